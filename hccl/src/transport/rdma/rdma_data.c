/*
 * rdma_data.c - the RDMA transport's data path, the algorithm's side of a link: send
 * acquire/commit and by reference, receive acquire/release and posted in place, readiness,
 * drain, and the check every wait on an RDMA link makes each sleep slice (its peer down).
 *
 * Each link has 8 send slots and 8 receive slots of slot_bytes (HCCL_BUFFSIZE split as TCP
 * splits it), each led by a 32-byte header {size, sequence, post, posts_seen, stamp},
 * registered once when the link is made. The caller fills send slot m % 8 (send_acquire gives
 * it: a copy, counted in bytes_copied_send) and commits it, or hands its own buffer (send_ref:
 * no copy where it lies in an HcclMemAlloc region, rdma_reg.c). Message m is one RDMA WRITE
 * with immediate m of header and payload into the peer's receive slot m % 8; the receiver
 * learns which slot filled from its completion (the thread publishes `arrived`) and the
 * payload it takes from a slot counts in bytes_copied_recv.
 *
 * Zero copy at the receiving end (NCCL net_ib's FIFO): recv_post, for a buffer in an
 * HcclMemAlloc region, writes an entry {addr, rkey, chunk, bytes, first, step, n, id} into the
 * sender's region (RDMA WRITE with immediate POST id; at most RDMA_NPOSTS ahead of the entries
 * the sender said, in its headers, it has read, and only over an entry of this side's whose
 * messages were all taken). The sender reads the entries in order before each message and
 * keeps those with messages to come (a ring's receiver posts one per block, each taking every
 * (n - 1)th or 2(n - 1)th message); a message an entry covers goes as two writes, its header into its
 * slot (post = id + 1) and its payload straight into the receiver's buffer with the immediate,
 * and recv_acquire returns that place, so the caller's copy to it is none. Messages the sender wrote
 * before it read the entry stay in their slots (post = 0): the header says which, message by
 * message, so both kinds keep their order. Once a message was covered by a posted receive (it
 * went into one, or an entry read later covered it), the next one no entry covers waits a
 * little for the receiver's next entry (wait_post), so a stream of posted receives stays zero
 * copy although each is announced when its receive starts.
 *
 * recv_release returns a credit: a SEND with immediate {released count}, no payload, posted by
 * the releasing thread; the sender's thread publishes it as `acked`. A sender has at most 8
 * messages its receiver has not released (shm's and TCP's rule), so a write always finds its
 * receive slot free, and send_drained = every committed message released. Those counters and
 * the waits on them (sleeping on `arrived` and `acked` with hccl__wait_change) are the link's
 * credits, shared with TCP (transport/credits.h, credits.c); what is RDMA's here is how
 * messages and credits travel, send_ready's wait for a posted receive, and the check its waits
 * make.
 */
#include <arpa/inet.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "credits.h"
#include "log.h"
#include "rdma.h"
#include "wait.h"

_Static_assert(RDMA_NSLOTS == HCCL_CREDITS, "an RDMA link's send window is its receiver's slots");

HcclResult hccl__rdma_wait_check(void *arg, const struct hccl_wait *w, uint32_t peer) {
  struct rdma_link *l = arg;
  struct rdma_peer *p = &l->st->peers[peer];
  if (atomic_load_explicit(&p->dead, memory_order_acquire))
    return hccl__fail(HCCL_E_REMOTE, "%s on rank %u (server %s) stopped while it waited for rank "
                      "%u: %s",
                      w->what, w->rank, l->base.tx->peers[w->rank].host, peer, p->reason);
  return HCCL_SUCCESS;
}

/* Waits until message l->cr.sent may be written: fewer than RDMA_NSLOTS unreleased, the peer
 * alive (credits.c). */
static HcclResult send_window(struct rdma_link *l, const struct hccl_wait *w) {
  return hccl__credits_send_wait(&l->cr, l->base.peer, &l->st->peers[l->base.peer].dead, w,
                                 hccl__rdma_wait_check, l);
}

HcclResult hccl__rdma_send_acquire(struct hccl_link *base, void **buf,
                                   const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  HCCL_TRY(send_window(l, w));
  *buf = l->mem + hccl__rdma_slot_off(l->cr.sent, base->slot_bytes) + RDMA_HDR;
  return HCCL_SUCCESS;
}

/* Posts the n work requests chained from wr on l's send queue once it has room (their
 * completions are the thread's to reap; a dead peer's never come, and then nothing is posted). */
