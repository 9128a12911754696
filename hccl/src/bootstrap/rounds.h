/*
 * rounds.h - the bootstrap's rounds through the store: each rank publishes one record under
 * "<prefix>/<round>/<rank>" and reads every rank's, and the store's part ends with a "done"
 * handshake so no rank loses the store while it still reads. core/comm.c runs the rounds
 * ("info", "conn", "ready") and decides what the records hold.
 */
#ifndef HCCL_ROUNDS_H
#define HCCL_ROUNDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"

struct hccl_store;
struct hccl_store_server;

/* What the rounds are given of a communicator, and all they read: its store, the prefix of its
 * keys, who this rank is among how many, and how long to wait. core/comm.c fills one where it
 * runs a round; the rounds never see the communicator. */
struct hccl_rounds {
  struct hccl_store *store;
  struct hccl_store_server *server; /* rank 0's store server, or NULL: finish stops it */
  bool store_external;              /* the caller's store: "done" only after a failure, and a
                                     * timeout names the connect timeout, not
                                     * HCCL_CONNECT_TIMEOUT */
  const char *key_prefix;           /* keys are "<key_prefix>/<round>/..." */
  uint32_t rank, nranks;
  int64_t connect_timeout_ms; /* each round's deadline, and each "done" wait's */
};

/* Same value for every process of one server (host name, boot id, network namespace); the
 * host name is written to host. */
uint64_t hccl__host_identity(char *host, size_t len);

/* Publishes `mine` (len bytes) for round `round` and fills all[r * len] with every rank's, in
 * rank order. Waits up to the connect timeout for each; the failure names the rank missing. */
HcclResult hccl__round_allgather(const struct hccl_rounds *rd, const char *round,
                                 const void *mine, size_t len, void *all);

/* Ends the store's part of the bootstrap, on success and on failure alike, closing rd->store
 * and stopping rd->server (rank 0's), and setting both to NULL: the caller forgets its own
 * pointers to them too. all_joined: every rank published its "info" record; failed: the
 * bootstrap failed after that (the same checks fail on every rank). */
void hccl__round_finish(struct hccl_rounds *rd, bool all_joined, bool failed);

#endif
