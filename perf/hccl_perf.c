/*
 * hccl_perf.c - the libhccl benchmark programs, one per collective, all built from this file
 * (PERF_COLL and PERF_PROG set by perf/CMakeLists.txt):
 *   allreduce_perf       HcclAllReduce         broadcast_perf  HcclBroadcast
 *   all_gather_perf      HcclAllGather         reduce_perf     HcclReduce
 *   reduce_scatter_perf  HcclReduceScatter     alltoall_perf   HcclAlltoAll
 *   sendrecv_perf        HcclSend to rank+1 and HcclRecv from rank-1, both queued, then waited
 * Each times its collective over a sweep of sizes, types (and ops, for reductions), checks
 * every result, and prints the table on rank 0 (docs/perf_programs.md).
 *
 * One process per rank. The communicator comes from HcclCommInitFromEnv(), so any launcher
 * that sets RANK/WORLD_SIZE (or RANK_ID/RANK_SIZE) and MASTER_ADDR/MASTER_PORT works
 * (npu-launch, torchrun, a shell loop); with none of them set it runs as a single rank.
 *
 *   npu-launch --device-list 0-3 -- allreduce_perf -b 8 -e 64M -f 2 -d all -o all
 *
 * Everything but the communication (flags, sweep, data, check, output) is in perf_common.c,
 * shared with bench/mpi_allreduce_perf.c; this file is the libhccl ops table.
 * libhccl refuses sends to oneself, so sendrecv on one rank is a memcpy from send to recv
 * (what a send to oneself amounts to).
 * Built with MPI (when CMake finds it) and started by mpirun (Open MPI's or MPICH's variables
 * set), it shares the root info by MPI_Bcast as nccl-tests built with MPI=1 does, so
 * `mpirun -np 8 allreduce_perf` just works; otherwise it never touches MPI.
 * With -z 0 the timed calls are queued with request handles and waited for together, which
 * is what nccl-tests' non-blocking mode measures; -z 1 (default) passes a NULL request.
 * Where links between servers ran over RDMA, the line after the table gives the bytes the
 * timed calls sent over them and the bytes copied per byte sent (HcclGetCommTransportStats:
 * 0.00 with -R 1 where the algorithm receives in place).
 * PERF_EXCLUDE=r,r,... runs the benchmark on the communicator HcclCommShrink makes without
 * those ranks (the excluded processes leave at once, status 0): the one way to build servers
 * of different counts (4 + 2 + 1 out of 3 x 4), which init refuses (bench/uneven.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccl.h"
#include "perf_coll.h"
#include "hccl_types.h"
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

#ifndef PERF_COLL /* a plain compile of this file builds allreduce_perf */
#define PERF_COLL PERF_ALLREDUCE
#define PERF_PROG "allreduce_perf"
#endif

static HcclComm comm;
static uint32_t my_rank, nranks;
static char errbuf[1024];
static HcclRequest *pending;
static size_t npending, cap_pending;

/* HCCL_REDUCE_AVG is a value of a plain enum; hccl.h says it has it with HCCL_HAVE_REDUCE_AVG.
 * Without it -o avg is refused before any call (perf_backend.has_avg). */
#ifdef HCCL_HAVE_REDUCE_AVG
#define HAVE_AVG 1
#define AVG_OP HCCL_REDUCE_AVG
#else
#define HAVE_AVG 0
#define AVG_OP HCCL_REDUCE_RESERVED
#endif
static const HcclReduceOp ops[PERF_NOPS] = {
    [PERF_SUM] = HCCL_REDUCE_SUM, [PERF_PROD] = HCCL_REDUCE_PROD,
    [PERF_MAX] = HCCL_REDUCE_MAX, [PERF_MIN] = HCCL_REDUCE_MIN,
    [PERF_AVG] = AVG_OP,
};

/* Records a failed call for last_error(); returns 1. */
static int failed(HcclResult rc, const char *call) {
  const char *detail = HcclGetLastErrorMessage();
  snprintf(errbuf, sizeof(errbuf), "%s failed: %d (%s)%s%s", call, (int)rc, HcclGetErrorString(rc),
           detail && *detail ? ": " : "", detail ? detail : "");
  return 1;
}

/* PERF_EXCLUDE's ranks (comma-separated) excluded from comm by HcclCommShrink: comm becomes the
 * survivors' communicator, and an excluded rank leaves with status 0. 0, or 1 with errbuf set. */
