/*
 * ring.c - ring allreduce (reduce-scatter then allgather, fused per round), ring
 * reduce-scatter, ring allgather, and the pipelined chains for broadcast and reduce.
 *
 * The buffer is cut into p blocks (block j belongs to rank j; sizes differ by at most one
 * element) and every block into slot-sized chunks; round t moves chunk t of every block.
 * In a round, the rank at ring position i:
 *
 *   reduce-scatter, p-1 sends: step 0 sends block ring[i-1]; step k receives block
 *   ring[i-k-1], reduces it with its own input and sends it on; the last receive brings
 *   block ring[i] (its own), fully reduced.
 *   allgather, p-1 sends: forwards what it received until every block has passed everyone.
 *
 *        pos0 -> pos1 -> pos2 -> pos3
 *          ^                      |
 *          +----------------------+
 *
 * Each step reduces straight from the left neighbour's message into the right neighbour's
 * slot (prims.c), so 2(p-1)/p of the data crosses memory per rank, the bandwidth optimum.
 */
#include <string.h>

#include "algo.h"
#include "log.h"
#include "comm.h"

struct blocks {
  size_t base, rem; /* block j: base + (j < rem) elements */
};

static size_t blk_count(const struct blocks *b, uint32_t j) {
  return b->base + (j < b->rem);
}
static size_t blk_off(const struct blocks *b, uint32_t j) {
  return j * b->base + (j < b->rem ? j : b->rem);
}

static uint32_t at(const struct hccl_comm *c, int64_t pos) {
  int64_t p = c->nranks;
  return c->ring[((pos % p) + p) % p];
}

/* Elements of block j in round t, and where they start (elements from the buffer start). */
static size_t chunk(const struct blocks *b, uint32_t j, size_t t, size_t per, size_t *off) {
  size_t n = blk_count(b, j), lo = t * per;
  *off = blk_off(b, j) + lo;
  if (lo >= n) return 0;
  return n - lo < per ? n - lo : per;
}

static size_t per_chunk(const struct hccl_comm *c, const struct hccl_prim *p) {
  return c->chunk_bytes / p->esz;
}

/* Reduce-scatter steps of one round; the last step writes the reduced own block to `out` at
 * out_off_of(own block) and, when `forward` is set, also sends it on (the allgather's first
 * send). `send` holds the p blocks laid out by `b`. */
static HcclResult rs_round(struct hccl_comm *c, const struct hccl_prim *p, const struct blocks *b,
                           size_t t, size_t per, const char *send, char *out, size_t out_base,
                           int forward) {
  int64_t i = c->ring_pos;
  uint32_t p_ = c->nranks;
  struct hccl_link *left = c->links[at(c, i - 1)], *right = c->links[at(c, i + 1)];
  size_t es = p->esz, off, n;
  n = chunk(b, at(c, i - 1), t, per, &off);
  HCCL_TRY(hccl__prim_step(p, NULL, right, send + off * es, NULL, n * es));
  for (uint32_t k = 1; k + 1 < p_; k++) {
    n = chunk(b, at(c, i - k - 1), t, per, &off);
    HCCL_TRY(hccl__prim_step(p, left, right, send + off * es, NULL, n * es));
  }
  uint32_t own = at(c, i);
  n = chunk(b, own, t, per, &off);
  size_t o = out_base == (size_t)-1 ? off : out_base + (off - blk_off(b, own));
  return hccl__prim_step(p, left, forward ? right : NULL, send + off * es, out + o * es, n * es);
}

/* Allgather steps of one round after the own block has been sent: p-2 forwards and a final
 * receive, writing every block into `out` at its offset. */
static HcclResult ag_round(struct hccl_comm *c, const struct hccl_prim *p, const struct blocks *b,
                           size_t t, size_t per, char *out) {
  int64_t i = c->ring_pos;
  uint32_t p_ = c->nranks;
  struct hccl_link *left = c->links[at(c, i - 1)], *right = c->links[at(c, i + 1)];
  size_t es = p->esz, off, n;
  for (uint32_t m = 1; m + 1 < p_; m++) {
    n = chunk(b, at(c, i - m), t, per, &off);
    HCCL_TRY(hccl__prim_step(p, left, right, NULL, out + off * es, n * es));
  }
  n = chunk(b, at(c, i + 1), t, per, &off);
  return hccl__prim_step(p, left, NULL, NULL, out + off * es, n * es);
}

