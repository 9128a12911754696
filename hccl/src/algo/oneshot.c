/*
 * oneshot.c - the one-shot allreduce of a small message over a group on one server: one wait
 * per member per call, where recursive doubling makes log2(p) dependent hops and zero-copy
 * two synchronisations before any data moves. When ranks outnumber cores every wait that
 * sleeps costs a context switch, and one into a Python+torch process costs far more than into a
 * small C program (issue 43, point 7), so the number of waits is what this path cuts.
 *
 * Every member keeps an area of HcclMemAlloc memory (struct hccl_oneshot, made on the group's
 * first call, its windows learnt in that call's one exchange and kept; each call maps them
 * through the links, which keep the mappings):
 *
 *   head     member 0's: `arrived` (arrivals over all rounds) and `round` (the last round
 *            every member reached); every member's own: `seq` (the last round it reached, for
 *            the messages) and `waiting` (it sleeps on member 0's `round`)
 *   slot 0   the input of this member's even rounds
 *   slot 1   the input of its odd rounds
 *
 * A round (a call moves its message in rounds of at most HCCL_ONESHOT_ROUND_BYTES; the plan
 * picks this path only for one round) numbered k from the group's first:
 *
 *   1. copy the round's piece of the input into the own slot k % 2
 *   2. arrive: seq = k, then add one to member 0's `arrived`; the member that brings it to
 *      k p stores `round` = k and wakes the sleepers; every other waits until `round` = k
 *      (hccl__wait_change: its deadline, the abort marks, and each slice every other member's
 *      link's own check, so a member that died or left fails the wait on every member)
 *   3. reduce slot k % 2 of every member, in ring order (position 0 first, position p-1
 *      last, with hccl__zview_reduce: float16 and bfloat16 accumulated in float32 and
 *      rounded once), into the output: every member computes the same bits
 *
 * Why no second synchronisation: a member writes slot k % 2 again in round k + 2, after it
 * saw every member arrive in round k + 1; a member arrives in round k + 1 only after it has
 * finished reading round k's slots. So a slot is never written while anyone still reads it.
 * The fetch-and-add orders every member's copy before the last arrival (a release sequence),
 * whose store of `round` every waiter reads with acquire: the slots are complete when read.
 * A waiter sets its own `waiting` before it reads `round` and the last arriver stores `round`
 * before it reads the flags (all sequentially consistent), so no wake-up is lost; each member
 * has its own flag because hccl__wait_change clears it on the way out, which on a shared one
 * could hide a member that went on to sleep in the next round.
 */
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "log.h"
#include "zview.h"

struct oneshot_head {
  alignas(64) _Atomic uint32_t arrived;
  alignas(64) _Atomic uint32_t round;
  alignas(64) _Atomic uint32_t seq;
  _Atomic uint32_t waiting;
};

#define ONESHOT_SLOTS_AT ((sizeof(struct oneshot_head) + 63) / 64 * 64)
#define ONESHOT_AREA_BYTES (ONESHOT_SLOTS_AT + 2 * (size_t)HCCL_ONESHOT_ROUND_BYTES)

/* A communicator's one-shot state (struct hccl_algo_state's `oneshot`), for its world group on
 * one server. Every member makes the same calls and sees the same exchange, so all agree on
 * `ready` and count the same rounds. */
struct hccl_oneshot {
  void *area;   /* this member's (HcclMemAlloc) */
  int ready;    /* 0: not tried yet; 1: every member's area known; -1: some member has none */
  uint32_t rounds;                            /* rounds run so far: the next is rounds + 1 */
  struct hccl_window win[ZCOPY_MAX_MEMBERS]; /* every member's area, by member */
};

/* One round's view of every member's area. */
struct arrival {
  const struct hccl_group *g;
  char *area[ZCOPY_MAX_MEMBERS];
  uint32_t k;
};

static struct oneshot_head *head(const struct arrival *a, uint32_t j) {
  return (struct oneshot_head *)a->area[j];
}

/* Each sleep slice: every other member's link's own check (its death, its departure, its
 * abort). Every member, not only those still to arrive: the last may have arrived and died
 * before it stored `round`. */
static HcclResult check_members(void *arg, const struct hccl_wait *w, uint32_t peer) {
  (void)peer;
  const struct arrival *a = arg;
  const struct hccl_group *g = a->g;
  for (uint32_t j = 0; j < g->n; j++) {
    if (j == g->me) continue;
    struct hccl_link *l = hccl__group_link(g, j);
    if (l) HCCL_TRY(hccl__prim_check(l, w, g->rank[j]));
  }
  return HCCL_SUCCESS;
}

