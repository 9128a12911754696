/*
 * mpi_allreduce_perf.c - the MPI twin of allreduce_perf: the same flags, sweep, data, check
 * and output (all of it perf/perf_common.c), with MPI_Allreduce doing the communication, so
 * that libhccl can be compared with the MPI installed on the machine.
 *
 *   mpirun --oversubscribe -np 4 mpi_allreduce_perf -b 8 -e 64M -f 2 -d all -o all
 *
 * Types: the integers -> MPI_INT8_T .. MPI_UINT64_T, float -> MPI_FLOAT, double -> MPI_DOUBLE.
 * MPI has no float16 or bfloat16, so they travel as MPI_UINT16_T with user-defined
 * (commutative) ops that compute in float32 and round once (perf_half_from_float,
 * perf_bf16_from_float), as libhccl does; they are slower than MPI's built-in ops, which the
 * half and bfloat16 lines therefore measure too. MPI has no average either: avg is MPI_SUM (or
 * the 16-bit types' sum), then a division of the result by the rank count inside the timed
 * call, as NCCL computes it (toward zero on integers, rounded once on floating types).
 * -z 0 uses MPI_Iallreduce (MPI_Iallgather, ...) and waits for each call before issuing the
 * next: MPI does not allow several pending calls on the same buffer, which is what queueing -n
 * calls would need.
 * Errors: MPI_ERRORS_RETURN on MPI_COMM_WORLD, so a failed call is reported with
 * MPI_Error_string and the job ends with MPI_Abort.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_common.h"

#ifndef PERF_COLL /* a plain compile of this file builds mpi_allreduce_perf */
#define PERF_COLL PERF_ALLREDUCE
#define PERF_PROG "mpi_allreduce_perf"
#endif

static char errbuf[1024];
static int my_rank, nranks;
static MPI_Op half_ops[PERF_NOPS], bf16_ops[PERF_NOPS]; /* avg: the sum */

static MPI_Op ops[PERF_NOPS]; /* MPI's built-in ops; MPI_SUM etc. are not constants */

static int failed(int rc, const char *call) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof(msg), "unknown");
  snprintf(errbuf, sizeof(errbuf), "%s failed: error %d: %s", call, rc, msg);
  return 1;
}

/* ---- float16 and bfloat16 ops: float32 math, rounded once; max/min are exact and keep NaN ---- */

#define SIXTEEN_BIT_OPS(ty, to_f, from_f)                                                          \
  static void ty##_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {                        \
    const uint16_t *a = in;                                                                        \
    uint16_t *b = inout;                                                                           \
    for (int i = 0; i < *len; i++)                                                                 \
      b[i] = from_f(to_f(a[i]) + to_f(b[i]));                                                      \
  }                                                                                                \
  static void ty##_prod(void *in, void *inout, int *len, MPI_Datatype *dt) {                       \
    const uint16_t *a = in;                                                                        \
    uint16_t *b = inout;                                                                           \
    for (int i = 0; i < *len; i++)                                                                 \
      b[i] = from_f(to_f(a[i]) * to_f(b[i]));                                                      \
  }                                                                                                \
  static void ty##_minmax(const uint16_t *a, uint16_t *b, int n, int want_max) {                   \
    for (int i = 0; i < n; i++) {                                                                  \
      float x = to_f(a[i]), y = to_f(b[i]);                                                        \
      if (y != y) continue; /* NaN already in b stays */                                           \
      if (x != x || (want_max ? x > y : x < y)) b[i] = a[i];                                       \
    }                                                                                              \
  }                                                                                                \
  static void ty##_max(void *in, void *inout, int *len, MPI_Datatype *dt) {                        \
    ty##_minmax(in, inout, *len, 1);                                                               \
  }                                                                                                \
  static void ty##_min(void *in, void *inout, int *len, MPI_Datatype *dt) {                        \
    ty##_minmax(in, inout, *len, 0);                                                               \
  }

SIXTEEN_BIT_OPS(half, perf_half_to_float, perf_half_from_float)
SIXTEEN_BIT_OPS(bf16, perf_bf16_to_float, perf_bf16_from_float)