HcclResult hccl__ring_allreduce(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                                void *recv, size_t count) {
  struct blocks b = {count / c->nranks, count % c->nranks};
  size_t per = per_chunk(c, p);
  size_t rounds = (b.base + (b.rem > 0) + per - 1) / per;
  for (size_t t = 0; t < rounds; t++) {
    HCCL_TRY(rs_round(c, p, &b, t, per, send, recv, (size_t)-1, 1));
    HCCL_TRY(ag_round(c, p, &b, t, per, recv));
  }
  return HCCL_SUCCESS;
}

HcclResult hccl__ring_reduce_scatter(struct hccl_comm *c, const struct hccl_prim *p,
                                     const void *send, void *recv, size_t recv_count) {
  struct blocks b = {recv_count, 0};
  size_t per = per_chunk(c, p);
  size_t rounds = (recv_count + per - 1) / per;
  for (size_t t = 0; t < rounds; t++)
    HCCL_TRY(rs_round(c, p, &b, t, per, send, recv, 0, 0));
  return HCCL_SUCCESS;
}

HcclResult hccl__ring_allgather(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                                void *recv, size_t send_count) {
  struct blocks b = {send_count, 0};
  size_t per = per_chunk(c, p), es = p->esz;
  size_t rounds = (send_count + per - 1) / per;
  char *out = recv;
  struct hccl_link *right = c->links[at(c, c->ring_pos + 1)];
  for (size_t t = 0; t < rounds; t++) {
    size_t off, n = chunk(&b, c->rank, t, per, &off);
    /* Send our own chunk and place it in the output (unless in place). */
    HCCL_TRY(hccl__prim_step(p, NULL, right, (const char *)send + (off - blk_off(&b, c->rank)) * es,
                             out + off * es, n * es));
    HCCL_TRY(ag_round(c, p, &b, t, per, out));
  }
  return HCCL_SUCCESS;
}

/* Chains run from the root along the ring: v = 0 is the root, v = p-1 the far end. */
HcclResult hccl__chain_broadcast(struct hccl_comm *c, const struct hccl_prim *p, void *buf,
                                 size_t count, uint32_t root) {
  uint32_t np = c->nranks, rpos = c->pos_of[root];
  uint32_t v = (c->ring_pos + np - rpos) % np;
  struct hccl_link *from = v > 0 ? c->links[at(c, (int64_t)c->ring_pos - 1)] : NULL;
  struct hccl_link *to = v + 1 < np ? c->links[at(c, (int64_t)c->ring_pos + 1)] : NULL;
  size_t per = per_chunk(c, p) * p->esz, bytes = count * p->esz;
  char *b = buf;
  for (size_t off = 0; off < bytes; off += per) {
    size_t n = bytes - off < per ? bytes - off : per;
    HCCL_TRY(hccl__prim_step(p, from, to, from ? NULL : b + off, from ? b + off : NULL, n));
  }
  return HCCL_SUCCESS;
}

/* Reduce flows the other way: from the far end (v = p-1) towards the root (v = 0). */
HcclResult hccl__chain_reduce(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                              void *recv, size_t count, uint32_t root) {
  uint32_t np = c->nranks, rpos = c->pos_of[root];
  uint32_t v = (c->ring_pos + np - rpos) % np;
  struct hccl_link *from = v + 1 < np ? c->links[at(c, (int64_t)c->ring_pos + 1)] : NULL;
  struct hccl_link *to = v > 0 ? c->links[at(c, (int64_t)c->ring_pos - 1)] : NULL;
  size_t per = per_chunk(c, p) * p->esz, bytes = count * p->esz;
  const char *s = send;
  char *r = recv;
  for (size_t off = 0; off < bytes; off += per) {
    size_t n = bytes - off < per ? bytes - off : per;
    HCCL_TRY(hccl__prim_step(p, from, to, s + off, to ? NULL : r + off, n));
  }
  return HCCL_SUCCESS;
}
