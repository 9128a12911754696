/*
 * wait.h - the pieces of the one way this library waits for another process: the clock, the
 * polling budget, what a wait is for (struct hccl_wait), and the futex post and wake a waiter
 * sleeps on. The wait itself (poll a 32-bit word in shared memory briefly, yield, then sleep
 * on a futex, in slices, until the word changes, the deadline passes, the peer dies, or the
 * communicator is aborted) is hccl__wait_change. What it needs of the communicator (whether any
 * transport heard of an abort, the peers' records for the deadlock and timeout messages, the
 * trace) it reaches through struct hccl_waiter, which core/comm_wait.c fills once per
 * communicator, so a transport waits without knowing the communicator.
 * With 8 ranks on 2 cores a wait that only spins would starve the very peer it waits for, so
 * the spin is short when the machine is oversubscribed.
 */
#ifndef HCCL_WAIT_H
#define HCCL_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"

/* How long a wait polls before it yields and sleeps; one per communicator. */
struct hccl_spin {
  int64_t poll_ns;
  int yields;
};

struct hccl_progress;

/* The communicator's side of its waits (core/comm_wait.c fills it once, at init). Each
 * function gets `arg`. */
struct hccl_waiter {
  struct hccl_spin spin; /* how long a wait polls before it sleeps */
  /* [nranks], by the rank a wait names: 1 for a peer pinned to the one CPU this rank is pinned
   * to. That peer can answer only once this rank leaves the CPU, so a wait for it polls not
   * at all and yields at once. NULL: no such peer. */
  const uint8_t *same_core;
  /* Whether any transport has heard of an abort: HCCL_E_REMOTE, logged with the origin's
   * reason, if so. Called each sleep slice, before the link's own check of its peer. */
  HcclResult (*aborted)(void *arg, const char *what);
  /* The deadlock check: a signature of the cycle of waits this rank's wait for `peer` is part
   * of (0: none), its text in buf, and in *oldest_ms when its oldest wait began. */
  uint64_t (*cycle)(void *arg, uint32_t peer, char *buf, size_t len, int64_t *oldest_ms);
  /* The end of a timeout message: who is really behind, following the ranks' records. */
  void (*explain)(void *arg, uint32_t peer, char *buf, size_t len);
  /* A sleep from from_ns to to_ns waiting for `peer`, for the trace; NULL: not traced. */
  void (*slept)(void *arg, int64_t from_ns, int64_t to_ns, uint32_t peer, const char *what);
  void *arg;
  int64_t timeout_ms;      /* HCCL_EXEC_TIMEOUT, for the timeout message */
  const char *timeout_src; /* where it came from */
};

/* What a wait is for, to make errors name it; set up once per collective. */
struct hccl_wait {
  const struct hccl_waiter *waiter; /* the communicator's side */
  uint32_t rank;                    /* this rank, for messages */
  const char *what;    /* "allreduce", ... */
  int64_t deadline_ns; /* CLOCK_MONOTONIC */
  /* This rank's progress record (progress_record.h), where a collective's waits say whom they
   * sleep for; NULL for waits that publish nothing (point-to-point). */
  struct hccl_progress *progress;
};

int64_t hccl__now_ns(void);

/* The machine's online CPUs (at least 1): whether ranks outnumber them decides the polling
 * budget below and where zero-copy starts (algo/plan.c, through the communicator). */
long hccl__online_cpus(void);

/* The polling budget for a rank with local_ranks ranks on its server: HCCL_SPIN
 * (microseconds, spin_setting >= 0), else chosen from ranks per core and this rank's pinning. */
struct hccl_spin hccl__wait_spin_budget(int local_ranks, int spin_setting);

/* The one CPU the calling thread may run on (its affinity holds exactly one), else -1. */
int hccl__wait_pinned_cpu(void);

/* Stores `value` into *word and wakes the sleeper if the flag says there is one. */
void hccl__post(_Atomic uint32_t *word, _Atomic uint32_t *waiting, uint32_t value);

/* Wakes every sleeper on *word (abort paths). */
void hccl__wake_all(_Atomic uint32_t *word);

/* Waits until *word != old. `waiting` is the sleeper flag a poster checks (hccl__post);
 * `peer` is the global rank waited for; `check(arg, w, peer)` is called each sleep slice
 * (about 10 ms), after the waiter's abort check, and may return an error to end the wait (dead
 * peer, abort). Returns HCCL_E_TIMEOUT (logged, naming the peer and w->what) at the deadline,
 * HCCL_E_PARA (logged) when the ranks wait for each other in a cycle. */
HcclResult hccl__wait_change(_Atomic uint32_t *word, _Atomic uint32_t *waiting, uint32_t old,
                             uint32_t peer, const struct hccl_wait *w,
                             HcclResult (*check)(void *arg, const struct hccl_wait *w,
                                                 uint32_t peer),
                             void *arg);

/* Whether any transport has heard of an abort (w's waiter): HCCL_E_REMOTE, logged, if so. */
static inline HcclResult hccl__wait_aborted(const struct hccl_wait *w) {
  return w->waiter->aborted(w->waiter->arg, w->what);
}

#endif
