/*
 * tcp_data.c - the TCP transport's data path, the algorithm's side of a link: the ops that
 * acquire, commit and flush sends (also by reference), acquire, release and post receives,
 * answer readiness and drain, and the check every wait on a TCP link makes each sleep slice (its
 * peer gone). The sockets behind them are written and read by tcp_write.c and tcp_read.c, on the
 * calling thread when they can, else by the I/O thread (tcp_io_thread.c), which these ops wake
 * (hccl__tcp_poke, tcp.h). Setup, connect, abort, the peer questions and teardown are tcp.c,
 * with the ops table that names these ops.
 *
 * Data path: each link has 8 send slots and 8 receive slots of slot_bytes in private memory
 * (HCCL_BUFFSIZE split over the TCP links and the 2 channels, as shm splits it, 4 KiB to 512 KiB:
 * bigger than shm's 128 KiB, fewer frames and wake-ups per byte).
 * The algorithm's thread fills a send slot and commits it, or (send_ref) queues a pointer into its
 * caller's buffer instead, which sendmsg then reads in place (the kernel's copy is the only one;
 * send_flush waits until `written` covers every message queued). The committing thread writes its
 * DATA frames {type, size, stamp} + payload itself at once, while the socket takes them
 * (hccl__tcp_write_now: the kernel's send path, which on one machine also runs the receiver's
 * protocol work, then runs beside the receiving); one I/O thread per communicator (epoll, and
 * an eventfd to wake it) makes every other socket call: it writes what is left, reads frames into
 * the next receive slot, or (recv_post: a receive in place) straight into the caller's buffer where
 * the algorithm said the next messages go, and publishes it with hccl__post on `arrived` (so
 * waiters sleep in hccl__wait_change as on shm; recv_acquire returns where it landed), and when the
 * algorithm has released messages it sends one ACK {released count} for all of them. A thread
 * waiting for a message after a small one (at most 64 KiB) reads the socket itself for up to
 * 2 ms (hccl__tcp_read_now), sleeping in poll on it: one wake-up per message instead of the
 * I/O thread's and then its own; the I/O thread leaves the socket to it meanwhile.
 * A sender has at most 8 messages its receiver has not released (shm's rule), so a frame always
 * finds its receive slot free, and send_drained = every committed message released: the link's
 * credits, whose counters and waits (transport/credits.h, credits.c) RDMA's links share; what is
 * TCP's here is how messages and ACKs travel, the thread reading its socket itself, and the
 * check its waits make. The eventfd is written only when the thread may be asleep.
 */
#include <pthread.h>
#include <stdint.h>

#include "credits.h"
#include "log.h"
#include "tcp.h"
#include "transport.h"
#include "wait.h"

/* A receive whose link's last message had at most READ_SELF_MAX bytes reads its socket itself
 * for up to READ_SELF_NS before it leaves it to the I/O thread and sleeps on the futex
 * (hccl__tcp_read_now). Alternating runs against the build before, 4 KiB allreduce in place,
 * medians: 2 x 1 servers 34.5 -> 31.3 and 32.3 -> 28.9 us, 2 x 2 91.5 -> 86.5 and 91.1 -> 84.0,
 * 2 x 4 194.4 -> 182.7 and 189.2 -> 174.3; 64 MiB unchanged (2 x 1 1.75 / 1.77 GB/s, 2 x 2
 * 1.36 / 1.34, 2 x 4 0.83 / 0.82). */
#define READ_SELF_MAX (64u << 10)
#define READ_SELF_NS 2000000

_Static_assert(TCP_NSLOTS == HCCL_CREDITS, "a TCP link's send window is its receiver's slots");

/* Called every sleep slice of a wait on a TCP link, after the wait has read every transport's
 * abort mark (hccl__check_aborts): the peer's departure. */
HcclResult hccl__tcp_wait_check(void *arg, const struct hccl_wait *w, uint32_t peer) {
  struct hccl_tctx *tx = ((struct hccl_link *)arg)->tx;
  struct tcp_state *st = hccl__tcp_state_of(tx);
  struct tcp_peer *p = &st->peers[peer];
  if (atomic_load(&p->dead))
    return hccl__fail(HCCL_E_REMOTE,
                      "%s on rank %u stopped: rank %u (host %s, address %s) %s while rank %u "
                      "waited for it",
                      w->what, tx->rank, peer, tx->peers[peer].host, p->addr, p->reason,
                      tx->rank);
  return HCCL_SUCCESS;
}

/* ---- data path: the algorithm's side ---- */

/* Waits until message l->cr.sent may be queued: fewer than TCP_NSLOTS unreleased, the peer
 * alive (credits.c). */
static HcclResult send_window(struct hccl_link *base, const struct hccl_wait *w) {
  struct tcp_link *l = (struct tcp_link *)base;
  return hccl__credits_send_wait(&l->cr, base->peer, &l->st->peers[base->peer].dead, w,
                                 hccl__tcp_wait_check, base);
}

