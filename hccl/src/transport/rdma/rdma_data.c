/*
 * rdma_data.c - the RDMA transport's data path, the algorithm's side of a link: send
 * acquire/commit, receive acquire/release, readiness, drain, and the check every wait on an RDMA
 * link makes each sleep slice (its peer down).
 *
 * Each link has 8 send slots and 8 receive slots of slot_bytes (HCCL_BUFFSIZE split as TCP
 * splits it), each led by a 32-byte header {size, sequence, stamp}, registered once when the link
 * is made. The caller fills send slot m % 8 (send_acquire gives it: the one copy, counted in
 * bytes_copied); send_commit writes its header and posts one RDMA WRITE with immediate of header
 * and payload into the peer's receive slot m % 8, the immediate naming m, so the receiver learns
 * which slot filled from its completion (the thread publishes `arrived`). recv_release returns a
 * credit: a SEND with immediate {released count}, no payload, posted by the releasing thread;
 * the sender's thread publishes it as `acked`. A sender has at most 8 messages its receiver has
 * not released (shm's and TCP's rule), so a write always finds its receive slot free, and
 * send_drained = every committed message released. Waits sleep on `arrived` and `acked` with
 * hccl__wait_change, as on shm and TCP.
 */
#include <arpa/inet.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "rdma.h"
#include "wait.h"


HcclResult hccl__rdma_wait_check(void *arg, const struct hccl_wait *w, uint32_t peer) {
  struct rdma_link *l = arg;
  struct rdma_peer *p = &l->st->peers[peer];
  if (atomic_load_explicit(&p->dead, memory_order_acquire))
    return hccl__fail(HCCL_E_REMOTE, "%s on rank %u (server %s) stopped while it waited for rank "
                      "%u: %s",
                      w->what, w->rank, l->base.tx->peers[w->rank].host, peer, p->reason);
  return HCCL_SUCCESS;
}

/* Waits until message l->sent may be written: fewer than RDMA_NSLOTS unreleased. */
static HcclResult send_window(struct rdma_link *l, const struct hccl_wait *w) {
  while (!hccl__rdma_window_open(l->sent, l->acked_seen)) {
    uint32_t acked = atomic_load_explicit(&l->acked, memory_order_acquire);
    if (acked != l->acked_seen) {
      l->acked_seen = acked;
      continue;
    }
    HCCL_TRY(hccl__wait_change(&l->acked, &l->send_waiting, acked, l->base.peer, w,
                               hccl__rdma_wait_check, l));
  }
  if (atomic_load_explicit(&l->st->peers[l->base.peer].dead, memory_order_relaxed)) {
    HCCL_TRY(hccl__wait_aborted(w)); /* an origin's reason wins, as in waits */
    return hccl__rdma_wait_check(l, w, l->base.peer);
  }
  return HCCL_SUCCESS;
}

HcclResult hccl__rdma_send_acquire(struct hccl_link *base, void **buf,
                                   const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  HCCL_TRY(send_window(l, w));
  *buf = l->mem + hccl__rdma_slot_off(l->sent, base->slot_bytes) + RDMA_HDR;
  return HCCL_SUCCESS;
}

/* Posts wr on l's send queue once it has room (its completions are the thread's to reap; a
 * dead peer's never come, and then nothing is posted). */
static void post(struct rdma_link *l, struct ibv_send_wr *wr) {
  struct rdma_peer *p = &l->st->peers[l->base.peer];
  while (atomic_load(&l->sq_posted) - atomic_load(&l->sq_done) >= RDMA_SEND_WR) {
    if (atomic_load(&p->dead)) return;
    sched_yield();
  }
  if (atomic_load(&p->dead)) return;
  struct ibv_send_wr *bad;
  atomic_fetch_add(&l->sq_posted, 1);
  int e = ibv_post_send(l->qp, wr, &bad);
  if (e) {
    atomic_fetch_sub(&l->sq_posted, 1);
    char why[400];
    snprintf(why, sizeof(why), "rank %u cannot post an RDMA work request to rank %u (server %s): "
             "%s", l->base.tx->rank, l->base.peer, l->base.tx->peers[l->base.peer].host,
             strerror(e));
    atomic_store(&l->failed, 1);
    hccl__rdma_peer_down(l->st, l->base.peer, why);
  }
}

void hccl__rdma_send_commit(struct hccl_link *base, size_t bytes,
                            const struct hccl_stamp *stamp) {
  struct rdma_link *l = (struct rdma_link *)base;
  size_t off = hccl__rdma_slot_off(l->sent, base->slot_bytes);
  struct rdma_slot_hdr h = {.size = (uint32_t)bytes, .seq = l->sent, .stamp = *stamp};
  memcpy(l->mem + off, &h, sizeof(h));
  struct ibv_sge sge = {.addr = (uintptr_t)(l->mem + off),
                        .length = (uint32_t)(RDMA_HDR + bytes),
                        .lkey = l->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = (uintptr_t)l | RDMA_TAG_SEND | RDMA_TAG_DATA,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(hccl__rdma_imm_data(l->sent))};
  wr.wr.rdma.remote_addr = l->raddr + off;
  wr.wr.rdma.rkey = l->rkey;
  post(l, &wr);
  l->sent++;
  atomic_fetch_add_explicit(&l->st->bytes_sent, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&l->st->bytes_copied, bytes, memory_order_relaxed);
}

