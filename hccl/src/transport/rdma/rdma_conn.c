/*
 * rdma_conn.c - how the RDMA transport's links are made and its aborts travel: whether a peer is
 * this transport's (both published an active port), a link's queue pair made and published, the
 * hellos that exchange the two queue pairs (sent by connect, answered by the thread, sent again
 * when unanswered; rdma.c tells the protocol), and the abort mark with the ABORT datagrams that
 * pass it on. Called by rdma.c (connect, abort) and rdma_io_thread.c (a control datagram, the
 * resends); calls rdma_dev.c (queue pairs, datagrams) and rdma_fail.c (a peer down).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rdma.h"
#include "transport.h"
#include "wait.h"

static bool remote(const struct hccl_tctx *tx, uint32_t peer) {
  return tx->peers[peer].host_hash != tx->peers[tx->rank].host_hash;
}

bool hccl__rdma_can_connect(const struct hccl_tctx *tx, uint32_t peer) {
  struct rdma_state *st = hccl__rdma_state_of(tx);
  if (!st || tx->cfg->net == HCCL_NET_TCP || !remote(tx, peer)) return false;
  struct rdma_peer *p = &st->peers[peer];
  int known = atomic_load_explicit(&p->blob_state, memory_order_acquire);
  if (known == 0) {
    /* Decoded once, by whichever thread asks first (links.c's, or this transport's own when a
     * hello comes first); the others read it after the release. */
    pthread_mutex_lock(&st->lock);
    known = atomic_load(&p->blob_state);
    if (known == 0) {
      known = hccl__rdma_blob_decode(tx->peers[peer].conn[HCCL_TRANSPORT_RDMA], &p->blob) ? 1 : 2;
      atomic_store_explicit(&p->blob_state, known, memory_order_release);
    }
    pthread_mutex_unlock(&st->lock);
  }
  return known == 1;
}

void hccl__rdma_send_hello(struct rdma_state *st, struct rdma_link *l) {
  struct rdma_msg m = {.type = RDMA_MSG_HELLO,
                       .channel = (uint8_t)l->channel,
                       .have_yours = l->have_theirs,
                       .mtu = (uint8_t)st->mtu,
                       .qpn = l->qp->qp_num,
                       .psn = l->psn,
                       .rkey = l->mr->rkey,
                       .raddr = (uintptr_t)(l->mem + l->half),
                       .slot_bytes = (uint32_t)st->slot_bytes};
  l->hello_ns = hccl__now_ns();
  hccl__rdma_ctl_send(st, l->base.peer, &m, NULL);
}

/* Makes the link to (peer, channel), its QP at INIT, and publishes it. Under st->lock. */
HcclResult hccl__rdma_link_new(struct rdma_state *st, uint32_t peer, int channel,
                           struct rdma_link **out) {
  /* 64-byte aligned: the low bits of its address tag work requests (rdma.h). */
  struct rdma_link *l = NULL;
  if (posix_memalign((void **)&l, 64, sizeof(*l)) != 0)
    return hccl__fail(HCCL_E_MEMORY, "out of memory for an RDMA link to rank %u", peer);
  memset(l, 0, sizeof(*l));
  l->st = st;
  l->channel = channel;
  l->base.ops = st->ops;
  l->base.tx = st->tx;
  l->base.peer = peer;
  l->base.slot_bytes = st->slot_bytes;
  l->since_ns = hccl__now_ns();
  HcclResult r = hccl__rdma_qp_new(st, l);
  if (r != HCCL_SUCCESS) {
    hccl__rdma_qp_free(st, l);
    free(l);
    return r;
  }
  int n = atomic_load(&st->nlinks);
  st->all[n] = l;
  atomic_store_explicit(&st->nlinks, n + 1, memory_order_release);
  atomic_store(&st->peers[peer].link[channel], l);
  *out = l;
  return HCCL_SUCCESS;
}

