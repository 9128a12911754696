/*
 * perf_args.h - the command line of every benchmark program (perf/hccl_perf.c and the MPI
 * twins): the flags as nccl-tests spells them, read into one struct perf_opts, and the size
 * sweep they describe. perf_common.c runs what they say; this file and perf_args.c only read
 * and check them, so a bad flag exits 2 before any communication.
 */
#ifndef PERF_ARGS_H
#define PERF_ARGS_H

#include <stddef.h>

#include "perf_coll.h"
#include "perf_common.h"

/* What the flags ask for (perf_common.h's flow; usage text: perf_args.c). */
struct perf_opts {
  size_t min_bytes, max_bytes, step_bytes;
  long step_factor; /* > 1: multiply; 0: add step_bytes */
  int iters, warmup, check, avg_mode, blocking;
  int registered; /* -R 1: buffers from the backend's mem_alloc */
  int root; /* -1: every rank in turn */
  int ntypes, nops;
  perf_type types[PERF_NTYPES];
  perf_op ops[PERF_NOPS];
};

/* Fills *o from argv: the defaults, then each flag checked against its rule. Exits 2 on a bad
 * flag (the message, printed by the job's first process only, names the flag, the value and
 * the rule), 0 after -h or --help (the usage on stdout). */
void perf_parse_args(int argc, char **argv, const struct perf_backend *be,
                     const struct perf_coll_desc *d, struct perf_opts *o);

/* The size after size in the sweep (-b .. -e, times -f or plus -i), or 0 when past -e (or on
 * overflow). */
size_t perf_next_size(const struct perf_opts *o, size_t size);

#endif
