/*
 * plan.c - one plan per collective call (plan.h): the cost model picks which algorithm a
 * collective of n bytes runs, per call, as NCCL's tuning does, unless HCCL_ALGO forces one;
 * the zero-copy rule and its back-off decide whether the zero-copy path is offered first, and
 * the one-shot and staged rules whether an allreduce tries those (oneshot.c, staged.c) before
 * the model's choice. The plan lists those candidates in the order to try, each with the name
 * the trace and the flight recorder print when it ran; hccl__plan_run (plan_run.c) runs them
 * and says which ran. This file prices and chooses only. The one place where the
 * ring/tree/two-level decision is made; the algorithms know nothing of it.
 *
 * Each group carries the cost of its slowest link (group.h: alpha per message hop, beta per
 * byte, from the transports' own figures). With n bytes on p ranks:
 *   ring                  2(p-1) a + 2(p-1)/p n b
 *   recursive doubling    log2(p) (a + n b)                 (n up to one slot)
 *   halving-doubling      2 log2(p) a + 2(p-1)/p n b * 1.5  (its halves stride the buffer)
 *                         (either: + 2 (a + n b) when p is not a power of two, the fold)
 *   allgather, N = p n bytes out:
 *     ring                (p-1) a + (p-1)/p N b
 *     Bruck               ceil(log2 p) a + (p-1)/p N b + N c (c: a local copy, COST_COPY_NS)
 *   reduce-scatter, N = p n bytes in:
 *     ring                (p-1) a + (p-1)/p N b
 *     by allreduce        the recursive doubling allreduce of N (N up to a slot), then the
 *                         own block: log2(p) (a + N b) + N c
 *   one-shot (oneshot.c)  a + (p + 1) n c                   (one wait; a copy in, p slots read)
 *   two-level, L ranks on each of S servers (hier.c):
 *                         2 [(L-1) a_l + (L-1)/L n b_l]     reduce-scatter, allgather inside
 *                       + the best flat allreduce of n/L bytes over the S servers
 *   through leaders, S servers of different counts, the largest of L ranks (hier.c):
 *                         2 [(L-1) a_l + n b_l]             chain reduce, chain broadcast inside
 *                      or 2 ceil(log2 L) (a_l + n b_l)      binomial ones (n up to one slot)
 *                       + the best flat allreduce of n bytes over the S leaders
 *   broadcast, reduce:    chain (p-1) a + n b; binomial tree ceil(log2 p) (a + n b) (a per
 *                         chunk of a slot); through leaders on servers of different counts,
 *                         the same two steps inside as the allreduce's + the cheaper of the
 *                         two over the S leaders
 *   on servers of different counts sharing one kernel (pretend servers, v->one_kernel), the
 *                         byte terms of hops that run at once add up (flat_priced below)
 * The shm constants were fitted on 2-core, 8-rank runs of allreduce_perf (HCCL_ALGO=ring vs
 * tree, 4 KiB to 1 MiB): tree wins to 16 KiB, they tie near 64 KiB, ring wins from 256 KiB.
 */
#include "log.h"
#include "plan.h"

#define COST_HD_PENALTY 1.5
/* A byte of local copy (memcpy at about 10 GB/s on this machine, bench/membw.c). */
#define COST_COPY_NS 0.1
/* From this size (of a rank's larger buffer) a call inside one server first offers the
 * zero-copy path (zcopy.c), which costs two short synchronisations (2 log2(p) message hops)
 * before any data moves, against the copying algorithms' log2(p) hops with a copy at each.
 * What a hop costs decides it. With more ranks than cores a hop may wait for a context switch:
 * 4 and 8 ranks on 2 cores, zero-copy lost up to 16 KiB (4 KiB: 22-23 us against 8 at 4 ranks,
 * 39-43 against 23-30 at 8) and tied at 64 KiB, so there it starts at ZCOPY_MIN_BYTES. With a
 * core for each rank a hop costs about 0.4 us and a copy about 0.2 ns a byte, so the crossover
 * is near 2 KiB whatever p is: 2 ranks on 2 cores, allreduce_perf -R 1 (HcclMemAlloc buffers),
 * zero-copy took 0.82-0.99 us at 4 KiB against recursive doubling's 1.23-1.29, 0.96-1.08 at
 * 16 KiB against 2.84-3.07, and lost at 1 KiB (0.78-0.84 against 0.70-0.79); allgather,
 * reduce-scatter and broadcast alike (4 KiB: 0.81-0.95, 0.84-0.91, 1.03-1.24 us against
 * 1.08-1.18, 1.10-1.16, 1.44-1.52). So with a core for each rank it starts at
 * ZCOPY_MIN_OWN_CORES (measured at 2 ranks only, the most this machine has cores for). */
