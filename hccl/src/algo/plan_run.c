/*
 * plan_run.c - runs one call's plan (plan.h, made by plan.c): its candidates in order, each
 * that declines (zero-copy when some rank's buffers are not HcclMemAlloc memory, one-shot or
 * staged when some rank has no area) handing on to the next, the last (the cost model's
 * choice) always running; keeps the zero-copy back-off (struct hccl_zcopy_offers) as offers
 * run or decline; returns which candidate ran (struct hccl_ran). The two-level allreduce tries
 * its zero-copy and staged forms in its steps inside servers (hier.c), in one call. The plan is
 * read only: the planner prices and chooses, this file runs.
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

/* Whether plan lists algo among its candidates. */
static bool listed(const struct hccl_plan *plan, enum hccl_plan_algo algo) {
  for (uint32_t i = 0; i < plan->ncand; i++)
    if (plan->cand[i].algo == algo) return true;
  return false;
}

/* *ran: plan's candidate algo, as the plan lists it (its name too). */
static void ran_as(const struct hccl_plan *plan, enum hccl_plan_algo algo, struct hccl_ran *ran) {
  for (uint32_t i = 0; i < plan->ncand; i++)
    if (plan->cand[i].algo == algo)
      *ran = (struct hccl_ran){.algo = algo, .name = plan->cand[i].name};
}

/* The two-level allreduce, its steps inside the servers offered zero-copy and staged when the
 * plan lists those forms; *ran says which form ran. */
static HcclResult run_hier(const struct hccl_plan_view *v, const struct hccl_plan *plan,
                           struct hccl_zcopy_offers *b, const struct hccl_prim *p,
                           const struct hccl_call *call, struct hccl_ran *ran) {
  enum hccl_plan_algo algo = hccl__plan_last(plan)->algo;
  bool hd = algo == HCCL_PLAN_HIER_HD;
  bool zcopy = b && listed(plan, hd ? HCCL_PLAN_HIER_ZCOPY_HD : HCCL_PLAN_HIER_ZCOPY_RING);
  bool offered = zcopy,
       staged = listed(plan, hd ? HCCL_PLAN_HIER_STAGED_HD : HCCL_PLAN_HIER_STAGED_RING);
  HCCL_TRY(hccl__hier_allreduce(v->local, v->cross, hd ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING,
                                p, call->send, call->recv, call->count, &zcopy, &staged));
  if (offered) settle_offer(b, zcopy);
  if (zcopy) algo = hd ? HCCL_PLAN_HIER_ZCOPY_HD : HCCL_PLAN_HIER_ZCOPY_RING;
  if (staged) algo = hd ? HCCL_PLAN_HIER_STAGED_HD : HCCL_PLAN_HIER_STAGED_RING;
  ran_as(plan, algo, ran);
  return HCCL_SUCCESS;
}

/* A broadcast or reduce through leaders (algo): where the root sits, from v's placement. */
static HcclResult run_lead_rooted(const struct hccl_plan_view *v, const struct hccl_plan *plan,
                                  enum hccl_plan_algo algo, const struct hccl_prim *p,
                                  const struct hccl_call *call) {
  uint32_t me = v->world->rank[v->world->me];
  struct hccl_lead_root root = {.server = v->server_of[call->root],
                                .local = v->local_index[call->root],
                                .home = v->server_of[call->root] == v->server_of[me]};
  enum hccl_algo_kind inside = plan->tree_inside ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
  bool tree = algo == HCCL_PLAN_LEAD_TREE_BROADCAST || algo == HCCL_PLAN_LEAD_TREE_REDUCE;
  enum hccl_algo_kind between = tree ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
  if (call->kind == HCCL_K_BROADCAST)
    return hccl__lead_broadcast(v->local, v->cross, inside, between, p, call->recv, call->count,
                                &root);
  return hccl__lead_reduce(v->local, v->cross, inside, between, p, call->send, call->recv,
                           call->count, &root);
}

/* Runs candidate algo of plan for call; *ran false when it declined (zero-copy, one-shot,
 * staged) and the next candidate is to run, true when it ran (every other algorithm). */
