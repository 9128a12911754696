/*
 * staged.c - allreduce of ordinary (malloc) buffers over a group on one server through a
 * staging area: HcclMemAlloc memory of each member's (the group state's `stage`) that every
 * member maps once (zview.h), so that a block is reduced straight from all members' staged
 * inputs, as zcopy.c does from their buffers, instead of passing hop by hop round the ring.
 *
 * An area has three parts; a part has a slot for each member; a round moves one slot's worth
 * of every block (block k: the ring's even cut, member k reduces it):
 *
 *   copy in      each member copies its input's piece of every other member's block into
 *                that member's slot of its own current part
 *   reduce       member k reduces its block's piece from slot k of every other member's part
 *                and its own input (hccl__zview_reduce: the ring's order, so the ring's bits)
 *                into slot k of its own part
 *   barrier      (dissemination, log2(p) message hops)
 *   copy out     each member copies slot k of member k's part into its output, for every k
 *
 * The next round's copy in runs before the barrier, into the next part, so a round costs one
 * barrier. A part is written again three rounds later, after a barrier every member reached
 * after its copy out from it. The rounds go on from part to part across calls; the first
 * round's copy in happens before the exchange that opens the view, which tells that every
 * member has entered the call (so has left the last one's older parts) and which part each
 * member started at. A member's work per byte is a copy in of (p-1)/p, 1/p of a reduction
 * over p inputs and a copy out (with streaming stores when the output is large, prims.h's
 * stream_out), against the ring's p-1 copies into slots, reductions and copies out of 1/p each,
 * each with a hand-over to the next member, which on a shared core waits for a context switch.
 *
 * With `between` (the two-level allreduce, hier.c) the rounds are split in two: all rounds of
 * copy in and reduce into the member's own block of its output (a reduce-scatter), then
 * `between` on that block, then all rounds of putting the block into its slot and copying every
 * slot out (an allgather). The cut and the order of every reduction are the ring's, so the bits
 * are those of hier.c's ring steps.
 */
#include <string.h>

#include "algo.h"
#include "zview.h"

/* Bytes one round moves a member (one part), at most: a slot a member, each no larger than the
 * group's chunk (its links' slot, which HCCL_BUFFSIZE bounds), so an area takes 3 x 1 MiB at
 * most, or 3 n chunks. 8 ranks on 2 cores, 64 MiB: rounds of 256 KiB to 2 MiB within noise of
 * each other, 64 KiB 10-20% slower (four times the barriers), 4 MiB 20-50% slower (the areas no
 * longer in the caches). */
#define STAGE_ROUND_BYTES (1u << 20)
#define STAGE_PARTS 3

struct stage_run {
  const struct hccl_group *g;
  const struct hccl_prim *p;
  size_t es, slot, part, per; /* bytes of a slot, of a part; elements of a slot */
  size_t first[ZCOPY_MAX_MEMBERS], len[ZCOPY_MAX_MEMBERS]; /* the blocks' even cut */
  char *area[ZCOPY_MAX_MEMBERS]; /* every member's area (this member's own; the others mapped) */
  uint32_t h0[ZCOPY_MAX_MEMBERS]; /* the part each member's first round uses */
  size_t t;                       /* rounds run so far in this call */
};

/* Elements of block k that round r of a pass moves. */
static size_t piece(const struct stage_run *s, uint32_t k, size_t r) {
  size_t lo = r * s->per;
  if (s->len[k] <= lo) return 0;
  return s->len[k] - lo < s->per ? s->len[k] - lo : s->per;
}

/* Slot j of the part member k uses `ahead` rounds after the current one. */
static char *slot(const struct stage_run *s, uint32_t k, size_t ahead, uint32_t j) {
  return s->area[k] + (s->h0[k] + s->t + ahead) % STAGE_PARTS * s->part + j * s->slot;
}

/* Where round r's piece of block k lies in a whole buffer. */
static size_t at(const struct stage_run *s, uint32_t k, size_t r) {
  return (s->first[k] + r * s->per) * s->es;
}

/* Round r's piece of every other member's block of send into the own part `ahead` rounds on;
 * the own block is reduced straight from send. */
static void copy_in(const struct stage_run *s, const void *send, size_t r, size_t ahead) {
  uint32_t me = s->g->me;
  for (uint32_t k = 0; k < s->g->n; k++)
    if (k != me)
      memcpy(slot(s, me, ahead, k), (const char *)send + at(s, k, r), piece(s, k, r) * s->es);
}

/* Round r's piece of this member's block, reduced over the other members' current parts and
 * its own input, into dst (which may be that input's piece: as in zcopy.c, the own input is
 * read last, element by element as dst is written). */
static void reduce_in(const struct stage_run *s, const void *send, size_t r, char *dst) {
  const struct hccl_group *g = s->g;
  const char *in[ZCOPY_MAX_MEMBERS];
  for (uint32_t k = 0; k < g->n; k++)
    in[k] = slot(s, k, 0, g->me);
  in[g->me] = (const char *)send + at(s, g->me, r);
  size_t c = piece(s, g->me, r), cper = hccl__zview_per(g, s->p);
  for (size_t o = 0; o < c; o += cper)
    hccl__zview_reduce(g, s->p, in, g->me, o * s->es, dst + o * s->es,
                       c - o < cper ? c - o : cper);
}