#define ZCOPY_MIN_BYTES (64u << 10)
#define ZCOPY_MIN_OWN_CORES (4u << 10)
/* From this size an allreduce of ordinary buffers over 4 or more ranks of a server runs staged
 * (staged.c) instead of the ring, and so do a two-level allreduce's steps inside servers of 4 or
 * more. 4 and 8 ranks on 2 cores, 4 alternating runs, medians, out of place / in place: 64 KiB
 * 49/46 -> 43/39 us and 145/138 -> 119/104; 1 MiB 588/545 -> 571/491 and 1291/1229 ->
 * 1227/1024; 64 MiB 43.5/42.4 -> 39.3/41.6 ms and 89.2/93.1 -> 78.2/82.8. At 2 ranks it lost
 * in place (64 MiB 14.5 -> 16.9 ms): the ring's one hop each way is already a copy in and out.
 * Two servers of 4, 64 MiB: the steps inside the servers took 122 -> 101 ms of 156 -> 138. */
#define STAGED_MIN_BYTES (64u << 10)
#define STAGED_MIN_RANKS 4
/* Up to this size an allreduce inside one server of ONESHOT_MIN_RANKS or more members, not a
 * power of two, runs one-shot (oneshot.c) where the cost model says it costs less than the flat
 * choice. Its lever is the
 * number of waits: one a call against recursive doubling's log2(p), each of which may sleep and
 * cost a context switch when ranks outnumber cores (4 KiB through torch under mp.spawn, 4 ranks
 * on 2 cores: 82-93 us a call against 14.2 + 2 x 11.1 for torch's floor and the C call,
 * docs/pytorch.md). Its price is the reads: every member reads every member's slot, p n bytes,
 * where recursive doubling reads log2(p) n, which at 16 KiB and 8 ranks is 128 KiB a member,
 * still within L2 and a few microseconds; from 64 KiB the staged path (one barrier a round, 1/p
 * of the reduction each) is there. One round of the area (HCCL_ONESHOT_ROUND_BYTES) at most, so
 * a chosen call waits once. Measured on the quiet machine (2026-11-28, allreduce_perf under
 * npu-launch --cpu-bind none, 3 runs in turns against HCCL_ALGO=tree, medians, in place / out of
 * place): 8 ranks one-shot / tree 0.56/0.52 at 1 KiB, 0.75/0.58 at 4, 0.83/0.87 at 16; 4 ranks
 * a tie to 8 KiB (0.94-1.10) and 1.13/1.08 at 16 KiB. Through torch under mp.spawn, 4 KiB:
 * 4 ranks 0.93, 8 ranks 0.80. At 2 ranks recursive doubling is already one exchange, one
 * wait: nothing to gain.
 * Measured again (2026-12-07, bench/plan8.sh: 1-16 KiB, 200 calls a size, 5 rounds in turns,
 * medians, under npu-launch's default binding), recursive doubling's hops had got cheaper and
 * one-shot now lost at every power of two: 4 ranks 1.6-2.6x its time (1-16 KiB), 8 ranks
 * 2.4-2.8x (1 and 4 KiB) and 1.3-1.9x (16 KiB), out of place and in place; without binding 8 ranks tied at 4 KiB and
 * lost at 16 KiB (1.2-1.4x), and through torch under mp.spawn, 8 ranks, 4 KiB, they tied
 * (146-156 us a call against 133-158). Where the group is not a power of two, recursive
 * doubling first folds the extra members in and out (two more dependent hops of the whole
 * message), and one-shot won up to a whole round: 3 ranks 0.17-0.28x the best flat time at 1
 * and 4 KiB and 0.32-0.35x at 16 KiB, 6 ranks 0.32-0.61x at 1-16 KiB (where the model had
 * chosen ring or halving-doubling at 16 KiB); so there the limit is the round, whatever the
 * count. */
#define ONESHOT_MAX_BYTES HCCL_ONESHOT_ROUND_BYTES
#define ONESHOT_MIN_RANKS 3

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

/* A member count that is not a power of two folds its extra members in first and out last
 * (hd.c): two more hops of the whole message. */
static double cost_hd(const struct hccl_group *g, double n) {
  double p = g->n, lg = log2u(g->n);
  double fold = (g->n & (g->n - 1)) ? 2 * (g->alpha_ns + n * g->beta_ns) : 0;
  if (n <= (double)g->chunk_bytes) return lg * (g->alpha_ns + n * g->beta_ns) + fold;
  return 2 * lg * g->alpha_ns + 2 * (p - 1) / p * n * g->beta_ns * COST_HD_PENALTY + fold;
}

static double cost_oneshot(const struct hccl_group *g, double n) {
  return g->alpha_ns + (g->n + 1.0) * n * COST_COPY_NS;
}

/* The kind HCCL_ALGO forces, or the cheaper of ring (costing ring) and HD (costing hd). */
static enum hccl_algo_kind cheaper(enum hccl_algo_choice forced, double ring, double hd,
                                   double *cost) {
  enum hccl_algo_kind k = forced == HCCL_ALGO_RING ? HCCL_ALGO_KIND_RING
                          : forced == HCCL_ALGO_HD ? HCCL_ALGO_KIND_HD
                          : hd < ring              ? HCCL_ALGO_KIND_HD
                                                   : HCCL_ALGO_KIND_RING;
  if (cost) *cost = k == HCCL_ALGO_KIND_HD ? hd : ring;
  return k;
}

