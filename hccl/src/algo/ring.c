/*
 * ring.c - ring allreduce (reduce-scatter then allgather, fused per round), ring
 * reduce-scatter, ring allgather, and the pipelined chains for broadcast and reduce, over a
 * group of ranks (group.h).
 *
 * The buffer is cut into n blocks (block j belongs to member j; sizes differ by at most one
 * element) and every block into slot-sized chunks; round t moves chunk t of every block.
 * In a round, the member at ring position i:
 *
 *   reduce-scatter, n-1 sends: step 0 sends block ring[i-1]; step k receives block
 *   ring[i-k-1], reduces it with its own input and sends it on; the last receive brings
 *   block ring[i] (its own), fully reduced.
 *   allgather, n-1 sends: forwards what it received until every block has passed everyone.
 *
 *        pos0 -> pos1 -> pos2 -> pos3
 *          ^                      |
 *          +----------------------+
 *
 * Each step reduces straight from the left neighbour's message into the right neighbour's
 * slot (prims.c), so 2(n-1)/n of the data crosses memory per rank, the bandwidth optimum.
 */
#include <string.h>

#include "algo.h"
#include "log.h"

struct blocks {
  size_t base, rem; /* block j: base + (j < rem) elements */
};

static size_t blk_count(const struct blocks *b, uint32_t j) {
  return b->base + (j < b->rem);
}
static size_t blk_off(const struct blocks *b, uint32_t j) {
  return j * b->base + (j < b->rem ? j : b->rem);
}

/* Elements of block j in round t, and where they start (elements from the buffer start). */
static size_t chunk(const struct blocks *b, uint32_t j, size_t t, size_t per, size_t *off) {
  size_t n = blk_count(b, j), lo = t * per;
  *off = blk_off(b, j) + lo;
  if (lo >= n) return 0;
  return n - lo < per ? n - lo : per;
}

static size_t per_chunk(const struct hccl_group *g, const struct hccl_prim *p) {
  return g->chunk_bytes / p->esz;
}

static size_t rounds_of(const struct blocks *b, size_t per) {
  return (b->base + (b->rem > 0) + per - 1) / per;
}

/* Reduce-scatter steps of one round; the last step writes the reduced own block to `out` at
 * out_off_of(own block) and, when `forward` is set, also sends it on (the allgather's first
 * send). `send` holds the n blocks laid out by `b`. */
static HcclResult rs_round(const struct hccl_group *g, const struct hccl_prim *p,
                           const struct blocks *b, size_t t, size_t per, const char *send,
                           char *out, size_t out_base, int forward) {
  int64_t i = g->pos[g->me];
  uint32_t n_ = g->n;
  struct hccl_link *left = hccl__group_link(g, hccl__group_at(g, i - 1));
  struct hccl_link *right = hccl__group_link(g, hccl__group_at(g, i + 1));
  size_t es = p->esz, off, n;
  n = chunk(b, hccl__group_at(g, i - 1), t, per, &off);
  HCCL_TRY(hccl__prim_step(p, NULL, right, send + off * es, NULL, n * es));
  for (uint32_t k = 1; k + 1 < n_; k++) {
    n = chunk(b, hccl__group_at(g, i - k - 1), t, per, &off);
    HCCL_TRY(hccl__prim_step(p, left, right, send + off * es, NULL, n * es));
  }
  uint32_t own = g->me;
  n = chunk(b, own, t, per, &off);
  size_t o = out_base == (size_t)-1 ? off : out_base + (off - blk_off(b, own));
  struct hccl_prim last = hccl__prim_last(p); /* the own block is complete here */
  return hccl__prim_step(&last, left, forward ? right : NULL, send + off * es, out + o * es,
                         n * es);
}

/* Allgather steps of one round after the own block has been sent: n-2 forwards and a final
 * receive, writing every block into `out` at its offset. Receive m of the round (1 .. n-1)
 * brings block ring[i-m]. */
static HcclResult ag_round(const struct hccl_group *g, const struct hccl_prim *p,
                           const struct blocks *b, size_t t, size_t per, char *out) {
  int64_t i = g->pos[g->me];
  uint32_t n_ = g->n;
  struct hccl_link *left = hccl__group_link(g, hccl__group_at(g, i - 1));
  struct hccl_link *right = hccl__group_link(g, hccl__group_at(g, i + 1));
  size_t es = p->esz, off, n;
  for (uint32_t m = 1; m + 1 < n_; m++) {
    n = chunk(b, hccl__group_at(g, i - m), t, per, &off);
    HCCL_TRY(hccl__prim_step(p, left, right, NULL, out + off * es, n * es));
  }
  n = chunk(b, hccl__group_at(g, i + 1), t, per, &off);
  return hccl__prim_step(p, left, NULL, NULL, out + off * es, n * es);
}

