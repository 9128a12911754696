/*
 * coll_run.c - how a validated collective call runs: one plan per call (algo/plan.c chooses
 * the candidates, algo/plan_run.c runs them and says which ran; its name goes to the trace and
 * the flight recorder), the call's
 * bookkeeping (sequence number and fingerprint, progress record, trace, flight recorder), and
 * the order of execution. A call with a NULL request runs on the caller's thread, after any
 * queued asynchronous calls; a call with a request goes to the communicator's FIFO, run by one
 * worker thread started on first use.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "coll_run.h"
#include "comm.h"
#include "comm_wait.h"
#include "fail.h"
#include "fingerprint.h"
#include "flight.h"
#include "log.h"
#include "plan.h"
#include "plan_run.h"
#include "progress.h"
#include "reduce.h"
#include "request.h"
#include "thread.h"
#include "trace.h"
#include "wait.h"

/* A queued call: the request the caller holds (first, so HcclRequestWait frees the whole
 * record) and the call, in the communicator's FIFO until the worker has run it. */
struct hccl_coll_req {
  struct hccl_request base;
  struct hccl_op op;
  struct hccl_coll_req *next;
};

/* What the planner (algo/plan.c) reads of c. */
static struct hccl_plan_view plan_view(struct hccl_comm *c) {
  return (struct hccl_plan_view){.nranks = c->nranks,
                                 .nservers = c->nservers,
                                 .local_nranks = c->local_nranks,
                                 .max_local_nranks = c->max_local_nranks,
                                 .uneven = c->uneven,
                                 .one_kernel = c->one_kernel,
                                 .crowded = c->crowded,
                                 .world = &c->world,
                                 .local = &c->local,
                                 .cross = &c->cross,
                                 .server_of = c->server_of,
                                 .local_index = c->local_index,
                                 .algo = &c->cfg.algo,
                                 .zcopy_min_bytes = c->zcopy_min_bytes,
                                 .own_cores = c->own_cores,
                                 .offers = c->zcopy};
}

/* o as the planner and the algorithms take it. */
static struct hccl_call call_of(const struct hccl_comm *c, const struct hccl_op *o) {
  size_t esz = o->kind == HCCL_K_BARRIER ? 1 : hccl__dtype_size(o->dt);
  struct hccl_call call = {.kind = o->kind,
                           .send = o->send,
                           .recv = o->recv,
                           .count = o->count,
                           .esz = esz,
                           .bytes = o->bytes,
                           .root = o->root};
  size_t resz = hccl__dtype_size(o->recv_dt), n = c->nranks;
  if (o->kind == HCCL_K_ALLTOALL) {
    call.sb = (struct hccl_blocks){NULL, NULL, o->count, esz};
    call.rb = (struct hccl_blocks){NULL, NULL, o->recv_count, resz};
  } else if (o->kind == HCCL_K_ALLTOALLV) {
    call.sb = (struct hccl_blocks){o->v, o->v + n, 0, esz};
    call.rb = (struct hccl_blocks){o->v + 2 * n, o->v + 3 * n, 0, resz};
  }
  return call;
}

/* Whether the steps stream their writes to the output (prims.h): out of place (in place, the
 * output's lines were just read as the input and are in the cache) and at least
 * HCCL_STREAM_MIN bytes of output, for the reducing collectives and allgather. */
static bool stream_out(const struct hccl_comm *c, const struct hccl_op *o) {
  size_t bytes = o->bytes;
  if (o->kind == HCCL_K_ALLGATHER)
    bytes *= c->nranks;
  else if (o->kind != HCCL_K_ALLREDUCE && o->kind != HCCL_K_REDUCE &&
           o->kind != HCCL_K_REDUCE_SCATTER)
    return false;
  return o->send != o->recv && bytes >= HCCL_STREAM_MIN;
}