HcclResult hccl__tcp_send_acquire(struct hccl_link *base, void **buf, const struct hccl_wait *w) {
  struct tcp_link *l = (struct tcp_link *)base;
  HCCL_TRY(send_window(base, w));
  *buf = l->sbuf + (size_t)(l->cr.sent % TCP_NSLOTS) * base->slot_bytes;
  return HCCL_SUCCESS;
}

/* Queues message l->cr.sent, its payload at pay, for the I/O thread. */
static void queue(struct tcp_link *l, const void *pay, size_t bytes,
                  const struct hccl_stamp *stamp) {
  l->shdr[l->cr.sent % TCP_NSLOTS] =
      (struct tcp_frame){.type = FRAME_DATA, .size = (uint32_t)bytes, .stamp = *stamp};
  l->spay[l->cr.sent % TCP_NSLOTS] = pay;
  l->cr.sent++;
  atomic_store(&l->committed, l->cr.sent);
  if (!hccl__tcp_write_now(l)) hccl__tcp_poke(l->st);
}

void hccl__tcp_send_commit(struct hccl_link *base, size_t bytes, const struct hccl_stamp *stamp) {
  struct tcp_link *l = (struct tcp_link *)base;
  queue(l, l->sbuf + (size_t)(l->cr.sent % TCP_NSLOTS) * base->slot_bytes, bytes, stamp);
}

/* The payload goes from buf to the socket with the kernel's copy only (the I/O thread's
 * sendmsg reads it), not through the send slot. */
HcclResult hccl__tcp_send_ref(struct hccl_link *base, const void *buf, size_t bytes,
                               const struct hccl_stamp *stamp, const struct hccl_wait *w) {
  HCCL_TRY(send_window(base, w));
  queue((struct tcp_link *)base, buf, bytes, stamp);
  return HCCL_SUCCESS;
}

HcclResult hccl__tcp_send_flush(struct hccl_link *base, const struct hccl_wait *w) {
  return hccl__credits_flush(&((struct tcp_link *)base)->cr, base->peer, w, hccl__tcp_wait_check,
                             base);
}

HcclResult hccl__tcp_recv_acquire(struct hccl_link *base, const void **buf, size_t *bytes,
                                   struct hccl_stamp *stamp, const struct hccl_wait *w) {
  struct tcp_link *l = (struct tcp_link *)base;
  /* After a small message, expect another: read the socket here (one wake-up instead of the
   * I/O thread's and then this thread's). Large ones are left to the I/O thread,
   * which reads the next slot while this thread reduces the last. */
  if (l->last_size <= READ_SELF_MAX && !hccl__credits_recv_ready(&l->cr) &&
      hccl__tcp_read_now(l, READ_SELF_NS))
    hccl__tcp_poke_always(l->st);
  HCCL_TRY(hccl__credits_recv_wait(&l->cr, base->peer, w, hccl__tcp_wait_check, base));
  uint32_t slot = l->cr.received % TCP_NSLOTS;
  *buf = l->rat[slot];
  *bytes = l->rhdr[slot].size;
  l->last_size = l->rhdr[slot].size;
  *stamp = l->rhdr[slot].stamp;
  return HCCL_SUCCESS;
}

void hccl__tcp_recv_release(struct hccl_link *base) {
  struct tcp_link *l = (struct tcp_link *)base;
  l->cr.received++;
  atomic_store(&l->released, l->cr.received);
  hccl__tcp_poke(l->st);
}

/* Small receives keep the slots: their payloads come through the staging buffer anyway. One
 * post at a time, of the next messages in a row (skip 0, step 1): the ring's posts of every
 * (n - 1)th or 2(n - 1)th message are not taken, and those messages land in slots. */
void hccl__tcp_recv_post(struct hccl_link *base, void *buf, size_t chunk, size_t bytes,
                         uint32_t skip, uint32_t step) {
  struct tcp_link *l = (struct tcp_link *)base;
  if (bytes < TCP_DIRECT || skip != 0 || step != 1) return;
  size_t n = (bytes + chunk - 1) / chunk;
  pthread_mutex_lock(&l->post_lock);
  l->post = (struct hccl_tcp_post){.dst = buf,
                                   .chunk = chunk,
                                   .bytes = bytes,
                                   .first = l->cr.received,
                                   .n = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n};
  pthread_mutex_unlock(&l->post_lock);
  atomic_fetch_add_explicit(&l->post_gen, 1, memory_order_release);
}

bool hccl__tcp_send_ready(struct hccl_link *base) {
  return hccl__credits_send_ready(&((struct tcp_link *)base)->cr);
}

bool hccl__tcp_recv_ready(struct hccl_link *base) {
  return hccl__credits_recv_ready(&((struct tcp_link *)base)->cr);
}

bool hccl__tcp_send_drained(struct hccl_link *base) {
  return hccl__credits_drained(&((struct tcp_link *)base)->cr);
}

HcclResult hccl__tcp_send_drain(struct hccl_link *base, const struct hccl_wait *w) {
  struct tcp_link *l = (struct tcp_link *)base;
  return hccl__credits_drain(&l->cr, base->peer, w, hccl__tcp_wait_check, base);
}