static void post_wr(struct rdma_link *l, struct ibv_send_wr *wr, uint32_t n) {
  struct rdma_peer *p = &l->st->peers[l->base.peer];
  while (atomic_load(&l->sq_posted) - atomic_load(&l->sq_done) + n > RDMA_SEND_WR) {
    if (atomic_load(&p->dead)) return;
    sched_yield();
  }
  if (atomic_load(&p->dead)) return;
  struct ibv_send_wr *bad = NULL;
  atomic_fetch_add(&l->sq_posted, n);
  int e = ibv_post_send(l->qp, wr, &bad);
  if (e) {
    uint32_t unposted = 0; /* those from bad on */
    for (struct ibv_send_wr *at = bad ? bad : wr; at; at = at->next)
      unposted++;
    atomic_fetch_sub(&l->sq_posted, unposted);
    char why[400];
    snprintf(why, sizeof(why), "rank %u cannot post an RDMA work request to rank %u (server %s): "
             "%s", l->base.tx->rank, l->base.peer, l->base.tx->peers[l->base.peer].host,
             strerror(e));
    atomic_store(&l->failed, 1);
    hccl__rdma_peer_down(l->st, l->base.peer, why);
  }
}

static void broke(struct rdma_link *l, const char *what, uint32_t a, uint32_t b) {
  char why[400];
  snprintf(why, sizeof(why), "rank %u (server %s) broke the RDMA protocol (%s %u, %u expected)",
           l->base.peer, l->base.tx->peers[l->base.peer].host, what, a, b);
  atomic_store(&l->failed, 1);
  hccl__rdma_peer_down(l->st, l->base.peer, why);
}

/* Reads the entries the thread published since the last look into l->live (as room allows),
 * dropping the live ones whose messages were all sent (message l->cr.sent is next). */
static void read_posts(struct rdma_link *l) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < l->nlive; i++)
    if (!hccl__rdma_post_spent(&l->live[i], l->cr.sent)) l->live[k++] = l->live[i];
  l->nlive = k;
  uint32_t arrived = atomic_load_explicit(&l->posts_arrived, memory_order_acquire);
  while (l->posts_seen != arrived && l->nlive < RDMA_NPOSTS) {
    struct rdma_post e;
    memcpy(&e, l->mem + 2 * l->half + (size_t)(l->posts_seen % RDMA_NPOSTS) * RDMA_POST_STRIDE,
           sizeof(e));
    if (e.id != l->posts_seen || e.n == 0 || e.chunk == 0 || e.step == 0) {
      broke(l, "posted receive", e.id, l->posts_seen);
      return;
    }
    l->posts_seen++;
    if (l->have_last && !l->last_covered && hccl__rdma_post_covers(&e, l->last_seq))
      l->last_covered = true; /* it came too late for that message, but the receiver posts */
    if (!hccl__rdma_post_spent(&e, l->cr.sent)) l->live[l->nlive++] = e;
  }
}

/* Where message l->cr.sent of `bytes` goes in the receiver's own buffer, if a receive it posted
 * covers it. false: into its slot. */
static bool place_of(struct rdma_link *l, size_t bytes, uint64_t *addr, uint32_t *rkey,
                     uint32_t *post) {
  if (bytes == 0) return false;
  read_posts(l);
  for (uint32_t i = 0; i < l->nlive; i++)
    if (hccl__rdma_post_place(&l->live[i], l->cr.sent, bytes, addr)) {
      *rkey = l->live[i].rkey;
      *post = l->live[i].id + 1;
      return true;
    }
  return false;
}

/* Whether a message with bytes should wait for the receiver's next posted receive: the last
 * one was covered by a posted receive, and no entry read has messages to come (one that has,
 * but not this one, l->cr.sent, says this one goes to its slot: a ring's reduce-scatter
 * message between two of its allgather's). */
static bool post_expected(const struct rdma_link *l) {
  if (!l->have_last || !l->last_covered) return false;
  for (uint32_t i = 0; i < l->nlive; i++)
    if (!hccl__rdma_post_spent(&l->live[i], l->cr.sent)) return false;
  return true;
}

/* How long message l->cr.sent may wait for a posted receive: 8 times what such waits took lately,
 * within RDMA_POST_WAIT_MIN_NS .. RDMA_POST_WAIT_NS; RDMA_POST_WAIT_FIRST_NS before any
 * (rdma.h). */
