/*
 * rdma_io_thread.c - the RDMA transport's completion thread, one per communicator (gloo's
 * device thread): it reaps the communicator's one completion queue (a message landed in a
 * receive slot or a posted receive: `arrived` published; the peer's posted receive written
 * here: `posts_arrived`; a credit: `acked` published; a send done; a control datagram:
 * rdma.c's hccl__rdma_on_msg), reposts each receive, resends unanswered hellos, and
 * reads the device's async events (a port down, a queue pair in error). The algorithm's threads
 * post their own writes and credits; this thread only listens.
 *
 * It never spins when there is nothing to do: after the polling budget (HCCL_SPIN's, as TCP's
 * I/O thread) it arms the queue's notification, polls once more (a completion that came
 * between the last poll and the arming would raise no event), and sleeps in poll() on the
 * completion channel's descriptor, an eventfd (abort, teardown, a new link) and the async
 * descriptor, at most 1 s (50 ms while a link is being made, for the hellos' resends).
 *
 * A failed work request names the fault: retry count exceeded is a network fault between the
 * two servers (a cut cable, a port down, a dead host), as TCP names one; the peer is marked down
 * with it and every waiter on its links woken, so each wait fails naming the server. A local
 * error waits up to 200 ms for the port's async event first, so that a port going down is named
 * as such (on rxe the failed send comes before the event).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "credits.h"
#include "log.h"
#include "rdma.h"
#include "wait.h"


/* A link someone waits on with nothing in flight is probed this often: a waiting receiver has
 * no work request of its own that could fail when the wire is cut or the peer's host dies. */
#define PROBE_MS 1000

static void on_ctl(struct rdma_state *st, const struct ibv_wc *wc) {
  uint32_t i = (uint32_t)(wc->wr_id >> 3);
  if (wc->status != IBV_WC_SUCCESS) {
    if (wc->status != IBV_WC_WR_FLUSH_ERR) hccl__rdma_ctl_repost(st, i);
    return;
  }
  const char *buf = st->ctl_mem + (size_t)i * (RDMA_GRH + RDMA_CTL_MAX) + RDMA_GRH;
  size_t len = wc->byte_len > RDMA_GRH ? wc->byte_len - RDMA_GRH : 0;
  struct rdma_msg m;
  const char *text;
  char why[160];
  if (hccl__rdma_msg_decode(buf, len, st->comm_id, st->tx->nranks, &m, &text, why, sizeof(why)))
    hccl__rdma_on_msg(st, &m, text);
  else
    HCCL_WARN("RDMA rank %u: ignored %s", st->tx->rank, why);
  hccl__rdma_ctl_repost(st, i);
}

static void on_async(struct rdma_state *st);

/* Whether a failed completion is the adapter's own (local) error: what a port going down gives
 * on rxe (the route through the netdev under it fails before the port's event is raised). */
static bool local_error(enum ibv_wc_status s) {
  return s == IBV_WC_LOC_QP_OP_ERR || s == IBV_WC_LOC_LEN_ERR || s == IBV_WC_LOC_PROT_ERR ||
         s == IBV_WC_LOC_EEC_OP_ERR || s == IBV_WC_GENERAL_ERR;
}

/* Before a local error is named: the port's async event, if it comes within 200 ms, names
 * every peer first (rdma_fail.c also asks the port's state; this covers the moment between
 * the route's failure and the port's state changing). Errors end the job, so the wait is paid
 * once. */
static void await_port_event(struct rdma_state *st) {
  struct pollfd pf = {.fd = st->ctx->async_fd, .events = POLLIN};
  if (poll(&pf, 1, 200) > 0) on_async(st);
}

