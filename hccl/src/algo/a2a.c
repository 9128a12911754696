/*
 * a2a.c - the collectives where every rank has something different for every other:
 * gather and scatter (direct, to and from the root), and all-to-all(v) (pairwise).
 *
 * Gather: each non-root sends its block straight to the root over its own link; the root
 * receives from root+1, root+2, ... in turn, while the others' first chunks already wait in
 * its slots. Scatter is the reverse. With one link per pair there is no hop to save: a tree
 * would move every byte more than once.
 *
 * All-to-all: p-1 steps; in step k rank i sends its block for (i+k) mod p and receives the
 * block of (i-k) mod p, chunk by chunk interleaved (prim_sendrecv), so every rank sends and
 * receives in every step and no rank waits for a slot another rank will only free after it:
 *
 *   step 1:  0->1  1->2  2->3  3->0        step 2:  0->2  1->3  2->0  3->1   ...
 *
 * The own block is a local copy. Blocks may differ in size (alltoallv) or be empty; every
 * block still travels as a framed message (prims.h), so a rank whose expected size differs
 * from what its peer sends always finds out, names the peer, and aborts the communicator.
 * A sender learns it too: before returning, every rank drains the links it sent on (waits
 * until the receivers released its messages), and a receiver that refused one aborts instead.
 *
 * These move bytes and never reduce, so they run with p->esz == 1: the block sizes are in
 * bytes, and a sender and a receiver with different element types chunk the same way.
 */
#include <string.h>

#include "algo.h"
#include "log.h"

/* The link to member r, made now if this is its first use (group.c). */
#define LINK(r, l) HCCL_TRY(hccl__group_link_get(g, (r), &(l)))

static size_t blk_off(const struct hccl_blocks *b, uint32_t j) {
  return (size_t)(b->displs ? b->displs[j] : (uint64_t)j * b->count) * b->esz;
}
static size_t blk_bytes(const struct hccl_blocks *b, uint32_t j) {
  return (size_t)(b->counts ? b->counts[j] : b->count) * b->esz;
}

HcclResult hccl__direct_gather(const struct hccl_group *g, const struct hccl_prim *p,
                               const void *send, void *recv, size_t bytes, uint32_t root) {
  uint32_t n = g->n;
  struct hccl_link *l;
  if (g->me != root) {
    LINK(root, l);
    HCCL_TRY(hccl__prim_sendrecv(p, l, send, bytes, NULL, NULL, NULL, 0));
    return hccl__prim_drain(p, l);
  }
  char *out = recv;
  if (out + (size_t)root * bytes != send) memmove(out + (size_t)root * bytes, send, bytes);
  for (uint32_t k = 1; k < n; k++) {
    uint32_t r = (root + k) % n;
    LINK(r, l);
    HCCL_TRY(hccl__prim_sendrecv(p, NULL, NULL, 0, l, NULL, out + (size_t)r * bytes, bytes));
  }
  return HCCL_SUCCESS;
}

HcclResult hccl__direct_scatter(const struct hccl_group *g, const struct hccl_prim *p,
                                const void *send, void *recv, size_t bytes, uint32_t root) {
  uint32_t n = g->n;
  struct hccl_link *l;
  if (g->me != root) {
    LINK(root, l);
    return hccl__prim_sendrecv(p, NULL, NULL, 0, l, NULL, recv, bytes);
  }
  const char *in = send;
  for (uint32_t k = 1; k < n; k++) {
    uint32_t r = (root + k) % n;
    LINK(r, l);
    HCCL_TRY(hccl__prim_sendrecv(p, l, in + (size_t)r * bytes, bytes, NULL, NULL, NULL, 0));
  }
  if (in + (size_t)root * bytes != recv) memmove(recv, in + (size_t)root * bytes, bytes);
  for (uint32_t k = 1; k < n; k++)
    HCCL_TRY(hccl__prim_drain(p, hccl__group_link(g, (root + k) % n)));
  return HCCL_SUCCESS;
}

HcclResult hccl__pairwise_alltoall(const struct hccl_group *g, const struct hccl_prim *p,
                                   const void *send, const struct hccl_blocks *sb, void *recv,
                                   const struct hccl_blocks *rb) {
  uint32_t n = g->n, me = g->me;
  const char *in = send;
  char *out = recv;
  /* Equal sizes of the own block are an argument check (coll.c). */
  if (blk_bytes(sb, me)) memcpy(out + blk_off(rb, me), in + blk_off(sb, me), blk_bytes(sb, me));
  for (uint32_t k = 1; k < n; k++) {
    uint32_t to = (me + k) % n, from = (me + n - k) % n;
    struct hccl_link *lt, *lf;
    LINK(to, lt);
    LINK(from, lf);
    HCCL_TRY(hccl__prim_sendrecv(p, lt, in + blk_off(sb, to), blk_bytes(sb, to), lf, NULL,
                                 out + blk_off(rb, from), blk_bytes(rb, from)));
  }
  for (uint32_t k = 1; k < n; k++)
    HCCL_TRY(hccl__prim_drain(p, hccl__group_link(g, (me + k) % n)));
  return HCCL_SUCCESS;
}
