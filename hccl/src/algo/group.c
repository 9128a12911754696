/*
 * group.c - making the group views algorithms run over (group.h): their member lists, the
 * communicator's local and cross groups once the world ring is known, and each group's chunk
 * and cost once the links exist.
 */
#include <stdlib.h>

#include "group.h"
#include "links.h"
#include "log.h"
#include "mem_region.h"
#include "partners.h"
#include "zview.h"

/* A group's largest message when its links allow more. */
#define DEFAULT_CHUNK (512u << 10)

/* What zcopy.c keeps of a group of n members from one call to the next (zview.h): NULL where
 * it runs no exchange (n < 2 or too many members) or out of memory, which only makes every
 * exchange send its descriptors in full. Freed with free(). */
static struct hccl_zmemo *zmemo_new(uint32_t n) {
  if (n < 2 || n > ZCOPY_MAX_MEMBERS) return NULL;
  struct hccl_zmemo *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->n = n;
  for (int s = 0; s < ZCOPY_MAX_STEPS; s++)
    m->to[s] = m->from[s] = UINT32_MAX;
  return m;
}

HcclResult hccl__group_alloc(struct hccl_group *g, uint32_t n) {
  g->n = n;
  g->rank = calloc(n, sizeof(uint32_t));
  g->ring = calloc(n, sizeof(uint32_t));
  g->pos = calloc(n, sizeof(uint32_t));
  if (!g->rank || !g->ring || !g->pos)
    return hccl__fail(HCCL_E_MEMORY, "out of memory for a group of %u ranks", n);
  g->zmemo = zmemo_new(n);
  return HCCL_SUCCESS;
}

void hccl__group_free(struct hccl_group *g) {
  free(g->rank);
  free(g->ring);
  free(g->pos);
  free(g->zmemo);
}

/* Zero-copy runs among the ranks of one server only: a group across servers keeps no memo. */
static void no_zcopy(struct hccl_group *g) {
  free(g->zmemo);
  g->zmemo = NULL;
}

/* The local and cross groups (group.h), once the world ring is known: the local group's ring
 * is the world ring's stretch on this server; the cross group's members are in server order. */
HcclResult hccl__groups_make(const struct hccl_tctx *tx, uint32_t nservers, bool uneven,
                             const uint32_t *server_of, struct hccl_group *world,
                             struct hccl_group *local, struct hccl_group *cross) {
  uint32_t mine = server_of[tx->rank], my_index = tx->local_index[tx->rank];
  HCCL_TRY(hccl__group_alloc(local, tx->local_nranks));
  /* Uneven: the leaders (local index 0) for a leader, this rank alone for the others. */
  bool alone = uneven && my_index != 0;
  HCCL_TRY(hccl__group_alloc(cross, alone ? 1 : nservers));
  no_zcopy(cross);
  if (nservers > 1) no_zcopy(world);
  for (uint32_t r = 0; r < tx->nranks; r++) {
    if (server_of[r] == mine) local->rank[tx->local_index[r]] = r;
    if (!alone && tx->local_index[r] == my_index) cross->rank[server_of[r]] = r;
  }
  if (alone) cross->rank[0] = tx->rank;
  uint32_t pos = 0;
  for (uint32_t i = 0; i < tx->nranks; i++) {
    uint32_t r = world->ring[i];
    if (server_of[r] == mine) local->ring[pos++] = tx->local_index[r];
  }
  for (uint32_t k = 0; k < local->n; k++)
    local->pos[local->ring[k]] = k;
  for (uint32_t s = 0; s < cross->n; s++)
    cross->ring[s] = cross->pos[s] = s;
  local->me = my_index;
  cross->me = alone ? 0 : mine;
  return HCCL_SUCCESS;
}

/* A group's chunk (the smallest slot of its links) and cost (its slowest link's), once the
 * links exist; every group shares the communicator's links and scratch. */
void hccl__group_measure(struct hccl_algo_state *s, struct hccl_group *g) {
  g->links = s->tx->links[HCCL_CHANNEL_COLL];
  g->state = s;
  g->chunk_bytes = DEFAULT_CHUNK;
  g->alpha_ns = g->beta_ns = 0;
  for (uint32_t k = 0; k < g->n; k++) {
    const struct hccl_link *l = g->links[g->rank[k]]; /* the links made so far, none made here */
    const struct hccl_transport_ops *t = l ? l->ops : NULL;
    size_t slot = l ? l->slot_bytes : 0;
    if (!l && s->lazy && k != g->me) t = hccl__link_expect(s->tx, g->rank[k], &slot);
    if (!t) continue;
    if (slot && slot < g->chunk_bytes) g->chunk_bytes = slot;
    if (t->alpha_ns > g->alpha_ns) g->alpha_ns = t->alpha_ns;
    if (t->beta_ns > g->beta_ns) g->beta_ns = t->beta_ns;
  }
}

void hccl__group_partners(const struct hccl_group *g, bool *need) {
  if (g->n < 2) return;
  uint32_t pos = g->pos[g->me];
  need[g->rank[hccl__group_at(g, (int64_t)pos - 1)]] = true;
  need[g->rank[hccl__group_at(g, (int64_t)pos + 1)]] = true;
  uint32_t at[HCCL_HD_MAX_PARTNERS];
  uint32_t n = hccl__hd_partner_positions(g->n, pos, at);
  for (uint32_t i = 0; i < n; i++)
    need[g->rank[g->ring[at[i]]]] = true;
}

void *hccl__group_temp(const struct hccl_group *g, size_t bytes) {
  struct hccl_algo_state *c = g->state;
  if (bytes <= c->temp_bytes) return c->temp;
  free(c->temp);
  c->temp = malloc(bytes);
  c->temp_bytes = c->temp ? bytes : 0;
  if (!c->temp) hccl__fail(HCCL_E_MEMORY, "out of memory for %zu bytes of a collective's", bytes);
  return c->temp;
}

void *hccl__group_stage(const struct hccl_group *g, size_t bytes) {
  struct hccl_algo_state *c = g->state;
  if (bytes <= c->stage_bytes) return c->stage;
  hccl__mem_free(c->stage);
  c->stage = NULL;
  c->stage_bytes = 0;
  c->stage_next = 0;
  if (hccl__mem_alloc(&c->stage, bytes) != HCCL_SUCCESS) return NULL;
  c->stage_bytes = bytes;
  return c->stage;
}

HcclResult hccl__group_link_get(const struct hccl_group *g, uint32_t k, struct hccl_link **out) {
  return hccl__link_get(g->state->tx, HCCL_CHANNEL_COLL, g->rank[k], HCCL_CONNECT_WAIT, out);
}

struct hccl_link *hccl__group_link_demand(const struct hccl_group *g, uint32_t k) {
  struct hccl_link *l = NULL;
  if (hccl__group_link_get(g, k, &l) != HCCL_SUCCESS) return NULL;
  if (!g->state->lazy)
    HCCL_WARN("rank %u made its link to rank %u on first use inside a collective: "
            "hccl__group_partners missed it (a bug; the collective goes on)",
            g->state->tx->rank, g->rank[k]);
  return l;
}