/* Receiving in place (prims.h): each round brings, from the left neighbour, `skip` messages
 * and then chunk t of blocks ring[i-1], ring[i-2], ..., ring[i-n+1], one message each, in
 * `per_round` messages in all; so block ring[i-m]'s chunks are messages skip + m - 1 +
 * k * per_round of the call, and may land in `out` at the block's place (RDMA: written there
 * by the left neighbour; an allgather's or allreduce's second half then copies nothing). */
static void post_blocks(const struct hccl_group *g, const struct hccl_prim *p,
                        const struct blocks *b, size_t per, char *out, uint32_t skip,
                        uint32_t per_round) {
  int64_t i = g->pos[g->me];
  struct hccl_link *left = g->n > 1 ? hccl__group_link(g, hccl__group_at(g, i - 1)) : NULL;
  for (uint32_t m = 1; m < g->n; m++) {
    uint32_t j = hccl__group_at(g, i - m);
    hccl__prim_post_every(left, out + blk_off(b, j) * p->esz, per * p->esz,
                          blk_count(b, j) * p->esz, skip + m - 1, per_round);
  }
}

/* The ring and the chains send by reference (prims.h): none of them writes a region after
 * sending it, except an allreduce in place, whose first send of each round (block i-1 of the
 * input) receives its final value in the same round's allgather: that round flushes its
 * sending link between the two (hccl__ring_allreduce), so the write waits until the transport
 * has read the bytes, a wait TSan can follow. It costs little: those bytes are read long
 * before block i-1's final value can come back (the peer needs all of them first); what the
 * flush waits for is the own block's forward, sent just before. The forwarded and own output
 * blocks, the other members' input blocks and the chains' buffers are written, if at all,
 * before they are sent. Each public function below runs with by_ref set and flushes its
 * sending link before it returns, so the caller may change its buffers at once. On a failure
 * it returns without the flush (the wait could last until the deadline): the failure aborts
 * the communicator, and the transport reads no payload from then on (tcp_abort waits for its
 * I/O thread to stop). */
static struct hccl_prim by_ref(const struct hccl_prim *p) {
  struct hccl_prim q = *p;
  q.by_ref = true;
  return q;
}

static struct hccl_link *right_of(const struct hccl_group *g) {
  return g->n > 1 ? hccl__group_link(g, hccl__group_at(g, (int64_t)g->pos[g->me] + 1)) : NULL;
}

HcclResult hccl__ring_allreduce(const struct hccl_group *g, const struct hccl_prim *p0,
                                const void *send, void *recv, size_t count) {
  struct hccl_prim q = by_ref(p0), *p = &q;
  struct blocks b = {count / g->n, count % g->n};
  size_t per = per_chunk(g, p), rounds = rounds_of(&b, per);
  post_blocks(g, p, &b, per, recv, g->n - 1, 2 * (g->n - 1)); /* after n-1 reduce-scatter's */
  for (size_t t = 0; t < rounds; t++) {
    HCCL_TRY(rs_round(g, p, &b, t, per, send, recv, (size_t)-1, 1));
    if (send == recv) HCCL_TRY(hccl__prim_flush(p, right_of(g))); /* above by_ref() */
    HCCL_TRY(ag_round(g, p, &b, t, per, recv));
  }
  return hccl__prim_flush(p, right_of(g));
}

HcclResult hccl__ring_reduce_scatter(const struct hccl_group *g, const struct hccl_prim *p0,
                                     const void *send, void *recv, size_t recv_count) {
  struct hccl_prim q = by_ref(p0), *p = &q;
  struct blocks b = {recv_count, 0};
  size_t per = per_chunk(g, p), rounds = rounds_of(&b, per);
  for (size_t t = 0; t < rounds; t++)
    HCCL_TRY(rs_round(g, p, &b, t, per, send, recv, 0, 0));
  return hccl__prim_flush(p, right_of(g));
}

HcclResult hccl__ring_reduce_scatter_split(const struct hccl_group *g, const struct hccl_prim *p0,
                                           const void *send, void *recv, size_t count) {
  struct hccl_prim q = by_ref(p0), *p = &q;
  struct blocks b = {count / g->n, count % g->n};
  size_t per = per_chunk(g, p), rounds = rounds_of(&b, per);
  for (size_t t = 0; t < rounds; t++)
    HCCL_TRY(rs_round(g, p, &b, t, per, send, recv, (size_t)-1, 0));
  return hccl__prim_flush(p, right_of(g));
}

