/*
 * group.h - the ranks an algorithm runs over. The ring and halving-doubling algorithms never
 * walk "the" communicator: they run over a group view, a list of member ranks with their own
 * ring order and links, so the same code serves the whole communicator, the ranks of one
 * server (over device links), and one rank per server (over TCP), and a two-level
 * (hierarchical) allreduce composes them (hier.c), as NCCL builds per-channel rings and Gloo
 * binds an algorithm to its pairs.
 *
 *   member k      0    1    2    3        block k of a reduce-scatter or allgather buffer
 *   rank[k]       4    5    6    7        belongs to member k
 *   ring position 0 -> 1 -> 3 -> 2        ring[pos] = member at that position (topology order)
 *
 * The communicator builds its groups once (group.c, called by core/comm.c): `world` (every rank,
 * member k = rank k), `local` (this server's ranks, member k = local index k) and `cross` (the
 * ranks with this rank's local index, one per server, in server order). What they share is an
 * algorithm state (struct hccl_algo_state): the transport context their links are made through,
 * the scratch and a temp buffer. No algorithm sees the communicator.
 */
#ifndef HCCL_GROUP_H
#define HCCL_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"
#include "transport.h"

/* What a communicator's groups share: the transports' context (transport.h), through which a
 * link not made at init is made on first use; the scratch (the largest chunk of any group);
 * and hccl__group_temp's buffer, which grows and is kept for the next collective (one runs at a
 * time). The communicator keeps it; algorithms reach it through their groups. */
struct hccl_oneshot;

struct hccl_algo_state {
  struct hccl_tctx *tx;
  void *scratch;
  void *temp;
  size_t temp_bytes;
  /* zcopy.c's staging area for ordinary buffers (hccl__group_stage): HcclMemAlloc memory the
   * group's members map, and which of its three parts the next staged call starts at. */
  void *stage;
  size_t stage_bytes;
  uint32_t stage_next;
  /* oneshot.c's area and every member's window, for the world group on one server; NULL
   * until its first call (hccl__oneshot_free frees it). */
  struct hccl_oneshot *oneshot;
  /* The communicator made no links at creation (a split group's, core/comm.c's lazy_rest):
   * every link is made on its first use, so a missing partner link is no bug (no warning). */
  bool lazy;
};

struct hccl_zmemo;

struct hccl_group {
  uint32_t n;               /* members */
  uint32_t me;              /* this rank's member index */
  uint32_t *rank;           /* [n]: global rank of member k */
  uint32_t *ring;           /* [n]: member at ring position i */
  uint32_t *pos;            /* [n]: ring position of member k */
  struct hccl_link **links; /* indexed by GLOBAL rank (the communicator's channel-0 links) */
  size_t chunk_bytes;       /* largest message every link of the group takes */
  void *scratch;            /* chunk_bytes of scratch (binomial reduce) */
  /* zcopy.c's record of this group's last exchange (struct hccl_zmemo, zview.h), made with
   * the group (group.c); or NULL. Its own: a group copied from another must not share it (set it NULL). */
  struct hccl_zmemo *zmemo;
  struct hccl_algo_state *state; /* what the communicator's groups share */
  /* Cost of one message hop and of one byte on this group's slowest link, for the cost
   * model (transport ops' alpha and beta). */
  double alpha_ns, beta_ns;
};

/* Allocates g's member arrays for n members (HCCL_E_MEMORY, logged, when out of memory). */
HcclResult hccl__group_alloc(struct hccl_group *g, uint32_t n);
/* Frees them; a group never allocated (all NULL) is accepted. */
void hccl__group_free(struct hccl_group *g);
/* The local and cross groups of rank tx->rank, once the world ring is set: server_of[r] is
 * rank r's server index (of nservers), tx->local_index[r] its index on its server. The groups
 * that span servers (the cross group; the world group when nservers > 1) lose their zmemo.
 * uneven: the servers hold different counts (place.h), so a local index need not exist on
 * every server: the cross group is then the leaders (local index 0 of each server, in server
 * order) for a leader, and this rank alone for the others (hier.c's form through leaders). */
HcclResult hccl__groups_make(const struct hccl_tctx *tx, uint32_t nservers, bool uneven,
                             const uint32_t *server_of, struct hccl_group *world,
                             struct hccl_group *local, struct hccl_group *cross);
/* Sets need[rank] (indexed by global rank) for every member an algorithm over g may exchange
 * with, seen from g->me: ring neighbours (ring.c, zcopy.c) and hd.c's partners. The
 * communicator makes these links at init, O(log n) of them; hccl__group_link makes any other
 * on first use. */
void hccl__group_partners(const struct hccl_group *g, bool *need);
/* g's state (s), links (s->tx's channel-0 links), chunk (its smallest slot) and cost (its
 * slowest link's alpha and beta), once the links exist; with s->lazy, a link not made yet
 * counts as the one its transport would make (hccl__link_expect). */
void hccl__group_measure(struct hccl_algo_state *s, struct hccl_group *g);

/* `bytes` of memory for the collective running on g's communicator (one runs at a time): a
 * buffer g's state keeps and grows, so that calls of the same size allocate nothing.
 * NULL (logged) when out of memory. */
void *hccl__group_temp(const struct hccl_group *g, size_t bytes);

/* `bytes` of HcclMemAlloc memory that g's members may map, kept by g's state for later calls
 * (freed with the communicator). NULL (logged) when it cannot be had. */
void *hccl__group_stage(const struct hccl_group *g, size_t bytes);

/* The link to member k, made now (hccl__link_get, waiting) if it is not there: for the
 * algorithms whose partners are every member (a2a.c), so links are made on first use. Fails,
 * logged, when it cannot be made. */
HcclResult hccl__group_link_get(const struct hccl_group *g, uint32_t k, struct hccl_link **out);

/* The link to member k not made at init, which hccl__group_partners should have named: made
 * now, with a warning. NULL, logged, when it cannot be made. */
struct hccl_link *hccl__group_link_demand(const struct hccl_group *g, uint32_t k);

/* The link to member k. */
static inline struct hccl_link *hccl__group_link(const struct hccl_group *g, uint32_t k) {
  struct hccl_link *l = g->links[g->rank[k]];
  return l || k == g->me ? l : hccl__group_link_demand(g, k);
}

/* The member at ring position `pos` (any integer, taken modulo n). */
static inline uint32_t hccl__group_at(const struct hccl_group *g, int64_t pos) {
  int64_t n = g->n;
  return g->ring[((pos % n) + n) % n];
}

#endif
