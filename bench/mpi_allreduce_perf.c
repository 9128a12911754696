/*
 * mpi_allreduce_perf.c - the MPI twin of allreduce_perf: the same flags, sweep, data, check
 * and output (all of it perf/perf_common.c), with MPI_Allreduce doing the communication, so
 * that libhccl can be compared with the MPI installed on the machine.
 *
 *   mpirun --oversubscribe -np 4 mpi_allreduce_perf -b 8 -e 64M -f 2 -d all -o all
 *
 * Types: int8 -> MPI_INT8_T, int32 -> MPI_INT32_T, float -> MPI_FLOAT. MPI has no float16,
 * so half travels as MPI_UINT16_T with four user-defined (commutative) ops that compute in
 * float32 and round once to float16 (perf_half_from_float), as libhccl does; they are slower
 * than MPI's built-in ops, which the half lines therefore measure too.
 * -z 0 uses MPI_Iallreduce and waits for each call before issuing the next: MPI does not allow
 * several pending calls on the same buffer, which is what queueing -n calls would need.
 * Errors: MPI_ERRORS_RETURN on MPI_COMM_WORLD, so a failed call is reported with
 * MPI_Error_string and the job ends with MPI_Abort.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_common.h"

static char errbuf[1024];
static MPI_Op half_ops[PERF_NOPS];

static MPI_Op ops[PERF_NOPS]; /* MPI's built-in ops; MPI_SUM etc. are not constants */

static int failed(int rc, const char *call) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof(msg), "unknown");
  snprintf(errbuf, sizeof(errbuf), "%s failed: error %d: %s", call, rc, msg);
  return 1;
}

/* ---- float16 ops: float32 math, rounded once; max/min are exact and keep NaN ---- */

static void half_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++)
    b[i] = perf_half_from_float(perf_half_to_float(a[i]) + perf_half_to_float(b[i]));
}

static void half_prod(void *in, void *inout, int *len, MPI_Datatype *dt) {
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++)
    b[i] = perf_half_from_float(perf_half_to_float(a[i]) * perf_half_to_float(b[i]));
}

static void half_minmax(const uint16_t *a, uint16_t *b, int n, int want_max) {
  for (int i = 0; i < n; i++) {
    float x = perf_half_to_float(a[i]), y = perf_half_to_float(b[i]);
    if (y != y) continue; /* NaN already in b stays */
    if (x != x || (want_max ? x > y : x < y)) b[i] = a[i];
  }
}

static void half_max(void *in, void *inout, int *len, MPI_Datatype *dt) {
  half_minmax(in, inout, *len, 1);
}

static void half_min(void *in, void *inout, int *len, MPI_Datatype *dt) {
  half_minmax(in, inout, *len, 0);
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

  MPI_User_function *const fns[PERF_NOPS] = {half_sum, half_prod, half_max, half_min};
  for (int op = 0; op < PERF_NOPS; op++)
    if ((rc = MPI_Op_create(fns[op], 1, &half_ops[op])) != MPI_SUCCESS)
      return failed(rc, "MPI_Op_create (float16 op)");
  ops[PERF_SUM] = MPI_SUM;
  ops[PERF_PROD] = MPI_PROD;
  ops[PERF_MAX] = MPI_MAX;
  ops[PERF_MIN] = MPI_MIN;

  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  version[strcspn(version, ",\n")] = '\0'; /* "Open MPI v4.1.4, package: ..." -> first part */
  w->rank = rank;
  w->nranks = size;
  w->device = local;
  snprintf(w->impl, sizeof(w->impl), "%.63s", version);
  return 0;
}

static int mpi_allreduce(void *send, void *recv, size_t count, perf_type t, perf_op op,
                         int blocking) {
  static const char *const names[PERF_NTYPES] = {"MPI_INT8_T", "MPI_INT32_T", "MPI_UINT16_T (half)",
                                                 "MPI_FLOAT"};
  MPI_Datatype dt = t == PERF_INT8    ? MPI_INT8_T
                    : t == PERF_INT32 ? MPI_INT32_T
                    : t == PERF_HALF  ? MPI_UINT16_T
                                      : MPI_FLOAT;
  MPI_Op mop = t == PERF_HALF ? half_ops[op] : ops[op];
  if (count > (size_t)0x7fffffff) {
    snprintf(errbuf, sizeof(errbuf), "count %zu does not fit MPI's int count; lower -e", count);
    return 1;
  }
  const void *s = send == recv ? MPI_IN_PLACE : send;
  int rc;
  if (blocking) {
    rc = MPI_Allreduce(s, recv, (int)count, dt, mop, MPI_COMM_WORLD);
  } else {
    MPI_Request req;
    rc = MPI_Iallreduce(s, recv, (int)count, dt, mop, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  if (rc == MPI_SUCCESS) return 0;
  char call[128];
  snprintf(call, sizeof(call), "MPI_Allreduce(count %zu, %s, %s)", count, names[t],
           perf_op_name(op));
  return failed(rc, call);
}

static int mpi_wait_all(void) {
  return 0; /* every call was completed when issued */
}

static int mpi_allgather(const void *send, void *recv, size_t bytes) {
  int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : failed(rc, "MPI_Allgather");
}

static int mpi_barrier(void) {
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : failed(rc, "MPI_Barrier");
}

static const char *mpi_last_error(void) {
  return errbuf;
}

static void mpi_finalize(void) {
  for (int op = 0; op < PERF_NOPS; op++)
    MPI_Op_free(&half_ops[op]);
  MPI_Finalize();
}

static void __attribute__((noreturn)) mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  exit(code); /* MPI_Abort does not return; this is for the compiler */
}

/* Runs the benchmark; see perf/perf_common.h for the exit codes. */
int main(int argc, char **argv) {
  static const struct perf_backend be = {
      .prog = "mpi_allreduce_perf",
      .init = mpi_init,
      .allreduce = mpi_allreduce,
      .wait_all = mpi_wait_all,
      .allgather = mpi_allgather,
      .barrier = mpi_barrier,
      .last_error = mpi_last_error,
      .finalize = mpi_finalize,
      .abort_run = mpi_abort,
      .note = "# MPI twin: half = MPI_UINT16_T with user-defined ops (float32 math, rounded "
              "once); -z 0 waits for each MPI_Iallreduce before the next",
  };
  return perf_main(argc, argv, &be);
}