static enum hccl_algo_kind pick(const struct hccl_group *g, enum hccl_algo_choice forced, double n,
                                double *cost) {
  return cheaper(forced, cost_ring(g, n), cost_hd(g, n), cost);
}

/* The forced flat choice: a word of HCCL_ALGO, or a level of its level form (between servers
 * level 1 first when each server has one rank, else level 0 first). */
static enum hccl_algo_choice flat_choice(const struct hccl_plan_view *v) {
  const struct hccl_algo_setting *a = v->algo;
  if (a->levels && v->nservers > 1 && v->local_nranks == 1 && !v->uneven &&
      a->level[1] != HCCL_ALGO_AUTO)
    return a->level[1];
  return a->choice;
}

static double ceil_log2u(uint32_t x) {
  double steps = 0;
  while ((1u << (unsigned)steps) < x)
    steps += 1;
  return steps;
}

/* A broadcast or reduce of n bytes over g: the pipelined chain, or the binomial tree (each
 * slot-sized chunk through the whole tree in turn). */
static double cost_rooted(const struct hccl_group *g, enum hccl_algo_kind k, double n) {
  if (k == HCCL_ALGO_KIND_RING) return (g->n - 1.0) * g->alpha_ns + n * g->beta_ns;
  double chunks = g->chunk_bytes && n > (double)g->chunk_bytes ? n / (double)g->chunk_bytes : 1;
  return ceil_log2u(g->n) * (chunks * g->alpha_ns + n * g->beta_ns);
}

/* On one kernel (v->one_kernel: pretend servers, network namespaces of one machine) a link is
 * no resource of its own: every byte a hop moves, over TCP or shared memory, costs the same
 * few cores, so hops that run at once add up instead of overlapping. The cost functions above
 * price a step by one hop's bytes on the group's slowest link; a copy of g whose beta is
 * `beta` (the sum of the concurrent hops' betas) makes them price the step's every hop. */
static struct hccl_group priced(const struct hccl_group *g, double beta) {
  struct hccl_group c = *g;
  c.beta_ns = beta;
  return c;
}

/* On one kernel with more ranks than cores (v->crowded), a message up to a chunk between
 * servers waits for its receiver to be scheduled: a hop costs a wake-up, far more than the
 * link's own latency (TCP's 25 us, fitted on 2 ranks with a core each), while a byte cost
 * less than the link's figure. Fitted on pretend servers
 * (bench/uneven.sh's launch, 2 cores, 2026-12-07, 5 rounds in turns, medians, fp32, in and out
 * of place): the leaders' step forced ring against halving-doubling (HCCL_ALGO=
 * 'level0:NA;level1:ring' and ';level1:hd') on 4+2+1 and 2+2+1, 4 KiB to 256 KiB, the ring
 * slower by 139-188 us at 4-16 KiB, 86-145 at 64 KiB, and faster by 196-356 (4+2+1) or tied
 * (2+2+1) at 256 KiB; least squares on the model's difference over 3 leaders, ring 4a +
 * (4/3) n b against the fold and one exchange 3 (a + n b), gave a = 175 us, b = 0.74 ns.
 * With TCP's own figures the model had chosen the leaders' ring from 7.5 KB, 1.3-1.6x the
 * fastest at 16 and 64 KiB on 4+2+1. Three ranks on three 1-rank servers (1+1+1) agreed: the
 * flat ring slower than halving-doubling by 33-89 us at 4-256 KiB, where
 * TCP's figures have the ring cheaper from 7.5 KB. The reduce-scatter's choice follows (its
 * recursive doubling form is an allreduce of the whole): forced runs (HCCL_ALGO=ring against
 * tree) had recursive doubling 1.6x faster on 4+2+1 at 2.3 KiB a rank, where these figures
 * choose it and TCP's did not. Not the allgather's: its choice between Bruck and the ring is
 * by hop count alone, and crowded pretend servers did not order them so (2+2+1: the ring
 * faster at every size, 1.1-1.8x; 4+1 and 4+2+1: Bruck faster to 3 KiB a rank, the ring from
 * 50 KiB), so it keeps the links' figures. On separate servers (or a core a rank) the links'
 * own figures stand. */
#define CROWDED_HOP_NS 175000.0
#define CROWDED_BYTE_NS 0.75

/* g priced as a hop between crowded pretend servers costs (CROWDED_HOP_NS). */
static struct hccl_group crowded(const struct hccl_group *g) {
  struct hccl_group c = *g;
  c.alpha_ns = CROWDED_HOP_NS;
  c.beta_ns = CROWDED_BYTE_NS;
  return c;
}

