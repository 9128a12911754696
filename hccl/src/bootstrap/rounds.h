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

struct hccl_comm;

/* Same value for every process of one server (host name, boot id, network namespace); the
 * host name is written to host. */
uint64_t hccl__host_identity(char *host, size_t len);

/* Publishes `mine` (len bytes) for round `round` and fills all[r * len] with every rank's, in
 * rank order. Waits up to the connect timeout for each; the failure names the rank missing. */
HcclResult hccl__round_allgather(struct hccl_comm *c, const char *round, const void *mine,
                                 size_t len, void *all);

/* Ends the store's part of the bootstrap, on success and on failure alike, closing the store
 * and stopping rank 0's server. all_joined: every rank published its "info" record. */
void hccl__round_finish(struct hccl_comm *c, bool all_joined);

#endif