static int64_t post_limit(const struct rdma_link *l) {
  return hccl__rdma_post_limit(l->post_wait_ns, RDMA_POST_WAIT_MIN_NS, RDMA_POST_WAIT_FIRST_NS,
                               RDMA_POST_WAIT_NS);
}

/* When message l->cr.sent began to wait (now, on its first look). */
static int64_t wait_began(struct rdma_link *l, int64_t now) {
  if (l->wait_seq != l->cr.sent || l->wait_since == 0) {
    l->wait_seq = l->cr.sent;
    l->wait_since = now;
  }
  return l->wait_since;
}

/* A short rendezvous: where the receiver has been posting its buffers, the next entry is
 * usually on its way (the receiver posts when its receive starts, and the sender may start
 * first), and a message written before it comes lands in a slot the receiver copies out of.
 * So message l->cr.sent waits for it, from its first look (send_ready's, or here) up to
 * post_limit, and goes to its slot after that, or at once when the link or the communicator
 * fails. Returns place_of's answer. */
static bool wait_post(struct rdma_link *l, size_t bytes, uint64_t *addr, uint32_t *rkey,
                      uint32_t *post) {
  struct rdma_state *st = l->st;
  int64_t t0 = wait_began(l, hccl__now_ns()), limit = post_limit(l);
  for (;;) {
    if (place_of(l, bytes, addr, rkey, post)) {
      int64_t took = hccl__now_ns() - t0;
      l->post_wait_ns = l->post_wait_ns ? (3 * l->post_wait_ns + took) / 4 : took;
      return true;
    }
    if (!post_expected(l) || atomic_load(&l->failed) ||
        atomic_load(&st->peers[l->base.peer].dead) || atomic_load(&st->abort_origin))
      return false;
    if (hccl__now_ns() - t0 >= limit) return false;
    sched_yield();
  }
}

/* Writes message l->cr.sent: its header (in send slot l->cr.sent % 8, written here) and `bytes` of
 * payload from src (lkey): the send slot's own payload or a registered caller's buffer. Into
 * the peer's receive slot, header and payload as one RDMA WRITE with immediate; or, where a
 * posted receive covers the message, the header into the slot (an RDMA WRITE) and the payload
 * into the receiver's buffer (the RDMA WRITE with immediate: RC places the first before the
 * second completes). */
static void write_msg(struct rdma_link *l, size_t bytes, const struct hccl_stamp *stamp,
                      const void *src, uint32_t lkey) {
  size_t off = hccl__rdma_slot_off(l->cr.sent, l->base.slot_bytes);
  uint64_t addr = 0;
  uint32_t rkey = 0, post = 0;
  bool placed = place_of(l, bytes, &addr, &rkey, &post);
  if (!placed && bytes > 0 && post_expected(l)) placed = wait_post(l, bytes, &addr, &rkey, &post);
  if (bytes > 0) {
    l->have_last = true;
    l->last_seq = l->cr.sent;
    l->last_covered = placed;
  }
  l->wait_since = 0;
  struct rdma_slot_hdr h = {.size = (uint32_t)bytes,
                            .seq = l->cr.sent,
                            .post = post,
                            .posts_seen = l->posts_seen,
                            .stamp = *stamp};
  memcpy(l->mem + off, &h, sizeof(h));
  bool inline_src = src == l->mem + off + RDMA_HDR; /* the slot: one piece with its header */
  struct ibv_sge sge[2] = {{.addr = (uintptr_t)(l->mem + off),
                            .length = (uint32_t)(RDMA_HDR + (inline_src ? bytes : 0)),
                            .lkey = l->mr->lkey},
                           {.addr = (uintptr_t)src, .length = (uint32_t)bytes, .lkey = lkey}};
  struct ibv_send_wr data = {.wr_id = (uintptr_t)l | RDMA_TAG_SEND | RDMA_TAG_DATA,
                             .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = htonl(hccl__rdma_imm_data(l->cr.sent))};
  if (!placed) {
    data.sg_list = sge;
    data.num_sge = inline_src || bytes == 0 ? 1 : 2;
    data.wr.rdma.remote_addr = l->raddr + off;
    data.wr.rdma.rkey = l->rkey;
    post_wr(l, &data, 1);
  } else {
    sge[0].length = RDMA_HDR;
    struct ibv_send_wr hdr = {.wr_id = (uintptr_t)l | RDMA_TAG_SEND,
                              .next = &data,
                              .sg_list = &sge[0],
                              .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE,
                              .send_flags = IBV_SEND_SIGNALED};
    hdr.wr.rdma.remote_addr = l->raddr + off;
    hdr.wr.rdma.rkey = l->rkey;
    data.sg_list = &sge[1];
    data.num_sge = 1;
    data.wr.rdma.remote_addr = addr;
    data.wr.rdma.rkey = rkey;
    post_wr(l, &hdr, 2);
  }
  l->cr.sent++;
  atomic_fetch_add_explicit(&l->st->bytes_sent, bytes, memory_order_relaxed);
}

