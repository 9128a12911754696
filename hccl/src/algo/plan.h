/*
 * plan.h - one plan per collective call, as NCCL's tuning makes it: the algorithms to try in
 * order (zero-copy offered first, then the one-shot or staged allreduce, each of which may
 * decline, then the cost model's choice), each with the name the trace and the flight recorder
 * give it when it ran, and the word HcclAllReduceAlgoName gives it. The cost model, HCCL_ALGO,
 * the zero-copy rule and the reading of its back-off all live in plan.c. The caller
 * (core/coll_run.c) makes one plan per call and hands it, read-only, to hccl__plan_run
 * (plan_run.c), which runs the candidates in order and says which one ran: nothing writes a
 * plan once it is made.
 *
 * The planner is given what it reads (struct hccl_plan_view), not the communicator, so it is a
 * pure function of its inputs and tests/algo/test_plan.c checks it on made-up server shapes.
 */
#ifndef HCCL_PLAN_H
#define HCCL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "coll_kind.h"
#include "settings.h"

/* One collective's zero-copy back-off (plan.c): eligible calls so far, the count at which the
 * next one offers it, and the current back-off. Every rank makes the same calls and sees the
 * same exchange results, so all hold the same values. */
struct hccl_zcopy_offers {
  uint64_t calls, next, skip;
};

/* What the planner reads of a communicator. */
struct hccl_plan_view {
  uint32_t nranks, nservers, local_nranks; /* local_nranks: on this rank's server */
  uint32_t max_local_nranks;               /* on the server with the most ranks */
  /* Servers of different counts (a shrink's survivors, topo/place.h): no cross group of equal
   * local indices, so the allreduce runs flat or through leaders (hier.c), chosen alike on
   * every rank whatever its server's count (the groups' figures are every rank's worst,
   * core/comm.c; the cross group is the leaders, or this rank alone when it leads none). */
  bool uneven;
  /* On servers of different counts: every rank reported the same kernel boot id in the
   * "ready" round (core/comm.c), so the servers are network namespaces of one machine (pretend
   * servers) and every byte over any link costs the same cores: the model then sums the bytes
   * of concurrent hops instead of taking the slowest link's (plan.c). */
  bool one_kernel;
  /* One kernel, and more ranks than its online CPUs (the same count on every rank there): a
   * short message between servers then waits for its receiver to be scheduled, and the
   * planner prices such hops by what they were measured to cost there (plan.c). */
  bool crowded;
  const struct hccl_group *world, *local, *cross; /* group.h; their costs drive the model */
  /* [nranks]: each rank's server (the cross group's member index of its leader) and its index
   * there (its local group's member index): where a rooted call through leaders starts or
   * ends (hccl__plan_run only; the planner never reads them). */
  const uint32_t *server_of, *local_index;
  const struct hccl_algo_setting *algo;           /* HCCL_ALGO */
  size_t zcopy_min_bytes; /* the size from which zero-copy is offered; 0: plan.c's measured one */
  /* Whether the server has a core for each of its ranks (online CPUs >= local_nranks): the
   * same on every rank of a machine, so every rank makes the same zero-copy offer. */
  bool own_cores;
  /* [HCCL_ZCOPY_NKINDS]: each zero-copy collective's back-off, read by hccl__plan and updated
   * by hccl__plan_run. NULL: never offer zero-copy (a question about a size, not a call). */
  struct hccl_zcopy_offers *offers;
};

/* One call as the API made it, validated (coll.c): count 0 has returned already, except for a
 * barrier and an alltoallv. count is the API's: elements of the whole buffer (allreduce,
 * broadcast, reduce), of each rank's block (allgather's sendCount, reduce-scatter's recvCount,
 * gather, scatter, alltoall's sendCount). root is a rank. sb and rb: alltoall(v)'s blocks. */
struct hccl_call {
  enum hccl_coll_kind kind;
  const void *send;
  void *recv;
  size_t count;
  size_t esz;   /* bytes of an element (1 for a barrier) */
  size_t bytes; /* count x esz, computed once by the caller (core/coll.c's struct hccl_op) */
  uint32_t root;
  struct hccl_blocks sb, rb;
};