/* Of a pipelined chain's `hops` over g, the share that moves at once for n bytes: one per
 * chunk in flight, min(chunks, hops) / hops. Two chunks down a chain of 6 hops keep 2 of them
 * busy, not 6; the ring's hops all move at every step. Counted for the flat reduce's chain
 * (plan_rooted), whose form through leaders reduces the whole message at each of its three
 * steps in turn: bench/uneven.sh, 256 KiB (2 chunks of the device links' 128 KiB), the flat
 * chain took 332-367 us on 4+2+1 against 374-497 through leaders in 4 runs (4+1: 191-202
 * against 200-203); at 1 MiB mixed, from 4 MiB the leaders faster (6.3-7.1 ms against
 * 9.9-15.4). Not for the broadcast, whose form through leaders was the faster at 256 KiB in 2
 * of 3 runs on 4+2+1 (1.17-1.23x) and in all 3 on 4+1 (1.09-1.17x). */
static double in_flight(double hops, const struct hccl_group *g, double n) {
  size_t c = g->chunk_bytes ? g->chunk_bytes : 1;
  double chunks = (double)(((size_t)n + c - 1) / c);
  return hops < 1 ? 1 : (chunks < hops ? chunks : hops) / hops;
}

/* The world's ring or chain on S servers of p ranks, ranks of a server next to each other:
 * S of its p hops cross between servers (the chain from a leader S - 1 of p - 1), the others
 * stay inside one; on one kernel the betas of those moving at once (at_once of them: 1 for
 * all, or in_flight's share) add up. Elsewhere the slowest link paces it. */
static struct hccl_group flat_priced(const struct hccl_plan_view *v, bool chain, double at_once) {
  double p = v->world->n, S = v->nservers;
  if (!v->one_kernel) return *v->world;
  return priced(v->world, at_once * ((chain ? S - 1 : S) * v->cross->beta_ns +
                                     (p - S) * v->local->beta_ns));
}

/* Halving-doubling and the binomial tree over the world: which of their pairs cross servers
 * depends on where the ranks sit, so on one kernel every byte is counted at the network's
 * price: halving-doubling's p members each move the per-member bytes the model counts; the
 * tree's p - 1 edges each the whole, where cost_rooted counts ceil(log2 p) levels. */
static struct hccl_group flat_priced_tree(const struct hccl_plan_view *v, bool rooted) {
  double p = v->world->n;
  if (!v->one_kernel) return *v->world;
  return priced(v->world, (rooted ? (p - 1) / ceil_log2u(v->world->n) : p) * v->cross->beta_ns);
}

/* A collective of `bytes` on servers of different counts: an allreduce (rooted false), or a
 * broadcast or reduce (rooted true), flat (costing flat_cost) or through leaders (hier.c) when
 * that costs less or HCCL_ALGO's level form asks for it (level 0 then says chain, "ring", or
 * tree, "hd", inside servers, unset the tree up to one slot; level 1 the algorithm between the
 * leaders: ring or halving-doubling for an allreduce, chain or binomial tree for the rooted
 * ones). Its two steps inside servers (reduce and broadcast; or the root's server's and the
 * others') cost alike. Reads only what every rank holds alike: the largest server's count
 * (whose steps inside the others wait for), HCCL_ALGO, and the groups' figures (every rank's
 * worst on such a communicator, core/comm.c), the leaders counted as nservers on every rank,
 * led or not. True: through leaders, *between between them, *tree the steps inside by
 * binomial tree. */
static bool plan_leaders(const struct hccl_plan_view *v, size_t bytes, bool rooted,
                         double flat_cost, enum hccl_algo_kind *between, bool *tree) {
  const struct hccl_algo_setting *a = v->algo;
  if (!a->levels && a->choice != HCCL_ALGO_AUTO && a->choice != HCCL_ALGO_ONESHOT) return false;
  struct hccl_group leaders = *v->cross;
  leaders.n = v->nservers;
  const struct hccl_group *l = v->local;
  double L = v->max_local_nranks, n = (double)bytes, cross_cost, S = v->nservers;
  enum hccl_algo_choice forced = a->levels ? a->level[1] : HCCL_ALGO_AUTO;
  /* On one kernel the leaders' hops add up as the flat ones do (flat_priced), every one
   * crossing: the ring's S, halving-doubling's S members, the chain's S - 1, the tree's S - 1
   * edges; and so do the hops inside all servers: p - S in each step of an allreduce (every
   * rank but a leader sends, then receives, the whole), p - S over both of a broadcast's or a
   * reduce's (the root's server's, then the others'). */
  double b = leaders.beta_ns, inner = (v->world->n - S) / (rooted ? 2.0 : 1.0);
  struct hccl_group one = priced(&leaders, (rooted ? S - 1 : S) * b);
  struct hccl_group two = priced(&leaders, (rooted ? (S - 1) / ceil_log2u(v->nservers) : S) * b);
  if (!v->one_kernel) one = two = leaders;
  *between = rooted ? cheaper(forced, cost_rooted(&one, HCCL_ALGO_KIND_RING, n),
                              cost_rooted(&two, HCCL_ALGO_KIND_HD, n), &cross_cost)
                    : cheaper(forced, cost_ring(&one, n), cost_hd(&two, n), &cross_cost);
  enum hccl_algo_choice in = a->levels ? a->level[0] : HCCL_ALGO_AUTO;
  *tree = in == HCCL_ALGO_HD || (in == HCCL_ALGO_AUTO && bytes <= l->chunk_bytes);
  double inside = *tree ? ceil_log2u(v->max_local_nranks) * (l->alpha_ns + n * l->beta_ns)
                        : (L - 1) * l->alpha_ns + n * l->beta_ns;
  if (v->one_kernel)
    inside = (*tree ? ceil_log2u(v->max_local_nranks) : L - 1) * l->alpha_ns +
             inner * n * l->beta_ns;
  return a->levels || 2 * inside + cross_cost < flat_cost;
}

