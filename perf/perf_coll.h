/*
 * perf_coll.h - what differs between the collectives the benchmarks measure (internal to
 * perf/): one row of perf_colls[] per collective, read by the one loop in perf_common.c.
 *
 * A row says how many elements a rank sends and receives for a size, where the in-place
 * buffers sit, what every block of a rank's result must hold (the reference the check
 * compares with), and the bus bandwidth factor. The sizes follow the usual convention of
 * collective benchmarks: -b/-e give the bytes of the whole buffer (the larger of send and
 * receive), and collectives that split it by rank take count / nranks per rank, rounded
 * down to a multiple of 16 bytes.
 */
#ifndef PERF_COLL_H
#define PERF_COLL_H

#include <stddef.h>

#include "perf_common.h"

/* A rank's buffers for one size, in elements. */
struct perf_shape {
  size_t send, recv; /* elements this rank sends from / receives into */
  size_t count;      /* the call's count argument (struct perf_call), printed as "count" */
  /* In place there is one buffer: the input starts rank * send_at elements into it and the
   * result rank * recv_at elements into it. */
  size_t send_at, recv_at;
};

/* Where a block of a rank's result comes from. */
enum perf_src {
  PERF_SRC_RESULT,   /* the reduction of every rank's input, from element `at` */
  PERF_SRC_INPUT,    /* rank `rank`'s input, from element `at` */
  PERF_SRC_UNTOUCHED /* not written by the call: stays as it was before */
};

struct perf_block {
  enum perf_src src;
  int rank;
  size_t at;
};

struct perf_coll_desc {
  const char *name;      /* "allreduce", ... */
  unsigned reduces : 1;  /* sweeps -o; otherwise runs once per type, redop "none" */
  unsigned rooted : 1;   /* the root column shows -r; -r -1 runs every root */
  unsigned inplace : 1;  /* has an in-place form; otherwise those columns read N/A */
  unsigned per_peer : 1; /* the result is nranks blocks (one per peer), else one */
  /* busbw = algbw * bus_mul, times (p - 1) / p when bus_part; algbw = size column / time */
  double bus_mul;
  unsigned bus_part : 1;
  /* This rank's buffers when the size column is elems * es bytes at most. */
  void (*shape)(size_t elems, size_t es, int nranks, struct perf_shape *sh);
  /* What block k (of len elements) of rank's result holds. */
  struct perf_block (*block)(int rank, int nranks, int root, int inplace, size_t k, size_t len);
};

extern const struct perf_coll_desc perf_colls[PERF_NCOLLS];

#endif