static void on_wc(struct rdma_state *st, const struct ibv_wc *wc) {
  int tag = (int)(wc->wr_id & 3);
  if (tag == RDMA_TAG_CTL_SEND) {
    atomic_fetch_add(&st->ctl_done, 1);
    return;
  }
  if (tag == RDMA_TAG_CTL_RECV) {
    on_ctl(st, wc);
    return;
  }
  struct rdma_link *l = (struct rdma_link *)(uintptr_t)(wc->wr_id & ~(uint64_t)RDMA_TAG_MASK);
  if (tag == RDMA_TAG_SEND) atomic_fetch_add(&l->sq_done, 1);
  if (tag == RDMA_TAG_SEND && (wc->wr_id & RDMA_TAG_DATA) && wc->status == IBV_WC_SUCCESS)
    hccl__credits_written(&l->cr, atomic_load(&l->cr.written) + 1);
  if (tag == RDMA_TAG_SEND && (wc->wr_id & RDMA_TAG_POST) && wc->status == IBV_WC_SUCCESS)
    atomic_fetch_add_explicit(&l->posts_done, 1, memory_order_release);
  if (wc->status != IBV_WC_SUCCESS) {
    /* The first error names the fault; what the queue pair flushes after it says nothing new. */
    if (wc->status == IBV_WC_WR_FLUSH_ERR && atomic_load(&l->failed)) return;
    if (local_error(wc->status) && !atomic_load(&st->port_down)) await_port_event(st);
    hccl__rdma_link_fail(st, l, wc->status);
    return;
  }
  if (tag == RDMA_TAG_SEND) return;
  if (hccl__rdma_post_recv(l) != 0) hccl__rdma_link_fail(st, l, IBV_WC_GENERAL_ERR);
  uint32_t imm = ntohl(wc->imm_data);
  char why[400];
  uint32_t kind = imm & RDMA_IMM_KIND;
  if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && kind == RDMA_IMM_DATA) {
    uint32_t a = atomic_load_explicit(&l->cr.arrived, memory_order_relaxed);
    if (imm == hccl__rdma_imm_data(a)) {
      hccl__credits_arrive(&l->cr, a + 1);
      return;
    }
    snprintf(why, sizeof(why), "rank %u (server %s) broke the RDMA protocol (message %u "
             "written, %u expected)", l->base.peer, st->tx->peers[l->base.peer].host, imm,
             hccl__rdma_imm_data(a));
  } else if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && kind == RDMA_IMM_POST) {
    /* The entry is in this side's region now; the sending thread reads it (rdma_data.c). */
    uint32_t a = atomic_load_explicit(&l->posts_arrived, memory_order_relaxed);
    if (imm == hccl__rdma_imm_post(a)) {
      atomic_store_explicit(&l->posts_arrived, a + 1, memory_order_release);
      return;
    }
    snprintf(why, sizeof(why), "rank %u (server %s) broke the RDMA protocol (posted receive %u "
             "written, %u expected)", l->base.peer, st->tx->peers[l->base.peer].host,
             imm & RDMA_IMM_VALUE, a & RDMA_IMM_VALUE);
  } else if (wc->opcode == IBV_WC_RECV && (wc->wc_flags & IBV_WC_WITH_IMM) &&
             kind == RDMA_IMM_CREDIT) {
    uint32_t was = atomic_load_explicit(&l->cr.acked, memory_order_relaxed);
    hccl__credits_ack(&l->cr, hccl__rdma_widen(was, imm & RDMA_IMM_VALUE));
    return;
  } else {
    snprintf(why, sizeof(why), "rank %u (server %s) broke the RDMA protocol (a completion of "
             "opcode %d, immediate 0x%x)", l->base.peer, st->tx->peers[l->base.peer].host,
             (int)wc->opcode, imm);
  }
  atomic_store(&l->failed, 1);
  hccl__rdma_peer_down(st, l->base.peer, why);
}

/* The device's async events: a port down fails every peer (the network between this server
 * and all others is cut), a queue pair in error fails its peer. */
static void on_async(struct rdma_state *st) {
  struct ibv_async_event ev;
  struct hccl_tctx *tx = st->tx;
  while (st->v->get_async_event(st->ctx, &ev) == 0) {
    enum ibv_event_type t = ev.event_type;
    char why[400];
    if (t == IBV_EVENT_PORT_ERR || t == IBV_EVENT_DEVICE_FATAL) {
      atomic_store(&st->port_down, 1);
      for (uint32_t r = 0; r < tx->nranks; r++) {
        if (!atomic_load(&st->peers[r].link[0]) && !atomic_load(&st->peers[r].link[1])) continue;
        hccl__rdma_port_why(st, r, t == IBV_EVENT_PORT_ERR ? "went down" :
                                "failed (device fatal error)", why, sizeof(why));
        hccl__rdma_peer_down(st, r, why);
      }
    } else if (t == IBV_EVENT_QP_FATAL || t == IBV_EVENT_QP_REQ_ERR ||
               t == IBV_EVENT_QP_ACCESS_ERR) {
      int n = atomic_load(&st->nlinks);
      for (int i = 0; i < n; i++) {
        struct rdma_link *l = st->all[i];
        if (l->qp != ev.element.qp) continue;
        atomic_store(&l->failed, 1);
        snprintf(why, sizeof(why), "the RDMA queue pair to rank %u (server %s) went into the "
                 "error state (%s)", l->base.peer, tx->peers[l->base.peer].host,
                 st->v->event_type_str(t));
        hccl__rdma_peer_down(st, l->base.peer, why);
      }
    } else if (t == IBV_EVENT_PORT_ACTIVE) {
      atomic_store(&st->port_down, 0);
      HCCL_INFO("RDMA rank %u: %s port %d is active again", tx->rank, st->dev_name, st->port);
    }
    st->v->ack_async_event(&ev);
  }
}

