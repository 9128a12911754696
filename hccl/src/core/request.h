/*
 * request.h - what HcclRequest points to, shared by the two engines that complete requests:
 * the collective queue (coll.c) and the point-to-point engine (p2p.c). Each engine embeds a
 * struct hccl_request as the first member of its own record and owns a lock, a condition
 * variable and a list of the requests nobody has waited for yet; the request points to all
 * three, so HcclRequestTest/HcclRequestWait work on either kind and p2p requests may complete
 * out of order relative to collective ones.
 *
 * Ownership: the engine that made a request fills it and sets done (under its lock); the
 * caller's HcclRequestWait frees it. Requests never waited for stay on the owner's live list
 * and are freed when the communicator is destroyed (hccl.h's contract for HcclCommDestroy).
 */
#ifndef HCCL_REQUEST_H
#define HCCL_REQUEST_H

#include <pthread.h>
#include <stdbool.h>

#include "hccl.h"

struct hccl_comm;

struct hccl_request {
  struct hccl_comm *comm;
  pthread_mutex_t *lock;      /* the owner's: guards done, result, message and the live list */
  pthread_cond_t *cond;       /* the owner's: broadcast whenever one of its requests is done */
  struct hccl_request **live; /* head of the owner's list of unwaited requests */
  struct hccl_request *live_prev, *live_next; /* on that list until HcclRequestWait */
  /* Called by HcclRequestWait with *lock held while the request is not done: may run the call
   * on the waiting thread (then returns true; the lock is held again on return). NULL: none. */
  bool (*help)(struct hccl_request *q);
  HcclResult result;
  /* The failing call's message, for the waiter's thread: as long as base/log.c's last error
   * (256 bytes cut a mismatch naming each rank's call, seen through torch 1.13's async path). */
  char message[1024];
  int done;
};

/* Sets the owner fields of q and puts it on the owner's live list. Caller holds *lock. */
void hccl__request_attach(struct hccl_request *q, struct hccl_comm *comm, pthread_mutex_t *lock,
                          pthread_cond_t *cond, struct hccl_request **live);

/* Records the call's result and, when it failed, `message` (NULL: this thread's last error
 * message), marks q done and wakes its waiters. Caller holds q->lock; q may be freed by a
 * waiter once the lock is released. */
void hccl__request_complete(struct hccl_request *q, HcclResult result, const char *message);

/* Frees every request still on a live list (destroy, after the owner's thread has stopped). */
void hccl__request_free_live(struct hccl_request **live);

#endif
