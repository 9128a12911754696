/*
 * p2p.c - point-to-point sends and receives (HcclSend, HcclRecv, HcclRecvAny), progressed by an
 * engine thread of their own, on a channel of their own (transport channel 1), so a p2p
 * message never mixes with a collective's and is never queued behind one.
 *
 * Every call, blocking or not, is posted to the engine (a blocking call is post + wait on its
 * request). The engine keeps the posted ops in posting order. An op is eligible when it is the
 * first unfinished op of its (direction, peer); a recv-any is eligible only when no earlier
 * receive is pending, and a receive is not eligible while an earlier recv-any is pending. This
 * is what makes sends and receives between two ranks match in the order they were made.
 *
 * Progress: each pass moves every eligible op forward, chunk by chunk (one slot-sized framed
 * message per hccl__prim_step, prims.h), as long as its link is ready (send_ready/recv_ready),
 * so several sends and receives in flight all progress: two ranks may both isend 64 MiB to
 * each other before they irecv. A recv-any takes the first link with a message waiting, learns
 * its source from that first chunk and reads the rest of the message from that link. When a
 * pass moves nothing, the engine polls for the communicator's spin budget, then blocks in a
 * bounded way: with one thing to wait for, a blocking prim step with a 10 ms slice deadline
 * (the futex sleep and the transport's dead-peer and abort checks, the slice's timeout kept
 * quiet); with several (an unmatched recv-any waits on every link), 1 ms slices in rotation.
 *
 * Completion: a receive completes when its last chunk is in the buffer. A send completes when
 * the receiver has released every chunk of it (send_drained): the receiver checks each chunk's
 * size, and one that refuses a size aborts the communicator instead of releasing, so the
 * sender fails too, as hccl.h promises ("both fail naming the sizes"). So sends go by reference
 * (prims.h, by_ref: over TCP the I/O thread's sendmsg reads the caller's buffer, without
 * the copy into the send slot), and the buffer is the caller's again when the send completes.
 * The price: a send completes only once its receive is posted, as with NCCL; two blocking
 * sends facing each other wait for each other (until HCCL_EXEC_TIMEOUT) where isend/irecv or a
 * send/recv order would not.
 *
 * Failures: each op's deadline is its post time + HCCL_EXEC_TIMEOUT; expiry fails it naming
 * the op, the peer and the bytes moved. Any failure (timeout, wrong size, dead peer, a peer's
 * abort) breaks the communicator (hccl__comm_fail) and fails every pending op; a communicator
 * broken by a collective fails pending ops too.
 *
 * Sends to oneself are refused (HCCL_E_PARA): NCCL allows them, but torch never makes them,
 * and a rank's own FIFO does not exist.
 */
#include "p2p.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "comm_wait.h"
#include "dtype.h"
#include "fail.h"
#include "flight.h"
#include "group_open.h"
#include "links.h"
#include "log.h"
#include "prims.h"
#include "request.h"
#include "thread.h"
#include "transport.h"

#define SLICE_ONE_NS 10000000LL /* blocking slice with one thing to wait for */
#define SLICE_MANY_NS 1000000LL /* with several, in rotation */
#define NO_PEER UINT32_MAX

enum p2p_kind { P2P_SEND, P2P_RECV, P2P_RECV_ANY };

struct p2p_op {
  struct hccl_request req; /* first: HcclRequestWait frees the whole op */
  enum p2p_kind kind;
  uint32_t peer; /* NO_PEER: a recv-any not matched yet */
  uint32_t *src_out;
  char *buf;
  size_t bytes;
  size_t chunk, nchunks, next; /* framing (prims.h) and chunks moved */
  bool posted;                 /* a receive: its rest offered to the link in place */
  struct hccl_wait w;          /* the op's own deadline; w.what = what */
  char what[96];
  uint64_t fr_id; /* its flight recorder entry (flight.h) */
  struct p2p_op *next_op;
};

struct hccl_p2p {
  struct hccl_comm *comm;
  pthread_mutex_t lock; /* guards the incoming list, stop, and every request's fields */
  pthread_cond_t cond;  /* posts, stop, and completions */
  struct p2p_op *in_head, *in_tail;
  struct hccl_request *live;
  bool stop;
  pthread_t thread;
  /* The engine thread's own. */
  struct p2p_op *head, *tail; /* active ops, posting order */
  struct p2p_op **elig;       /* [2 * nranks + 1] */
  bool *busy;                 /* [2 * nranks]: send busy per peer, then recv busy per peer */
  uint32_t rotate;
};

