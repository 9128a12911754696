/*
 * credits.h - a link's credits, shared by the transports whose links carry messages between
 * servers (tcp/, rdma/): a sender has at most HCCL_CREDITS messages its receiver has not
 * released, so a message always finds its receive slot free, and a sender whose messages were
 * all released is drained. The counters (struct hccl_credits, embedded in each such link) are
 * the algorithm's thread's, except the three the transport's own thread publishes: `arrived`
 * (messages landed), `acked` (the receiver's released count, its credits coming back) and
 * `written` (messages whose source the transport has wholly read, so a sender's buffer is its
 * own again: send_flush); the algorithm's thread sleeps on them with hccl__wait_change, as on
 * shm. All counters wrap at 2^32, the arithmetic with them.
 *
 * For transports only: the core and the algorithms see links through transport.h and links.h,
 * never this header (hccl/src/README.md's layer table). What differs between the transports
 * stays theirs: how a message and a credit travel, and the check a wait makes each sleep slice
 * (a peer gone), which the waits here are given as a callback with its argument. credits.c is
 * the waits.
 */
#ifndef HCCL_CREDITS_H
#define HCCL_CREDITS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hccl.h"
#include "wait.h"

/* Messages a sender may have unreleased per link (shm's rule too): a transport's slots per
 * direction (TCP_NSLOTS, RDMA_NSLOTS), which its data path asserts. */
#define HCCL_CREDITS 8

struct hccl_credits {
  /* Send side. sent: messages committed; acked_seen: the last `acked` read. */
  uint32_t sent, acked_seen;
  _Atomic uint32_t acked; /* the receiver's released count, published by the transport */
  _Atomic uint32_t send_waiting;
  _Atomic uint32_t written; /* messages whose source was wholly read, published by the transport */
  _Atomic uint32_t flush_waiting;
  /* Receive side. received: messages released (the next one taken is message `received`). */
  uint32_t received;
  _Atomic uint32_t arrived; /* messages landed, published by the transport */
  _Atomic uint32_t recv_waiting;
};

/* The transport's check each sleep slice of a wait makes (hccl__wait_change's `check`). */
typedef HcclResult (*hccl_credits_check)(void *arg, const struct hccl_wait *w, uint32_t peer);

/* Whether message `sent` may go while the receiver has released `acked`: fewer than
 * HCCL_CREDITS unreleased, across the 2^32 wrap too. */
static inline bool hccl__credits_open(uint32_t sent, uint32_t acked) {
  return sent - acked < HCCL_CREDITS;
}

/* Whether message c->sent may go now, re-reading `acked` when the last value read says no
 * (the algorithm's thread; never waits). */
static inline bool hccl__credits_send_ready(struct hccl_credits *c) {
  if (hccl__credits_open(c->sent, c->acked_seen)) return true;
  c->acked_seen = atomic_load_explicit(&c->acked, memory_order_acquire);
  return hccl__credits_open(c->sent, c->acked_seen);
}

/* Whether message c->received has landed. */
static inline bool hccl__credits_recv_ready(const struct hccl_credits *c) {
  return atomic_load_explicit(&c->arrived, memory_order_acquire) != c->received;
}

/* Whether every message sent has been released (re-reading `acked` if not yet). */
static inline bool hccl__credits_drained(struct hccl_credits *c) {
  if (c->acked_seen != c->sent)
    c->acked_seen = atomic_load_explicit(&c->acked, memory_order_acquire);
  return c->acked_seen == c->sent;
}

/* The transport's thread: `count` messages have landed, or been released by the receiver
 * (its credits back); wakes the algorithm's thread if it sleeps on them. */
static inline void hccl__credits_arrive(struct hccl_credits *c, uint32_t count) {
  hccl__post(&c->arrived, &c->recv_waiting, count);
}
static inline void hccl__credits_ack(struct hccl_credits *c, uint32_t count) {
  hccl__post(&c->acked, &c->send_waiting, count);
}
/* The transport's thread: `count` messages have had their source wholly read. */
static inline void hccl__credits_written(struct hccl_credits *c, uint32_t count) {
  hccl__post(&c->written, &c->flush_waiting, count);
}

/* Whether the algorithm's thread sleeps, or is about to, on a message or a credit. */
static inline bool hccl__credits_waiting(struct hccl_credits *c) {
  return atomic_load(&c->recv_waiting) || atomic_load(&c->send_waiting);
}

/* Wakes every wait on c (a failed link, an abort), so it makes its check at once. */
static inline void hccl__credits_wake_all(struct hccl_credits *c) {
  hccl__wake_all(&c->arrived);
  hccl__wake_all(&c->acked);
  hccl__wake_all(&c->written);
}

/* Waits until message c->sent may go (hccl__credits_send_ready), sleeping on `acked`; then, if
 * the peer is `dead` (its transport's flag, set once its reason is written), fails as a wait
 * would: the abort's origin's reason if any transport heard one, else check's. So a message to
 * a dead peer fails here rather than at the next wait. Errors are check's, the abort's or
 * hccl__wait_change's (deadline, cycle), logged. */
HcclResult hccl__credits_send_wait(struct hccl_credits *c, uint32_t peer, const _Atomic int *dead,
                                   const struct hccl_wait *w, hccl_credits_check check, void *arg);

/* Waits until message c->received has landed (hccl__credits_recv_ready), sleeping on
 * `arrived`. Errors as hccl__wait_change's, check's included. */
HcclResult hccl__credits_recv_wait(struct hccl_credits *c, uint32_t peer,
                                   const struct hccl_wait *w, hccl_credits_check check, void *arg);

/* Waits until every message sent has been released (hccl__credits_drained). Errors as
 * hccl__credits_recv_wait's. */
HcclResult hccl__credits_drain(struct hccl_credits *c, uint32_t peer, const struct hccl_wait *w,
                               hccl_credits_check check, void *arg);

/* Waits until every message sent has had its source read (`written` = `sent`): a transport's
 * send_flush. Errors as hccl__credits_recv_wait's. */
HcclResult hccl__credits_flush(struct hccl_credits *c, uint32_t peer, const struct hccl_wait *w,
                               hccl_credits_check check, void *arg);

#endif