/* Runs call (o's, stamped st) by plan; *ran: the candidate that ran. */
static HcclResult run_op(struct hccl_comm *c, const struct hccl_op *o, struct hccl_stamp st,
                         const struct hccl_plan_view *v, const struct hccl_call *call,
                         const struct hccl_plan *plan, struct hccl_ran *ran) {
  struct hccl_wait w = hccl__comm_wait(c, hccl__coll_kind_name(o->kind), c->progress.self);
  struct hccl_prim p = {.w = &w, .esz = call->esz, .reduce = NULL, .finish = true};
  struct hccl_red red;
  if (o->kind == HCCL_K_ALLREDUCE || o->kind == HCCL_K_REDUCE ||
      o->kind == HCCL_K_REDUCE_SCATTER) {
    if (!hccl__red_make(&red, o->dt, o->op, &o->scalar, c->nranks))
      return hccl__fail(HCCL_E_INTERNAL, "no kernel for %s of %s", hccl__op_name(o->op),
                        hccl__dtype_name(o->dt));
    p.red = &red;
    p.reduce = red.step;
  }
  p.stamp = st;
  p.stream_out = stream_out(c, o);
  HCCL_TRY(hccl__plan_run(v, plan, &p, call, ran));
  if (ran->algo == HCCL_PLAN_ZERO_COPY || ran->algo == HCCL_PLAN_HIER_ZCOPY_RING ||
      ran->algo == HCCL_PLAN_HIER_ZCOPY_HD)
    c->zcopy_ran = c->coll_seq + 1;
  if (ran->algo == HCCL_PLAN_STAGED || ran->algo == HCCL_PLAN_HIER_STAGED_RING ||
      ran->algo == HCCL_PLAN_HIER_STAGED_HD)
    c->staged_ran = c->coll_seq + 1;
  if (ran->algo == HCCL_PLAN_ONESHOT) c->oneshot_ran = c->coll_seq + 1;
  return HCCL_SUCCESS;
}

/* A rooted collective's result on most ranks does not depend on every rank's messages (a
 * broadcast's receiver needs only the root's data), so a rank could finish it while a peer it
 * sent to rejects the message (a mismatched call, fingerprint.h). Waiting until every message
 * it sent was accepted makes the call fail on every rank or on none. The other collectives
 * need no such wait: every rank's result depends on messages from every rank. */
static HcclResult confirm_sent(struct hccl_comm *c, const struct hccl_op *o) {
  if (c->nranks == 1 || !(o->kind == HCCL_K_BROADCAST || o->kind == HCCL_K_REDUCE ||
                          o->kind == HCCL_K_GATHER || o->kind == HCCL_K_SCATTER))
    return HCCL_SUCCESS;
  struct hccl_wait w = hccl__comm_wait(c, hccl__coll_kind_name(o->kind), c->progress.self);
  struct hccl_prim p = {.w = &w, .esz = 1};
  struct hccl_link **links = c->tx.links[HCCL_CHANNEL_COLL];
  for (uint32_t r = 0; r < c->nranks; r++)
    if (links[r]) HCCL_TRY(hccl__prim_drain(&p, links[r]));
  return HCCL_SUCCESS;
}

static bool reduces(const struct hccl_op *o) {
  return o->kind == HCCL_K_ALLREDUCE || o->kind == HCCL_K_REDUCE ||
         o->kind == HCCL_K_REDUCE_SCATTER;
}

static bool rooted(const struct hccl_op *o) {
  return o->kind == HCCL_K_BROADCAST || o->kind == HCCL_K_REDUCE || o->kind == HCCL_K_GATHER ||
         o->kind == HCCL_K_SCATTER;
}

static void trace_call(struct hccl_comm *c, const struct hccl_op *o, HcclResult r, int64_t t0,
                       const char *algo) {
  hccl__trace_call(c->trace, hccl__coll_kind_name(o->kind), t0, hccl__now_ns(), c->coll_seq,
                   o->count, o->dt, reduces(o) ? (int)o->op : -1, o->root, algo, r);
}

/* Runs one call and, on failure, breaks the communicator and tells the peers. */
static HcclResult execute(struct hccl_comm *c, const struct hccl_op *o) {
  if (atomic_load(&c->broken))
    return hccl__fail(HCCL_E_REMOTE,
                      "%s on rank %u refused: the communicator failed earlier (%s); destroy it "
                      "and make a new one",
                      hccl__coll_kind_name(o->kind), c->rank, c->broken_msg);
  /* A peer's abort is read before (it may have failed this very call already) and after (a
   * call that never had to wait would not otherwise see it): one rank never succeeds at a
   * call another has failed. */
  HcclResult r = hccl__check_aborts(c, hccl__coll_kind_name(o->kind));
  int64_t t0 = c->trace ? hccl__now_ns() : 0;
  c->coll_seq++; /* counted by every rank alike: calls run one at a time, in call order */
  hccl__progress_enter(&c->progress, c->coll_seq, o->kind, rooted(o) ? o->root : UINT32_MAX);
  /* The call's fingerprint, made once: every message carries it, the flight recorder keeps
   * its hash. */
  struct hccl_stamp st =
      hccl__fp_make(c->coll_seq, o->kind, o->count, o->dt, o->op, o->scalar, o->root, o->user_type);
  uint64_t fr = 0;
  if (c->fr) {
    fr = o->fr_id ? o->fr_id
                  : hccl__fr_enqueue(c->fr, o->kind, o->count, o->dt, reduces(o) ? (int)o->op : -1,
                                     rooted(o) ? o->root : UINT32_MAX, UINT32_MAX);
    hccl__fr_start(c->fr, fr, c->coll_seq, st.w[0] ^ st.w[1]);
  }
  /* The one plan of this call, and what of it ran: the name the records give the call (a call
   * that failed, the model's choice). */
  struct hccl_plan_view v = plan_view(c);
  struct hccl_call call = call_of(c, o);
  const struct hccl_plan plan = hccl__plan(&v, &call);
  const struct hccl_cand *last = hccl__plan_last(&plan);
  struct hccl_ran ran = {.algo = last->algo, .name = last->name};
  if (r == HCCL_SUCCESS) r = run_op(c, o, st, &v, &call, &plan, &ran);
  if (r == HCCL_SUCCESS) r = confirm_sent(c, o);
  /* A failed call stays published (wait.c). */
  if (r == HCCL_SUCCESS) hccl__progress_leave(&c->progress);
  if (fr) hccl__fr_end(c->fr, fr, r, ran.name);
  if (c->trace) trace_call(c, o, r, t0, ran.name);
  if (r == HCCL_SUCCESS) r = hccl__check_aborts(c, hccl__coll_kind_name(o->kind));
  if (r != HCCL_SUCCESS) hccl__comm_fail(c, r);
  return r;
}

