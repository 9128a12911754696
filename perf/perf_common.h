/*
 * perf_common.h - the collective benchmarks shared by the libhccl programs (allreduce_perf,
 * all_gather_perf, reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf, sendrecv_perf;
 * perf/hccl_perf.c), their MPI twins (bench/mpi_allreduce_perf.c) and the oneCCL twin of
 * allreduce_perf (bench/ccl_allreduce_perf.cpp), so that all of them parse the same flags, sweep
 * the same sizes, fill and check the same data and print the same table. Only the communication
 * differs, and it sits behind one ops table (struct perf_backend) that each program fills with
 * designated initializers and hands to perf_main() together with the collective it measures. What
 * differs between collectives (the counts for a size, the reference result, the bus bandwidth
 * factor) is one row of a table in perf_coll.c, not code in the loop.
 *
 * What a run does, per rank (one process per rank):
 *   parse flags (a bad value exits 2 before any communication)
 *   backend init; gather every rank's pid/host/device with an allgather; rank 0 prints them
 *   for each size (-b .. -e, times -f or plus -i)
 *     for each type (-d: int8 uint8 int16 uint16 int32 uint32 int64 uint64 half bfloat16
 *                    float double)
 *       for each op (-o: sum prod max min avg; reductions only, else once, redop "none")
 *         for each root (-r; broadcast and reduce only, -1 = every rank in turn)
 *           out-of-place, then in-place: warm-up, barrier, timed loop, then a checked run
 *           rank 0 prints one line
 *   footer; exit 0, or 1 if any element was wrong or a call failed.
 *
 * The checking data is chosen so that the exact result does not depend on the order in which
 * ranks' contributions are combined, for every type and op (see perf_data.c).
 */
