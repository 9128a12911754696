/*
 * progress.h - each rank publishes how far it got (its current collective, whether it is
 * inside it, whom it sleeps waiting for, a heartbeat while it sleeps) in a record its peers
 * can read (struct hccl_progress, shared by the shm transport). When a wait times out, the
 * message follows the chain of waits from the peer it waited for to the rank that is really
 * behind: one that has not reached the call, one inside it that waits for nobody, or one
 * whose heartbeat stopped (frozen by SIGSTOP or a debugger), as torch's desync report does.
 *
 * Cost: two stores into this rank's own cache line per call, one per sleep slice.
 */
#ifndef HCCL_PROGRESS_H
#define HCCL_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

struct hccl_comm;

/* This rank's record (the shared one when a transport has it, else a private one). */
struct hccl_progress *hccl__progress_self(struct hccl_comm *c);

/* Marks call number seq of collective `kind` started / ended on this rank. */
void hccl__progress_enter(struct hccl_comm *c, uint64_t seq, unsigned kind);
void hccl__progress_leave(struct hccl_comm *c);

/* Writes into buf why this rank's wait for `peer` in its current call may have timed out:
 * which rank is behind and how the waits chain to it, or, when the records do not reach
 * (a peer on another server), that `peer` did not reach this call or is stuck. */
void hccl__progress_explain(struct hccl_comm *c, uint32_t peer, char *buf, size_t len);

#endif
