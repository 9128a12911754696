/*
 * plan.h - one plan per collective call, as NCCL's tuning makes it: which algorithm runs, the
 * name the trace, the flight recorder and HcclAllReduceAlgoName give it, and whether the
 * zero-copy path is offered first. The cost model, HCCL_ALGO, the zero-copy rule and its
 * back-off all live in plan.c; the caller (core/coll.c) makes one plan per call, runs it with
 * hccl__plan_run, and prints plan.name.
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
  HCCL_PLAN_ZERO_COPY,             /* zcopy.c: set by hccl__plan_run when the offer ran */
  HCCL_PLAN_RING_ALLREDUCE,        /* ring.c */
  HCCL_PLAN_HD_ALLREDUCE,          /* hd.c: recursive halving-doubling */
  HCCL_PLAN_HIER_RING,             /* hier.c, ring between servers */
  HCCL_PLAN_HIER_HD,               /* hier.c, halving-doubling between servers */
  HCCL_PLAN_HIER_ZCOPY_RING,       /* hier.c, zero-copy inside servers: set when the offer ran */
  HCCL_PLAN_HIER_ZCOPY_HD,         /* the same, halving-doubling between servers */
  HCCL_PLAN_STAGED,                /* staged.c: set by hccl__plan_run when it ran */
  HCCL_PLAN_HIER_STAGED_RING,      /* hier.c, staged inside servers: set when it ran */
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
  HCCL_PLAN_ONESHOT,               /* oneshot.c: set by hccl__plan_run when it ran */
  HCCL_PLAN_LEAD_RING,             /* hier.c through leaders (uneven servers), ring between */
  HCCL_PLAN_LEAD_HD,               /* the same, halving-doubling between servers */
  HCCL_PLAN_LEAD_CHAIN_BROADCAST,  /* hier.c through leaders (uneven servers), chain between */
  HCCL_PLAN_LEAD_TREE_BROADCAST,   /* the same, binomial tree between servers */
  HCCL_PLAN_LEAD_CHAIN_REDUCE,     /* hier.c through leaders (uneven servers), chain between */
  HCCL_PLAN_LEAD_TREE_REDUCE,      /* the same, binomial tree between servers */
};

struct hccl_plan {
  enum hccl_plan_algo algo;
  /* What ran, as the trace and the flight recorder print it: "ring", "halving-doubling",
   * "two-level, ring between servers", "two-level, halving-doubling between servers" (each
   * with ", zero-copy inside servers" when that offer ran, or ", staged inside servers"),
   * "two-level through leaders, ring between servers" (or halving-doubling; uneven servers),
 * "through leaders, chain between servers" (or binomial tree; a broadcast or reduce on uneven
 * servers),
   * "recursive doubling allreduce", "Bruck", "chain", "binomial tree", "dissemination",
   * "direct", "pairwise", "local" (one rank), "zero-copy", "staged" or "one-shot" (set by
   * hccl__plan_run). */
  const char *name;
  /* An allreduce's algorithm as HcclAllReduceAlgoName says it: "ring", "hd", "hier-ring",
   * "hier-hd" (also for the form through leaders) or "oneshot", the cost model's choice
   * without zero-copy (on one rank the model's "ring", though the call only copies). NULL
   * for the other collectives. */
  const char *word;
  bool zcopy_eligible; /* the call counts in its collective's zero-copy back-off */
  bool zcopy_offer;    /* and offers zero-copy first: algo runs only if the offer fails */
  bool staged;         /* an allreduce that runs staged (staged.c) unless zero-copy ran */
  /* An allreduce that runs one-shot (oneshot.c) unless zero-copy ran, or some rank has no
   * area (then algo runs). */
  bool oneshot;
  /* A form through leaders: its steps inside servers by binomial tree, not by chain. */
  bool tree_inside;
};

/* The plan for call on v: the cost model's choice, or HCCL_ALGO's, and whether zero-copy is
 * offered first. Reads v (the back-off too) and changes nothing, so every rank, given the same
 * calls, makes the same plan. */
struct hccl_plan hccl__plan(const struct hccl_plan_view *v, const struct hccl_call *call);

/* Whether algo is the two-level allreduce (hier.c) whose steps inside servers are what may run
 * zero-copy or staged. */
static inline bool hccl__plan_two_level(enum hccl_plan_algo algo) {
  return algo == HCCL_PLAN_HIER_RING || algo == HCCL_PLAN_HIER_HD;
}

/* What algo is called in traces and flight records. */
const char *hccl__plan_name(enum hccl_plan_algo algo);

/* The zero-copy form of call (zcopy.c) in *z, or false when its collective has none. */
bool hccl__plan_zcopy_call(const struct hccl_call *call, struct hccl_zcopy_call *z);

#endif