static char *at(void *buf, size_t off) {
  return buf ? (char *)buf + off : NULL;
}

static size_t moved_bytes(const struct p2p_op *op) {
  if (op->peer == NO_PEER) return 0;
  size_t b = op->next * op->chunk;
  return b < op->bytes ? b : op->bytes;
}

/* Removes op from the active list, writes a recv-any's source, completes its request. */
static void finish(struct hccl_p2p *e, struct p2p_op *op, HcclResult r, const char *msg) {
  struct p2p_op **pp = &e->head, *prev = NULL;
  while (*pp != op) {
    prev = *pp;
    pp = &(*pp)->next_op;
  }
  *pp = op->next_op;
  if (e->tail == op) e->tail = prev;
  if (r == HCCL_SUCCESS && op->kind == P2P_RECV_ANY) *op->src_out = op->peer;
  hccl__fr_end(e->comm->fr, op->fr_id, r, NULL);
  pthread_mutex_lock(&e->lock);
  hccl__request_complete(&op->req, r, msg);
  pthread_mutex_unlock(&e->lock);
}

/* After `why` (this thread's last error, logged once by whoever saw it): breaks the
 * communicator and fails every active op, each with a message naming it. */
static void fail_all(struct hccl_p2p *e, HcclResult r, struct p2p_op *origin) {
  struct hccl_comm *c = e->comm;
  char why[256], msg[512];
  snprintf(why, sizeof(why), "%s", HcclGetLastErrorMessage());
  hccl__comm_fail(c, r);
  while (e->head) {
    struct p2p_op *op = e->head;
    if (op == origin)
      finish(e, op, r, why);
    else {
      snprintf(msg, sizeof(msg), "%s on rank %u stopped after %zu bytes: %s", op->what, c->rank,
               moved_bytes(op), why);
      finish(e, op, r, msg);
    }
  }
}

/* op's link, made on first use without waiting (links.c): NULL until it is there. Its chunk
 * size is known from then on. */
static HcclResult op_link(struct hccl_p2p *e, struct p2p_op *op, struct hccl_link **l) {
  struct hccl_comm *c = e->comm;
  HCCL_TRY(hccl__link_get(&c->tx, HCCL_CHANNEL_P2P, op->peer, HCCL_CONNECT_TRY, l));
  if (*l && op->chunk == 0) {
    struct hccl_prim p = {.esz = 1};
    op->chunk = hccl__prim_chunk(&p, *l);
    op->nchunks = hccl__prim_nchunks(op->bytes, op->chunk);
  }
  return HCCL_SUCCESS;
}

/* The p2p link to r for a recv-any: one that exists, or one r already made to send here. */
static struct hccl_link *any_link(struct hccl_comm *c, uint32_t r) {
  struct hccl_link *l = NULL;
  if (!c->tx.links[HCCL_CHANNEL_P2P][r] &&
      hccl__link_get(&c->tx, HCCL_CHANNEL_P2P, r, HCCL_CONNECT_OFFERED, &l) != HCCL_SUCCESS)
    return NULL;
  return c->tx.links[HCCL_CHANNEL_P2P][r];
}

