/*
 * prims.h - the moves every algorithm is made of, on one message of at most a link's slot:
 * receive from one link and/or send to another, optionally reducing what arrives with a local
 * buffer and/or writing the value to an output buffer. Algorithms call only these; these call
 * only the transport ops table.
 *
 * One step computes v = recv (op) local, or recv, or local (whichever inputs are given), then
 * writes v to `out` (if given) and to the send slot (if a send link is given). Reducing
 * straight from the receive slot into the send slot means a byte crosses memory once per hop.
 */
#ifndef HCCL_PRIMS_H
#define HCCL_PRIMS_H

#include <stdbool.h>
#include <stddef.h>

#include "hccl.h"
#include "reduce.h"
#include "transport.h"
#include "wait.h"

struct hccl_prim {
  const struct hccl_wait *w;
  /* The call's kernels (reduce.h), NULL for data-moving collectives; `reduce` is the one the
   * steps apply (red->step, or red->last on a step that finishes its elements). */
  const struct hccl_red *red;
  hccl__reduce_fn reduce;
  /* The algorithm handed this prim finishes the call's reduction: its steps that complete an
   * element apply the call's scale (AVG, PREMUL_SUM: hccl__prim_last). False for the steps a
   * two-level allreduce runs inside servers, which the step between servers finishes. */
  bool finish;
  size_t esz;              /* element size */
  struct hccl_stamp stamp; /* the call's fingerprint (core/fingerprint.h); zero: unchecked */
  /* Set by an algorithm that never writes a region after a step with this flag sent it, and
   * that calls hccl__prim_flush on its sending links before it returns (or, as point-to-point
   * sends do, completes only once the link is drained: the bytes were read by the sending
   * thread itself or by the one that then publishes the peer's release of them): a step whose
   * value is in a caller's buffer (the input sent as it is, or the output the step wrote) then
   * sends it by reference where the link's transport can (send_ref: TCP), without the copy
   * into the send slot. (That a
   * peer's answer to a later message proves the bytes were read is true but crosses processes,
   * where neither TSan nor a reader of the code can follow it; the rule needs no such proof.) */
  bool by_ref;
  /* The call's output is too large to stay in the cache until the caller reads it (at least
   * HCCL_STREAM_MIN bytes): a step writes `out` with streaming stores (hccl__copy_stream). */
  bool stream_out;
};

/* p for the steps that complete their elements: with the call's finishing kernel when the
 * algorithm finishes the call (p->finish), else p as it is. */
static inline struct hccl_prim hccl__prim_last(const struct hccl_prim *p) {
  struct hccl_prim q = *p;
  if (p->red && p->finish) q.reduce = p->red->last;
  return q;
}

/* p for an algorithm whose reductions another step finishes (finish cleared). */
static inline struct hccl_prim hccl__prim_partial(const struct hccl_prim *p) {
  struct hccl_prim q = *p;
  q.finish = false;
  return q;
}

/* Copies bytes of v into the caller's output out, streamed where the call asked (stream_out). */
void hccl__prim_write_out(const struct hccl_prim *p, void *out, const void *v, size_t bytes);

/* 16 MiB: from there on, out-of-place allreduce ran 3-15% faster with streamed output at 2, 4
 * and 8 ranks on the 2-core test machine (64 MiB 9-15%); at 8 MiB, 2 ranks ran 4% slower. */
#define HCCL_STREAM_MIN ((size_t)16 << 20)

/* recv_from / send_to may be NULL (no receive / no send); local and out may be NULL. bytes is
 * the size of this message (a multiple of esz, at most the slot size). Fails, naming the peer,
 * when a received message's stamp differs from p->stamp (the ranks called different
 * collectives: the message names both calls) or its size from `bytes`. */
HcclResult hccl__prim_step(const struct hccl_prim *p, struct hccl_link *recv_from,
                           struct hccl_link *send_to, const void *local, void *out, size_t bytes);

/* Receives one message of `bytes` (at most the slot size) into out, or an empty one, which a
 * sender sends where the receiver knows what it would say (zcopy.c: the same as last time):
 * *empty says which. Fails as hccl__prim_step on any other size or stamp. */
HcclResult hccl__prim_recv_or_empty(const struct hccl_prim *p, struct hccl_link *from, void *out,
                                    size_t bytes, bool *empty);

/* Receiving in place: the next messages from `from`, chunks of `chunk` bytes of buf[0..bytes),
 * may land in buf itself where the transport copies anyway (TCP's recv_post), so the steps
 * that take them copy nothing. Only for the receive that takes exactly those messages next;
 * buf stays the transport's until they are taken or the call fails. Nothing where the
 * transport has no such thing (shm), or for an empty buf. */
