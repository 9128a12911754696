/*
 * select.c - the cost model: which algorithm a collective of n bytes runs, per call, as NCCL
 * decides, unless HCCL_ALGO forces one. The one place where the ring/tree/two-level decision
 * is made; the algorithms know nothing of it.
 *
 * Each group carries the cost of its slowest link (group.h: alpha per message hop, beta per
 * byte, from the transports' own figures). With n bytes on p ranks:
 *   ring                  2(p-1) a + 2(p-1)/p n b
 *   recursive doubling    log2(p) (a + n b)                 (n up to one slot)
 *   halving-doubling      2 log2(p) a + 2(p-1)/p n b * 1.5  (its halves stride the buffer)
 *   allgather, N = p n bytes out:
 *     ring                (p-1) a + (p-1)/p N b
 *     Bruck               ceil(log2 p) a + (p-1)/p N b + N c (c: a local copy, COST_COPY_NS)
 *   reduce-scatter, N = p n bytes in:
 *     ring                (p-1) a + (p-1)/p N b
 *     by allreduce        the recursive doubling allreduce of N (N up to a slot), then the
 *                         own block: log2(p) (a + N b) + N c
 *   two-level, L ranks on each of S servers (hier.c):
 *                         2 [(L-1) a_l + (L-1)/L n b_l]     reduce-scatter, allgather inside
 *                       + the best flat allreduce of n/L bytes over the S servers
 * The shm constants were fitted on 2-core, 8-rank runs of allreduce_perf (HCCL_ALGO=ring vs
 * tree, 4 KiB to 1 MiB): tree wins to 16 KiB, they tie near 64 KiB, ring wins from 256 KiB.
 */
#include "algo.h"
#include "comm.h"

#define COST_HD_PENALTY 1.5
/* A byte of local copy (memcpy at about 10 GB/s on this machine, bench/membw.c). */
#define COST_COPY_NS 0.1
/* From this size (of a rank's larger buffer) a call inside one server first offers the
 * zero-copy path (zcopy.c), which costs two short synchronisations (2 log2(p) message hops)
 * before any data moves. It beat the ring and halving-doubling allreduce from 64 KiB at 2, 4
 * and 8 ranks on 2 cores (allreduce_perf -R 1 against -R 0; the crossover lies between 16 and
 * 64 KiB). Reduce-scatter, allgather and broadcast use the same threshold on their larger
 * buffer; it is not measured for them yet, and their crossover may lie higher: their ring
 * (p-1 hops) or binomial tree (log2(p)) has fewer hops than an allreduce's. */
#define ZCOPY_MIN_BYTES (64u << 10)

static double log2u(uint32_t x) {
  double l = 0;
  while (x > 1)
    x >>= 1, l += 1;
  return l;
}

static double cost_ring(const struct hccl_group *g, double n) {
  double p = g->n;
  return 2 * (p - 1) * g->alpha_ns + 2 * (p - 1) / p * n * g->beta_ns;
}

static double cost_hd(const struct hccl_group *g, double n) {
  double p = g->n, lg = log2u(g->n);
  if (n <= (double)g->chunk_bytes) return lg * (g->alpha_ns + n * g->beta_ns);
  return 2 * lg * g->alpha_ns + 2 * (p - 1) / p * n * g->beta_ns * COST_HD_PENALTY;
}

static enum hccl_algo_kind pick(const struct hccl_group *g, enum hccl_algo_choice forced, double n,
                                double *cost) {
  double ring = cost_ring(g, n), hd = cost_hd(g, n);
  enum hccl_algo_kind k = forced == HCCL_ALGO_RING ? HCCL_ALGO_KIND_RING
                          : forced == HCCL_ALGO_HD ? HCCL_ALGO_KIND_HD
                          : hd < ring              ? HCCL_ALGO_KIND_HD
                                                   : HCCL_ALGO_KIND_RING;
  if (cost) *cost = k == HCCL_ALGO_KIND_HD ? hd : ring;
  return k;
}

