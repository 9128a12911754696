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
 * ranks with this rank's local index, one per server, in server order).
 */
#ifndef HCCL_GROUP_H
#define HCCL_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"
#include "transport.h"

struct hccl_group {
  uint32_t n;               /* members */
  uint32_t me;              /* this rank's member index */
  uint32_t *rank;           /* [n]: global rank of member k */
  uint32_t *ring;           /* [n]: member at ring position i */
  uint32_t *pos;            /* [n]: ring position of member k */
  struct hccl_link **links; /* indexed by GLOBAL rank (the communicator's channel-0 links) */
  size_t chunk_bytes;       /* largest message every link of the group takes */
  void *scratch;            /* chunk_bytes of scratch (binomial reduce) */
  struct hccl_comm *comm;   /* whose links these are */
  /* Cost of one message hop and of one byte on this group's slowest link, for the cost
   * model (transport ops' alpha and beta). */
  double alpha_ns, beta_ns;
};

struct hccl_comm;

/* Allocates g's member arrays for n members (HCCL_E_MEMORY, logged, when out of memory). */
HcclResult hccl__group_alloc(struct hccl_group *g, uint32_t n);
/* Frees them; a group never allocated (all NULL) is accepted. */
void hccl__group_free(struct hccl_group *g);
/* The communicator's local and cross groups, once the world ring is set; server_of[r] is rank
 * r's server index. */
HcclResult hccl__groups_make(struct hccl_comm *c, const uint32_t *server_of);
/* Sets need[rank] (indexed by global rank) for every member an algorithm over g may exchange
 * with, seen from g->me: ring neighbours (ring.c, zcopy.c) and hd.c's partners. The
 * communicator makes these links at init, O(log n) of them; hccl__group_link makes any other
 * on first use. */
void hccl__group_partners(const struct hccl_group *g, bool *need);
/* g's links (the communicator's channel-0 links), chunk (its smallest slot) and cost (its
 * slowest link's alpha and beta), once the links exist. */
void hccl__group_measure(struct hccl_comm *c, struct hccl_group *g);

/* `bytes` of memory for the collective running on g's communicator (one runs at a time): a
 * buffer the communicator keeps and grows, so that calls of the same size allocate nothing.
 * NULL (logged) when out of memory. */
void *hccl__group_temp(const struct hccl_group *g, size_t bytes);

/* The link to member k not made at init: made now (hccl__link_get, waiting), counted in
 * hccl_group.on_demand. NULL, logged, when it cannot be made. */
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