static HcclResult run_one(const struct hccl_plan_view *v, const struct hccl_plan *plan,
                          enum hccl_plan_algo algo, struct hccl_zcopy_offers *b,
                          const struct hccl_prim *p, const struct hccl_call *call, bool *ran) {
  const struct hccl_group *g = v->world; /* member k is rank k: roots stay as they are */
  struct hccl_prim move = *p;
  move.esz = 1;
  move.reduce = NULL;
  size_t bytes = call->bytes;
  *ran = true;
  switch (algo) {
  case HCCL_PLAN_ZERO_COPY: {
    struct hccl_zcopy_call z;
    *ran = false;
    /* Listed only for a call that counts in a back-off (b), whose collective has a zero-copy
     * form: otherwise it declines. */
    if (!b || !hccl__plan_zcopy_call(call, &z)) return HCCL_SUCCESS;
    HCCL_TRY(hccl__zcopy(v->world, p, &z, ran));
    settle_offer(b, *ran);
    return HCCL_SUCCESS;
  }
  case HCCL_PLAN_ONESHOT:
    return hccl__oneshot_allreduce(g, p, call->send, call->recv, call->count, ran);
  case HCCL_PLAN_STAGED:
    return hccl__staged_allreduce(g, p, call->send, call->recv, call->count, NULL, NULL, ran);
  case HCCL_PLAN_LOCAL: {
    bool moves = call->kind != HCCL_K_BARRIER && call->kind != HCCL_K_BROADCAST;
    if (moves && bytes && p->red && p->red->only) /* one rank's premul sum: its input scaled */
      p->red->only(call->recv, call->send, call->send, call->count, &p->red->s);
    else if (moves && bytes && call->recv && call->recv != call->send)
      memcpy(call->recv, call->send, bytes);
    return HCCL_SUCCESS;
  }
  case HCCL_PLAN_HIER_ZCOPY_RING:
  case HCCL_PLAN_HIER_ZCOPY_HD:
  case HCCL_PLAN_HIER_STAGED_RING:
  case HCCL_PLAN_HIER_STAGED_HD:
    break; /* run_hier, below */
  case HCCL_PLAN_RING_ALLREDUCE:
    return hccl__ring_allreduce(g, p, call->send, call->recv, call->count);
  case HCCL_PLAN_HD_ALLREDUCE:
    return hccl__hd_allreduce(g, p, call->send, call->recv, call->count);
  case HCCL_PLAN_HIER_RING:
  case HCCL_PLAN_HIER_HD:
    break; /* run_hier, below */
  case HCCL_PLAN_LEAD_RING:
  case HCCL_PLAN_LEAD_HD:
    return hccl__lead_allreduce(
        v->local, v->cross, plan->tree_inside ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING,
        algo == HCCL_PLAN_LEAD_HD ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING, p, call->send,
        call->recv, call->count);
  case HCCL_PLAN_LEAD_CHAIN_BROADCAST:
  case HCCL_PLAN_LEAD_TREE_BROADCAST:
  case HCCL_PLAN_LEAD_CHAIN_REDUCE:
  case HCCL_PLAN_LEAD_TREE_REDUCE:
    return run_lead_rooted(v, plan, algo, p, call);
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
                    (int)algo, (int)call->kind);
}

HcclResult hccl__plan_run(const struct hccl_plan_view *v, const struct hccl_plan *plan,
                          const struct hccl_prim *p, const struct hccl_call *call,
                          struct hccl_ran *ran) {
  struct hccl_zcopy_offers *b = count_offer(v, plan, call);
  if (hccl__plan_two_level(hccl__plan_last(plan)->algo))
    return run_hier(v, plan, b, p, call, ran);
  for (uint32_t i = 0; i < plan->ncand; i++) {
    bool done;
    HCCL_TRY(run_one(v, plan, plan->cand[i].algo, b, p, call, &done));
    if (done) {
      *ran = (struct hccl_ran){.algo = plan->cand[i].algo, .name = plan->cand[i].name};
      return HCCL_SUCCESS;
    }
  }
  return hccl__fail(HCCL_E_INTERNAL,
                    "a plan of %u candidates for collective %d: every one declined, the last too",
                    plan->ncand, (int)call->kind);
}