static int shrink_by_env(void) {
  const char *list = getenv("PERF_EXCLUDE");
  int ex[256], n = 0;
  uint32_t me, size;
  if (!list || !*list) return 0;
  HcclResult rc = HcclGetRankId(comm, &me);
  if (rc == HCCL_SUCCESS) rc = HcclGetRankSize(comm, &size);
  if (rc != HCCL_SUCCESS) return failed(rc, "HcclGetRankId/HcclGetRankSize");
  for (const char *c = list; *c;) {
    char *end;
    long r = strtol(c, &end, 10);
    if (end == c || r < 0 || r >= (long)size || (*end && *end != ',') || n == 256) {
      snprintf(errbuf, sizeof(errbuf),
               "PERF_EXCLUDE='%s': want at most 256 ranks from 0 to %u, separated by commas",
               list, size - 1);
      return 1;
    }
    ex[n++] = (int)r;
    c = *end ? end + 1 : end;
  }
  for (int i = 0; i < n; i++)
    if (ex[i] == (int)me) {
      HcclCommDestroy(comm);
      exit(0);
    }
  HcclComm shrunk;
  if ((rc = HcclCommShrink(comm, ex, n, &shrunk, NULL, HCCL_SHRINK_DEFAULT)) != HCCL_SUCCESS)
    return failed(rc, "HcclCommShrink (PERF_EXCLUDE)");
  HcclCommDestroy(comm);
  comm = shrunk;
  return 0;
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
  if (shrink_by_env()) return 1;
  if ((rc = HcclGetRankId(comm, &rank)) != HCCL_SUCCESS) return failed(rc, "HcclGetRankId");
  if ((rc = HcclGetRankSize(comm, &size)) != HCCL_SUCCESS) return failed(rc, "HcclGetRankSize");
  if ((rc = HcclGetDeviceId(comm, &dev)) != HCCL_SUCCESS) return failed(rc, "HcclGetDeviceId");
  my_rank = rank;
  nranks = size;
  w->rank = (int)rank;
  w->nranks = (int)size;
  w->device = dev;
  snprintf(w->impl, sizeof(w->impl), "libhccl %d.%d.%d", HCCL_VERSION_MAJOR, HCCL_VERSION_MINOR,
           HCCL_VERSION_PATCH);
  return 0;
}

/* Room for n more queued requests (-z 0) at pending[npending]; 0, or 1 when out of memory. */
static int reserve(size_t n) {
  if (npending + n <= cap_pending) return 0;
  size_t cap = cap_pending ? 2 * cap_pending : 64;
  HcclRequest *grown = realloc(pending, cap * sizeof(*grown));
  if (!grown) {
    snprintf(errbuf, sizeof(errbuf), "out of memory for %zu pending requests (-z 0)", cap);
    return 1;
  }
  pending = grown;
  cap_pending = cap;
  return 0;
}

/* Issues the call with request req (NULL: blocking). */
static HcclResult issue(const struct perf_call *c, HcclRequest *req) {
  HcclDataType dt = perf_hccl_dtype[c->type];
  uint64_t n = c->count;
  uint32_t root = (uint32_t)c->root;
  switch (c->coll) {
  case PERF_ALLREDUCE:
    return HcclAllReduce(c->send, c->recv, n, dt, ops[c->op], comm, req);
  case PERF_ALLGATHER:
    return HcclAllGather(c->send, c->recv, n, dt, comm, req);
  case PERF_REDUCE_SCATTER:
    return HcclReduceScatter(c->send, c->recv, n, dt, ops[c->op], comm, req);
  case PERF_BROADCAST: /* one buffer: the root's data, or where the others receive it */
    return HcclBroadcast(my_rank == root ? c->send : c->recv, n, dt, root, comm, req);
  case PERF_REDUCE:
    return HcclReduce(c->send, c->recv, n, dt, ops[c->op], root, comm, req);
  case PERF_ALLTOALL:
    return HcclAlltoAll(c->send, n, dt, c->recv, n, dt, comm, req);
  default:
    return HCCL_E_PARA; /* sendrecv is two calls: see hccl_run */
  }
}