void hccl__rdma_on_msg(struct rdma_state *st, const struct rdma_msg *m, const char *text) {
  struct hccl_tctx *tx = st->tx;
  char why[400];
  if (m->type == RDMA_MSG_ABORT) {
    if (hccl__rdma_mark_abort(st, m->origin, (HcclResult)m->code, text)) {
      hccl__rdma_send_aborts(st);
      hccl__rdma_wake_all(st);
    }
    return;
  }
  if (m->type == RDMA_MSG_BYE) {
    snprintf(why, sizeof(why), "rank %u (server %s) destroyed its communicator", m->from,
             tx->peers[m->from].host);
    hccl__rdma_peer_down(st, m->from, why);
    return;
  }
  if (!hccl__rdma_can_connect(tx, m->from)) return; /* not a peer of this transport */
  pthread_mutex_lock(&st->lock);
  struct rdma_link *l = atomic_load(&st->peers[m->from].link[m->channel]);
  if (!l && (atomic_load(&st->stop) || atomic_load(&st->abort_origin))) goto out;
  if (!l && hccl__rdma_link_new(st, m->from, m->channel, &l) != HCCL_SUCCESS) {
    snprintf(why, sizeof(why), "rank %u (server %s) could not be linked: %s", m->from,
             tx->peers[m->from].host, HcclGetLastErrorMessage());
    pthread_mutex_unlock(&st->lock);
    hccl__rdma_peer_down(st, m->from, why);
    return;
  }
  if (l->have_theirs && m->qpn != l->rqpn) {
    HCCL_WARN("RDMA rank %u: a hello from rank %u names queue pair %u, not %u: ignored", tx->rank,
              m->from, m->qpn, l->rqpn);
    goto out;
  }
  bool first = false;
  if (!l->have_theirs) {
    if (m->slot_bytes != st->slot_bytes) {
      snprintf(why, sizeof(why), "rank %u (server %s) has RDMA slots of %u bytes, rank %u of %zu: "
               "HCCL_BUFFSIZE must be equal on every rank", m->from, tx->peers[m->from].host,
               m->slot_bytes, tx->rank, st->slot_bytes);
      pthread_mutex_unlock(&st->lock);
      hccl__rdma_peer_down(st, m->from, why);
      return;
    }
    l->rqpn = m->qpn;
    l->rkey = m->rkey;
    l->raddr = m->raddr;
    l->mtu = hccl__rdma_mtu_agree(st->mtu, m->mtu);
    if (hccl__rdma_qp_connect(st, l, m->psn) != HCCL_SUCCESS) {
      snprintf(why, sizeof(why), "%s", HcclGetLastErrorMessage());
      atomic_store(&l->failed, 1);
      pthread_mutex_unlock(&st->lock);
      hccl__rdma_peer_down(st, m->from, why);
      return;
    }
    l->have_theirs = first = true;
  }
  if (m->have_yours) l->peer_has_mine = true;
  if (l->have_theirs && l->peer_has_mine && !atomic_load(&l->ready)) {
    atomic_store_explicit(&l->ready, 1, memory_order_release);
    HCCL_DEBUG("RDMA link: rank %u to rank %u (server %s) channel %d, QP %u to %u, MTU %u",
               tx->rank, m->from, tx->peers[m->from].host, l->channel, l->qp->qp_num, l->rqpn,
               hccl__rdma_mtu_bytes(l->mtu));
  }
  if (!m->have_yours || first) hccl__rdma_send_hello(st, l);
out:
  pthread_mutex_unlock(&st->lock);
}

/* Hellos of links not ready, sent again every RDMA_HELLO_RESEND_MS. Returns whether any link
 * is still being made (the thread then sleeps in shorter slices). The thread's. */
bool hccl__rdma_resend_hellos(struct rdma_state *st, int64_t now) {
  bool pending = false;
  int n = atomic_load_explicit(&st->nlinks, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    struct rdma_link *l = st->all[i];
    if (atomic_load(&l->ready) || atomic_load(&l->failed)) continue;
    pending = true;
    pthread_mutex_lock(&st->lock);
    if (now - l->hello_ns >= RDMA_HELLO_RESEND_MS * 1000000LL) hccl__rdma_send_hello(st, l);
    pthread_mutex_unlock(&st->lock);
  }
  return pending;
}

bool hccl__rdma_mark_abort(struct rdma_state *st, uint32_t origin, HcclResult code,
                           const char *reason) {
  uint32_t none = 0;
  if (!atomic_compare_exchange_strong(&st->abort_origin, &none, origin + 1)) return false;
  atomic_store(&st->abort_code, (int32_t)code);
  snprintf(st->abort_reason, sizeof(st->abort_reason), "%s", reason ? reason : "");
  atomic_store(&st->abort_ready, 1);
  return true;
}

void hccl__rdma_send_aborts(struct rdma_state *st) {
  uint32_t origin = atomic_load(&st->abort_origin) - 1;
  struct rdma_msg m = {.type = RDMA_MSG_ABORT,
                       .origin = origin,
                       .code = atomic_load(&st->abort_code)};
  for (uint32_t r = 0; r < st->tx->nranks; r++) {
    struct rdma_peer *p = &st->peers[r];
    if (r == origin || (!atomic_load(&p->link[0]) && !atomic_load(&p->link[1]))) continue;
    hccl__rdma_ctl_send(st, r, &m, st->abort_reason);
  }
}
