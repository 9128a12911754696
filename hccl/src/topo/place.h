/*
 * place.h - where each rank of a communicator sits: from every rank's server identity and
 * device choice (what the bootstrap's "info" round gathered), the servers in order of their
 * lowest rank, each rank's index on its server, its device, and the world ring (servers in
 * order, each server's ranks in its topology's ring order). Pure: every rank computes the
 * same answer from the same input, so a bad job fails the same way on every rank.
 */
#ifndef HCCL_PLACE_H
#define HCCL_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"
#include "topo.h"

struct hccl_place_rank {
  uint64_t host_hash;     /* same value = same server */
  int32_t device;         /* in: the rank's choice, -1 = none; out: its device */
  const char *host;       /* the server's name, for messages */
  const char *device_src; /* where the choice came from, for messages */
};

struct hccl_place {
  uint32_t nservers;
  uint32_t per_server;   /* ranks on the first server (on every server unless uneven) */
  uint32_t *server_of;   /* [n], the caller's: server index of each rank */
  uint32_t *local_index; /* [n], the caller's: index among its server's ranks, in rank order */
  uint32_t *ring;        /* [n], the caller's: the rank at each world ring position */
  /* In: the survivors of a shrink (core/comm_shrink.c), who cannot choose their number: no
   * topology device rule at all, not even ascend910's counts and halves (without it, only a
   * topology with device_counts limits the count per server or makes servers equal). */
  bool any_count;
  /* Out: the servers hold different counts (2 + 1, 3 + 2). A rank's local index then
   * has no peer on every other server, so there is no cross group: such a communicator runs
   * flat algorithms only (group.c, plan.c). */
  bool uneven;
};

/* Places the n ranks of r. topo: the servers' topology (HCCL_TOPO_FILE), whose device rules
 * each server's devices must meet; NULL: a flat server as large as the devices used (any
 * count per server, servers of different counts). A rank without a device gets its local
 * index. HCCL_E_PARA with the reason in err (two ranks on one device; a topology's rule: a
 * server's rank count not in its device_counts, servers of different counts under such a
 * topology, a device out of its range, a job across its groups); HCCL_E_MEMORY. */
HcclResult hccl__place(struct hccl_place_rank *r, uint32_t n, const struct hccl_topo *topo,
                       struct hccl_place *out, char *err, size_t errlen);

#endif