/* An allreduce of `bytes`: flat over every rank (ring or halving-doubling), or two-level with
 * ring or halving-doubling between servers when that costs less or HCCL_ALGO's level form asks
 * for it (through leaders on servers of different counts: plan_leaders). */
static enum hccl_plan_algo plan_allreduce(const struct hccl_plan_view *v, size_t bytes,
                                          bool *tree) {
  const struct hccl_algo_setting *a = v->algo;
  bool two_level = v->nservers > 1 && v->local_nranks > 1 && !v->uneven;
  double flat_cost;
  enum hccl_plan_algo flat = pick(v->world, flat_choice(v), (double)bytes, &flat_cost) ==
                                     HCCL_ALGO_KIND_HD
                                 ? HCCL_PLAN_HD_ALLREDUCE
                                 : HCCL_PLAN_RING_ALLREDUCE;
  enum hccl_algo_kind between;
  if (v->uneven && v->nservers > 1) {
    struct hccl_group ring = flat_priced(v, false, 1), hd = flat_priced_tree(v, false);
    flat = cheaper(flat_choice(v), cost_ring(&ring, (double)bytes), cost_hd(&hd, (double)bytes),
                   &flat_cost) == HCCL_ALGO_KIND_HD
               ? HCCL_PLAN_HD_ALLREDUCE
               : HCCL_PLAN_RING_ALLREDUCE;
    if (!plan_leaders(v, bytes, false, flat_cost, &between, tree)) return flat;
    return between == HCCL_ALGO_KIND_HD ? HCCL_PLAN_LEAD_HD : HCCL_PLAN_LEAD_RING;
  }
  if (!two_level) return flat;
  /* The level form asks for the two-level algorithm; one word asks for a flat one. */
  if (!a->levels && a->choice != HCCL_ALGO_AUTO && a->choice != HCCL_ALGO_ONESHOT) return flat;
  const struct hccl_group *l = v->local;
  double L = l->n, n = (double)bytes, cross_cost;
  enum hccl_algo_kind cross =
      pick(v->cross, a->levels ? a->level[1] : HCCL_ALGO_AUTO, n / L, &cross_cost);
  double hier_cost = 2 * ((L - 1) * l->alpha_ns + (L - 1) / L * n * l->beta_ns) + cross_cost;
  if (a->levels || hier_cost < flat_cost)
    return cross == HCCL_ALGO_KIND_HD ? HCCL_PLAN_HIER_HD : HCCL_PLAN_HIER_RING;
  return flat;
}

/* Whether a call whose larger buffer (send or receive, per rank) has `bytes` may offer the
 * zero-copy path: the communicator is on one server (or the call is a two-level allreduce,
 * whose steps inside each server can run zero-copy), the message large enough (ZCOPY_MIN_BYTES,
 * or ZCOPY_MIN_OWN_CORES on one server with a core for each rank), and HCCL_ALGO does not force
 * an algorithm. The same rule for every zero-copy collective. */
static bool plan_zcopy(const struct hccl_plan_view *v, size_t bytes, bool two_level) {
  const struct hccl_algo_setting *a = v->algo;
  size_t min = v->zcopy_min_bytes                   ? v->zcopy_min_bytes
               : v->nservers == 1 && v->own_cores ? ZCOPY_MIN_OWN_CORES
                                                   : ZCOPY_MIN_BYTES;
  return (v->nservers == 1 || two_level) && v->world->n > 1 && bytes >= min && !a->levels &&
         a->choice == HCCL_ALGO_AUTO;
}

/* Whether an allreduce of `bytes` planned as algo runs staged when zero-copy does not: the
 * ranks it would stage over (the server's, for one server or a two-level allreduce) are at
 * least STAGED_MIN_RANKS, the message at least STAGED_MIN_BYTES, and HCCL_ALGO forces
 * nothing. */
static bool plan_staged(const struct hccl_plan_view *v, size_t bytes, enum hccl_plan_algo algo) {
  const struct hccl_algo_setting *a = v->algo;
  uint32_t n = v->nservers == 1 ? v->world->n : hccl__plan_two_level(algo) ? v->local->n : 0;
  return n >= STAGED_MIN_RANKS && bytes >= STAGED_MIN_BYTES && !a->levels &&
         a->choice == HCCL_ALGO_AUTO;
}

/* Whether an allreduce of `bytes` runs one-shot (oneshot.c): on one server of 2 or more ranks,
 * when HCCL_ALGO=oneshot forces it, or, with HCCL_ALGO unset, when the server has
 * ONESHOT_MIN_RANKS or more and not a power of two, the message at most ONESHOT_MAX_BYTES, and
 * the cost model puts it below the flat choice. (On servers of their own, HCCL_ALGO=oneshot leaves the choice to the
 * cost model.) */