void hccl__rdma_send_commit(struct hccl_link *base, size_t bytes,
                            const struct hccl_stamp *stamp) {
  struct rdma_link *l = (struct rdma_link *)base;
  size_t off = hccl__rdma_slot_off(l->cr.sent, base->slot_bytes);
  atomic_fetch_add_explicit(&l->st->bytes_copied_send, bytes, memory_order_relaxed);
  write_msg(l, bytes, stamp, l->mem + off + RDMA_HDR, l->mr->lkey);
}

/* From the caller's buffer: without a copy when it lies in an HcclMemAlloc region (the
 * registration cache, rdma_reg.c); else through the slot, as acquire + copy + commit. */
HcclResult hccl__rdma_send_ref(struct hccl_link *base, const void *buf, size_t bytes,
                               const struct hccl_stamp *stamp, const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  HCCL_TRY(send_window(l, w));
  uint32_t lkey, rkey;
  if (!hccl__rdma_reg_find(l->st, buf, bytes, &lkey, &rkey)) {
    size_t off = hccl__rdma_slot_off(l->cr.sent, base->slot_bytes);
    memcpy(l->mem + off + RDMA_HDR, buf, bytes);
    hccl__rdma_send_commit(base, bytes, stamp);
    return HCCL_SUCCESS;
  }
  write_msg(l, bytes, stamp, buf, lkey);
  return HCCL_SUCCESS;
}

/* Until every message's write completed: the adapter has read its source. */
HcclResult hccl__rdma_send_flush(struct hccl_link *base, const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  return hccl__credits_flush(&l->cr, base->peer, w, hccl__rdma_wait_check, l);
}

HcclResult hccl__rdma_recv_acquire(struct hccl_link *base, const void **buf, size_t *bytes,
                                   struct hccl_stamp *stamp, const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  HCCL_TRY(hccl__credits_recv_wait(&l->cr, base->peer, w, hccl__rdma_wait_check, l));
  const char *slot = l->mem + l->half + hccl__rdma_slot_off(l->cr.received, base->slot_bytes);
  struct rdma_slot_hdr h;
  memcpy(&h, slot, sizeof(h));
  if (h.seq != l->cr.received || h.size > base->slot_bytes)
    return hccl__fail(HCCL_E_REMOTE, "%s on rank %u: rank %u (server %s) broke the RDMA protocol "
                      "(message %u of %u bytes in the slot of message %u; slots of %zu bytes)",
                      w->what, w->rank, base->peer, base->tx->peers[base->peer].host, h.seq,
                      h.size, l->cr.received, base->slot_bytes);
  uint64_t addr = 0;
  uint32_t id = h.post - 1;
  const struct rdma_post *mine = &l->mine[id % RDMA_NPOSTS];
  /* A posted receive's message: the post is one of the last 16 this side made. */
  bool known = h.post != 0 && l->posts_made - id - 1 < RDMA_NPOSTS && mine->id == id;
  if (h.post != 0 && !(known && hccl__rdma_post_place(mine, h.seq, h.size, &addr)))
    return hccl__fail(HCCL_E_REMOTE, "%s on rank %u: rank %u (server %s) broke the RDMA protocol "
                      "(message %u of %u bytes written to posted receive %u, which %s)",
                      w->what, w->rank, base->peer, base->tx->peers[base->peer].host, h.seq,
                      h.size, id, known ? "does not hold it" : "is not one of the last posted");
  if ((int32_t)(h.posts_seen - l->peer_seen) > 0) l->peer_seen = h.posts_seen;
  *buf = h.post ? (const void *)(uintptr_t)addr : slot + RDMA_HDR;
  l->held_copied = h.post ? 0 : h.size;
  *bytes = h.size;
  *stamp = h.stamp;
  return HCCL_SUCCESS;
}

