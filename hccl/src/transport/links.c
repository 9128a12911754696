/*
 * links.c - a communicator's links (the link tables of its transport context): for a peer, the
 * first transport of the priority table (transport.c) that can join the two is asked for a
 * link on a channel, as NCCL's transport selection does. At init a rank makes only the links
 * its collectives use: both channels to the ranks of its server, and channel 0 to the
 * partners of the algorithms over the world and cross groups (ring neighbours,
 * halving-doubling and tree partners: O(log n) of them). Any other link (point-to-point,
 * all-to-all, gather, scatter) is made on first use, which is what keeps a job of thousands of
 * ranks from holding a full mesh of sockets (docs/scaling.md).
 */
#include <stdio.h>

#include "links.h"
#include "log.h"
#include "transport.h"

const struct hccl_transport_ops *hccl__link_expect(const struct hccl_tctx *c, uint32_t peer,
                                                   size_t *slot) {
  *slot = 0;
  HCCL_FOR_EACH_TRANSPORT_WITH(t, can_connect) {
    if (!t->can_connect(c, peer)) continue;
    if (t->slot_bytes) *slot = t->slot_bytes(c);
    return t;
  }
  return NULL;
}

static HcclResult pick(const struct hccl_tctx *c, uint32_t r,
                       const struct hccl_transport_ops **out) {
  size_t slot;
  *out = hccl__link_expect(c, r, &slot);
  if (*out) return HCCL_SUCCESS;
  char tried[128] = "";
  for (int i = 0, n = 0; hccl__transports[i] && n < (int)sizeof(tried); i++)
    n += snprintf(tried + n, sizeof(tried) - (size_t)n, "%s%s", i ? ", " : "",
                  hccl__transports[i]->name);
  return hccl__fail(HCCL_E_NOT_SUPPORT,
                    "no transport joins rank %u (server %s) and rank %u (server %s): none of %s "
                    "can connect them",
                    c->rank, c->peers[c->rank].host, r, c->peers[r].host, tried);
}

HcclResult hccl__link_get(struct hccl_tctx *c, int channel, uint32_t peer, int mode,
                          struct hccl_link **out) {
  struct hccl_link **slot = &c->links[channel][peer];
  *out = *slot;
  if (*slot || peer == c->rank) return HCCL_SUCCESS;
  const struct hccl_transport_ops *t = NULL;
  HCCL_TRY(pick(c, peer, &t));
  HCCL_TRY(t->connect(c, peer, channel, mode, slot));
  *out = *slot;
  return HCCL_SUCCESS;
}

/* The ranks above this one first, then those below: at init a transport whose link is made by
 * one end has the lower rank make it without waiting for the higher (HCCL_CONNECT_INIT), so a
 * rank makes every link it owes before it waits for any, and no wait chains through another
 * rank's waits. In rank order, rank k waited for its lower partners before dialling its higher
 * ones, which waited for it in turn: a chain as long as the ring (bench/split.sh's SPLIT_LOG
 * shows the "links" phase). */
HcclResult hccl__links_connect(struct hccl_tctx *c, const bool *need) {
  uint64_t mine = c->peers[c->rank].host_hash;
  struct hccl_link *l;
  for (uint32_t k = 1; k < c->nranks; k++) {
    uint32_t r = (c->rank + k) % c->nranks;
    bool local = c->peers[r].host_hash == mine;
    if (local || need[r]) HCCL_TRY(hccl__link_get(c, HCCL_CHANNEL_COLL, r, HCCL_CONNECT_INIT, &l));
    if (local) HCCL_TRY(hccl__link_get(c, HCCL_CHANNEL_P2P, r, HCCL_CONNECT_INIT, &l));
  }
  return HCCL_SUCCESS;
}
