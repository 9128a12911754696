/*
 * hd.c - the latency-side algorithms: recursive halving-doubling allreduce
 * (Rabenseifner), recursive doubling for messages of one slot, binomial-tree broadcast and
 * reduce, Bruck's allgather. (The dissemination barrier, over the same ring positions 2^k
 * away, is barrier.c.)
 *
 * Halving-doubling on p2 = 2^k ranks (positions in ring order):
 *
 *   halving (reduce-scatter)         doubling (allgather)
 *   mask 1: 0<->1 2<->3 ...  n/2     mask 4: 0<->4 ...       n/8
 *   mask 2: 0<->2 1<->3 ...  n/4     mask 2: 0<->2 ...       n/4
 *   mask 4: 0<->4 1<->5 ...  n/8     mask 1: 0<->1 ...       n/2
 *
 * so the largest exchanges are between ring neighbours (the same device group). When p is not
 * a power of two, the first 2r positions (r = p - p2) pair up: the even one hands its vector
 * to the odd one before, and gets the result back after. Who pairs with whom: partners.h.
 */
#include <string.h>

#include "algo.h"
#include "log.h"
#include "partners.h"

/* The link to the member holding virtual index v among the p2 active ones. */
static struct hccl_link *active_link(const struct hccl_group *g, uint32_t v, uint32_t r) {
  return hccl__group_link(g, g->ring[hccl__hd_active_pos(v, r)]);
}

/* The link to the member at ring position pos. */
static struct hccl_link *link_at(const struct hccl_group *g, uint32_t pos) {
  return hccl__group_link(g, g->ring[pos]);
}

HcclResult hccl__hd_allreduce(const struct hccl_group *g, const struct hccl_prim *p,
                              const void *send, void *recv, size_t count) {
  uint32_t np = g->n, pos = g->pos[g->me], p2 = hccl__hd_p2(np);
  uint32_t r = np - p2;
  size_t es = p->esz, bytes = count * es;
  const char *src = send;
  char *out = recv;

  uint32_t v;
  if (pos < 2 * r) {
    if (pos % 2 == 0) {
      struct hccl_link *partner = link_at(g, pos + 1);
      HCCL_TRY(hccl__prim_send(p, partner, send, bytes));
      return hccl__prim_recv(p, partner, recv, bytes);
    }
    struct hccl_link *partner = link_at(g, pos - 1);
    size_t per = partner->slot_bytes / es * es;
    for (size_t off = 0; off < bytes; off += per) {
      size_t n = bytes - off < per ? bytes - off : per;
      HCCL_TRY(hccl__prim_step(p, partner, NULL, src + off, out + off, n));
    }
    src = out;
    v = pos / 2;
  } else {
    v = pos - r;
  }

  /* The last exchange of the reducing half completes the elements this rank keeps. */
  struct hccl_prim last = hccl__prim_last(p);
  if (bytes <= g->chunk_bytes) {
    /* Recursive doubling: log2(p2) full exchanges, the fewest hops for small messages. */
    for (uint32_t mask = 1; mask < p2; mask <<= 1) {
      struct hccl_link *l = active_link(g, v ^ mask, r);
      HCCL_TRY(hccl__prim_exchange(mask << 1 < p2 ? p : &last, l, src, bytes, src, out, bytes));
      src = out;
    }
  } else {
    size_t lo[32], hi[32];
    size_t a = 0, b = count;
    int depth = 0;
    for (uint32_t mask = 1; mask < p2; mask <<= 1, depth++) {
      struct hccl_link *l = active_link(g, v ^ mask, r);
      size_t mid = a + (b - a) / 2;
      size_t ka, kb, sa, sb; /* keep [ka,kb), send [sa,sb) */
      if ((v & mask) == 0) {
        ka = a, kb = mid, sa = mid, sb = b;
      } else {
        ka = mid, kb = b, sa = a, sb = mid;
      }
      lo[depth] = a;
      hi[depth] = b;
      HCCL_TRY(hccl__prim_exchange(mask << 1 < p2 ? p : &last, l, src + sa * es, (sb - sa) * es,
                                   src + ka * es, out + ka * es, (kb - ka) * es));
      a = ka;
      b = kb;
      src = out;
    }
    for (uint32_t mask = p2 >> 1; mask >= 1; mask >>= 1) {
      depth--;
      struct hccl_link *l = active_link(g, v ^ mask, r);
      size_t pa, pb;         /* the partner's half of [lo, hi) */
      if ((v & mask) == 0) { /* we kept the lower half */
        pa = b, pb = hi[depth];
      } else {
        pa = lo[depth], pb = a;
      }
      HCCL_TRY(hccl__prim_exchange(p, l, out + a * es, (b - a) * es, NULL, out + pa * es,
                                   (pb - pa) * es));
      a = lo[depth];
      b = hi[depth];
    }
  }
  if (pos < 2 * r) HCCL_TRY(hccl__prim_send(p, link_at(g, pos - 1), out, bytes));
  return HCCL_SUCCESS;
}

