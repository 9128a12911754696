/*
 * plan_run.h - runs one call's plan (plan.h): the runner, apart from the planner that prices
 * and chooses (plan.c), as NCCL's enqueue.cc is apart from its tuning model.
 */
#ifndef HCCL_PLAN_RUN_H
#define HCCL_PLAN_RUN_H

#include "algo.h"
#include "hccl.h"
#include "plan.h"

/* Runs plan for call: offers zero-copy first when the plan says so (plan->algo and plan->name
 * become HCCL_PLAN_ZERO_COPY and "zero-copy" when it ran; for the two-level allreduce, whose
 * steps inside a server are what can run zero-copy, HCCL_PLAN_HIER_ZCOPY_*) and updates the
 * back-off in v->offers, then the one-shot path (HCCL_PLAN_ONESHOT) or the staged one
 * (HCCL_PLAN_STAGED, HCCL_PLAN_HIER_STAGED_*) when the plan says so, then plan->algo over v->world (member k is rank k). p is the call's
 * primitive (its kernel for a reducing call, its stamp); alltoall(v), gather and scatter move
 * bytes with a copy of it whose esz is 1. Returns the algorithm's result. */
HcclResult hccl__plan_run(const struct hccl_plan_view *v, struct hccl_plan *plan,
                          const struct hccl_prim *p, const struct hccl_call *call);

#endif