/* Every round: send the own chunk (from `own`, element offsets relative to the own block, or
 * from `out` itself when own is NULL), placing it in `out` unless it is there, then forward. */
static HcclResult allgather(const struct hccl_group *g, const struct hccl_prim *p0,
                            const struct blocks *b, const char *own, char *out) {
  struct hccl_prim q = by_ref(p0), *p = &q;
  size_t per = per_chunk(g, p), es = p->esz, rounds = rounds_of(b, per);
  struct hccl_link *right = hccl__group_link(g, hccl__group_at(g, (int64_t)g->pos[g->me] + 1));
  post_blocks(g, p, b, per, out, 0, g->n - 1); /* two members: the other's chunks in a row */
  for (size_t t = 0; t < rounds; t++) {
    size_t off, n = chunk(b, g->me, t, per, &off);
    if (own)
      HCCL_TRY(hccl__prim_step(p, NULL, right, own + (off - blk_off(b, g->me)) * es, out + off * es,
                               n * es));
    else
      HCCL_TRY(hccl__prim_step(p, NULL, right, out + off * es, NULL, n * es));
    HCCL_TRY(ag_round(g, p, b, t, per, out));
  }
  return hccl__prim_flush(p, right);
}

HcclResult hccl__ring_allgather(const struct hccl_group *g, const struct hccl_prim *p,
                                const void *send, void *recv, size_t send_count) {
  struct blocks b = {send_count, 0};
  return allgather(g, p, &b, send, recv);
}

HcclResult hccl__ring_allgather_split(const struct hccl_group *g, const struct hccl_prim *p,
                                      void *buf, size_t count) {
  struct blocks b = {count / g->n, count % g->n};
  return allgather(g, p, &b, NULL, buf);
}

/* Chains run from the root along the ring: v = 0 is the root, v = n-1 the far end. */
HcclResult hccl__chain_broadcast(const struct hccl_group *g, const struct hccl_prim *p0, void *buf,
                                 size_t count, uint32_t root) {
  struct hccl_prim q = by_ref(p0), *p = &q;
  uint32_t np = g->n, rpos = g->pos[root], mine = g->pos[g->me];
  uint32_t v = (mine + np - rpos) % np;
  struct hccl_link *from = v > 0 ? hccl__group_link(g, hccl__group_at(g, (int64_t)mine - 1)) : NULL;
  struct hccl_link *to =
      v + 1 < np ? hccl__group_link(g, hccl__group_at(g, (int64_t)mine + 1)) : NULL;
  size_t per = per_chunk(g, p) * p->esz, bytes = count * p->esz;
  char *b = buf;
  hccl__prim_post(from, b, per, bytes); /* received in place */
  for (size_t off = 0; off < bytes; off += per) {
    size_t n = bytes - off < per ? bytes - off : per;
    HCCL_TRY(hccl__prim_step(p, from, to, from ? NULL : b + off, from ? b + off : NULL, n));
  }
  return hccl__prim_flush(p, to);
}

/* Reduce flows the other way: from the far end (v = n-1) towards the root (v = 0). */
HcclResult hccl__chain_reduce(const struct hccl_group *g, const struct hccl_prim *p0,
                              const void *send, void *recv, size_t count, uint32_t root) {
  struct hccl_prim q = by_ref(p0), *p = &q;
  uint32_t np = g->n, rpos = g->pos[root], mine = g->pos[g->me];
  uint32_t v = (mine + np - rpos) % np;
  struct hccl_link *from =
      v + 1 < np ? hccl__group_link(g, hccl__group_at(g, (int64_t)mine + 1)) : NULL;
  struct hccl_link *to = v > 0 ? hccl__group_link(g, hccl__group_at(g, (int64_t)mine - 1)) : NULL;
  size_t per = per_chunk(g, p) * p->esz, bytes = count * p->esz;
  const char *s = send;
  char *r = recv;
  struct hccl_prim last = hccl__prim_last(p); /* the root's steps complete the elements */
  const struct hccl_prim *step = to ? p : &last;
  for (size_t off = 0; off < bytes; off += per) {
    size_t n = bytes - off < per ? bytes - off : per;
    HCCL_TRY(hccl__prim_step(step, from, to, s + off, to ? NULL : r + off, n));
  }
  return hccl__prim_flush(p, to);
}
