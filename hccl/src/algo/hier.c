/*
 * hier.c - the two-level allreduce for communicators that span servers, as HCCL and NCCL run
 * it: reduce-scatter inside each server over device links, allreduce of each shard between
 * the servers over the network (ring, or halving-doubling; the cost model picks), allgather
 * inside each server.
 *
 *   server A: a0 a1 a2 a3          server B: b0 b1 b2 b3
 *   1. reduce-scatter in A, in B:  member k holds shard k summed over its server
 *   2. allreduce of shard k between a_k and b_k (the `cross` group): shard k summed over all
 *   3. allgather in A, in B:       every member holds every shard
 *
 * Each byte crosses the network 2(S-1)/S / L times per rank instead of 2(p-1)/p times: the
 * L ranks of a server share the network traffic, each for its own shard.
 */
#include <string.h>

#include "algo.h"
#include "log.h"

HcclResult hccl__hier_allreduce(const struct hccl_group *local, const struct hccl_group *cross,
                                enum hccl_algo_kind cross_kind, const struct hccl_prim *p,
                                const void *send, void *recv, size_t count) {
  size_t es = p->esz, L = local->n, off;
  size_t n = hccl__even_block(count, local->n, local->me, &off);
  if (L > 1)
    HCCL_TRY(hccl__ring_reduce_scatter_split(local, p, send, recv, count));
  else if (send != recv)
    memcpy(recv, send, count * es);
  /* Every member of the cross group has this local index, so the same shard size: a shard of
   * zero elements is skipped by all of them alike. */
  char *shard = (char *)recv + off * es;
  if (cross->n > 1 && n > 0) {
    if (cross_kind == HCCL_ALGO_KIND_HD)
      HCCL_TRY(hccl__hd_allreduce(cross, p, shard, shard, n));
    else
      HCCL_TRY(hccl__ring_allreduce(cross, p, shard, shard, n));
  }
  if (L > 1) HCCL_TRY(hccl__ring_allgather_split(local, p, recv, count));
  return HCCL_SUCCESS;
}