/* The forced flat choice: a word of HCCL_ALGO, or a level of its level form (between servers
 * level 1 first when each server has one rank, else level 0 first). */
static enum hccl_algo_choice flat_choice(const struct hccl_comm *c) {
  const struct hccl_algo_setting *a = &c->cfg.algo;
  if (a->levels && c->nservers > 1 && c->local_nranks == 1 && a->level[1] != HCCL_ALGO_AUTO)
    return a->level[1];
  return a->choice;
}

struct hccl_allreduce_plan hccl__plan_allreduce(const struct hccl_comm *c, size_t bytes) {
  struct hccl_allreduce_plan plan = {.hier = false};
  const struct hccl_algo_setting *a = &c->cfg.algo;
  bool two_level = c->nservers > 1 && c->local_nranks > 1;
  double flat_cost;
  plan.kind = pick(&c->world, flat_choice(c), (double)bytes, &flat_cost);
  if (!two_level) return plan;
  /* The level form asks for the two-level algorithm; one word asks for a flat one. */
  if (!a->levels && a->choice != HCCL_ALGO_AUTO) return plan;
  const struct hccl_group *l = &c->local;
  double L = l->n, n = (double)bytes, cross_cost;
  enum hccl_algo_kind cross =
      pick(&c->cross, a->levels ? a->level[1] : HCCL_ALGO_AUTO, n / L, &cross_cost);
  double hier_cost = 2 * ((L - 1) * l->alpha_ns + (L - 1) / L * n * l->beta_ns) + cross_cost;
  if (a->levels || hier_cost < flat_cost) {
    plan.hier = true;
    plan.kind = cross;
  }
  return plan;
}

bool hccl__plan_zcopy(const struct hccl_comm *c, size_t bytes) {
  const struct hccl_algo_setting *a = &c->cfg.algo;
  size_t min = c->zcopy_min_bytes ? c->zcopy_min_bytes : ZCOPY_MIN_BYTES;
  return c->nservers == 1 && c->world.n > 1 && bytes >= min && !a->levels &&
         a->choice == HCCL_ALGO_AUTO;
}

enum hccl_algo_kind hccl__select_rooted(const struct hccl_comm *c, size_t bytes) {
  enum hccl_algo_choice forced = flat_choice(c);
  if (forced == HCCL_ALGO_RING) return HCCL_ALGO_KIND_RING;
  if (forced == HCCL_ALGO_HD) return HCCL_ALGO_KIND_HD;
  return bytes <= c->world.chunk_bytes ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
}

enum hccl_algo_kind hccl__select_allgather(const struct hccl_comm *c, size_t bytes) {
  enum hccl_algo_choice forced = flat_choice(c);
  if (forced == HCCL_ALGO_RING) return HCCL_ALGO_KIND_RING;
  if (forced == HCCL_ALGO_HD) return HCCL_ALGO_KIND_HD;
  const struct hccl_group *g = &c->world;
  double p = g->n, steps = 0, N = p * (double)bytes;
  while ((1u << (unsigned)steps) < g->n)
    steps += 1;
  double ring = (p - 1) * g->alpha_ns, bruck = steps * g->alpha_ns + N * COST_COPY_NS;
  return g->n > 2 && bruck < ring ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
}

enum hccl_algo_kind hccl__select_reduce_scatter(const struct hccl_comm *c, size_t bytes) {
  enum hccl_algo_choice forced = flat_choice(c);
  const struct hccl_group *g = &c->world;
  double p = g->n, N = p * (double)bytes;
  if (forced == HCCL_ALGO_RING || N > (double)g->chunk_bytes) return HCCL_ALGO_KIND_RING;
  if (forced == HCCL_ALGO_HD) return HCCL_ALGO_KIND_HD;
  double ring = cost_ring(g, N) / 2, rd = cost_hd(g, N) + N * COST_COPY_NS;
  return g->n > 2 && rd < ring ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
}