/* Round r's piece of every block but block skip's (n: none), from its owner's current part,
 * into recv. */
static void copy_out(const struct stage_run *s, void *recv, size_t r, uint32_t skip) {
  for (uint32_t k = 0; k < s->g->n; k++) {
    if (k == skip) continue;
    hccl__prim_write_out(s->p, (char *)recv + at(s, k, r), slot(s, k, 0, k),
                         piece(s, k, r) * s->es);
  }
}

/* The allreduce with no `between`: reduce into the own slot, copy every slot out. */
static HcclResult fused(struct stage_run *s, const void *send, void *recv, size_t rounds) {
  uint32_t me = s->g->me;
  for (size_t r = 0; r < rounds; r++, s->t++) {
    reduce_in(s, send, r, slot(s, me, 0, me));
    if (r + 1 < rounds) copy_in(s, send, r + 1, 1);
    HCCL_TRY(hccl__dissemination_barrier(s->g, s->p));
    copy_out(s, recv, r, s->g->n);
  }
  return HCCL_SUCCESS;
}

/* The two-level form: reduce-scatter rounds, between, allgather rounds. */
static HcclResult split(struct stage_run *s, const void *send, void *recv, size_t rounds,
                        HcclResult (*between)(void *, void *, size_t), void *between_arg) {
  const struct hccl_group *g = s->g;
  uint32_t me = g->me;
  char *own = (char *)recv + at(s, me, 0);
  for (size_t r = 0; r < rounds; r++, s->t++) {
    reduce_in(s, send, r, own + r * s->per * s->es);
    if (r + 1 < rounds) {
      copy_in(s, send, r + 1, 1);
      HCCL_TRY(hccl__dissemination_barrier(g, s->p));
    }
  }
  HCCL_TRY(between(between_arg, own, s->len[me]));
  /* The current part was last read three rounds ago (or in the last call), before a barrier
   * every member has passed; the barrier after it also tells that all have left between. */
  memcpy(slot(s, me, 0, me), own, piece(s, me, 0) * s->es);
  HCCL_TRY(hccl__dissemination_barrier(g, s->p));
  for (size_t r = 0; r < rounds; r++, s->t++) {
    if (r + 1 < rounds)
      memcpy(slot(s, me, 1, me), own + (r + 1) * s->per * s->es, piece(s, me, r + 1) * s->es);
    copy_out(s, recv, r, me);
    if (r + 1 < rounds) HCCL_TRY(hccl__dissemination_barrier(g, s->p));
  }
  return HCCL_SUCCESS;
}

HcclResult hccl__staged_allreduce(const struct hccl_group *g, const struct hccl_prim *p,
                                  const void *send, void *recv, size_t count,
                                  HcclResult (*between)(void *, void *, size_t),
                                  void *between_arg, bool *ran) {
  *ran = false;
  if (g->n < 2 || g->n > ZCOPY_MAX_MEMBERS) return HCCL_SUCCESS;
  uint32_t me = g->me;
  struct hccl_prim part = hccl__prim_partial(p); /* with `between`, which finishes the call */
  struct stage_run s = {.g = g, .p = between ? &part : p, .es = p->esz};
  s.slot = STAGE_ROUND_BYTES / g->n < g->chunk_bytes ? STAGE_ROUND_BYTES / g->n : g->chunk_bytes;
  s.slot = s.slot / 64 * 64;
  s.part = s.slot * g->n;
  s.per = s.slot / s.es;
  for (uint32_t k = 0; k < g->n; k++)
    s.len[k] = hccl__even_block(count, g->n, k, &s.first[k]);
  size_t rounds = (s.len[0] + s.per - 1) / s.per, bytes = STAGE_PARTS * s.part;
  s.area[me] = hccl__group_stage(g, bytes);
  s.h0[me] = g->state->stage_next % STAGE_PARTS;
  if (s.area[me]) copy_in(&s, send, 0, 0);
  /* The exchange carries each member's area (as its send window) and the part its first round
   * uses (as its receive window): every member then reads each area at its owner's part, even
   * where the members' counts of earlier rounds differ. A member without an area offers none
   * (a window of NULL is none), so all see it and run another algorithm. */
  char *first_part = s.area[me] ? s.area[me] + s.h0[me] * s.part : NULL;
  struct zview v;
  bool ok;
  HCCL_TRY(hccl__zview_open(g, p, s.area[me], s.area[me] ? bytes : 1, first_part,
                            s.area[me] ? s.part : 1, &v, &ok));
  if (!ok) return HCCL_SUCCESS;
  for (uint32_t k = 0; k < g->n; k++) {
    s.area[k] = (char *)v.in[k];
    s.h0[k] = (uint32_t)((size_t)(v.out[k] - v.in[k]) / s.part);
  }
  HcclResult res = between ? split(&s, send, recv, rounds, between, between_arg)
                           : fused(&s, send, recv, rounds);
  g->state->stage_next = (uint32_t)((s.h0[me] + s.t) % STAGE_PARTS);
  *ran = true;
  return res;
}
