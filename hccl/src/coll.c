/*
 * coll.c - the collective entry points: argument checks (each failure names the value and the
 * rule), the choice of algorithm, and the order of execution. A call with a NULL request runs
 * on the caller's thread, after any queued asynchronous calls; a call with a request goes to
 * the communicator's FIFO, run by one worker thread started on first use.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "comm.h"
#include "log.h"
#include "request.h"
#include "reduce.h"
#include "wait.h"

enum coll_kind { K_ALLREDUCE, K_BROADCAST, K_ALLGATHER, K_REDUCE_SCATTER, K_REDUCE, K_BARRIER };
static const char *const kind_names[] = {"allreduce",      "broadcast", "allgather",
                                         "reduce-scatter", "reduce",    "barrier"};

struct hccl_op {
  enum coll_kind kind;
  const void *send;
  void *recv;
  size_t count;
  HcclDataType dt;
  HcclReduceOp op;
  uint32_t root;
};

/* A queued call: the request the caller holds (first, so HcclRequestWait frees the whole
 * record) and the call, in the communicator's FIFO until the worker has run it. */
struct hccl_coll_req {
  struct hccl_request base;
  struct hccl_op op;
  struct hccl_coll_req *next;
};

static HcclResult run_op(struct hccl_comm *c, const struct hccl_op *o) {
  struct hccl_wait w = {.comm = c,
                        .what = kind_names[o->kind],
                        .deadline_ns = hccl__now_ns() + c->cfg.exec_timeout_ms * 1000000LL};
  size_t esz = o->kind == K_BARRIER ? 1 : hccl__dtype_size(o->dt);
  struct hccl_prim p = {.w = &w, .esz = esz, .reduce = NULL};
  if (o->kind == K_ALLREDUCE || o->kind == K_REDUCE || o->kind == K_REDUCE_SCATTER)
    p.reduce = hccl__reduce_kernel(o->dt, o->op);
  size_t bytes = o->count * esz;
  uint32_t n = c->nranks;

  if (n == 1) {
    size_t total = o->kind == K_BARRIER || o->kind == K_BROADCAST ? 0 : bytes;
    if (total && o->recv && o->recv != o->send) memcpy(o->recv, o->send, total);
    return HCCL_SUCCESS;
  }
  switch (o->kind) {
  case K_ALLREDUCE:
    if (hccl__select_allreduce(c, bytes) == HCCL_ALGO_KIND_HD)
      return hccl__hd_allreduce(c, &p, o->send, o->recv, o->count);
    return hccl__ring_allreduce(c, &p, o->send, o->recv, o->count);
  case K_REDUCE_SCATTER:
    return hccl__ring_reduce_scatter(c, &p, o->send, o->recv, o->count);
  case K_ALLGATHER:
    return hccl__ring_allgather(c, &p, o->send, o->recv, o->count);
  case K_BROADCAST:
    if (hccl__select_rooted(c, bytes) == HCCL_ALGO_KIND_HD)
      return hccl__binomial_broadcast(c, &p, o->recv, o->count, o->root);
    return hccl__chain_broadcast(c, &p, o->recv, o->count, o->root);
  case K_REDUCE:
    if (hccl__select_rooted(c, bytes) == HCCL_ALGO_KIND_HD)
      return hccl__binomial_reduce(c, &p, o->send, o->recv, o->count, o->root);
    return hccl__chain_reduce(c, &p, o->send, o->recv, o->count, o->root);
  case K_BARRIER:
    return hccl__dissemination_barrier(c, &p);
  }
  return hccl__fail(HCCL_E_INTERNAL, "unknown collective %d", (int)o->kind);
}

static HcclResult check_aborts(struct hccl_comm *c, const char *what) {
  for (int i = 0; hccl__transports[i]; i++)
    if (hccl__transports[i]->check_abort) HCCL_TRY(hccl__transports[i]->check_abort(c, what));
  return HCCL_SUCCESS;
}

/* Runs one call and, on failure, breaks the communicator and tells the peers. */
static HcclResult execute(struct hccl_comm *c, const struct hccl_op *o) {
  if (atomic_load(&c->broken))
    return hccl__fail(HCCL_E_REMOTE,
                      "%s on rank %u refused: the communicator failed earlier (%s); destroy it "
                      "and make a new one",
                      kind_names[o->kind], c->rank, c->broken_msg);
  /* A peer's abort is read before (it may have failed this very call already) and after (a
   * call that never had to wait would not otherwise see it): one rank never succeeds at a
   * call another has failed. */
  HcclResult r = check_aborts(c, kind_names[o->kind]);
  if (r == HCCL_SUCCESS) r = run_op(c, o);
  if (r == HCCL_SUCCESS) r = check_aborts(c, kind_names[o->kind]);
  if (r != HCCL_SUCCESS) hccl__comm_fail(c, r);
  return r;
}

