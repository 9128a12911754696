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
 *
 * When every member of the server passes HcclMemAlloc buffers (a DDP bucket, torch_hccl's
 * allocator), steps 1 and 3 run zero-copy (zcopy.c): each member reduces its shard straight
 * from the others' inputs and, after step 2, copies it straight into their outputs, instead
 * of passing every block through a link's slot (a copy in, and for the allgather a copy out).
 * The shard is the same cut and is reduced in the same order either way, so the results are
 * the same bits. Otherwise, when the plan says so, they run staged (staged.c): each member
 * copies its input into a staging area the others map once, and each block is reduced from
 * there, the same cut in the same order again.
 *
 * Servers of different counts (a shrink's survivors, topo/place.h: 2 + 1, 4 + 2 + 1) have no
 * shard that every server can own, so hccl__lead_allreduce runs the form through leaders
 * (each server's local index 0) instead:
 *
 *   server A: a0 a1 a2 a3     server B: b0 b1     server C: c0
 *   1. reduce to a0 in A, to b0 in B (chain or binomial tree over device links)
 *   2. allreduce of the whole buffer among a0, b0, c0 (the `cross` group, the leaders)
 *   3. broadcast from a0 in A, from b0 in B
 *
 * Each byte crosses the network 2(S-1)/S times per leader instead of the flat ring's
 * 2(p-1)/p per rank, and the network's latency is paid over S members, not p.
 *
 * Broadcast and reduce on such servers run through leaders too (hccl__lead_broadcast,
 * hccl__lead_reduce), the root's server first for a broadcast and last for a reduce:
 *
 *   broadcast from a2:  1. a2 -> A (so a0 has it)  2. a0 -> b0, c0  3. b0 -> B
 *   reduce to a2:       1. B -> b0                 2. b0, c0 -> a0  3. A -> a2 (a0's input:
 *                                                                      step 2's result)
 *
 * Each step a chain or a binomial tree. The network's latency is paid over S leaders instead
 * of p ranks; the bytes cross it once as in the flat forms, but the steps inside servers no
 * longer overlap with it, so the cost model keeps the flat forms for long messages.
 */
#include <string.h>

#include "algo.h"
#include "log.h"

struct cross_step {
  const struct hccl_group *cross;
  enum hccl_algo_kind kind;
  const struct hccl_prim *p;
};

/* Step 2 on this member's shard (n elements, in place). Every member of the cross group has
 * the same local index, so the same shard size: a shard of zero elements is skipped by all of
 * them alike. */
static HcclResult cross_allreduce(void *arg, void *shard, size_t n) {
  const struct cross_step *s = arg;
  if (s->cross->n < 2 || n == 0) return HCCL_SUCCESS;
  if (s->kind == HCCL_ALGO_KIND_HD) return hccl__hd_allreduce(s->cross, s->p, shard, shard, n);
  return hccl__ring_allreduce(s->cross, s->p, shard, shard, n);
}

HcclResult hccl__hier_allreduce(const struct hccl_group *local, const struct hccl_group *cross,
                                enum hccl_algo_kind cross_kind, const struct hccl_prim *p,
                                const void *send, void *recv, size_t count, bool *zcopy,
                                bool *staged) {
  /* The shard's allreduce runs in place on a shard just written: its stores stay ordinary. */
  struct hccl_prim cp = *p;
  cp.stream_out = false;
  struct cross_step step = {.cross = cross, .kind = cross_kind, .p = &cp};
  bool offer_staged = *staged;
  *staged = false;
  if (*zcopy && local->n > 1) {
    struct hccl_zcopy_call z = {.kind = HCCL_ZCOPY_ALLREDUCE, .send = send, .recv = recv,
                                .count = count, .between = cross_allreduce, .between_arg = &step};
    HCCL_TRY(hccl__zcopy(local, p, &z, zcopy));
    if (*zcopy) return HCCL_SUCCESS;
  }
  *zcopy = false;
  if (offer_staged && local->n > 1) {
    HCCL_TRY(hccl__staged_allreduce(local, p, send, recv, count, cross_allreduce, &step, staged));
    if (*staged) return HCCL_SUCCESS;
  }
  size_t es = p->esz, L = local->n, off;
  size_t n = hccl__even_block(count, local->n, local->me, &off);
  struct hccl_prim part = hccl__prim_partial(p); /* the step between servers finishes */
  if (L > 1)
    HCCL_TRY(hccl__ring_reduce_scatter_split(local, &part, send, recv, count));
  else if (send != recv)
    memcpy(recv, send, count * es);
  HCCL_TRY(cross_allreduce(&step, (char *)recv + off * es, n));
  if (L > 1) HCCL_TRY(hccl__ring_allgather_split(local, p, recv, count));
  return HCCL_SUCCESS;
}

HcclResult hccl__lead_allreduce(const struct hccl_group *local, const struct hccl_group *cross,
                                enum hccl_algo_kind inside, enum hccl_algo_kind between,
                                const struct hccl_prim *p, const void *send, void *recv,
                                size_t count) {
  struct hccl_prim cp = *p;
  cp.stream_out = false;
  struct cross_step step = {.cross = cross, .kind = between, .p = &cp};
  struct hccl_prim part = hccl__prim_partial(p); /* the step between servers finishes */
  bool tree = inside == HCCL_ALGO_KIND_HD;
  if (local->n > 1)
    HCCL_TRY(tree ? hccl__binomial_reduce(local, &part, send, recv, count, 0)
                  : hccl__chain_reduce(local, &part, send, recv, count, 0));
  else if (send != recv)
    memcpy(recv, send, count * p->esz);
  if (local->me == 0) HCCL_TRY(cross_allreduce(&step, recv, count));
  if (local->n < 2) return HCCL_SUCCESS;
  return tree ? hccl__binomial_broadcast(local, p, recv, count, 0)
              : hccl__chain_broadcast(local, p, recv, count, 0);
}

static HcclResult rooted_bcast(const struct hccl_group *g, enum hccl_algo_kind kind,
                               const struct hccl_prim *p, void *buf, size_t count,
                               uint32_t root) {
  if (g->n < 2) return HCCL_SUCCESS;
  return kind == HCCL_ALGO_KIND_HD ? hccl__binomial_broadcast(g, p, buf, count, root)
                                   : hccl__chain_broadcast(g, p, buf, count, root);
}

static HcclResult rooted_reduce(const struct hccl_group *g, enum hccl_algo_kind kind,
                                const struct hccl_prim *p, const void *send, void *recv,
                                size_t count, uint32_t root) {
  return kind == HCCL_ALGO_KIND_HD ? hccl__binomial_reduce(g, p, send, recv, count, root)
                                   : hccl__chain_reduce(g, p, send, recv, count, root);
}

HcclResult hccl__lead_broadcast(const struct hccl_group *local, const struct hccl_group *cross,
                                enum hccl_algo_kind inside, enum hccl_algo_kind between,
                                const struct hccl_prim *p, void *buf, size_t count,
                                const struct hccl_lead_root *root) {
  struct hccl_prim cp = *p; /* what steps 1 and 2 write, a leader sends on */
  cp.stream_out = false;
  bool home = root->home;
  if (home) HCCL_TRY(rooted_bcast(local, inside, &cp, buf, count, root->local));
  if (local->me == 0) HCCL_TRY(rooted_bcast(cross, between, &cp, buf, count, root->server));
  if (!home) HCCL_TRY(rooted_bcast(local, inside, p, buf, count, 0));
  return HCCL_SUCCESS;
}

HcclResult hccl__lead_reduce(const struct hccl_group *local, const struct hccl_group *cross,
                             enum hccl_algo_kind inside, enum hccl_algo_kind between,
                             const struct hccl_prim *p, const void *send, void *recv,
                             size_t count, const struct hccl_lead_root *root) {
  struct hccl_prim cp = *p; /* steps 1 and 2 write the communicator's temp, not the output */
  cp.stream_out = false;
  struct hccl_prim part = hccl__prim_partial(&cp); /* the last step finishes */
  bool home = root->home, leader = local->me == 0, one = local->n < 2;
  size_t bytes = count * p->esz;
  /* A leader's partial result: its server's (step 1), or on the root's server all the others'
   * and its own input (step 2), which step 3 reduces with the rest of the root's server. */
  void *acc = NULL;
  if (leader && bytes && !(home && one) && !(acc = hccl__group_temp(local, bytes)))
    return HCCL_E_MEMORY;
  const void *in = send;
  if (!home && !one) {
    HCCL_TRY(rooted_reduce(local, inside, &part, send, leader ? acc : recv, count, 0));
    in = acc;
  }
  if (leader && cross->n > 1) {
    void *out = home ? (one ? recv : acc) : acc; /* written on the root's server's leader only */
    HCCL_TRY(rooted_reduce(cross, between, home && one ? &cp : &part, in, out, count,
                           root->server));
    in = out;
  }
  if (home && !one)
    HCCL_TRY(rooted_reduce(local, inside, p, leader ? in : send, recv, count, root->local));
  return HCCL_SUCCESS;
}