/* Runs the call at the head of the queue on this thread (the queue's lock held on entry and
 * exit). The busy mark keeps a second thread from starting the next call before this one ends. */
static void run_head_locked(struct hccl_comm *c) {
  struct hccl_coll_req *q = c->queue.head;
  c->queue.worker_busy = true;
  pthread_mutex_unlock(&c->queue.lock);
  HcclResult r = execute(c, &q->op);
  if (q->op.v_owned) free((void *)q->op.v);
  pthread_mutex_lock(&c->queue.lock);
  c->queue.head = q->next;
  if (!c->queue.head) c->queue.tail = NULL;
  c->queue.worker_busy = false;
  hccl__request_complete(&q->base, r, NULL);
}

/* HcclRequestWait's helper (the queue's lock held): when the waited call's turn has come and no
 * thread runs anything, run it here rather than wake the worker and sleep (two thread switches,
 * the cost of a small call on busy cores). */
static bool coll_help(struct hccl_request *base) {
  struct hccl_comm *c = base->comm;
  if ((struct hccl_coll_req *)base != c->queue.head || c->queue.worker_busy) return false;
  run_head_locked(c);
  return true;
}

static void *worker_main(void *arg) {
  struct hccl_comm *c = arg;
  hccl__log_bind(&c->log);
  pthread_mutex_lock(&c->queue.lock);
  for (;;) {
    while ((!c->queue.head || c->queue.worker_busy) && !c->queue.worker_stop)
      pthread_cond_wait(&c->queue.cond, &c->queue.lock);
    if (!c->queue.head) break;
    if (c->queue.worker_busy) { /* stopping, while a waiter runs the head: let it finish */
      pthread_cond_wait(&c->queue.cond, &c->queue.lock);
      continue;
    }
    /* A caller that waits at once (every blocking torch call) would find the call already
     * taken and sleep: give it the core once first, so it runs the call itself (coll_help).
     * One yield, not more: docs/performance.md, "Measurements behind the code", has the
     * figures. */
    struct hccl_coll_req *head = c->queue.head;
    pthread_mutex_unlock(&c->queue.lock);
    sched_yield();
    pthread_mutex_lock(&c->queue.lock);
    if (c->queue.head != head || c->queue.worker_busy) continue;
    run_head_locked(c);
  }
  pthread_mutex_unlock(&c->queue.lock);
  return NULL;
}

static HcclResult enqueue(struct hccl_comm *c, const struct hccl_op *o, HcclRequest *out) {
  struct hccl_coll_req *q = calloc(1, sizeof(*q));
  if (!q) return hccl__fail(HCCL_E_MEMORY, "out of memory for a request");
  q->op = *o;
  q->op.fr_id = hccl__fr_enqueue(c->fr, o->kind, o->count, o->dt, reduces(o) ? (int)o->op : -1,
                                 rooted(o) ? o->root : UINT32_MAX, UINT32_MAX);
  if (o->v) {
    /* The caller may free its arrays as soon as the call returns. */
    size_t len = 4 * (size_t)c->nranks * sizeof(uint64_t);
    uint64_t *v = malloc(len);
    if (!v) {
      free(q);
      return hccl__fail(HCCL_E_MEMORY, "out of memory for a queued alltoallv's counts");
    }
    memcpy(v, o->v, len);
    q->op.v = v;
    q->op.v_owned = true;
  }
  pthread_mutex_lock(&c->queue.lock);
  if (!c->queue.worker_started) {
    if (hccl__thread_start(&c->queue.worker, worker_main, c) != 0) {
      pthread_mutex_unlock(&c->queue.lock);
      if (q->op.v_owned) free((void *)q->op.v);
      free(q);
      return hccl__fail(HCCL_E_SYSCALL, "cannot start the communicator's worker thread");
    }
    c->queue.worker_started = true;
  }
  hccl__request_attach(&q->base, c, &c->queue.lock, &c->queue.cond, &c->queue.live);
  q->base.help = coll_help;
  if (c->queue.tail)
    c->queue.tail->next = q;
  else
    c->queue.head = q;
  c->queue.tail = q;
  pthread_cond_broadcast(&c->queue.cond);
  pthread_mutex_unlock(&c->queue.lock);
  *out = &q->base;
  return HCCL_SUCCESS;
}

