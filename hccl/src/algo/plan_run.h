/*
 * plan_run.h - runs one call's plan (plan.h): the runner, apart from the planner that prices
 * and chooses (plan.c), as NCCL's enqueue.cc is apart from its tuning model.
 */
#ifndef HCCL_PLAN_RUN_H
#define HCCL_PLAN_RUN_H

#include "algo.h"
#include "hccl.h"
#include "plan.h"

/* What ran of a plan: one of its candidates, as the plan lists it. */
struct hccl_ran {
  enum hccl_plan_algo algo;
  const char *name; /* as the trace and the flight recorder print it */
};

/* Runs plan for call over v->world (member k is rank k), read-only: its candidates in order
 * (plan.h), each that declines handing on to the next, the last always running; the
 * two-level allreduce's zero-copy and staged forms tried in its steps inside servers. Counts an
 * eligible call in v->offers' back-off and settles it as the offer ran or declined. p is the
 * call's primitive (its kernel for a reducing call, its stamp); alltoall(v), gather and scatter
 * move bytes with a copy of it whose esz is 1. Returns the algorithm's result; on success *ran
 * is the candidate that ran. */
HcclResult hccl__plan_run(const struct hccl_plan_view *v, const struct hccl_plan *plan,
                          const struct hccl_prim *p, const struct hccl_call *call,
                          struct hccl_ran *ran);

#endif