/* From the caller's buffer: without a copy when it lies in an HcclMemAlloc region (the
 * registration cache, rdma_reg.c): the slot's header and the payload gathered into one RDMA
 * WRITE with immediate; else through the slot, as acquire + copy + commit. */
HcclResult hccl__rdma_send_ref(struct hccl_link *base, const void *buf, size_t bytes,
                               const struct hccl_stamp *stamp, const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  HCCL_TRY(send_window(l, w));
  size_t off = hccl__rdma_slot_off(l->sent, base->slot_bytes);
  uint32_t lkey;
  if (!hccl__rdma_reg_find(l->st, buf, bytes, &lkey)) {
    memcpy(l->mem + off + RDMA_HDR, buf, bytes);
    hccl__rdma_send_commit(base, bytes, stamp);
    return HCCL_SUCCESS;
  }
  struct rdma_slot_hdr h = {.size = (uint32_t)bytes, .seq = l->sent, .stamp = *stamp};
  memcpy(l->mem + off, &h, sizeof(h));
  struct ibv_sge sge[2] = {{.addr = (uintptr_t)(l->mem + off), .length = RDMA_HDR,
                            .lkey = l->mr->lkey},
                           {.addr = (uintptr_t)buf, .length = (uint32_t)bytes, .lkey = lkey}};
  struct ibv_send_wr wr = {.wr_id = (uintptr_t)l | RDMA_TAG_SEND | RDMA_TAG_DATA,
                           .sg_list = sge,
                           .num_sge = 2,
                           .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(hccl__rdma_imm_data(l->sent))};
  wr.wr.rdma.remote_addr = l->raddr + off;
  wr.wr.rdma.rkey = l->rkey;
  post(l, &wr);
  l->sent++;
  atomic_fetch_add_explicit(&l->st->bytes_sent, bytes, memory_order_relaxed);
  return HCCL_SUCCESS;
}

/* Until every message's write completed: the adapter has read its source. */
HcclResult hccl__rdma_send_flush(struct hccl_link *base, const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  for (;;) {
    uint32_t written = atomic_load_explicit(&l->written, memory_order_acquire);
    if (written == l->sent) return HCCL_SUCCESS;
    HCCL_TRY(hccl__wait_change(&l->written, &l->flush_waiting, written, base->peer, w,
                               hccl__rdma_wait_check, l));
  }
}

HcclResult hccl__rdma_recv_acquire(struct hccl_link *base, const void **buf, size_t *bytes,
                                   struct hccl_stamp *stamp, const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  for (;;) {
    uint32_t arrived = atomic_load_explicit(&l->arrived, memory_order_acquire);
    if (arrived != l->received) break;
    HCCL_TRY(hccl__wait_change(&l->arrived, &l->recv_waiting, arrived, base->peer, w,
                               hccl__rdma_wait_check, l));
  }
  const char *slot = l->mem + l->half + hccl__rdma_slot_off(l->received, base->slot_bytes);
  struct rdma_slot_hdr h;
  memcpy(&h, slot, sizeof(h));
  if (h.seq != l->received || h.size > base->slot_bytes)
    return hccl__fail(HCCL_E_REMOTE, "%s on rank %u: rank %u (server %s) broke the RDMA protocol "
                      "(message %u of %u bytes in the slot of message %u; slots of %zu bytes)",
                      w->what, w->rank, base->peer, base->tx->peers[base->peer].host, h.seq,
                      h.size, l->received, base->slot_bytes);
  *buf = slot + RDMA_HDR;
  *bytes = h.size;
  *stamp = h.stamp;
  return HCCL_SUCCESS;
}

void hccl__rdma_recv_release(struct hccl_link *base) {
  struct rdma_link *l = (struct rdma_link *)base;
  l->received++;
  struct ibv_send_wr wr = {.wr_id = (uintptr_t)l | RDMA_TAG_SEND,
                           .sg_list = NULL,
                           .num_sge = 0,
                           .opcode = IBV_WR_SEND_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(hccl__rdma_imm_credit(l->received))};
  post(l, &wr);
}

bool hccl__rdma_send_ready(struct hccl_link *base) {
  struct rdma_link *l = (struct rdma_link *)base;
  if (hccl__rdma_window_open(l->sent, l->acked_seen)) return true;
  l->acked_seen = atomic_load_explicit(&l->acked, memory_order_acquire);
  return hccl__rdma_window_open(l->sent, l->acked_seen);
}

bool hccl__rdma_recv_ready(struct hccl_link *base) {
  struct rdma_link *l = (struct rdma_link *)base;
  return atomic_load_explicit(&l->arrived, memory_order_acquire) != l->received;
}

bool hccl__rdma_send_drained(struct hccl_link *base) {
  struct rdma_link *l = (struct rdma_link *)base;
  if (l->acked_seen != l->sent)
    l->acked_seen = atomic_load_explicit(&l->acked, memory_order_acquire);
  return l->acked_seen == l->sent;
}

HcclResult hccl__rdma_send_drain(struct hccl_link *base, const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  while (!hccl__rdma_send_drained(base))
    HCCL_TRY(hccl__wait_change(&l->acked, &l->send_waiting, l->acked_seen, base->peer, w,
                               hccl__rdma_wait_check, l));
  return HCCL_SUCCESS;
}