/* A request that is already complete (count 0). */
static HcclResult done_request(struct hccl_comm *c, HcclRequest *out) {
  struct hccl_coll_req *q = calloc(1, sizeof(*q));
  if (!q) return hccl__fail(HCCL_E_MEMORY, "out of memory for a request");
  pthread_mutex_lock(&c->queue.lock);
  hccl__request_attach(&q->base, c, &c->queue.lock, &c->queue.cond, &c->queue.live);
  hccl__request_complete(&q->base, HCCL_SUCCESS, NULL);
  pthread_mutex_unlock(&c->queue.lock);
  *out = &q->base;
  return HCCL_SUCCESS;
}

HcclResult hccl__coll_submit(struct hccl_comm *c, const struct hccl_op *o, HcclRequest *req) {
  /* Count 0 moves nothing and returns at once on every rank. A barrier always runs, and so
   * does an alltoallv: its counts differ per rank, and a rank with nothing to send or receive
   * still owes its peers one empty message each. */
  bool noop = o->count == 0 && o->kind != HCCL_K_BARRIER && o->kind != HCCL_K_ALLTOALLV;
  if (req) {
    if (noop) return done_request(c, req);
    return enqueue(c, o, req);
  }
  if (noop) return HCCL_SUCCESS;
  pthread_mutex_lock(&c->queue.lock);
  bool queued = c->queue.head != NULL || c->queue.worker_busy;
  if (!queued) c->queue.worker_busy = true;
  pthread_mutex_unlock(&c->queue.lock);
  if (!queued) {
    HcclResult r = execute(c, o);
    pthread_mutex_lock(&c->queue.lock);
    c->queue.worker_busy = false;
    /* Only a call queued meanwhile waits for this one to end (the worker, or its caller about
     * to run it, coll_help). With the queue empty a broadcast only wakes an idle worker, which
     * then takes the core from this caller (docs/performance.md, "Measurements behind the
     * code", has what that cost). */
    if (c->queue.head) pthread_cond_broadcast(&c->queue.cond);
    pthread_mutex_unlock(&c->queue.lock);
    return r;
  }
  HcclRequest q;
  HCCL_TRY(enqueue(c, o, &q));
  return HcclRequestWait(q);
}

void hccl__queue_init(struct hccl_queue *q) {
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->cond, NULL);
}

void hccl__queue_destroy(struct hccl_queue *q) {
  pthread_mutex_destroy(&q->lock);
  pthread_cond_destroy(&q->cond);
}

void hccl__coll_drain(struct hccl_queue *q) {
  pthread_mutex_lock(&q->lock);
  while (q->head || q->worker_busy) {
    /* Each queued call's end broadcasts the condition; a blocking call's on another thread may
     * not, so the wait is in slices of 10 ms. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&q->cond, &q->lock, &ts);
  }
  pthread_mutex_unlock(&q->lock);
}

void hccl__coll_shutdown(struct hccl_queue *q) {
  pthread_mutex_lock(&q->lock);
  bool started = q->worker_started;
  q->worker_stop = true;
  pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->lock);
  if (started) pthread_join(q->worker, NULL);
  /* The worker ran the queue dry before it stopped; requests never waited for are freed. */
  hccl__request_free_live(&q->live);
  q->head = q->tail = NULL;
}

const char *HcclAllReduceAlgoName(HcclComm comm, uint64_t bytes) {
  if (!comm) return "none";
  struct hccl_plan_view v = plan_view(comm);
  v.offers = NULL; /* a size, not a call: no buffers to offer zero-copy */
  struct hccl_call call = {.kind = HCCL_K_ALLREDUCE, .count = bytes, .esz = 1, .bytes = bytes};
  return hccl__plan(&v, &call).word;
}