static bool plan_oneshot(const struct hccl_plan_view *v, size_t bytes) {
  const struct hccl_algo_setting *a = v->algo;
  const struct hccl_group *g = v->world;
  if (v->nservers != 1 || g->n < 2 || a->levels) return false;
  if (a->choice == HCCL_ALGO_ONESHOT) return true;
  bool power_of_two = (g->n & (g->n - 1)) == 0;
  if (a->choice != HCCL_ALGO_AUTO || g->n < ONESHOT_MIN_RANKS || power_of_two ||
      bytes > ONESHOT_MAX_BYTES)
    return false;
  double flat; /* the cost model only for the calls it can decide (every call is planned) */
  pick(g, HCCL_ALGO_AUTO, (double)bytes, &flat);
  return cost_oneshot(g, (double)bytes) < flat;
}

/* Broadcast and reduce: chain or binomial tree over every rank; on servers of different counts
 * through leaders where plan_leaders says so. */
static enum hccl_plan_algo plan_rooted(const struct hccl_plan_view *v, size_t bytes,
                                       bool reduce, bool *tree) {
  enum hccl_algo_choice forced = flat_choice(v);
  enum hccl_algo_kind k = forced == HCCL_ALGO_RING ? HCCL_ALGO_KIND_RING
                          : forced == HCCL_ALGO_HD ? HCCL_ALGO_KIND_HD
                          : bytes <= v->world->chunk_bytes ? HCCL_ALGO_KIND_HD
                                                           : HCCL_ALGO_KIND_RING;
  enum hccl_algo_kind between;
  double at_once = reduce ? in_flight(v->world->n - 1.0, v->world, (double)bytes) : 1;
  struct hccl_group flat =
      k == HCCL_ALGO_KIND_RING ? flat_priced(v, true, at_once) : flat_priced_tree(v, true);
  if (v->uneven && v->nservers > 1 &&
      plan_leaders(v, bytes, true, cost_rooted(&flat, k, (double)bytes), &between, tree)) {
    if (between == HCCL_ALGO_KIND_HD)
      return reduce ? HCCL_PLAN_LEAD_TREE_REDUCE : HCCL_PLAN_LEAD_TREE_BROADCAST;
    return reduce ? HCCL_PLAN_LEAD_CHAIN_REDUCE : HCCL_PLAN_LEAD_CHAIN_BROADCAST;
  }
  *tree = false;
  if (k == HCCL_ALGO_KIND_HD) return reduce ? HCCL_PLAN_BINOMIAL_REDUCE : HCCL_PLAN_BINOMIAL_BROADCAST;
  return reduce ? HCCL_PLAN_CHAIN_REDUCE : HCCL_PLAN_CHAIN_BROADCAST;
}

/* The allgather of `bytes` a rank: HCCL_ALGO_KIND_HD (Bruck's, log2 steps) or the ring, by the
 * cost model, or as HCCL_ALGO forces ("ring", "hd"/"tree"). */
static enum hccl_algo_kind plan_allgather(const struct hccl_plan_view *v, size_t bytes) {
  enum hccl_algo_choice forced = flat_choice(v);
  if (forced == HCCL_ALGO_RING) return HCCL_ALGO_KIND_RING;
  if (forced == HCCL_ALGO_HD) return HCCL_ALGO_KIND_HD;
  const struct hccl_group *g = v->world;
  double p = g->n, steps = ceil_log2u(g->n), N = p * (double)bytes;
  double ring = (p - 1) * g->alpha_ns, bruck = steps * g->alpha_ns + N * COST_COPY_NS;
  return g->n > 2 && bruck < ring ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
}

/* The reduce-scatter of `bytes` a rank: HCCL_ALGO_KIND_HD (a recursive doubling allreduce of
 * the whole, log2 steps, when the whole fits a slot) or the ring, by the cost model or as
 * HCCL_ALGO forces. */
static enum hccl_algo_kind plan_reduce_scatter(const struct hccl_plan_view *v, size_t bytes) {
  enum hccl_algo_choice forced = flat_choice(v);
  const struct hccl_group *g = v->world;
  double p = g->n, N = p * (double)bytes;
  if (forced == HCCL_ALGO_RING || N > (double)g->chunk_bytes) return HCCL_ALGO_KIND_RING;
  if (forced == HCCL_ALGO_HD) return HCCL_ALGO_KIND_HD;
  double ring = cost_ring(g, N) / 2, rd = cost_hd(g, N) + N * COST_COPY_NS;
  return g->n > 2 && rd < ring ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
}

