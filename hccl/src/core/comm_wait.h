/*
 * comm_wait.h - a communicator's side of its waits: the struct hccl_waiter (base/wait.h) every
 * wait of the communicator carries, whose functions read the communicator (the abort checks of
 * every transport, the peers' progress records for the deadlock and timeout messages, the
 * trace). The wait itself is base/wait.c's: a transport waits without knowing the communicator.
 */
#ifndef HCCL_COMM_WAIT_H
#define HCCL_COMM_WAIT_H

#include "hccl.h"
#include "wait.h"

struct hccl_comm;

/* Fills c->waiter, once the settings, the placement and the trace are known. */
void hccl__comm_waiter_init(struct hccl_comm *c);

/* A wait of c's for `what`, its deadline HCCL_EXEC_TIMEOUT from now; progress: the record it
 * publishes (c->progress.self for a collective), or NULL. */
struct hccl_wait hccl__comm_wait(struct hccl_comm *c, const char *what,
                                 struct hccl_progress *progress);

/* Whether any transport has heard of an abort (a peer's failure, HcclCommAbort): returns
 * HCCL_E_REMOTE, logged with the origin's reason, if so. Called at the start and end of every
 * collective and every sleep slice of a wait. */
HcclResult hccl__check_aborts(struct hccl_comm *c, const char *what);

#endif