void hccl__rdma_recv_release(struct hccl_link *base) {
  struct rdma_link *l = (struct rdma_link *)base;
  if (l->held_copied)
    atomic_fetch_add_explicit(&l->st->bytes_copied_recv, l->held_copied, memory_order_relaxed);
  l->held_copied = 0;
  l->cr.received++;
  struct ibv_send_wr wr = {.wr_id = (uintptr_t)l | RDMA_TAG_SEND,
                           .sg_list = NULL,
                           .num_sge = 0,
                           .opcode = IBV_WR_SEND_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(hccl__rdma_imm_credit(l->cr.received))};
  post_wr(l, &wr, 1);
}

/* Messages l->cr.received + skip, then every step-th, may land in buf (transport.h): where buf
 * lies in an HcclMemAlloc region (registered through the cache for the peer's writes), an
 * entry {addr, rkey, chunk, bytes, first, step, n, id} goes to the sender with an RDMA WRITE
 * with immediate. Skipped (the messages come through slots) while the link is not ready, for
 * other memory, when RDMA_NPOSTS entries are unread by the sender or not yet written, and
 * while the entry 16 posts back, whose place in mine[] this one takes, has messages to come. */
void hccl__rdma_recv_post(struct hccl_link *base, void *buf, size_t chunk, size_t bytes,
                          uint32_t skip, uint32_t step) {
  struct rdma_link *l = (struct rdma_link *)base;
  struct rdma_state *st = l->st;
  uint32_t id = l->posts_made, lkey, rkey;
  if (!atomic_load_explicit(&l->ready, memory_order_acquire) || atomic_load(&l->failed) ||
      atomic_load(&st->peers[base->peer].dead))
    return;
  if (!hccl__rdma_post_window_open(id, l->peer_seen) ||
      !hccl__rdma_post_window_open(id, atomic_load_explicit(&l->posts_done,
                                                            memory_order_acquire)))
    return;
  if (!hccl__rdma_post_spent(&l->mine[id % RDMA_NPOSTS], l->cr.received))
    return;
  if (!hccl__rdma_reg_find(st, buf, bytes, &lkey, &rkey)) return;
  struct rdma_post e =
      hccl__rdma_post_make((uintptr_t)buf, rkey, chunk, bytes, l->cr.received + skip, step, id);
  size_t at = (size_t)(id % RDMA_NPOSTS) * RDMA_POST_STRIDE;
  char *src = l->mem + 2 * l->half + (size_t)RDMA_NPOSTS * RDMA_POST_STRIDE + at;
  memcpy(src, &e, sizeof(e));
  struct ibv_sge sge = {.addr = (uintptr_t)src, .length = sizeof(e), .lkey = l->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = (uintptr_t)l | RDMA_TAG_SEND | RDMA_TAG_POST,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(hccl__rdma_imm_post(id))};
  /* The peer's entries follow its receive slots (raddr) in its region. */
  wr.wr.rdma.remote_addr = l->raddr + l->half + at;
  wr.wr.rdma.rkey = l->rkey;
  l->mine[id % RDMA_NPOSTS] = e;
  l->posts_made++;
  post_wr(l, &wr, 1);
}

/* Not ready while the next message waits for a posted receive (wait_post, up to post_limit
 * from its first look): an engine that progresses several ops (the p2p engine) takes its
 * receives meanwhile, and so posts them, instead of blocking in this send while its peer,
 * sending too, waits for that post. (An empty message waits for nothing; it is ready once the
 * engine sends anyway.) */
bool hccl__rdma_send_ready(struct hccl_link *base) {
  struct rdma_link *l = (struct rdma_link *)base;
  if (!hccl__credits_send_ready(&l->cr)) return false;
  if (!post_expected(l)) return true;
  uint64_t addr;
  uint32_t rkey, post;
  if (place_of(l, 1, &addr, &rkey, &post) || !post_expected(l)) return true;
  int64_t now = hccl__now_ns();
  return now - wait_began(l, now) >= post_limit(l);
}

bool hccl__rdma_recv_ready(struct hccl_link *base) {
  return hccl__credits_recv_ready(&((struct rdma_link *)base)->cr);
}

bool hccl__rdma_send_drained(struct hccl_link *base) {
  return hccl__credits_drained(&((struct rdma_link *)base)->cr);
}

HcclResult hccl__rdma_send_drain(struct hccl_link *base, const struct hccl_wait *w) {
  struct rdma_link *l = (struct rdma_link *)base;
  return hccl__credits_drain(&l->cr, base->peer, w, hccl__rdma_wait_check, l);
}
