/*
 * barrier.c - the dissemination barrier (Hensgen, Finkel and Manber): in round k each member
 * sends an empty message to the ring position 2^k ahead and waits for the one from 2^k behind,
 * so after ceil(log2 n) rounds every member has heard, directly or not, from every other.
 *
 *   n = 5, k = 1:  0->1 1->2 2->3 3->4 4->0
 *          k = 2:  0->2 1->3 2->4 3->0 4->1
 *          k = 4:  0->4 1->0 2->1 3->2 4->3
 *
 * The zero-copy and staged collectives (zcopy.c, staged.c) end with it, so nobody returns
 * while another member may still read its input or write its output; plan.c runs it as
 * HcclBarrier. Its partners are the ring positions 2^k away, as hd.c's trees' and Bruck's
 * allgather's, which hccl__group_partners names (partners.h), so its links exist from init.
 */
#include "algo.h"
#include "log.h"

HcclResult hccl__dissemination_barrier(const struct hccl_group *g, const struct hccl_prim *p) {
  uint32_t np = g->n, pos = g->pos[g->me];
  for (uint32_t k = 1; k < np; k <<= 1) {
    struct hccl_link *to = hccl__group_link(g, g->ring[(pos + k) % np]);
    struct hccl_link *from = hccl__group_link(g, g->ring[(pos + np - k) % np]);
    HCCL_TRY(hccl__prim_step(p, NULL, to, NULL, NULL, 0));
    HCCL_TRY(hccl__prim_step(p, from, NULL, NULL, NULL, 0));
  }
  return HCCL_SUCCESS;
}