void hccl__prim_post(struct hccl_link *from, void *buf, size_t chunk, size_t bytes);
/* The same for messages skip, skip + step, ... of those `from` sends next (a ring's rounds:
 * one block's chunk in each; transport.h's recv_post). */
void hccl__prim_post_every(struct hccl_link *from, void *buf, size_t chunk, size_t bytes,
                           uint32_t skip, uint32_t step);

/* Sends or receives a whole buffer of any size as slot-sized messages (a receive in place,
 * and so is hccl__prim_sendrecv's when it has no `local` to reduce with). */
HcclResult hccl__prim_send(const struct hccl_prim *p, struct hccl_link *to, const void *buf,
                           size_t bytes);
HcclResult hccl__prim_recv(const struct hccl_prim *p, struct hccl_link *from, void *buf,
                           size_t bytes);

/* Framed messages. A whole buffer of b bytes travels as floor(b/c) full chunks of c bytes (c =
 * the link's slot rounded down to whole elements) and one last chunk shorter than c, possibly
 * empty. No framing is a prefix of another, so a receiver that expects a different size always
 * meets a chunk of the wrong size and fails (prim_step's check), whatever the two sizes are;
 * a zero-byte buffer is one zero-byte message, which keeps both sides in step. */
size_t hccl__prim_chunk(const struct hccl_prim *p, const struct hccl_link *l);
static inline size_t hccl__prim_nchunks(size_t bytes, size_t chunk) {
  return bytes / chunk + 1;
}
/* Offset and length of chunk i of a framed message. */
static inline size_t hccl__prim_chunk_len(size_t bytes, size_t chunk, size_t i) {
  return i < bytes / chunk ? chunk : bytes % chunk;
}

/* Sends a framed message of send_bytes from sbuf to send_to while receiving one of recv_bytes
 * from recv_from, chunk by chunk (send chunk i, then receive chunk i), so both sides progress
 * with one slot of room whatever the other ranks do; writes (received op local), or the
 * received bytes when local is NULL, to out. Either link may be NULL (send only / receive
 * only); both may be the same link (a symmetric exchange). */
HcclResult hccl__prim_sendrecv(const struct hccl_prim *p, struct hccl_link *send_to,
                               const void *sbuf, size_t send_bytes, struct hccl_link *recv_from,
                               const void *local, void *out, size_t recv_bytes);

/* prim_sendrecv with one partner both ways. */
HcclResult hccl__prim_exchange(const struct hccl_prim *p, struct hccl_link *l, const void *sbuf,
                               size_t send_bytes, const void *local, void *out, size_t recv_bytes);

/* Waits until the transport has read every message sent by reference on `to` (none: at
 * once); the caller's buffers may change after it. NULL `to` is nothing to flush. */
HcclResult hccl__prim_flush(const struct hccl_prim *p, struct hccl_link *to);

/* Waits until the peer has released every message sent on `to`: the receiver accepted their
 * sizes. A receiver that found a wrong size aborts instead, and this fails with its reason. */
HcclResult hccl__prim_drain(const struct hccl_prim *p, struct hccl_link *to);

/* Where the peer's HcclMemAlloc window w is mapped in this process (the link's map_window;
 * only for links whose transport shares memory). */
static inline HcclResult hccl__prim_map(struct hccl_link *l, const struct hccl_window *w,
                                        void **ptr) {
  return l->ops->map_window(l, w, ptr);
}

/* Whether l's transport maps a peer's HcclMemAlloc windows (it shares memory): what the
 * zero-copy exchange asks of every link before it offers its windows (zcopy.c). */
static inline bool hccl__prim_can_map(const struct hccl_link *l) {
  return l->ops->map_window != NULL;
}

/* l's own check of its peer (its death, its departure, its abort) for a wait on something
 * other than a message on l: the one-shot allreduce's arrival count (oneshot.c) asks every
 * member's link in each sleep slice. Success when the transport has no such check. */
static inline HcclResult hccl__prim_check(struct hccl_link *l, const struct hccl_wait *w,
                                          uint32_t peer) {
  return l->ops->wait_check ? l->ops->wait_check(l, w, peer) : HCCL_SUCCESS;
}

/* Non-blocking: a send on l would not wait / a message from l is waiting / every message sent
 * on l was released. For engines that progress several links at once (p2p.c). */
static inline bool hccl__prim_can_send(struct hccl_link *l) {
  return l->ops->send_ready(l);
}
static inline bool hccl__prim_can_recv(struct hccl_link *l) {
  return l->ops->recv_ready(l);
}
static inline bool hccl__prim_drained(struct hccl_link *l) {
  return l->ops->send_drained(l);
}

#endif