/* The call as a message names it, e.g. "HcclReduce(count 256, float, sum, root 0)". */
static void describe(char *buf, size_t size, const struct perf_call *c) {
  static const char *const fns[PERF_NCOLLS] = {[PERF_ALLREDUCE] = "HcclAllReduce",
                                               [PERF_ALLGATHER] = "HcclAllGather",
                                               [PERF_REDUCE_SCATTER] = "HcclReduceScatter",
                                               [PERF_BROADCAST] = "HcclBroadcast",
                                               [PERF_REDUCE] = "HcclReduce",
                                               [PERF_ALLTOALL] = "HcclAlltoAll",
                                               [PERF_SENDRECV] = "HcclSend/HcclRecv"};
  const struct perf_coll_desc *d = &perf_colls[c->coll];
  int len =
      snprintf(buf, size, "%s(count %zu, %s", fns[c->coll], c->count, perf_type_name(c->type));
  if (d->reduces) len += snprintf(buf + len, size - (size_t)len, ", %s", perf_op_name(c->op));
  if (d->rooted) len += snprintf(buf + len, size - (size_t)len, ", root %d", c->root);
  if (c->coll == PERF_SENDRECV)
    len += snprintf(buf + len, size - (size_t)len, ", to rank %u, from rank %u",
                    (my_rank + 1) % nranks, (my_rank + nranks - 1) % nranks);
  snprintf(buf + len, size - (size_t)len, "%s)", c->send == c->recv ? ", in-place" : "");
}

/* Sends to the next rank and receives from the previous one, both queued before either is
 * waited for, so no rank waits for a peer that is itself waiting. A failure is returned at
 * once: the run then ends, and HcclCommDestroy frees what is still queued. */
static HcclResult sendrecv(const struct perf_call *c, int blocking) {
  HcclDataType dt = perf_hccl_dtype[c->type];
  if (nranks == 1) {
    memcpy(c->recv, c->send, c->count * perf_type_size(c->type));
    return HCCL_SUCCESS;
  }
  HcclRequest two[2], *req = two;
  if (!blocking) {
    if (reserve(2) != 0) return HCCL_E_MEMORY;
    req = &pending[npending];
  }
  HcclResult rc = HcclSend(c->send, c->count, dt, (my_rank + 1) % nranks, comm, &req[0]);
  if (rc != HCCL_SUCCESS) return rc;
  if (!blocking) npending++;
  rc = HcclRecv(c->recv, c->count, dt, (my_rank + nranks - 1) % nranks, comm, &req[1]);
  if (rc != HCCL_SUCCESS) return rc;
  if (!blocking) {
    npending++;
    return HCCL_SUCCESS;
  }
  HcclResult rs = HcclRequestWait(req[0]), rr = HcclRequestWait(req[1]);
  return rs != HCCL_SUCCESS ? rs : rr;
}

static int hccl_run(const struct perf_call *c, int blocking) {
  HcclResult rc;
  if (c->coll == PERF_SENDRECV) {
    rc = sendrecv(c, blocking);
  } else {
    HcclRequest *req = NULL;
    if (!blocking) {
      if (reserve(1) != 0) return 1;
      req = &pending[npending];
    }
    rc = issue(c, req);
    if (rc == HCCL_SUCCESS && req) npending++;
  }
  if (rc == HCCL_SUCCESS) return 0;
  char call[160];
  describe(call, sizeof(call), c);
  return failed(rc, call);
}

static int hccl_wait_all(void) {
  int bad = 0;
  for (size_t i = 0; i < npending; i++) {
    HcclResult rc = HcclRequestWait(pending[i]); /* waits on every request, even after a failure */
    if (rc != HCCL_SUCCESS && !bad) bad = failed(rc, "HcclRequestWait (a call queued with -z 0)");
  }
  npending = 0;
  return bad;
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

static int hccl_mem_alloc(void **ptr, size_t bytes) {
  return HcclMemAlloc(ptr, bytes) == HCCL_SUCCESS ? 0 : -1;
}

static void hccl_mem_free(void *ptr) {
  HcclMemFree(ptr);
}

/* RDMA's counters (HcclGetCommTransportStats): zeros where the job has no RDMA link. */
static int hccl_link_counts(struct perf_link_counts *c) {
  HcclTransportStats s;
  if (HcclGetCommTransportStats(comm, "rdma", &s) != HCCL_SUCCESS) return 1;
  snprintf(c->name, sizeof(c->name), "RDMA");
  c->links = s.links;
  c->sent = s.bytesSent;
  c->copied_send = s.bytesCopiedSend;
  c->copied_recv = s.bytesCopiedRecv;
  return 0;
}

/* Runs the benchmark; see perf_common.h for the exit codes. */
int main(int argc, char **argv) {
  static const struct perf_backend be = {
      .prog = PERF_PROG,
      .init = hccl_init,
      .run = hccl_run,
      .wait_all = hccl_wait_all,
      .barrier = hccl_barrier,
      .last_error = hccl_last_error,
      .finalize = hccl_finalize,
      .abort_run = hccl_abort,
      .mem_alloc = hccl_mem_alloc,
      .mem_free = hccl_mem_free,
      .link_counts = hccl_link_counts,
      .has_avg = HAVE_AVG,
      .by = PERF_BY_HCCL,
  };
  return perf_main(argc, argv, PERF_COLL, &be);
}
