/*
 * links.c - a communicator's links: for every other rank, the first transport of the priority
 * table (transport.c) that can join the two is asked for a link on each channel, as NCCL's
 * transport selection does. Every rank asks for every peer today (a full mesh across servers:
 * docs/scaling.md says what that costs and what is to replace it).
 */
#include <stdio.h>

#include "comm.h"
#include "log.h"
#include "transport.h"

/* Connects c->links[r] and c->p2p[r] for every rank r but this one. Fails naming the pair when
 * no transport can join them, or with the transport's reason. */
HcclResult hccl__links_connect(struct hccl_comm *c) {
  for (uint32_t r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    const struct hccl_transport_ops *t = NULL;
    for (int i = 0; hccl__transports[i]; i++)
      if (hccl__transports[i]->can_connect(c, r)) {
        t = hccl__transports[i];
        break;
      }
    if (!t) {
      char tried[128] = "";
      for (int i = 0, n = 0; hccl__transports[i] && n < (int)sizeof(tried); i++)
        n += snprintf(tried + n, sizeof(tried) - (size_t)n, "%s%s", i ? ", " : "",
                      hccl__transports[i]->name);
      return hccl__fail(HCCL_E_NOT_SUPPORT,
                        "no transport joins rank %u (server %s) and rank %u (server %s): none of "
                        "%s can connect them",
                        c->rank, c->peers[c->rank].host, r, c->peers[r].host, tried);
    }
    HCCL_TRY(t->connect(c, r, HCCL_CHANNEL_COLL, &c->links[r]));
    HCCL_TRY(t->connect(c, r, HCCL_CHANNEL_P2P, &c->p2p[r]));
  }
  return HCCL_SUCCESS;
}
