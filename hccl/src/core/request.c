/*
 * request.c - HcclRequestTest and HcclRequestWait over either engine's requests, and the live
 * list that lets destroy free requests nobody waited for. See request.h.
 */
#include "request.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"

void hccl__request_attach(struct hccl_request *q, struct hccl_comm *comm, pthread_mutex_t *lock,
                          pthread_cond_t *cond, struct hccl_request **live) {
  q->comm = comm;
  q->lock = lock;
  q->cond = cond;
  q->live = live;
  q->help = NULL;
  q->live_prev = NULL;
  q->live_next = *live;
  if (*live) (*live)->live_prev = q;
  *live = q;
}

void hccl__request_complete(struct hccl_request *q, HcclResult result, const char *message) {
  q->result = result;
  if (result != HCCL_SUCCESS)
    snprintf(q->message, sizeof(q->message), "%s", message ? message : HcclGetLastErrorMessage());
  q->done = 1;
  pthread_cond_broadcast(q->cond);
}

static void unlink_live(struct hccl_request *q) {
  if (q->live_prev)
    q->live_prev->live_next = q->live_next;
  else
    *q->live = q->live_next;
  if (q->live_next) q->live_next->live_prev = q->live_prev;
}

void hccl__request_free_live(struct hccl_request **live) {
  for (struct hccl_request *q = *live, *n; q; q = n) {
    n = q->live_next;
    free(q);
  }
  *live = NULL;
}

HcclResult HcclRequestTest(HcclRequest q, int *done) {
  if (!q || !done)
    return hccl__fail(HCCL_E_PTR, "HcclRequestTest: %s is NULL", q ? "done" : "request");
  pthread_mutex_lock(q->lock);
  *done = q->done;
  pthread_mutex_unlock(q->lock);
  return HCCL_SUCCESS;
}

HcclResult HcclRequestWait(HcclRequest q) {
  if (!q) return hccl__fail(HCCL_E_PTR, "HcclRequestWait: request is NULL");
  /* Every call has a deadline (HCCL_EXEC_TIMEOUT) in its engine, so this wait ends. */
  pthread_mutex_lock(q->lock);
  while (!q->done)
    if (!q->help || !q->help(q)) pthread_cond_wait(q->cond, q->lock);
  unlink_live(q);
  pthread_mutex_unlock(q->lock);
  HcclResult r = q->result;
  /* The engine's thread logged it; make it the waiting thread's last error too. */
  if (r != HCCL_SUCCESS) hccl__set_last_error(q->message);
  free(q);
  return r;
}
