/*
 * coll_run.h - how a validated collective call runs (coll_run.c): a communicator's call queue
 * (the FIFO of asynchronous calls, its lock and condition, and the worker thread that runs it),
 * and what the rest of the core asks of it: run or queue a call, wait for the queue to empty,
 * stop the worker.
 */
#ifndef HCCL_COLL_RUN_H
#define HCCL_COLL_RUN_H

#include <pthread.h>
#include <stdbool.h>

#include "hccl.h"

struct hccl_comm;
struct hccl_op;
struct hccl_coll_req;
struct hccl_request;

/* A communicator's part of coll_run.c (struct hccl_comm's `queue`). Asynchronous calls: FIFO
 * run by a worker thread started on first use, or by a thread that waits for the call at the
 * head. worker_busy: some thread (worker, waiter or blocking caller) is running a call now, so
 * no other may start one. */
struct hccl_queue {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct hccl_coll_req *head, *tail;
  struct hccl_request *live; /* queued requests not yet waited for (request.h) */
  bool worker_started, worker_busy, worker_stop;
  pthread_t worker;
};

/* Makes an empty queue's lock and condition; frees them (comm.c's alloc and free). */
void hccl__queue_init(struct hccl_queue *q);
void hccl__queue_destroy(struct hccl_queue *q);

/* Runs a validated call now (request NULL: after any queued ones, on this thread) or queues it
 * for the communicator's worker. Count 0 returns at once, except a barrier and an alltoallv. */
HcclResult hccl__coll_submit(struct hccl_comm *c, const struct hccl_op *o, HcclRequest *req);

/* Returns once no call on q is queued or running: HcclCommSplit's parent round, which runs
 * beside the queue over the bootstrap's sockets, then has the parent's links to itself for
 * its member rounds, as a blocking call would (each queued call is bounded by
 * HCCL_EXEC_TIMEOUT, so this wait is too). */
void hccl__coll_drain(struct hccl_queue *q);

/* Finishes queued calls and stops the worker thread; HcclCommDestroy calls it first. */
void hccl__coll_shutdown(struct hccl_queue *q);

#endif