static void *worker_main(void *arg) {
  struct hccl_comm *c = arg;
  pthread_mutex_lock(&c->qlock);
  for (;;) {
    while (!c->qhead && !c->worker_stop)
      pthread_cond_wait(&c->qcond, &c->qlock);
    if (!c->qhead) break;
    struct hccl_coll_req *q = c->qhead;
    c->worker_busy = true;
    pthread_mutex_unlock(&c->qlock);
    HcclResult r = execute(c, &q->op);
    pthread_mutex_lock(&c->qlock);
    c->qhead = q->next;
    if (!c->qhead) c->qtail = NULL;
    c->worker_busy = false;
    hccl__request_complete(&q->base, r);
  }
  pthread_mutex_unlock(&c->qlock);
  return NULL;
}

static HcclResult enqueue(struct hccl_comm *c, const struct hccl_op *o, HcclRequest *out) {
  struct hccl_coll_req *q = calloc(1, sizeof(*q));
  if (!q) return hccl__fail(HCCL_E_MEMORY, "out of memory for a request");
  q->op = *o;
  pthread_mutex_lock(&c->qlock);
  if (!c->worker_started) {
    if (pthread_create(&c->worker, NULL, worker_main, c) != 0) {
      pthread_mutex_unlock(&c->qlock);
      free(q);
      return hccl__fail(HCCL_E_SYSCALL, "cannot start the communicator's worker thread");
    }
    c->worker_started = true;
  }
  hccl__request_attach(&q->base, c, &c->qlock, &c->qcond, &c->coll_live);
  if (c->qtail)
    c->qtail->next = q;
  else
    c->qhead = q;
  c->qtail = q;
  pthread_cond_broadcast(&c->qcond);
  pthread_mutex_unlock(&c->qlock);
  *out = &q->base;
  return HCCL_SUCCESS;
}

/* A request that is already complete (count 0). */
static HcclResult done_request(struct hccl_comm *c, HcclRequest *out) {
  struct hccl_coll_req *q = calloc(1, sizeof(*q));
  if (!q) return hccl__fail(HCCL_E_MEMORY, "out of memory for a request");
  pthread_mutex_lock(&c->qlock);
  hccl__request_attach(&q->base, c, &c->qlock, &c->qcond, &c->coll_live);
  hccl__request_complete(&q->base, HCCL_SUCCESS);
  pthread_mutex_unlock(&c->qlock);
  *out = &q->base;
  return HCCL_SUCCESS;
}

/* Runs or queues a validated call. */
static HcclResult submit(struct hccl_comm *c, const struct hccl_op *o, HcclRequest *req) {
  if (req) {
    if (o->count == 0 && o->kind != K_BARRIER) return done_request(c, req);
    return enqueue(c, o, req);
  }
  if (o->count == 0 && o->kind != K_BARRIER) return HCCL_SUCCESS;
  pthread_mutex_lock(&c->qlock);
  bool queued = c->qhead != NULL || c->worker_busy;
  pthread_mutex_unlock(&c->qlock);
  if (!queued) return execute(c, o);
  HcclRequest q;
  HCCL_TRY(enqueue(c, o, &q));
  return HcclRequestWait(q);
}

void hccl__coll_shutdown(struct hccl_comm *c) {
  pthread_mutex_lock(&c->qlock);
  bool started = c->worker_started;
  c->worker_stop = true;
  pthread_cond_broadcast(&c->qcond);
  pthread_mutex_unlock(&c->qlock);
  if (started) pthread_join(c->worker, NULL);
  /* The worker ran the queue dry before it stopped; requests never waited for are freed. */
  hccl__request_free_live(&c->coll_live);
  c->qhead = c->qtail = NULL;
}

/* ---- argument checks ---- */

static HcclResult check_comm(struct hccl_comm *c, const char *fn) {
  if (!c) return hccl__fail(HCCL_E_PTR, "%s: comm is NULL", fn);
  return HCCL_SUCCESS;
}

static HcclResult check_dtype(struct hccl_comm *c, const char *fn, HcclDataType dt) {
  if (hccl__dtype_size(dt) == 0)
    return hccl__fail(HCCL_E_PARA, "%s on rank %u: data type %d is not an HcclDataType", fn,
                      c->rank, (int)dt);
  return HCCL_SUCCESS;
}

static HcclResult check_reduce(struct hccl_comm *c, const char *fn, HcclDataType dt,
                               HcclReduceOp op) {
  HCCL_TRY(check_dtype(c, fn, dt));
  if ((int)op < 0 || op >= HCCL_REDUCE_RESERVED)
    return hccl__fail(HCCL_E_PARA,
                      "%s on rank %u: reduce op %d is not valid; use sum, prod, max or min", fn,
                      c->rank, (int)op);
  if (!hccl__reduce_supported(dt, op))
    return hccl__fail(HCCL_E_NOT_SUPPORT,
                      "%s on rank %u: data type %s is not supported for reductions; they take "
                      "int8, int32, float16 or float32",
                      fn, c->rank, hccl__dtype_name(dt));
  return HCCL_SUCCESS;
}

