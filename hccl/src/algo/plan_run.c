/*
 * plan_run.c - runs one call's plan (plan.h, made by plan.c): offers zero-copy first when the
 * plan says so and keeps the zero-copy back-off, then the one-shot or the staged allreduce when
 * the plan says so, then the plan's algorithm; the two-level allreduce with its steps inside the
 * servers offered zero-copy or staged. The planner prices and chooses; this file only runs.
 */
#include <string.h>

#include "log.h"
#include "plan.h"
#include "plan_run.h"

/* Counts an eligible call in its collective's back-off (plan_offer's comment); the back-off,
 * or NULL when the call is not eligible. */
static struct hccl_zcopy_offers *count_offer(const struct hccl_plan_view *v,
                                             const struct hccl_plan *plan,
                                             const struct hccl_call *call) {
  struct hccl_zcopy_call z;
  if (!plan->zcopy_eligible || !hccl__plan_zcopy_call(call, &z)) return NULL;
  v->offers[z.kind].calls++;
  return &v->offers[z.kind];
}

/* The back-off after an offer that ran (reset) or did not (doubled, up to 1024). */
static void settle_offer(struct hccl_zcopy_offers *b, bool ran) {
  if (ran)
    b->skip = 0;
  else
    b->skip = b->skip ? (b->skip < 1024 ? 2 * b->skip : 1024) : 1;
  b->next = b->calls + b->skip;
}

/* The two-level allreduce, its steps inside the servers offered zero-copy when the plan says
 * so; plan->algo and plan->name say which form ran. */
static HcclResult run_hier(const struct hccl_plan_view *v, struct hccl_plan *plan,
                           struct hccl_zcopy_offers *b, const struct hccl_prim *p,
                           const struct hccl_call *call) {
  bool hd = plan->algo == HCCL_PLAN_HIER_HD, zcopy = b && plan->zcopy_offer;
  bool offered = zcopy, staged = plan->staged;
  HCCL_TRY(hccl__hier_allreduce(v->local, v->cross, hd ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING,
                                p, call->send, call->recv, call->count, &zcopy, &staged));
  if (offered) settle_offer(b, zcopy);
  if (zcopy) plan->algo = hd ? HCCL_PLAN_HIER_ZCOPY_HD : HCCL_PLAN_HIER_ZCOPY_RING;
  if (staged) plan->algo = hd ? HCCL_PLAN_HIER_STAGED_HD : HCCL_PLAN_HIER_STAGED_RING;
  plan->name = hccl__plan_name(plan->algo);
  return HCCL_SUCCESS;
}

/* A broadcast or reduce through leaders: where the root sits, from v's placement. */
static HcclResult run_lead_rooted(const struct hccl_plan_view *v, const struct hccl_plan *plan,
                                  const struct hccl_prim *p, const struct hccl_call *call) {
  uint32_t me = v->world->rank[v->world->me];
  struct hccl_lead_root root = {.server = v->server_of[call->root],
                                .local = v->local_index[call->root],
                                .home = v->server_of[call->root] == v->server_of[me]};
  enum hccl_algo_kind inside = plan->tree_inside ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
  bool tree = plan->algo == HCCL_PLAN_LEAD_TREE_BROADCAST || plan->algo == HCCL_PLAN_LEAD_TREE_REDUCE;
  enum hccl_algo_kind between = tree ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
  if (call->kind == HCCL_K_BROADCAST)
    return hccl__lead_broadcast(v->local, v->cross, inside, between, p, call->recv, call->count,
                                &root);
  return hccl__lead_reduce(v->local, v->cross, inside, between, p, call->send, call->recv,
                           call->count, &root);
}