/* Step 2: returns once every member has arrived in round a->k. */
static HcclResult arrive(const struct hccl_prim *p, const struct arrival *a) {
  const struct hccl_group *g = a->g;
  struct oneshot_head *h0 = head(a, 0), *mine = head(a, g->me);
  atomic_store_explicit(&mine->seq, a->k, memory_order_relaxed);
  uint32_t before = atomic_fetch_add_explicit(&h0->arrived, 1, memory_order_acq_rel);
  if (before == a->k * g->n - 1) {
    atomic_store(&h0->round, a->k);
    for (uint32_t j = 0; j < g->n; j++)
      if (j != g->me && atomic_load(&head(a, j)->waiting)) {
        hccl__wake_all(&h0->round);
        break;
      }
    return HCCL_SUCCESS;
  }
  while (atomic_load_explicit(&h0->round, memory_order_acquire) != a->k) {
    uint32_t late = 0; /* whom the wait names: the first member still to arrive */
    for (uint32_t j = 0; j < g->n; j++)
      if (atomic_load_explicit(&head(a, j)->seq, memory_order_relaxed) != a->k) {
        late = j;
        break;
      }
    HCCL_TRY(hccl__wait_change(&h0->round, &mine->waiting, a->k - 1, g->rank[late], p->w,
                               check_members, (void *)a));
  }
  return HCCL_SUCCESS;
}

/* The first call: this member's area, and every member's window in one exchange. */
static HcclResult setup(const struct hccl_group *g, const struct hccl_prim *p,
                        struct hccl_oneshot *o) {
  if (hccl__mem_alloc(&o->area, ONESHOT_AREA_BYTES) != HCCL_SUCCESS) o->area = NULL;
  if (o->area) memset(o->area, 0, ONESHOT_SLOTS_AT); /* before any member can see it */
  struct zdesc d[ZCOPY_MAX_MEMBERS];
  bool ok;
  size_t bytes = o->area ? ONESHOT_AREA_BYTES : 1; /* no area: a window of NULL is none */
  HCCL_TRY(hccl__zview_windows(g, p, o->area, bytes, o->area, bytes, d, &ok));
  o->ready = ok ? 1 : -1;
  for (uint32_t k = 0; ok && k < g->n; k++)
    o->win[k] = d[k].send;
  return HCCL_SUCCESS;
}

HcclResult hccl__oneshot_allreduce(const struct hccl_group *g, const struct hccl_prim *p,
                                   const void *send, void *recv, size_t count, bool *ran) {
  *ran = false;
  if (g->n < 2 || g->n > ZCOPY_MAX_MEMBERS) return HCCL_SUCCESS;
  struct hccl_algo_state *s = g->state;
  if (!s->oneshot) {
    s->oneshot = calloc(1, sizeof(*s->oneshot));
    if (!s->oneshot) return hccl__fail(HCCL_E_MEMORY, "one-shot allreduce: out of memory");
  }
  struct hccl_oneshot *o = s->oneshot;
  if (!o->ready) HCCL_TRY(setup(g, p, o));
  if (o->ready < 0) return HCCL_SUCCESS;
  struct arrival a = {.g = g};
  for (uint32_t k = 0; k < g->n; k++) {
    if (k == g->me) {
      a.area[k] = o->area;
      continue;
    }
    void *at;
    HCCL_TRY(hccl__prim_map(hccl__group_link(g, k), &o->win[k], &at));
    a.area[k] = at;
  }
  size_t es = p->esz, per = HCCL_ONESHOT_ROUND_BYTES / es, cper = hccl__zview_per(g, p);
  uint32_t last = hccl__group_at(g, -1); /* reduced last: the ring's order from position 0 */
  for (size_t lo = 0; lo < count; lo += per) {
    size_t c = count - lo < per ? count - lo : per, off = lo * es;
    a.k = ++o->rounds;
    size_t slot = ONESHOT_SLOTS_AT + (a.k % 2) * (size_t)HCCL_ONESHOT_ROUND_BYTES;
    memcpy(a.area[g->me] + slot, (const char *)send + off, c * es);
    HCCL_TRY(arrive(p, &a));
    const char *in[ZCOPY_MAX_MEMBERS];
    for (uint32_t k = 0; k < g->n; k++)
      in[k] = a.area[k] + slot;
    for (size_t o2 = 0; o2 < c; o2 += cper)
      hccl__zview_reduce(g, p, in, last, o2 * es, (char *)recv + off + o2 * es,
                         c - o2 < cper ? c - o2 : cper);
  }
  *ran = true;
  return HCCL_SUCCESS;
}

void hccl__oneshot_free(struct hccl_algo_state *s) {
  if (!s->oneshot) return;
  hccl__mem_free(s->oneshot->area);
  free(s->oneshot);
  s->oneshot = NULL;
}
