/*
 * allreduce_perf.c - nccl-tests' all_reduce_perf for libhccl: times HcclAllReduce over a sweep
 * of sizes, types and ops, checks every result, and prints nccl-tests' table on rank 0.
 *
 * One process per rank. The communicator comes from HcclCommInitFromEnv(), so any launcher
 * that sets RANK/WORLD_SIZE (or RANK_ID/RANK_SIZE) and MASTER_ADDR/MASTER_PORT works
 * (npu-launch, torchrun, a shell loop); with none of them set it runs as a single rank.
 *
 *   npu-launch --device-list 0-3 -- allreduce_perf -b 8 -e 64M -f 2 -d all -o all
 *
 * Everything but the communication (flags, sweep, data, check, output) is in perf_common.c,
 * shared with bench/mpi_allreduce_perf.c; this file is the libhccl ops table.
 * Built with MPI (when CMake finds it) and started by mpirun (Open MPI's or MPICH's variables
 * set), it shares the root info by MPI_Bcast as nccl-tests built with MPI=1 does, so
 * `mpirun -np 8 allreduce_perf` just works; otherwise it never touches MPI.
 * With -z 0 the timed calls are queued with request handles and waited for together, which
 * is what nccl-tests' non-blocking mode measures; -z 1 (default) passes a NULL request.
 */
#include <stdio.h>
#include <stdlib.h>

#include "hccl.h"
#include "perf_common.h"

#ifdef HCCL_PERF_MPI
#include <mpi.h>
static int mpi_on;

/* Rank 0 makes the root info and MPI carries it to the others. */
static HcclResult init_by_mpi(HcclComm *out) {
  int r, n, ok;
  if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return HCCL_E_INTERNAL;
  mpi_on = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  HcclRootInfo root;
  HcclResult rc = r == 0 ? HcclGetRootInfo(&root) : HCCL_SUCCESS;
  ok = rc == HCCL_SUCCESS;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) return r == 0 ? rc : HCCL_E_REMOTE;
  MPI_Bcast(&root, (int)sizeof(root), MPI_BYTE, 0, MPI_COMM_WORLD);
  return HcclCommInitRootInfo((uint32_t)n, &root, (uint32_t)r, out);
}
#endif

static HcclComm comm;
static char errbuf[1024];
static HcclRequest *pending;
static size_t npending, cap_pending;

static const HcclDataType dtypes[PERF_NTYPES] = {
    [PERF_INT8] = HCCL_DATA_TYPE_INT8,
    [PERF_INT32] = HCCL_DATA_TYPE_INT32,
    [PERF_HALF] = HCCL_DATA_TYPE_FP16,
    [PERF_FLOAT] = HCCL_DATA_TYPE_FP32,
};
static const HcclReduceOp ops[PERF_NOPS] = {
    [PERF_SUM] = HCCL_REDUCE_SUM,
    [PERF_PROD] = HCCL_REDUCE_PROD,
    [PERF_MAX] = HCCL_REDUCE_MAX,
    [PERF_MIN] = HCCL_REDUCE_MIN,
};

/* Records a failed call for last_error(); returns 1. */
static int failed(HcclResult rc, const char *call) {
  const char *detail = HcclGetLastErrorMessage();
  snprintf(errbuf, sizeof(errbuf), "%s failed: %d (%s)%s%s", call, (int)rc, HcclGetErrorString(rc),
           detail && *detail ? ": " : "", detail ? detail : "");
  return 1;
}

static int hccl_init(struct perf_world *w) {
  uint32_t rank, size;
  int32_t dev;
  HcclResult rc;
#ifdef HCCL_PERF_MPI
  if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE")) {
    if ((rc = init_by_mpi(&comm)) != HCCL_SUCCESS)
      return failed(rc, "HcclCommInitRootInfo (root info by MPI_Bcast)");
  } else