/* Moves eligible op forward without waiting. Sets *moved when a chunk moved or op finished. */
static HcclResult progress(struct hccl_p2p *e, struct p2p_op *op, bool *moved, bool *finished) {
  struct hccl_comm *c = e->comm;
  struct hccl_prim p = {.w = &op->w, .esz = 1, .by_ref = true};
  *finished = false;
  if (op->kind == P2P_SEND) {
    struct hccl_link *l;
    HCCL_TRY(op_link(e, op, &l));
    if (!l) return HCCL_SUCCESS;
    while (op->next < op->nchunks && hccl__prim_can_send(l)) {
      HCCL_TRY(hccl__prim_step(&p, NULL, l, at(op->buf, op->next * op->chunk), NULL,
                               hccl__prim_chunk_len(op->bytes, op->chunk, op->next)));
      op->next++;
      *moved = true;
    }
    if (op->next == op->nchunks && hccl__prim_drained(l)) *finished = *moved = true;
    return HCCL_SUCCESS;
  }
  if (op->peer == NO_PEER) {
    for (uint32_t k = 0; k < c->nranks && op->peer == NO_PEER; k++) {
      uint32_t r = (e->rotate + k) % c->nranks;
      if (r != c->rank && any_link(c, r) && hccl__prim_can_recv(c->tx.links[HCCL_CHANNEL_P2P][r]))
        op->peer = r;
    }
    if (op->peer == NO_PEER) return HCCL_SUCCESS;
    snprintf(op->what, sizeof(op->what), "recv-any of %zu bytes (matched rank %u)", op->bytes,
             op->peer);
  }
  struct hccl_link *l;
  HCCL_TRY(op_link(e, op, &l));
  if (!l) return HCCL_SUCCESS;
  /* The link's next messages are this op's (it is the first pending receive from its peer):
   * where the transport copies anyway (TCP) they may land in the buffer itself. */
  if (!op->posted && op->next < op->nchunks) {
    hccl__prim_post(l, at(op->buf, op->next * op->chunk), op->chunk,
                    op->bytes - op->next * op->chunk);
    op->posted = true;
  }
  while (op->next < op->nchunks && hccl__prim_can_recv(l)) {
    HCCL_TRY(hccl__prim_step(&p, l, NULL, NULL, at(op->buf, op->next * op->chunk),
                             hccl__prim_chunk_len(op->bytes, op->chunk, op->next)));
    op->next++;
    *moved = true;
  }
  if (op->next == op->nchunks) *finished = *moved = true;
  return HCCL_SUCCESS;
}

/* Fills e->elig with the eligible ops, in posting order; returns how many. */
static int eligible(struct hccl_p2p *e) {
  uint32_t n = e->comm->nranks;
  bool *send_busy = e->busy, *recv_busy = e->busy + n, recv_pending = false, any_pending = false;
  memset(e->busy, 0, 2 * n * sizeof(bool));
  int k = 0;
  for (struct p2p_op *op = e->head; op; op = op->next_op) {
    switch (op->kind) {
    case P2P_SEND:
      if (!send_busy[op->peer]) e->elig[k++] = op;
      send_busy[op->peer] = true;
      break;
    case P2P_RECV:
      if (!recv_busy[op->peer] && !any_pending) e->elig[k++] = op;
      recv_busy[op->peer] = true;
      recv_pending = true;
      break;
    case P2P_RECV_ANY:
      /* The first pending receive; once matched it reads only from its peer. */
      if (!recv_pending) e->elig[k++] = op;
      recv_pending = any_pending = true;
      break;
    }
  }
  return k;
}

static HcclResult timed_out(struct hccl_p2p *e, struct p2p_op *op) {
  struct hccl_comm *c = e->comm;
  if (op->peer == NO_PEER)
    return hccl__fail(HCCL_E_TIMEOUT,
                      "%s on rank %u timed out after %.3g s (%s): no rank sent to it", op->what,
                      c->rank, (double)c->cfg.exec_timeout_ms / 1000, c->cfg.exec_timeout_src);
  return hccl__fail(HCCL_E_TIMEOUT,
                    "%s on rank %u timed out after %.3g s (%s) with %zu of %zu bytes moved; "
                    "rank %u did not make the matching %s, or is stuck",
                    op->what, c->rank, (double)c->cfg.exec_timeout_ms / 1000,
                    c->cfg.exec_timeout_src, moved_bytes(op), op->bytes, op->peer,
                    op->kind == P2P_SEND ? "receive" : "send");
}

/* One bounded blocking wait on one of the eligible ops' wait items, in rotation: each op is one
 * item, an unmatched recv-any one per peer. *which is the op waited for. */