/* avg's last step: buf's n sums become averages over the ranks. */
static void divide_by_ranks(void *buf, size_t n, perf_type t) {
#define DIV_LOOP(ty, expr)                                                                         \
  do {                                                                                             \
    ty *v = buf;                                                                                   \
    for (size_t i = 0; i < n; i++)                                                                 \
      v[i] = (expr);                                                                               \
  } while (0)
  switch (t) {
  case PERF_INT8:
    DIV_LOOP(int8_t, (int8_t)(v[i] / nranks));
    break;
  case PERF_UINT8:
    DIV_LOOP(uint8_t, (uint8_t)(v[i] / (unsigned)nranks));
    break;
  case PERF_INT16:
    DIV_LOOP(int16_t, (int16_t)(v[i] / nranks));
    break;
  case PERF_UINT16:
    DIV_LOOP(uint16_t, (uint16_t)(v[i] / (unsigned)nranks));
    break;
  case PERF_INT32:
    DIV_LOOP(int32_t, v[i] / nranks);
    break;
  case PERF_UINT32:
    DIV_LOOP(uint32_t, v[i] / (uint32_t)nranks);
    break;
  case PERF_INT64:
    DIV_LOOP(int64_t, v[i] / nranks);
    break;
  case PERF_UINT64:
    DIV_LOOP(uint64_t, v[i] / (uint64_t)nranks);
    break;
  case PERF_HALF:
    DIV_LOOP(uint16_t, perf_half_from_float(perf_half_to_float(v[i]) / nranks));
    break;
  case PERF_BF16:
    DIV_LOOP(uint16_t, perf_bf16_from_float(perf_bf16_to_float(v[i]) / nranks));
    break;
  case PERF_FLOAT:
    DIV_LOOP(float, v[i] / (float)nranks);
    break;
  default:
    DIV_LOOP(double, v[i] / nranks);
    break;
  }
#undef DIV_LOOP
}

/* ---- the ops table ---- */

static int mpi_init(struct perf_world *w) {
  int rc, rank, size, local = 0;
  if ((rc = MPI_Init(NULL, NULL)) != MPI_SUCCESS) return failed(rc, "MPI_Init");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* The "device" is the rank's index among the ranks on its host. */
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
  }

  MPI_User_function *const hfns[PERF_NOPS] = {half_sum, half_prod, half_max, half_min, half_sum};
  MPI_User_function *const bfns[PERF_NOPS] = {bf16_sum, bf16_prod, bf16_max, bf16_min, bf16_sum};
  for (int op = 0; op < PERF_NOPS; op++)
    if ((rc = MPI_Op_create(hfns[op], 1, &half_ops[op])) != MPI_SUCCESS ||
        (rc = MPI_Op_create(bfns[op], 1, &bf16_ops[op])) != MPI_SUCCESS)
      return failed(rc, "MPI_Op_create (float16 or bfloat16 op)");
  ops[PERF_SUM] = MPI_SUM;
  ops[PERF_PROD] = MPI_PROD;
  ops[PERF_MAX] = MPI_MAX;
  ops[PERF_MIN] = MPI_MIN;
  ops[PERF_AVG] = MPI_SUM; /* then divide_by_ranks */

  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  version[strcspn(version, ",\n")] = '\0'; /* "Open MPI v4.1.4, package: ..." -> first part */
  my_rank = w->rank = rank;
  nranks = w->nranks = size;
  w->device = local;
  snprintf(w->impl, sizeof(w->impl), "%.63s", version);
  return 0;
}

static MPI_Datatype mpi_type(perf_type t) {
  switch (t) {
  case PERF_INT8:
    return MPI_INT8_T;
  case PERF_UINT8:
    return MPI_UINT8_T;
  case PERF_INT16:
    return MPI_INT16_T;
  case PERF_UINT16:
  case PERF_HALF:
  case PERF_BF16:
    return MPI_UINT16_T;
  case PERF_INT32:
    return MPI_INT32_T;
  case PERF_UINT32:
    return MPI_UINT32_T;
  case PERF_INT64:
    return MPI_INT64_T;
  case PERF_UINT64:
    return MPI_UINT64_T;
  case PERF_FLOAT:
    return MPI_FLOAT;
  default:
    return MPI_DOUBLE;
  }
}