static HcclResult check_bufs(struct hccl_comm *c, const char *fn, uint64_t count, HcclDataType dt,
                             uint64_t factor, const void *send, const void *recv,
                             const char *send_name, const char *recv_name) {
  size_t esz = hccl__dtype_size(dt);
  if (count > SIZE_MAX / esz / factor)
    return hccl__fail(HCCL_E_PARA, "%s on rank %u: count %llu is too large for this machine", fn,
                      c->rank, (unsigned long long)count);
  if (count > 0 && (!send || !recv))
    return hccl__fail(HCCL_E_PTR, "%s on rank %u: %s is NULL with count %llu", fn, c->rank,
                      send ? recv_name : send_name, (unsigned long long)count);
  return HCCL_SUCCESS;
}

static HcclResult check_root(struct hccl_comm *c, const char *fn, uint32_t root) {
  if (root >= c->nranks)
    return hccl__fail(HCCL_E_PARA,
                      "%s on rank %u: root %u is not a rank of this %u-rank "
                      "communicator",
                      fn, c->rank, root, c->nranks);
  return HCCL_SUCCESS;
}

HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                         HcclReduceOp op, HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_comm(comm, "HcclAllReduce"));
  HCCL_TRY(check_reduce(comm, "HcclAllReduce", dataType, op));
  HCCL_TRY(check_bufs(comm, "HcclAllReduce", count, dataType, 1, sendBuf, recvBuf, "sendBuf",
                      "recvBuf"));
  struct hccl_op o = {K_ALLREDUCE, sendBuf, recvBuf, count, dataType, op, 0};
  return submit(comm, &o, request);
}

HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                         HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_comm(comm, "HcclBroadcast"));
  HCCL_TRY(check_dtype(comm, "HcclBroadcast", dataType));
  HCCL_TRY(check_root(comm, "HcclBroadcast", root));
  HCCL_TRY(check_bufs(comm, "HcclBroadcast", count, dataType, 1, buf, buf, "buf", "buf"));
  struct hccl_op o = {K_BROADCAST, buf, buf, count, dataType, HCCL_REDUCE_SUM, root};
  return submit(comm, &o, request);
}

HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                         HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_comm(comm, "HcclAllGather"));
  HCCL_TRY(check_dtype(comm, "HcclAllGather", dataType));
  HCCL_TRY(check_bufs(comm, "HcclAllGather", sendCount, dataType, comm->nranks, sendBuf, recvBuf,
                      "sendBuf", "recvBuf"));
  struct hccl_op o = {K_ALLGATHER, sendBuf, recvBuf, sendCount, dataType, HCCL_REDUCE_SUM, 0};
  return submit(comm, &o, request);
}

HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                             HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                             HcclRequest *request) {
  HCCL_TRY(check_comm(comm, "HcclReduceScatter"));
  HCCL_TRY(check_reduce(comm, "HcclReduceScatter", dataType, op));
  HCCL_TRY(check_bufs(comm, "HcclReduceScatter", recvCount, dataType, comm->nranks, sendBuf,
                      recvBuf, "sendBuf", "recvBuf"));
  struct hccl_op o = {K_REDUCE_SCATTER, sendBuf, recvBuf, recvCount, dataType, op, 0};
  if (comm->nranks == 1) o.count = recvCount; /* one block: a copy */
  return submit(comm, &o, request);
}

HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                      HcclReduceOp op, uint32_t root, HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_comm(comm, "HcclReduce"));
  HCCL_TRY(check_reduce(comm, "HcclReduce", dataType, op));
  HCCL_TRY(check_root(comm, "HcclReduce", root));
  /* recvBuf matters on the root only. */
  HCCL_TRY(check_bufs(comm, "HcclReduce", count, dataType, 1, sendBuf,
                      comm->rank == root ? recvBuf : sendBuf, "sendBuf", "recvBuf"));
  struct hccl_op o = {K_REDUCE, sendBuf, recvBuf, count, dataType, op, root};
  return submit(comm, &o, request);
}

HcclResult HcclBarrier(HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_comm(comm, "HcclBarrier"));
  struct hccl_op o = {K_BARRIER, NULL, NULL, 0, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0};
  return submit(comm, &o, request);
}

const char *HcclAllReduceAlgoName(HcclComm comm, uint64_t bytes) {
  if (!comm) return "none";
  return hccl__select_allreduce(comm, bytes) == HCCL_ALGO_KIND_HD ? "hd" : "ring";
}
