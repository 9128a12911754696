/*
 * wait.h - the pieces of the one way this library waits for another process: the clock, the
 * polling budget, what a wait is for (struct hccl_wait), and the futex post and wake a waiter
 * sleeps on. The wait itself (poll a 32-bit word in shared memory briefly, yield, then sleep
 * on a futex, in slices, until the word changes, the deadline passes, the peer dies, or the
 * communicator is aborted) reads the communicator, so it lives above, in core/comm_wait.c.
 * With 8 ranks on 2 cores a wait that only spins would starve the very peer it waits for, so
 * the spin is short when the machine is oversubscribed.
 */
#ifndef HCCL_WAIT_H
#define HCCL_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hccl.h"

/* How long a wait polls before it yields and sleeps; one per communicator. */
struct hccl_spin {
  int64_t poll_ns;
  int yields;
};

/* What a wait is for, to make errors name it; set up once per collective. */
struct hccl_wait {
  struct hccl_comm *comm;
  const char *what;    /* "allreduce", ... */
  int64_t deadline_ns; /* CLOCK_MONOTONIC */
  /* This rank's progress record (progress_record.h), where a collective's waits say whom they
   * sleep for; NULL for waits that publish nothing (point-to-point). */
  struct hccl_progress *progress;
};

int64_t hccl__now_ns(void);

/* The polling budget for a rank with local_ranks ranks on its server: HCCL_SPIN
 * (microseconds, spin_setting >= 0), else chosen from ranks per core and this rank's pinning. */
struct hccl_spin hccl__wait_spin_budget(int local_ranks, int spin_setting);

/* Stores `value` into *word and wakes the sleeper if the flag says there is one. */
void hccl__post(_Atomic uint32_t *word, _Atomic uint32_t *waiting, uint32_t value);

/* Wakes every sleeper on *word (abort paths). */
void hccl__wake_all(_Atomic uint32_t *word);

#endif