/* Probes each link that a thread waits on (a receive, a send's window, a drain) and that has
 * nothing in flight: an RDMA WRITE of no bytes, which the peer's adapter acknowledges without
 * telling its software. A cut wire, a port down or a dead host then ends in retry count
 * exceeded on this side too, within (HCCL_RDMA_RETRY_CNT + 1) x the timeout, named as a network
 * fault (rdma_fail.c), instead of the waiter's HCCL_EXEC_TIMEOUT. */
static void probe_waited(struct rdma_state *st, int64_t now, int64_t *last) {
  if (now - *last < PROBE_MS * 1000000LL) return;
  *last = now;
  int n = atomic_load_explicit(&st->nlinks, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    struct rdma_link *l = st->all[i];
    if (!atomic_load(&l->ready) || atomic_load(&l->failed) ||
        atomic_load(&st->peers[l->base.peer].dead))
      continue;
    if (!hccl__credits_waiting(&l->cr)) continue;
    if (atomic_load(&l->sq_posted) != atomic_load(&l->sq_done)) continue; /* those will tell */
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)l | RDMA_TAG_SEND,
                             .sg_list = NULL,
                             .num_sge = 0,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.rdma.remote_addr = l->raddr;
    wr.wr.rdma.rkey = l->rkey;
    atomic_fetch_add(&l->sq_posted, 1);
    int e = ibv_post_send(l->qp, &wr, &bad);
    if (e) atomic_fetch_sub(&l->sq_posted, 1);
    HCCL_DEBUG("RDMA rank %u: probing the link to rank %u channel %d (a waiter, nothing in "
               "flight): %s", st->tx->rank, l->base.peer, l->channel, e ? strerror(e) : "posted");
  }
}

void *hccl__rdma_io_main(void *arg) {
  struct rdma_state *st = arg;
  hccl__log_bind(st->tx->log);
  struct ibv_wc wc[32];
  int64_t idle_since = 0, probed = 0;
  bool armed = false;
  while (!atomic_load(&st->stop)) {
    int n = ibv_poll_cq(st->cq, 32, wc);
    if (n < 0) {
      HCCL_WARN("RDMA rank %u: polling the completion queue failed (%d)", st->tx->rank, n);
      n = 0;
    }
    for (int i = 0; i < n; i++)
      on_wc(st, &wc[i]);
    if (n > 0) {
      idle_since = 0;
      continue;
    }
    int64_t now = hccl__now_ns();
    bool pending = hccl__rdma_resend_hellos(st, now);
    probe_waited(st, now, &probed);
    if (!idle_since) idle_since = now;
    if (now - idle_since < st->spin_ns) continue;
    if (!armed) {
      /* Poll once more after arming: a completion between the poll and the arming raises no
       * event. */
      armed = ibv_req_notify_cq(st->cq, 0) == 0;
      continue;
    }
    atomic_store(&st->sleeping, 1);
    if (atomic_load(&st->stop)) break;
    struct pollfd pf[3] = {{.fd = st->chan->fd, .events = POLLIN},
                           {.fd = st->evfd, .events = POLLIN},
                           {.fd = st->ctx->async_fd, .events = POLLIN}};
    int got = poll(pf, 3, pending ? 50 : 1000);
    atomic_store(&st->sleeping, 0);
    if (got <= 0) continue;
    if (pf[0].revents & POLLIN) {
      struct ibv_cq *cq;
      void *ctx;
      if (st->v->get_cq_event(st->chan, &cq, &ctx) == 0) {
        st->v->ack_cq_events(cq, 1);
        armed = false;
      }
    }
    if (pf[1].revents & POLLIN) {
      uint64_t v;
      ssize_t k = read(st->evfd, &v, sizeof(v));
      (void)k;
    }
    if (pf[2].revents & POLLIN) on_async(st);
  }
  return NULL;
}