/* What each algorithm is called in traces and flight records (tests and users grep these). */
static const char *const NAMES[] = {
    [HCCL_PLAN_LOCAL] = "local",
    [HCCL_PLAN_ZERO_COPY] = "zero-copy",
    [HCCL_PLAN_RING_ALLREDUCE] = "ring",
    [HCCL_PLAN_HD_ALLREDUCE] = "halving-doubling",
    [HCCL_PLAN_HIER_RING] = "two-level, ring between servers",
    [HCCL_PLAN_HIER_HD] = "two-level, halving-doubling between servers",
    [HCCL_PLAN_HIER_ZCOPY_RING] = "two-level, ring between servers, zero-copy inside servers",
    [HCCL_PLAN_HIER_ZCOPY_HD] = "two-level, halving-doubling between servers, zero-copy inside "
                                "servers",
    [HCCL_PLAN_STAGED] = "staged",
    [HCCL_PLAN_HIER_STAGED_RING] = "two-level, ring between servers, staged inside servers",
    [HCCL_PLAN_HIER_STAGED_HD] = "two-level, halving-doubling between servers, staged inside "
                                 "servers",
    [HCCL_PLAN_RING_REDUCE_SCATTER] = "ring",
    [HCCL_PLAN_RD_REDUCE_SCATTER] = "recursive doubling allreduce",
    [HCCL_PLAN_RING_ALLGATHER] = "ring",
    [HCCL_PLAN_BRUCK_ALLGATHER] = "Bruck",
    [HCCL_PLAN_CHAIN_BROADCAST] = "chain",
    [HCCL_PLAN_BINOMIAL_BROADCAST] = "binomial tree",
    [HCCL_PLAN_CHAIN_REDUCE] = "chain",
    [HCCL_PLAN_BINOMIAL_REDUCE] = "binomial tree",
    [HCCL_PLAN_DISSEMINATION_BARRIER] = "dissemination",
    [HCCL_PLAN_DIRECT_GATHER] = "direct",
    [HCCL_PLAN_DIRECT_SCATTER] = "direct",
    [HCCL_PLAN_PAIRWISE_ALLTOALL] = "pairwise",
    [HCCL_PLAN_ONESHOT] = "one-shot",
    [HCCL_PLAN_LEAD_RING] = "two-level through leaders, ring between servers",
    [HCCL_PLAN_LEAD_HD] = "two-level through leaders, halving-doubling between servers",
    [HCCL_PLAN_LEAD_CHAIN_BROADCAST] = "through leaders, chain between servers",
    [HCCL_PLAN_LEAD_TREE_BROADCAST] = "through leaders, binomial tree between servers",
    [HCCL_PLAN_LEAD_CHAIN_REDUCE] = "through leaders, chain between servers",
    [HCCL_PLAN_LEAD_TREE_REDUCE] = "through leaders, binomial tree between servers",
};

/* HcclAllReduceAlgoName's words (hccl.h) for the allreduce algorithms. */
static const char *allreduce_word(enum hccl_plan_algo algo) {
  switch (algo) {
  case HCCL_PLAN_HD_ALLREDUCE:
    return "hd";
  case HCCL_PLAN_HIER_RING:
  case HCCL_PLAN_LEAD_RING:
    return "hier-ring";
  case HCCL_PLAN_HIER_HD:
  case HCCL_PLAN_LEAD_HD:
    return "hier-hd";
  default:
    return "ring";
  }
}

/* The zero-copy form of call (zcopy.c), or false when its collective has none. */
bool hccl__plan_zcopy_call(const struct hccl_call *call, struct hccl_zcopy_call *z) {
  static const struct {
    enum hccl_coll_kind coll;
    enum hccl_zcopy_kind zcopy;
  } kinds[] = {{HCCL_K_ALLREDUCE, HCCL_ZCOPY_ALLREDUCE},
               {HCCL_K_REDUCE_SCATTER, HCCL_ZCOPY_REDUCE_SCATTER},
               {HCCL_K_ALLGATHER, HCCL_ZCOPY_ALLGATHER},
               {HCCL_K_BROADCAST, HCCL_ZCOPY_BROADCAST}};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (kinds[i].coll == call->kind) {
      *z = (struct hccl_zcopy_call){.kind = kinds[i].zcopy,
                                    .send = call->send,
                                    .recv = call->recv,
                                    .count = call->count,
                                    .root = call->root};
      return true;
    }
  return false;
}

/* The zero-copy path (zcopy.c) runs only when every rank's buffers are HcclMemAlloc memory,
 * which the ranks learn in an exchange that costs two log2(p) message rounds. After an
 * exchange that finds ordinary memory somewhere, the next 1, 2, 4 ... 1024 eligible calls of
 * that collective skip the offer and run their ordinary algorithm at once; a successful
 * exchange resets that. Each collective keeps its own back-off, so ordinary buffers in one (a
 * broadcast of parameters) never slow the offers of another (the gradients' allreduce). All
 * ranks count the same calls and see the same results, so all decide alike. Whether call,
 * planned as algo, offers zero-copy first; plan->zcopy_eligible whether it counts. */