static HcclResult block(struct hccl_p2p *e, int nelig, struct p2p_op **which) {
  struct hccl_comm *c = e->comm;
  uint32_t per_any = c->nranks - 1;
  int items = 0;
  for (int i = 0; i < nelig; i++)
    items += e->elig[i]->peer == NO_PEER ? (int)per_any : 1;
  int pick = (int)(e->rotate++ % (uint32_t)items);
  struct p2p_op *op = NULL;
  uint32_t peer = NO_PEER;
  for (int i = 0; i < nelig && !op; i++) {
    int span = e->elig[i]->peer == NO_PEER ? (int)per_any : 1;
    if (pick < span) {
      op = e->elig[i];
      peer = op->peer != NO_PEER ? op->peer : ((uint32_t)pick + c->rank + 1) % c->nranks;
    } else {
      pick -= span;
    }
  }
  *which = op;
  int64_t now = hccl__now_ns(), slice = items == 1 ? SLICE_ONE_NS : SLICE_MANY_NS;
  struct hccl_wait w = op->w;
  if (now + slice < w.deadline_ns) w.deadline_ns = now + slice;
  struct hccl_prim p = {.w = &w, .esz = 1, .by_ref = true};
  struct hccl_link *l = c->tx.links[HCCL_CHANNEL_P2P][peer];
  HcclResult r;
  if (!l || (op->peer != NO_PEER && op->chunk == 0)) {
    /* Not linked yet (made on first use): progress() asks again after a short sleep. */
    usleep((useconds_t)(SLICE_MANY_NS / 4000));
    return hccl__now_ns() < op->w.deadline_ns ? HCCL_SUCCESS : timed_out(e, op);
  }
  hccl__log_quiet(1);
  if (op->kind == P2P_SEND && op->next == op->nchunks) {
    r = hccl__prim_drain(&p, l);
  } else if (op->kind == P2P_SEND) {
    r = hccl__prim_step(&p, NULL, l, at(op->buf, op->next * op->chunk), NULL,
                        hccl__prim_chunk_len(op->bytes, op->chunk, op->next));
    if (r == HCCL_SUCCESS) op->next++;
  } else {
    size_t chunk = op->peer == NO_PEER ? hccl__prim_chunk(&p, l) : op->chunk;
    r = hccl__prim_step(&p, l, NULL, NULL, at(op->buf, op->next * chunk),
                        hccl__prim_chunk_len(op->bytes, chunk, op->next));
    if (r == HCCL_SUCCESS && op->peer == NO_PEER) {
      op->peer = peer;
      op->chunk = chunk;
      op->nchunks = hccl__prim_nchunks(op->bytes, chunk);
      snprintf(op->what, sizeof(op->what), "recv-any of %zu bytes (matched rank %u)", op->bytes,
               peer);
    }
    if (r == HCCL_SUCCESS) op->next++;
  }
  hccl__log_quiet(0);
  if (r == HCCL_E_TIMEOUT && hccl__now_ns() < op->w.deadline_ns) return HCCL_SUCCESS;
  if (r == HCCL_E_TIMEOUT) return timed_out(e, op);
  if (r != HCCL_SUCCESS) {
    /* A real failure (wrong size, dead peer, abort) seen while quiet: report it now. */
    char why[1024];
    snprintf(why, sizeof(why), "%s", hccl__quiet_error());
    return hccl__fail(r, "%s", why);
  }
  return HCCL_SUCCESS;
}

/* Whether the communicator broke elsewhere, or a peer aborted: fails everything if so. */
static bool healthy(struct hccl_p2p *e) {
  struct hccl_comm *c = e->comm;
  if (atomic_load(&c->broken)) {
    char msg[HCCL_REASON_MAX + 200];
    while (e->head) {
      struct p2p_op *op = e->head;
      snprintf(msg, sizeof(msg),
               "%s on rank %u refused: the communicator failed earlier (%s); destroy it and "
               "make a new one",
               op->what, c->rank, c->broken_msg);
      finish(e, op, HCCL_E_REMOTE, msg);
    }
    return false;
  }
  HcclResult r = hccl__check_aborts(c, e->head->what);
  if (r != HCCL_SUCCESS) {
    fail_all(e, r, e->head);
    return false;
  }
  return true;
}