#endif
      if ((rc = HcclCommInitFromEnv(&comm)) != HCCL_SUCCESS)
    return failed(rc, "HcclCommInitFromEnv");
  if ((rc = HcclGetRankId(comm, &rank)) != HCCL_SUCCESS) return failed(rc, "HcclGetRankId");
  if ((rc = HcclGetRankSize(comm, &size)) != HCCL_SUCCESS) return failed(rc, "HcclGetRankSize");
  if ((rc = HcclGetDeviceId(comm, &dev)) != HCCL_SUCCESS) return failed(rc, "HcclGetDeviceId");
  w->rank = (int)rank;
  w->nranks = (int)size;
  w->device = dev;
  snprintf(w->impl, sizeof(w->impl), "libhccl %d.%d.%d", HCCL_VERSION_MAJOR, HCCL_VERSION_MINOR,
           HCCL_VERSION_PATCH);
  return 0;
}

static int hccl_allreduce(void *send, void *recv, size_t count, perf_type t, perf_op op,
                          int blocking) {
  HcclRequest *req = NULL;
  if (!blocking) {
    if (npending == cap_pending) {
      size_t cap = cap_pending ? 2 * cap_pending : 64;
      HcclRequest *grown = realloc(pending, cap * sizeof(*grown));
      if (!grown) {
        snprintf(errbuf, sizeof(errbuf), "out of memory for %zu pending requests (-z 0)", cap);
        return 1;
      }
      pending = grown;
      cap_pending = cap;
    }
    req = &pending[npending];
  }
  HcclResult rc = HcclAllReduce(send, recv, count, dtypes[t], ops[op], comm, req);
  if (rc != HCCL_SUCCESS) {
    char call[128];
    snprintf(call, sizeof(call), "HcclAllReduce(count %zu, %s, %s%s)", count, perf_type_name(t),
             perf_op_name(op), send == recv ? ", in-place" : "");
    return failed(rc, call);
  }
  if (req) npending++;
  return 0;
}

static int hccl_wait_all(void) {
  int bad = 0;
  for (size_t i = 0; i < npending; i++) {
    HcclResult rc = HcclRequestWait(pending[i]); /* waits on every request, even after a failure */
    if (rc != HCCL_SUCCESS && !bad)
      bad = failed(rc, "HcclRequestWait (an HcclAllReduce queued "
                       "with -z 0)");
  }
  npending = 0;
  return bad;
}

static int hccl_allgather(const void *send, void *recv, size_t bytes) {
  HcclResult rc = HcclAllGather((void *)send, recv, bytes, HCCL_DATA_TYPE_INT8, comm, NULL);
  return rc == HCCL_SUCCESS ? 0 : failed(rc, "HcclAllGather");
}

static int hccl_barrier(void) {
  HcclResult rc = HcclBarrier(comm, NULL);
  return rc == HCCL_SUCCESS ? 0 : failed(rc, "HcclBarrier");
}

static const char *hccl_last_error(void) {
  return errbuf;
}

static void hccl_finalize(void) {
  HcclCommDestroy(comm);
  comm = NULL;
  free(pending);
#ifdef HCCL_PERF_MPI
  if (mpi_on) MPI_Finalize();
#endif
}

static void __attribute__((noreturn)) hccl_abort(int code) {
  HcclCommDestroy(comm); /* not collective: fine while peers are gone or stuck */
  exit(code);
}

/* Runs the benchmark; see perf_common.h for the exit codes. */
int main(int argc, char **argv) {
  static const struct perf_backend be = {
      .prog = "allreduce_perf",
      .init = hccl_init,
      .allreduce = hccl_allreduce,
      .wait_all = hccl_wait_all,
      .allgather = hccl_allgather,
      .barrier = hccl_barrier,
      .last_error = hccl_last_error,
      .finalize = hccl_finalize,
      .abort_run = hccl_abort,
  };
  return perf_main(argc, argv, &be);
}
