/*
 * comm_wait.h - a communicator's wait for a word in shared memory (the pieces are base/wait.h):
 * spin, yield, then futex sleep with a deadline, the peer checks, the abort checks of every
 * transport, this rank's published progress and the deadlock and timeout messages that read
 * the peers' records. Here, not in base/, because it reads the communicator.
 */
#ifndef HCCL_COMM_WAIT_H
#define HCCL_COMM_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "hccl.h"
#include "wait.h"

/* Waits until *word != old. `waiting` is the sleeper flag a poster checks (hccl__wake);
 * `peer` is the global rank waited for; `check` is called each sleep slice (about 10 ms) and
 * may return an error to end the wait (dead peer, abort). Returns HCCL_E_TIMEOUT (logged,
 * naming the peer and w->what) at the deadline. */
HcclResult hccl__wait_change(_Atomic uint32_t *word, _Atomic uint32_t *waiting, uint32_t old,
                             uint32_t peer, const struct hccl_wait *w,
                             HcclResult (*check)(const struct hccl_wait *w, uint32_t peer));

/* Whether any transport has heard of an abort (a peer's failure, HcclCommAbort): returns
 * HCCL_E_REMOTE, logged with the origin's reason, if so. Called at the start and end of every
 * collective and every sleep slice of a wait. */
HcclResult hccl__check_aborts(struct hccl_comm *c, const char *what);

#endif