#ifndef PERF_COMMON_H
#define PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Every HcclDataType and every op the benchmark sweeps, in the order -d all / -o all run them
 * (names: nccl-tests' spelling, perf_type_name). int16 and uint16 are HCCL's, not NCCL's. */
typedef enum {
  PERF_INT8,
  PERF_UINT8,
  PERF_INT16,
  PERF_UINT16,
  PERF_INT32,
  PERF_UINT32,
  PERF_INT64,
  PERF_UINT64,
  PERF_HALF,
  PERF_BF16,
  PERF_FLOAT,
  PERF_DOUBLE,
  PERF_NTYPES
} perf_type;
/* PERF_AVG: the sum divided by the number of ranks (rounded toward zero on integer types,
 * one division of the sum on floating ones); -o all runs it only where the backend has it
 * (perf_backend.has_avg). */
typedef enum { PERF_SUM, PERF_PROD, PERF_MAX, PERF_MIN, PERF_AVG, PERF_NOPS } perf_op;

/* The collectives, one program each. */
typedef enum {
  PERF_ALLREDUCE,
  PERF_ALLGATHER,
  PERF_REDUCE_SCATTER,
  PERF_BROADCAST,
  PERF_REDUCE,
  PERF_ALLTOALL,
  PERF_SENDRECV, /* rank r sends to (r+1)%p and receives from (r-1+p)%p */
  PERF_NCOLLS
} perf_coll;

/*
 * One call, with the arguments the collective's API takes. count is what the API calls count:
 * elements of the whole buffer for allreduce, broadcast, reduce and sendrecv; sent per rank
 * for allgather; received per rank for reduce_scatter; sent to each peer for alltoall.
 * In place: send == recv (allreduce, reduce, broadcast), send == recv + rank * count
 * (allgather), recv == send + rank * count (reduce_scatter). alltoall and sendrecv are only
 * called out of place.
 * Broadcast: the root's data is in send, the others receive into recv. An API with one buffer
 * is given send on the root and recv elsewhere; the root's recv is then not written, which is
 * what the check expects.
 */
struct perf_call {
  perf_coll coll;
  void *send, *recv;
  size_t count;
  perf_type type;
  perf_op op; /* allreduce, reduce_scatter, reduce */
  int root;   /* broadcast, reduce */
};

/* What a backend reports about this process after init. */
struct perf_world {
  int rank;      /* 0 .. nranks-1 */
  int nranks;    /* >= 1 */
  int device;    /* the device this rank drives (shown in the header) */
  char impl[64]; /* e.g. "libhccl 0.1.0" or "Open MPI 4.1.4", shown in the header */
};

/* What a network transport moved (struct perf_backend.link_counts): its links, the payload
 * bytes sent over them, and the bytes copied on their way, into a send slot at the sending end
 * and out of a receive slot at the receiving end. The benchmark sums them over ranks for the
 * timed calls and prints, after the table, "# <name>: N bytes sent, R bytes copied per byte
 * sent" where some links were used. */
struct perf_link_counts {
  char name[16]; /* "RDMA" */
  uint64_t links, sent, copied_send, copied_recv;
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
  /* Runs one call of any collective (see struct perf_call); the benchmark itself also uses
   * allreduce (to combine times and wrong counts) and allgather (int8, for the header).
   * blocking != 0: returns when done. blocking == 0: may return before the call finished;
   * wait_all() then completes every such call (they run in the order issued). */
  int (*run)(const struct perf_call *call, int blocking);
  int (*wait_all)(void);
  int (*barrier)(void);
  /* The message of the last failure; never NULL. */
  const char *(*last_error)(void);
  /* Leaves the job cleanly (after a successful run, or after a flag found bad once the rank
   * count was known: every rank finds it, so every rank leaves). */
  void (*finalize)(void);
  /* Leaves the job after a failure and exits the process with code; does not return. */
  void (*abort_run)(int code) __attribute__((noreturn));
  /* Memory for the send and receive buffers under -R 1 (HcclMemAlloc, MPI_Alloc_mem): the
   * library's own shareable memory, as nccl-tests' -R uses ncclMemAlloc. Called after init.
   * Return 0 on success. */
  int (*mem_alloc)(void **ptr, size_t bytes);
  void (*mem_free)(void *ptr);
  /* Optional: extra lines for the header (each starting with "# "), or NULL. */
  const char *note;
  /* Non-zero when run() takes PERF_AVG; otherwise -o avg is refused (exit 2) and -o all
   * leaves it out. */
  int has_avg;
  /* Which program this is in perf_flags.h's table (PERF_BY_*): the flags it takes and their
   * usage texts. */
  unsigned by;
  /* Optional: lines (without the last newline) printed after the usage, or NULL. */
  const char *usage_note;
  /* Optional (NULL: none): this rank's counters, so far, of the network transport that copies
   * bytes on their way (libhccl: RDMA's, HcclGetCommTransportStats), into *c; returns 0, or
   * non-zero when there are none. Every rank must answer alike (the sums are an allreduce). */
  int (*link_counts)(struct perf_link_counts *c);
  /* Optional (NULL: every (type, op) is taken): called on every rank before the first line of
   * a reduction's (type, op). Returns 0 when the backend takes it, else non-zero with one line
   * in why ("oneCCL refuses it (...)"); a refused pair is then a "# <type> <op>: skipped: why"
   * line where -d all or -o all chose it, and a failed call (exit 1) where both were named.
   * Every rank must answer alike. */
  int (*refuses)(perf_type t, perf_op op, char *why, size_t n);
};

/* The programs of perf_flags.h's table (struct perf_backend.by). */
#define PERF_BY_HCCL 1u  /* allreduce_perf ... sendrecv_perf (perf/hccl_perf.c) */
#define PERF_BY_MPI 2u   /* their MPI twins (bench/mpi_allreduce_perf.c) */
#define PERF_BY_CCL 4u   /* the oneCCL twin (bench/ccl_allreduce_perf.cpp) */
#define PERF_BY_TORCH 8u /* bench/torch_allreduce_perf.py (reads the table's text) */
#define PERF_BY_ALL (PERF_BY_HCCL | PERF_BY_MPI | PERF_BY_CCL | PERF_BY_TORCH)

/* Parses the flags, benchmarks coll through be and returns the process exit code:
 * 0 = every checked element right, 1 = wrong elements or a failed call, 2 = bad flags (the
 * message names the flag, the value and the rule). -h or --help prints the usage on stdout
 * and exits 0. */
int perf_main(int argc, char **argv, perf_coll coll, const struct perf_backend *be);

/* Names as the tables print them ("int8", "sum", "allgather"). */
const char *perf_type_name(perf_type t);
const char *perf_op_name(perf_op op);
const char *perf_coll_name(perf_coll c);
/* Bytes per element: 1, 2, 4 or 8. */
size_t perf_type_size(perf_type t);

/* IEEE binary16 <-> binary32. float -> half rounds to nearest even, overflows to infinity,
 * keeps NaN a NaN; half -> float is exact. Portable C, no F16C needed. */
uint16_t perf_half_from_float(float f);
float perf_half_to_float(uint16_t h);
/* bfloat16 (the top half of a binary32) <-> binary32: float -> bfloat16 rounds to nearest
 * even, overflows to infinity, keeps NaN a (quiet) NaN; bfloat16 -> float is exact. */
uint16_t perf_bf16_from_float(float f);
float perf_bf16_to_float(uint16_t b);

#endif