/* Issues one call: blocking when req is NULL, else the non-blocking form with *req to wait
 * on. In place follows struct perf_call, except that MPI's reduce-scatter in place leaves
 * the result at the start of the buffer: mpi_run moves it to this rank's slot. */
static int issue(const struct perf_call *c, int n, MPI_Request *req) {
  MPI_Datatype dt = mpi_type(c->type);
  MPI_Op mop = c->type == PERF_HALF   ? half_ops[c->op]
               : c->type == PERF_BF16 ? bf16_ops[c->op]
                                      : ops[c->op];
  MPI_Comm w = MPI_COMM_WORLD;
  size_t bytes = c->count * perf_type_size(c->type);
  const void *s = c->send;
  void *r = c->recv;
  int next = (my_rank + 1) % nranks, prev = (my_rank + nranks - 1) % nranks;
  switch (c->coll) {
  case PERF_ALLREDUCE:
    if (s == r) s = MPI_IN_PLACE;
    return req ? MPI_Iallreduce(s, r, n, dt, mop, w, req) : MPI_Allreduce(s, r, n, dt, mop, w);
  case PERF_ALLGATHER:
    if (s == (char *)r + (size_t)my_rank * bytes) s = MPI_IN_PLACE;
    return req ? MPI_Iallgather(s, n, dt, r, n, dt, w, req) : MPI_Allgather(s, n, dt, r, n, dt, w);
  case PERF_REDUCE_SCATTER:
    if (r == (char *)s + (size_t)my_rank * bytes) {
      r = (void *)s;
      s = MPI_IN_PLACE;
    }
    return req ? MPI_Ireduce_scatter_block(s, r, n, dt, mop, w, req)
               : MPI_Reduce_scatter_block(s, r, n, dt, mop, w);
  case PERF_BROADCAST: /* one buffer: the root's data, or where the others receive it */
    r = my_rank == c->root ? (void *)s : r;
    return req ? MPI_Ibcast(r, n, dt, c->root, w, req) : MPI_Bcast(r, n, dt, c->root, w);
  case PERF_REDUCE:
    if (s == r && my_rank == c->root) s = MPI_IN_PLACE;
    return req ? MPI_Ireduce(s, r, n, dt, mop, c->root, w, req)
               : MPI_Reduce(s, r, n, dt, mop, c->root, w);
  case PERF_ALLTOALL:
    return req ? MPI_Ialltoall(s, n, dt, r, n, dt, w, req) : MPI_Alltoall(s, n, dt, r, n, dt, w);
  case PERF_SENDRECV: /* a send and a receive waited for together; -z 0 alike */
    return MPI_Sendrecv(s, n, dt, next, 0, r, n, dt, prev, 0, w, MPI_STATUS_IGNORE);
  default:
    return MPI_ERR_OTHER;
  }
}

/* -z 0 issues the non-blocking form and waits for it before the next call: MPI does not allow
 * several pending calls on the same buffers, which is what queueing -n calls would need. */
