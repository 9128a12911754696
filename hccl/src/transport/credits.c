/*
 * credits.c - the waits on a link's credits (credits.h), one piece of code for the TCP and the
 * RDMA transports' data paths: for a free slot at the receiver (a credit), for the next message
 * to land, for every message sent to be released (drain), and for every message sent to have
 * its source read (flush). Each sleeps with
 * hccl__wait_change on the counter the transport's thread publishes, making the transport's own
 * check (its peer gone) each sleep slice.
 */
#include "credits.h"
#include "log.h"

HcclResult hccl__credits_send_wait(struct hccl_credits *c, uint32_t peer, const _Atomic int *dead,
                                   const struct hccl_wait *w, hccl_credits_check check, void *arg) {
  while (!hccl__credits_open(c->sent, c->acked_seen)) {
    uint32_t acked = atomic_load_explicit(&c->acked, memory_order_acquire);
    if (acked != c->acked_seen) {
      c->acked_seen = acked;
      continue;
    }
    HCCL_TRY(hccl__wait_change(&c->acked, &c->send_waiting, acked, peer, w, check, arg));
  }
  /* A dead peer would never read it: fail now rather than at the next wait. */
  if (atomic_load_explicit(dead, memory_order_relaxed)) {
    HCCL_TRY(hccl__wait_aborted(w)); /* an origin's reason wins, as in waits */
    return check(arg, w, peer);
  }
  return HCCL_SUCCESS;
}

HcclResult hccl__credits_recv_wait(struct hccl_credits *c, uint32_t peer,
                                   const struct hccl_wait *w, hccl_credits_check check, void *arg) {
  for (;;) {
    uint32_t arrived = atomic_load_explicit(&c->arrived, memory_order_acquire);
    if (arrived != c->received) return HCCL_SUCCESS;
    HCCL_TRY(hccl__wait_change(&c->arrived, &c->recv_waiting, arrived, peer, w, check, arg));
  }
}

HcclResult hccl__credits_drain(struct hccl_credits *c, uint32_t peer, const struct hccl_wait *w,
                               hccl_credits_check check, void *arg) {
  while (!hccl__credits_drained(c))
    HCCL_TRY(hccl__wait_change(&c->acked, &c->send_waiting, c->acked_seen, peer, w, check, arg));
  return HCCL_SUCCESS;
}

HcclResult hccl__credits_flush(struct hccl_credits *c, uint32_t peer, const struct hccl_wait *w,
                               hccl_credits_check check, void *arg) {
  for (;;) {
    uint32_t written = atomic_load_explicit(&c->written, memory_order_acquire);
    if (written == c->sent) return HCCL_SUCCESS;
    HCCL_TRY(hccl__wait_change(&c->written, &c->flush_waiting, written, peer, w, check, arg));
  }
}