/* Binomial tree over virtual ranks v = (pos - root pos) mod p: v receives from v - lowbit(v)
 * and sends to v + 2^j for every 2^j below lowbit(v). Chunks are pipelined: each chunk goes
 * down the whole tree before the next. */
static void tree_links(const struct hccl_group *g, uint32_t root, struct hccl_link **parent,
                       struct hccl_link **kids, int *nkids) {
  uint32_t np = g->n, rpos = g->pos[root];
  uint32_t v = (g->pos[g->me] + np - rpos) % np;
  uint32_t mask = 1;
  *parent = NULL;
  while (mask < np) {
    if (v & mask) {
      *parent = link_at(g, (v - mask + rpos) % np);
      break;
    }
    mask <<= 1;
  }
  *nkids = 0;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < np) kids[(*nkids)++] = link_at(g, (v + mask + rpos) % np);
}

HcclResult hccl__binomial_broadcast(const struct hccl_group *g, const struct hccl_prim *p,
                                    void *buf, size_t count, uint32_t root) {
  struct hccl_link *parent, *kids[32];
  int nk;
  tree_links(g, root, &parent, kids, &nk);
  size_t per = g->chunk_bytes / p->esz * p->esz, bytes = count * p->esz;
  char *b = buf;
  for (size_t off = 0; off < bytes; off += per) {
    size_t n = bytes - off < per ? bytes - off : per;
    if (parent) HCCL_TRY(hccl__prim_step(p, parent, NULL, NULL, b + off, n));
    for (int k = 0; k < nk; k++)
      HCCL_TRY(hccl__prim_step(p, NULL, kids[k], b + off, NULL, n));
  }
  return HCCL_SUCCESS;
}

HcclResult hccl__binomial_reduce(const struct hccl_group *g, const struct hccl_prim *p,
                                 const void *send, void *recv, size_t count, uint32_t root) {
  struct hccl_link *parent, *kids[32];
  int nk;
  tree_links(g, root, &parent, kids, &nk);
  size_t per = g->chunk_bytes / p->esz * p->esz, bytes = count * p->esz;
  const char *s = send;
  struct hccl_prim last = hccl__prim_last(p); /* the root's nearest child completes a chunk */
  for (size_t off = 0; off < bytes; off += per) {
    size_t n = bytes - off < per ? bytes - off : per;
    /* Accumulate in the output on the root, in scratch elsewhere; children in reverse order
     * of the broadcast's sends, the nearest last. */
    char *acc = parent ? g->scratch : (char *)recv + off;
    const char *cur = s + off;
    for (int k = nk - 1; k >= 0; k--) {
      HCCL_TRY(hccl__prim_step(k == 0 && !parent ? &last : p, kids[k], NULL, cur, acc, n));
      cur = acc;
    }
    if (parent)
      HCCL_TRY(hccl__prim_step(p, NULL, parent, cur, NULL, n));
    else if (cur != acc)
      memcpy(acc, cur, n);
  }
  return HCCL_SUCCESS;
}

/* Bruck's allgather: ceil(log2 p) steps for any p. A rank at ring position q keeps the blocks
 * in relative order, tmp[i] = the block of position q + i; in the step of distance d it sends
 * tmp[0, m) to position q - d and receives tmp[d, d + m) from position q + d, m = min(d, p - d),
 * one message each way; at the end each block is copied to its member's place in recv. Its
 * partners are the ring positions 2^k away, as the trees' and the barrier's. */
HcclResult hccl__bruck_allgather(const struct hccl_group *g, const struct hccl_prim *p,
                                 const void *send, void *recv, size_t count) {
  uint32_t np = g->n, q = g->pos[g->me];
  size_t blk = count * p->esz;
  char *out = recv, *tmp = hccl__group_temp(g, (size_t)np * blk);
  if (!tmp) return HCCL_E_MEMORY;
  memcpy(tmp, send, blk);
  HcclResult r = HCCL_SUCCESS;
  for (uint32_t d = 1; d < np && r == HCCL_SUCCESS; d <<= 1) {
    uint32_t m = d < np - d ? d : np - d;
    r = hccl__prim_sendrecv(p, link_at(g, (q + np - d) % np), tmp, (size_t)m * blk,
                            link_at(g, (q + d) % np), NULL, tmp + (size_t)d * blk,
                            (size_t)m * blk);
  }
  for (uint32_t i = 0; i < np && r == HCCL_SUCCESS; i++) {
    char *dst = out + (size_t)g->ring[(q + i) % np] * blk;
    if (dst != tmp + (size_t)i * blk) memcpy(dst, tmp + (size_t)i * blk, blk);
  }
  return r;
}