static void *engine_main(void *arg) {
  struct hccl_p2p *e = arg;
  struct hccl_comm *c = e->comm;
  int64_t idle_since = 0;
  for (;;) {
    pthread_mutex_lock(&e->lock);
    while (!e->in_head && !e->head && !e->stop)
      pthread_cond_wait(&e->cond, &e->lock);
    if (e->in_head) {
      if (e->tail)
        e->tail->next_op = e->in_head;
      else
        e->head = e->in_head;
      e->tail = e->in_tail;
      e->in_head = e->in_tail = NULL;
    }
    bool stop = e->stop;
    pthread_mutex_unlock(&e->lock);
    if (!e->head) {
      if (stop) break;
      continue;
    }
    if (!healthy(e)) continue;

    bool moved = false;
    HcclResult r = HCCL_SUCCESS;
    int n = eligible(e);
    /* Receives first, then sends: a receive posted in place reaches its peer before this
     * rank's sends, which that peer may be waiting for before it sends (RDMA's posted receives:
     * transport/rdma/rdma_data.c). An op taken in the first pass is cleared from elig. */
    for (int pass = 0; pass < 2 && r == HCCL_SUCCESS; pass++)
      for (int i = 0; i < n && r == HCCL_SUCCESS; i++) {
        struct p2p_op *op = e->elig[i];
        if (!op || (op->kind == P2P_SEND) != (pass == 1)) continue;
        e->elig[i] = NULL;
        bool done;
        r = progress(e, op, &moved, &done);
        if (r != HCCL_SUCCESS)
          fail_all(e, r, op);
        else if (done)
          finish(e, op, HCCL_SUCCESS, NULL);
      }
    if (r != HCCL_SUCCESS) continue;
    e->rotate++;
    int64_t now = hccl__now_ns();
    for (struct p2p_op *op = e->head; op; op = op->next_op)
      if (now >= op->w.deadline_ns) {
        fail_all(e, timed_out(e, op), op);
        break;
      }
    if (moved || !e->head) {
      idle_since = 0;
      continue;
    }
    /* Nothing moved: poll a little, give the core away, then wait in a bounded slice. */
    if (idle_since == 0) idle_since = now;
    if (now - idle_since < c->waiter.spin.poll_ns) continue;
    if (now - idle_since < c->waiter.spin.poll_ns + 1000 * (int64_t)c->waiter.spin.yields) {
      sched_yield();
      continue;
    }
    n = eligible(e);
    if (n == 0) continue; /* cannot happen: the first op of the list is always eligible */
    struct p2p_op *op;
    r = block(e, n, &op);
    if (r != HCCL_SUCCESS) fail_all(e, r, op);
  }
  return NULL;
}

static HcclResult engine_start(struct hccl_comm *c) {
  if (c->p2p_engine) return HCCL_SUCCESS;
  struct hccl_p2p *e = calloc(1, sizeof(*e));
  if (!e) return hccl__fail(HCCL_E_MEMORY, "out of memory for the p2p engine");
  e->comm = c;
  e->elig = calloc(2 * (size_t)c->nranks + 1, sizeof(*e->elig));
  e->busy = calloc(2 * (size_t)c->nranks, sizeof(bool));
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->cond, NULL);
  if (!e->elig || !e->busy || hccl__thread_start(&e->thread, engine_main, e) != 0) {
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    free(e->elig);
    free(e->busy);
    free(e);
    return hccl__fail(HCCL_E_SYSCALL, "rank %u cannot start its p2p engine thread", c->rank);
  }
  c->p2p_engine = e;
  return HCCL_SUCCESS;
}

void hccl__p2p_shutdown(struct hccl_comm *c) {
  struct hccl_p2p *e = c->p2p_engine;
  if (!e) return;
  pthread_mutex_lock(&e->lock);
  e->stop = true;
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
  /* The engine finishes (or fails, each by its deadline) every posted op before it stops. */
  pthread_join(e->thread, NULL);
  hccl__request_free_live(&e->live);
  pthread_mutex_destroy(&e->lock);
  pthread_cond_destroy(&e->cond);
  free(e->elig);
  free(e->busy);
  free(e);
  c->p2p_engine = NULL;
}