HcclResult hccl__plan_run(const struct hccl_plan_view *v, struct hccl_plan *plan,
                          const struct hccl_prim *p, const struct hccl_call *call) {
  const struct hccl_group *g = v->world; /* member k is rank k: roots stay as they are */
  struct hccl_prim move = *p;
  move.esz = 1;
  move.reduce = NULL;
  size_t bytes = call->bytes;
  struct hccl_zcopy_offers *b = count_offer(v, plan, call);
  if (hccl__plan_two_level(plan->algo)) return run_hier(v, plan, b, p, call);
  if (b && plan->zcopy_offer) {
    struct hccl_zcopy_call z;
    bool ran;
    hccl__plan_zcopy_call(call, &z);
    HCCL_TRY(hccl__zcopy(v->world, p, &z, &ran));
    settle_offer(b, ran);
    if (ran) {
      plan->algo = HCCL_PLAN_ZERO_COPY;
      plan->name = hccl__plan_name(HCCL_PLAN_ZERO_COPY);
      return HCCL_SUCCESS;
    }
  }
  if (plan->oneshot) {
    bool ran;
    HCCL_TRY(hccl__oneshot_allreduce(g, p, call->send, call->recv, call->count, &ran));
    if (ran) {
      plan->algo = HCCL_PLAN_ONESHOT;
      plan->name = hccl__plan_name(HCCL_PLAN_ONESHOT);
      return HCCL_SUCCESS;
    }
  }
  if (plan->staged) {
    bool ran;
    HCCL_TRY(hccl__staged_allreduce(g, p, call->send, call->recv, call->count, NULL, NULL, &ran));
    if (ran) {
      plan->algo = HCCL_PLAN_STAGED;
      plan->name = hccl__plan_name(HCCL_PLAN_STAGED);
      return HCCL_SUCCESS;
    }
  }
  switch (plan->algo) {
  case HCCL_PLAN_LOCAL: {
    bool moves = call->kind != HCCL_K_BARRIER && call->kind != HCCL_K_BROADCAST;
    if (moves && bytes && p->red && p->red->only) /* one rank's premul sum: its input scaled */
      p->red->only(call->recv, call->send, call->send, call->count, &p->red->s);
    else if (moves && bytes && call->recv && call->recv != call->send)
      memcpy(call->recv, call->send, bytes);
    return HCCL_SUCCESS;
  }
  case HCCL_PLAN_ZERO_COPY:
  case HCCL_PLAN_HIER_ZCOPY_RING:
  case HCCL_PLAN_HIER_ZCOPY_HD:
  case HCCL_PLAN_STAGED:
  case HCCL_PLAN_ONESHOT:
  case HCCL_PLAN_HIER_STAGED_RING:
  case HCCL_PLAN_HIER_STAGED_HD:
    break; /* only ever set once it ran */
  case HCCL_PLAN_RING_ALLREDUCE:
    return hccl__ring_allreduce(g, p, call->send, call->recv, call->count);
  case HCCL_PLAN_HD_ALLREDUCE:
    return hccl__hd_allreduce(g, p, call->send, call->recv, call->count);
  case HCCL_PLAN_HIER_RING:
  case HCCL_PLAN_HIER_HD:
    break; /* run_hier, above */
  case HCCL_PLAN_LEAD_RING:
  case HCCL_PLAN_LEAD_HD:
    return hccl__lead_allreduce(
        v->local, v->cross, plan->tree_inside ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING,
        plan->algo == HCCL_PLAN_LEAD_HD ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING, p, call->send,
        call->recv, call->count);
  case HCCL_PLAN_LEAD_CHAIN_BROADCAST:
  case HCCL_PLAN_LEAD_TREE_BROADCAST:
  case HCCL_PLAN_LEAD_CHAIN_REDUCE:
  case HCCL_PLAN_LEAD_TREE_REDUCE:
    return run_lead_rooted(v, plan, p, call);
  case HCCL_PLAN_RING_REDUCE_SCATTER:
    return hccl__ring_reduce_scatter(g, p, call->send, call->recv, call->count);
  case HCCL_PLAN_RD_REDUCE_SCATTER: {
    /* Small: the whole reduced in log2(n) steps, then this rank's block of it. */
    char *all = hccl__group_temp(g, bytes * g->n);
    if (!all) return HCCL_E_MEMORY;
    HCCL_TRY(hccl__hd_allreduce(g, p, call->send, all, call->count * g->n));
    memcpy(call->recv, all + bytes * g->me, bytes);
    return HCCL_SUCCESS;
  }
  case HCCL_PLAN_RING_ALLGATHER:
    return hccl__ring_allgather(g, p, call->send, call->recv, call->count);
  case HCCL_PLAN_BRUCK_ALLGATHER:
    return hccl__bruck_allgather(g, p, call->send, call->recv, call->count);
  case HCCL_PLAN_CHAIN_BROADCAST:
    return hccl__chain_broadcast(g, p, call->recv, call->count, call->root);
  case HCCL_PLAN_BINOMIAL_BROADCAST:
    return hccl__binomial_broadcast(g, p, call->recv, call->count, call->root);
  case HCCL_PLAN_CHAIN_REDUCE:
    return hccl__chain_reduce(g, p, call->send, call->recv, call->count, call->root);
  case HCCL_PLAN_BINOMIAL_REDUCE:
    return hccl__binomial_reduce(g, p, call->send, call->recv, call->count, call->root);
  case HCCL_PLAN_DISSEMINATION_BARRIER:
    return hccl__dissemination_barrier(g, p);
  case HCCL_PLAN_DIRECT_GATHER:
    return hccl__direct_gather(v->world, &move, call->send, call->recv, bytes, call->root);
  case HCCL_PLAN_DIRECT_SCATTER:
    return hccl__direct_scatter(v->world, &move, call->send, call->recv, bytes, call->root);
  case HCCL_PLAN_PAIRWISE_ALLTOALL:
    return hccl__pairwise_alltoall(v->world, &move, call->send, &call->sb, call->recv, &call->rb);
  }
  return hccl__fail(HCCL_E_INTERNAL, "a plan with no algorithm (%d) for collective %d",
                    (int)plan->algo, (int)call->kind);
}