/* The algorithms a plan can run; hccl__plan_run switches on it. */
enum hccl_plan_algo {
  HCCL_PLAN_LOCAL,                 /* one rank: a copy, or nothing */
  HCCL_PLAN_ZERO_COPY,             /* zcopy.c: declines unless every buffer is HcclMemAlloc's */
  HCCL_PLAN_RING_ALLREDUCE,        /* ring.c */
  HCCL_PLAN_HD_ALLREDUCE,          /* hd.c: recursive halving-doubling */
  HCCL_PLAN_HIER_RING,             /* hier.c, ring between servers */
  HCCL_PLAN_HIER_HD,               /* hier.c, halving-doubling between servers */
  HCCL_PLAN_HIER_ZCOPY_RING,       /* hier.c, zero-copy inside servers (or declines) */
  HCCL_PLAN_HIER_ZCOPY_HD,         /* the same, halving-doubling between servers */
  HCCL_PLAN_STAGED,                /* staged.c: declines when some rank has no staging area */
  HCCL_PLAN_HIER_STAGED_RING,      /* hier.c, staged inside servers (or declines) */
  HCCL_PLAN_HIER_STAGED_HD,        /* the same, halving-doubling between servers */
  HCCL_PLAN_RING_REDUCE_SCATTER,   /* ring.c */
  HCCL_PLAN_RD_REDUCE_SCATTER,     /* a recursive doubling allreduce of the whole, own block */
  HCCL_PLAN_RING_ALLGATHER,        /* ring.c */
  HCCL_PLAN_BRUCK_ALLGATHER,       /* hd.c */
  HCCL_PLAN_CHAIN_BROADCAST,       /* ring.c: pipelined chain */
  HCCL_PLAN_BINOMIAL_BROADCAST,    /* hd.c */
  HCCL_PLAN_CHAIN_REDUCE,          /* ring.c */
  HCCL_PLAN_BINOMIAL_REDUCE,       /* hd.c */
  HCCL_PLAN_DISSEMINATION_BARRIER, /* hd.c */
  HCCL_PLAN_DIRECT_GATHER,         /* a2a.c */
  HCCL_PLAN_DIRECT_SCATTER,        /* a2a.c */
  HCCL_PLAN_PAIRWISE_ALLTOALL,     /* a2a.c, alltoall and alltoallv */
  HCCL_PLAN_ONESHOT,               /* oneshot.c: declines when some rank has no area */
  HCCL_PLAN_LEAD_RING,             /* hier.c through leaders (uneven servers), ring between */
  HCCL_PLAN_LEAD_HD,               /* the same, halving-doubling between servers */
  HCCL_PLAN_LEAD_CHAIN_BROADCAST,  /* hier.c through leaders (uneven servers), chain between */
  HCCL_PLAN_LEAD_TREE_BROADCAST,   /* the same, binomial tree between servers */
  HCCL_PLAN_LEAD_CHAIN_REDUCE,     /* hier.c through leaders (uneven servers), chain between */
  HCCL_PLAN_LEAD_TREE_REDUCE,      /* the same, binomial tree between servers */
};

/* One algorithm a plan may run, and its name as the trace and the flight recorder print it
 * when it ran: "ring", "halving-doubling", "two-level, ring between servers", "two-level,
 * halving-doubling between servers" (each with ", zero-copy inside servers" or ", staged inside
 * servers" for those forms), "two-level through leaders, ring between servers" (or
 * halving-doubling; uneven servers), "through leaders, chain between servers" (or binomial
 * tree; a broadcast or reduce on uneven servers), "recursive doubling allreduce", "Bruck",
 * "chain", "binomial tree", "dissemination", "direct", "pairwise", "local" (one rank, whatever
 * runs), "zero-copy", "staged" or "one-shot". */
struct hccl_cand {
  enum hccl_plan_algo algo;
  const char *name;
};

/* Zero-copy, one-shot, staged, and the cost model's choice. */
#define HCCL_PLAN_MAX_CANDS 4

/* One call's plan, made by hccl__plan and only read after. */
struct hccl_plan {
  /* The candidates in the order to try: zero-copy (HCCL_PLAN_ZERO_COPY; for the two-level
   * allreduce, whose steps inside a server are what can run zero-copy, HCCL_PLAN_HIER_ZCOPY_*)
   * when offered; one-shot (HCCL_PLAN_ONESHOT) or staged (HCCL_PLAN_STAGED,
   * HCCL_PLAN_HIER_STAGED_*) for an allreduce the rules give them; each of these declines when
   * some rank cannot take it. Last, always, the cost model's choice (or HCCL_ALGO's), which
   * never declines (hccl__plan_last). ncand is 1 to HCCL_PLAN_MAX_CANDS. */
  struct hccl_cand cand[HCCL_PLAN_MAX_CANDS];
  uint32_t ncand;
  /* An allreduce's algorithm as HcclAllReduceAlgoName says it: "ring", "hd", "hier-ring",
   * "hier-hd" (also for the form through leaders) or "oneshot", the cost model's choice
   * without zero-copy (on one rank the model's "ring", though the call only copies). NULL
   * for the other collectives. */
  const char *word;
  /* The call counts in its collective's zero-copy back-off (whether or not it offers: a
   * backing-off call counts and does not), which hccl__plan_run keeps. */
  bool zcopy_eligible;
  /* A form through leaders: its steps inside servers by binomial tree, not by chain. */
  bool tree_inside;
};

/* The plan's last candidate: the cost model's choice (or HCCL_ALGO's), which runs when every
 * other declined; what the records name a call that failed. */
static inline const struct hccl_cand *hccl__plan_last(const struct hccl_plan *plan) {
  return &plan->cand[plan->ncand - 1];
}

/* The plan for call on v: the cost model's choice, or HCCL_ALGO's, and before it whether
 * zero-copy is offered and whether one-shot or staged is tried. Reads v (the back-off too) and
 * changes nothing, so every rank, given the same calls, makes the same plan. */
struct hccl_plan hccl__plan(const struct hccl_plan_view *v, const struct hccl_call *call);

/* Whether algo is the two-level allreduce (hier.c) whose steps inside servers are what may run
 * zero-copy or staged. */
static inline bool hccl__plan_two_level(enum hccl_plan_algo algo) {
  return algo == HCCL_PLAN_HIER_RING || algo == HCCL_PLAN_HIER_HD;
}

/* The zero-copy form of call (zcopy.c) in *z, or false when its collective has none. */
bool hccl__plan_zcopy_call(const struct hccl_call *call, struct hccl_zcopy_call *z);

#endif