static int mpi_run(const struct perf_call *c, int blocking) {
  static const char *const names[PERF_NTYPES] = {
      [PERF_INT8] = "MPI_INT8_T",          [PERF_UINT8] = "MPI_UINT8_T",
      [PERF_INT16] = "MPI_INT16_T",        [PERF_UINT16] = "MPI_UINT16_T",
      [PERF_INT32] = "MPI_INT32_T",        [PERF_UINT32] = "MPI_UINT32_T",
      [PERF_INT64] = "MPI_INT64_T",        [PERF_UINT64] = "MPI_UINT64_T",
      [PERF_HALF] = "MPI_UINT16_T (half)", [PERF_BF16] = "MPI_UINT16_T (bfloat16)",
      [PERF_FLOAT] = "MPI_FLOAT",          [PERF_DOUBLE] = "MPI_DOUBLE"};
  static const char *const fns[PERF_NCOLLS] = {[PERF_ALLREDUCE] = "MPI_Allreduce",
                                               [PERF_ALLGATHER] = "MPI_Allgather",
                                               [PERF_REDUCE_SCATTER] = "MPI_Reduce_scatter_block",
                                               [PERF_BROADCAST] = "MPI_Bcast",
                                               [PERF_REDUCE] = "MPI_Reduce",
                                               [PERF_ALLTOALL] = "MPI_Alltoall",
                                               [PERF_SENDRECV] = "MPI_Sendrecv"};
  if (c->count > (size_t)0x7fffffff) {
    snprintf(errbuf, sizeof(errbuf), "count %zu does not fit MPI's int count; lower -e", c->count);
    return 1;
  }
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = issue(c, (int)c->count, blocking ? NULL : &req);
  if (rc == MPI_SUCCESS && !blocking) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
  size_t bytes = c->count * perf_type_size(c->type);
  char *slot = (char *)c->send + (size_t)my_rank * bytes;
  if (rc == MPI_SUCCESS && c->coll == PERF_REDUCE_SCATTER && (char *)c->recv == slot)
    memmove(slot, c->send, bytes); /* MPI_IN_PLACE: the result came at the start */
  int reduced = c->coll == PERF_ALLREDUCE || c->coll == PERF_REDUCE_SCATTER ||
                (c->coll == PERF_REDUCE && my_rank == c->root);
  if (rc == MPI_SUCCESS && c->op == PERF_AVG && reduced)
    divide_by_ranks(c->recv, c->count, c->type);
  if (rc == MPI_SUCCESS) return 0;
  char call[128];
  snprintf(call, sizeof(call), "%s(count %zu, %s, %s)", fns[c->coll], c->count, names[c->type],
           perf_op_name(c->op));
  return failed(rc, call);
}

static int mpi_wait_all(void) {
  return 0; /* every call was completed when issued */
}

static int mpi_barrier(void) {
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : failed(rc, "MPI_Barrier");
}

static const char *mpi_last_error(void) {
  return errbuf;
}

static int mpi_mem_alloc(void **ptr, size_t bytes) {
  return MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, ptr) == MPI_SUCCESS ? 0 : -1;
}

static void mpi_mem_free(void *ptr) {
  MPI_Free_mem(ptr);
}

static void mpi_finalize(void) {
  for (int op = 0; op < PERF_NOPS; op++) {
    MPI_Op_free(&half_ops[op]);
    MPI_Op_free(&bf16_ops[op]);
  }
  MPI_Finalize();
}

static void __attribute__((noreturn)) mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  exit(code); /* MPI_Abort does not return; this is for the compiler */
}

/* Runs the benchmark; see perf/perf_common.h for the exit codes. */
int main(int argc, char **argv) {
  static const struct perf_backend be = {
      .prog = PERF_PROG,
      .init = mpi_init,
      .run = mpi_run,
      .wait_all = mpi_wait_all,
      .barrier = mpi_barrier,
      .last_error = mpi_last_error,
      .finalize = mpi_finalize,
      .abort_run = mpi_abort,
      .mem_alloc = mpi_mem_alloc,
      .mem_free = mpi_mem_free,
      .note = PERF_COLL == PERF_ALLREDUCE
                  ? "# MPI twin: half, bfloat16 = MPI_UINT16_T with user-defined ops (float32 "
                    "math, rounded once); avg = MPI_SUM, then / nranks; -z 0 waits for each "
                    "MPI_Iallreduce before the next"
                  : "# MPI twin: half, bfloat16 = MPI_UINT16_T with user-defined ops (float32 "
                    "math, rounded once); avg = MPI_SUM, then / nranks; -z 0 waits for each "
                    "non-blocking call before the next",
      .has_avg = 1,
      .by = PERF_BY_MPI,
  };
  return perf_main(argc, argv, PERF_COLL, &be);
}