/* Checks a call's arguments, posts it, and for a blocking call (request NULL) waits for it. */
static HcclResult post(struct hccl_comm *c, const char *fn, enum p2p_kind kind, void *buf,
                       uint64_t count, HcclDataType dt, uint32_t peer, uint32_t *src,
                       HcclRequest *request) {
  if (!c) return hccl__fail(HCCL_E_PTR, "%s: comm is NULL", fn);
  HCCL_TRY(hccl__group_refuse_call(fn));
  size_t esz = hccl__dtype_size(dt);
  if (esz == 0)
    return hccl__fail(HCCL_E_PARA, "%s on rank %u: data type %d is not an HcclDataType", fn,
                      c->rank, (int)dt);
  if (kind == P2P_RECV_ANY) {
    if (!src) return hccl__fail(HCCL_E_PTR, "%s on rank %u: srcRank is NULL", fn, c->rank);
    if (c->nranks == 1)
      return hccl__fail(
          HCCL_E_PARA, "%s on rank 0: a 1-rank communicator has no other rank to receive from", fn);
  } else {
    const char *name = kind == P2P_SEND ? "destRank" : "srcRank";
    if (peer >= c->nranks)
      return hccl__fail(HCCL_E_PARA,
                        "%s on rank %u: %s %u is not a rank of this %u-rank "
                        "communicator",
                        fn, c->rank, name, peer, c->nranks);
    if (peer == c->rank)
      return hccl__fail(HCCL_E_PARA,
                        "%s on rank %u: %s is this rank; sending to oneself is not supported "
                        "(copy the buffer instead)",
                        fn, c->rank, name);
  }
  if (count > SIZE_MAX / esz)
    return hccl__fail(HCCL_E_PARA, "%s on rank %u: count %llu is too large for this machine", fn,
                      c->rank, (unsigned long long)count);
  if (count > 0 && !buf)
    return hccl__fail(HCCL_E_PTR, "%s on rank %u: %s is NULL with count %llu", fn, c->rank,
                      kind == P2P_SEND ? "sendBuf" : "recvBuf", (unsigned long long)count);
  if (atomic_load(&c->broken))
    return hccl__fail(HCCL_E_REMOTE,
                      "%s on rank %u refused: the communicator failed earlier (%s); destroy it "
                      "and make a new one",
                      fn, c->rank, c->broken_msg);
  HCCL_TRY(engine_start(c));
  struct hccl_p2p *e = c->p2p_engine;
  struct p2p_op *op = calloc(1, sizeof(*op));
  if (!op) return hccl__fail(HCCL_E_MEMORY, "%s on rank %u: out of memory", fn, c->rank);
  op->kind = kind;
  op->peer = kind == P2P_RECV_ANY ? NO_PEER : peer;
  op->src_out = src;
  op->buf = buf;
  op->bytes = (size_t)count * esz;
  /* op->chunk stays 0 until the engine has the link (made on first use). */
  op->fr_id = hccl__fr_enqueue(c->fr, kind == P2P_SEND ? HCCL_FR_P2P_SEND : HCCL_FR_P2P_RECV, count,
                               dt, -1, UINT32_MAX, kind == P2P_RECV_ANY ? UINT32_MAX : peer);
  hccl__fr_start(c->fr, op->fr_id, 0, 0);
  if (kind == P2P_SEND)
    snprintf(op->what, sizeof(op->what), "send of %zu bytes to rank %u", op->bytes, peer);
  else if (kind == P2P_RECV)
    snprintf(op->what, sizeof(op->what), "recv of %zu bytes from rank %u", op->bytes, peer);
  else
    snprintf(op->what, sizeof(op->what), "recv-any of %zu bytes", op->bytes);
  op->w = hccl__comm_wait(c, op->what, NULL);
  pthread_mutex_lock(&e->lock);
  hccl__request_attach(&op->req, c, &e->lock, &e->cond, &e->live);
  if (e->in_tail)
    e->in_tail->next_op = op;
  else
    e->in_head = op;
  e->in_tail = op;
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
  if (request) {
    *request = &op->req;
    return HCCL_SUCCESS;
  }
  return HcclRequestWait(&op->req);
}

HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                    HcclComm comm, HcclRequest *request) {
  return post(comm, "HcclSend", P2P_SEND, sendBuf, count, dataType, destRank, NULL, request);
}

HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                    HcclComm comm, HcclRequest *request) {
  return post(comm, "HcclRecv", P2P_RECV, recvBuf, count, dataType, srcRank, NULL, request);
}

HcclResult HcclRecvAny(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t *srcRank,
                       HcclComm comm, HcclRequest *request) {
  return post(comm, "HcclRecvAny", P2P_RECV_ANY, recvBuf, count, dataType, 0, srcRank, request);
}
