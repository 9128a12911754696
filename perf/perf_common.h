/*
 * perf_common.h - the allreduce benchmark shared by allreduce_perf (libhccl) and its twin
 * mpi_allreduce_perf (MPI), so that both parse the same flags, sweep the same sizes, fill and
 * check the same data and print the same nccl-tests-shaped table. Only the communication
 * differs, and it sits behind one ops table (struct perf_backend) that each program fills
 * with designated initializers and hands to perf_main().
 *
 * What a run does, per rank (one process per rank):
 *   parse flags (a bad value exits 2 before any communication)
 *   backend init; gather every rank's pid/host/device with an allgather; rank 0 prints them
 *   for each size (-b .. -e, times -f or plus -i)
 *     for each type (-d: int8 int32 half float)
 *       for each op (-o: sum prod max min)
 *         out-of-place, then in-place: warm-up, barrier, timed loop, then a checked run
 *         rank 0 prints one line
 *   footer; exit 0, or 1 if any element was wrong or a call failed.
 *
 * The checking data is chosen so that the exact result does not depend on the order in which
 * ranks' contributions are combined, for every type and op (see perf_common.c).
 */
#ifndef PERF_COMMON_H
#define PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* The four types and four ops the benchmark sweeps, in the order -d all / -o all run them. */
typedef enum { PERF_INT8, PERF_INT32, PERF_HALF, PERF_FLOAT, PERF_NTYPES } perf_type;
typedef enum { PERF_SUM, PERF_PROD, PERF_MAX, PERF_MIN, PERF_NOPS } perf_op;

/* What a backend reports about this process after init. */
struct perf_world {
  int rank;      /* 0 .. nranks-1 */
  int nranks;    /* >= 1 */
  int device;    /* the device this rank drives (shown in the header) */
  char impl[64]; /* e.g. "libhccl 0.1.0" or "Open MPI 4.1.4", shown in the header */
};

/*
 * The communication a benchmark needs. Every function returns 0 on success and non-zero on
 * failure, after which last_error() gives one line naming the call and the reason; the
 * benchmark then prints it and calls abort_run() (a failed collective leaves the
 * communicator unusable, so there is no attempt to go on).
 */
struct perf_backend {
  const char *prog; /* program name used in messages, e.g. "allreduce_perf" */
  /* Joins the job; fills *world. Called once, after the flags were parsed. */
  int (*init)(struct perf_world *world);
  /* Allreduce of count elements. blocking != 0: returns when done. blocking == 0: may
   * return before the call finished; wait_all() then completes every such call (they run in
   * the order issued). send == recv means in-place. */
  int (*allreduce)(void *send, void *recv, size_t count, perf_type type, perf_op op, int blocking);
  int (*wait_all)(void);
  /* recv gets nranks * bytes bytes, rank r's send at offset r * bytes. Blocking. */
  int (*allgather)(const void *send, void *recv, size_t bytes);
  int (*barrier)(void);
  /* The message of the last failure; never NULL. */
  const char *(*last_error)(void);
  /* Leaves the job cleanly (after a successful run). */
  void (*finalize)(void);
  /* Leaves the job after a failure and exits the process with code; does not return. */
  void (*abort_run)(int code) __attribute__((noreturn));
  /* Optional: extra lines for the header (each starting with "# "), or NULL. */
  const char *note;
};

/* Parses the flags, runs the whole benchmark through be and returns the process exit code:
 * 0 = every checked element right, 1 = wrong elements or a failed call, 2 = bad flags (the
 * message names the flag, the value and the rule). -h prints the usage and returns 0. */
int perf_main(int argc, char **argv, const struct perf_backend *be);

/* Names as nccl-tests spells them ("int8", "sum"). */
const char *perf_type_name(perf_type t);
const char *perf_op_name(perf_op op);
/* Bytes per element: 1, 4, 2, 4. */
size_t perf_type_size(perf_type t);

/* IEEE binary16 <-> binary32. float -> half rounds to nearest even, overflows to infinity,
 * keeps NaN a NaN; half -> float is exact. Portable C, no F16C needed. */
uint16_t perf_half_from_float(float f);
float perf_half_to_float(uint16_t h);

#endif