static bool plan_offer(const struct hccl_plan_view *v, const struct hccl_call *call,
                       enum hccl_plan_algo algo, struct hccl_plan *plan) {
  struct hccl_zcopy_call z;
  size_t send_bytes, recv_bytes;
  if (!v->offers || !hccl__plan_zcopy_call(call, &z)) return false;
  hccl__zcopy_shape(&z, v->nranks, call->esz, &send_bytes, &recv_bytes);
  if (!plan_zcopy(v, send_bytes > recv_bytes ? send_bytes : recv_bytes,
                  hccl__plan_two_level(algo)))
    return false;
  const struct hccl_zcopy_offers *b = &v->offers[z.kind];
  plan->zcopy_eligible = true;
  return b->calls >= b->next;
}

/* Appends algo, under its name, to plan's candidates. */
static void add(struct hccl_plan *plan, enum hccl_plan_algo algo) {
  plan->cand[plan->ncand++] = (struct hccl_cand){.algo = algo, .name = NAMES[algo]};
}

struct hccl_plan hccl__plan(const struct hccl_plan_view *v, const struct hccl_call *call) {
  size_t bytes = call->bytes;
  const struct hccl_plan_view *links = v; /* the links' own figures (the allgather's) */
  /* One kernel's shared cores pace a call's bytes (flat_priced) only when a step moves more
   * than a chunk: below that a step is one message, whose time is its partner's wake-up on
   * those cores, priced as such where ranks outnumber them (crowded) and by the links'
   * figures where not (bench/uneven.sh, docs/design.md). */
  struct hccl_plan_view priced_view = *v;
  struct hccl_group world, cross;
  bool short_msg = bytes <= v->world->chunk_bytes;
  priced_view.one_kernel = v->one_kernel && !short_msg;
  if (v->crowded && short_msg) { /* a hop there is a wake-up (CROWDED_HOP_NS) */
    world = crowded(v->world), cross = crowded(v->cross);
    priced_view.world = &world, priced_view.cross = &cross;
  }
  v = &priced_view;
  struct hccl_plan plan = {.ncand = 0};
  enum hccl_plan_algo algo = HCCL_PLAN_LOCAL;
  bool oneshot = false, staged = false;
  switch (call->kind) {
  case HCCL_K_ALLREDUCE:
    algo = plan_allreduce(v, bytes, &plan.tree_inside);
    oneshot = plan_oneshot(v, bytes);
    plan.word = oneshot ? "oneshot" : allreduce_word(algo);
    staged = plan_staged(v, bytes, algo);
    break;
  case HCCL_K_REDUCE_SCATTER:
    algo = plan_reduce_scatter(v, bytes) == HCCL_ALGO_KIND_HD ? HCCL_PLAN_RD_REDUCE_SCATTER
                                                              : HCCL_PLAN_RING_REDUCE_SCATTER;
    break;
  case HCCL_K_ALLGATHER:
    algo = plan_allgather(links, bytes) == HCCL_ALGO_KIND_HD ? HCCL_PLAN_BRUCK_ALLGATHER
                                                         : HCCL_PLAN_RING_ALLGATHER;
    break;
  case HCCL_K_BROADCAST:
  case HCCL_K_REDUCE:
    algo = plan_rooted(v, bytes, call->kind == HCCL_K_REDUCE, &plan.tree_inside);
    break;
  case HCCL_K_BARRIER:
    algo = HCCL_PLAN_DISSEMINATION_BARRIER;
    break;
  case HCCL_K_GATHER:
    algo = HCCL_PLAN_DIRECT_GATHER;
    break;
  case HCCL_K_SCATTER:
    algo = HCCL_PLAN_DIRECT_SCATTER;
    break;
  case HCCL_K_ALLTOALL:
  case HCCL_K_ALLTOALLV:
    algo = HCCL_PLAN_PAIRWISE_ALLTOALL;
    break;
  default:
    break;
  }
  if (v->nranks == 1) {
    /* Gather, scatter and all-to-all still run their own code (it copies the own block); the
     * others copy here, or do nothing. Either is named "local". */
    if (algo != HCCL_PLAN_DIRECT_GATHER && algo != HCCL_PLAN_DIRECT_SCATTER &&
        algo != HCCL_PLAN_PAIRWISE_ALLTOALL)
      algo = HCCL_PLAN_LOCAL;
    plan.cand[plan.ncand++] = (struct hccl_cand){.algo = algo, .name = NAMES[HCCL_PLAN_LOCAL]};
    return plan;
  }
  /* The two-level allreduce tries zero-copy and staged in its steps inside servers (hier.c):
   * those forms of it. */
  bool two_level = hccl__plan_two_level(algo), hd = algo == HCCL_PLAN_HIER_HD;
  if (plan_offer(v, call, algo, &plan))
    add(&plan, !two_level ? HCCL_PLAN_ZERO_COPY
               : hd       ? HCCL_PLAN_HIER_ZCOPY_HD
                          : HCCL_PLAN_HIER_ZCOPY_RING);
  if (oneshot) add(&plan, HCCL_PLAN_ONESHOT);
  if (staged)
    add(&plan, !two_level ? HCCL_PLAN_STAGED
               : hd       ? HCCL_PLAN_HIER_STAGED_HD
                          : HCCL_PLAN_HIER_STAGED_RING);
  add(&plan, algo);
  return plan;
}
