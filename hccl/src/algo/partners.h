/*
 * partners.h - who exchanges with whom in hd.c's algorithms and barrier.c's barrier, as pure
 * arithmetic on ring positions: hd.c and barrier.c walk these exchanges, group.c makes their
 * links at init, and neither side includes the other.
 *
 * Halving-doubling runs over p2 = 2^k "active" positions (the largest power of two <= np).
 * With r = np - p2 extra positions, the first 2r positions pair up (2i, 2i + 1): the even one
 * folds its vector into the odd one and sits out. Active virtual index v lives at ring
 * position hccl__hd_active_pos(v, r) and exchanges with v ^ mask for each mask < p2. Trees
 * (any root) and the dissemination barrier use the positions 2^k away either side.
 */
#ifndef HCCL_PARTNERS_H
#define HCCL_PARTNERS_H

#include <stdint.h>

/* The largest power of two <= np (np >= 1). */
static inline uint32_t hccl__hd_p2(uint32_t np) {
  uint32_t p2 = 1;
  while (p2 * 2 <= np)
    p2 *= 2;
  return p2;
}

/* The ring position of active virtual index v, with r = np - p2 folded pairs. */
static inline uint32_t hccl__hd_active_pos(uint32_t v, uint32_t r) {
  return v < r ? 2 * v + 1 : v + r;
}

/* The most positions hccl__hd_partner_positions writes: 2 per power of two below 2^32, the
 * fold partner, 1 per mask. */
#define HCCL_HD_MAX_PARTNERS (2 * 32 + 1 + 32)

/* Writes into out the ring positions (in [0, np), possibly repeated) that position pos of np
 * may exchange with in hd.c's algorithms: the positions +-2^k away (trees, barrier), the fold
 * partner, and the active partners v ^ mask. Returns how many; 0 when np < 2. */
static inline uint32_t hccl__hd_partner_positions(uint32_t np, uint32_t pos,
                                                  uint32_t out[HCCL_HD_MAX_PARTNERS]) {
  uint32_t n = 0;
  if (np < 2) return 0;
  uint32_t p2 = hccl__hd_p2(np), r = np - p2;
  for (uint32_t k = 1; k < np; k <<= 1) {
    out[n++] = (pos + k) % np;
    out[n++] = (pos + np - k) % np;
  }
  if (pos < 2 * r) out[n++] = pos % 2 ? pos - 1 : pos + 1;
  if (pos < 2 * r && pos % 2 == 0) return n;
  uint32_t v = pos < 2 * r ? pos / 2 : pos - r;
  for (uint32_t mask = 1; mask < p2; mask <<= 1)
    out[n++] = hccl__hd_active_pos(v ^ mask, r);
  return n;
}

#endif
