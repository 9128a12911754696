/*
 * wait.c - the clock, the polling budget, the futex post and wake, and the wait itself: spin,
 * yield, then futex sleep with a deadline. See wait.h.
 *
 * Lost wake-ups are impossible: the waiter sets its flag, then re-reads the word before
 * sleeping, and FUTEX_WAIT itself re-checks the word; the poster stores the word, then reads
 * the flag. Both sides use sequentially consistent accesses, so at least one sees the other.
 */
#define _GNU_SOURCE
#include "wait.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "progress_record.h"

int64_t hccl__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long hccl__online_cpus(void) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online < 1 ? 1 : online;
}

struct hccl_spin hccl__wait_spin_budget(int local_ranks, int spin_setting) {
  /* A budget in time, not in polls: one `pause` costs 10 to 140 cycles depending on the CPU. */
  long online = hccl__online_cpus(), mine = online;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) mine = CPU_COUNT(&set);
  if (spin_setting >= 0) return (struct hccl_spin){(int64_t)spin_setting * 1000, 2};
  /* Oversubscribed: whoever we wait for may need our core. Two ranks a core (4 on 2): the
   * partner runs on the other core as often as on ours, so a few microseconds' poll and two
   * yields catch most answers without a futex round trip (4 KiB allreduce at 4 ranks on 2
   * cores: 7 us against 25-29 us with the short budget below). More ranks a core (8 on 2):
   * polling only steals the core they need (17 us with the short budget, 22-30 us with 2-3). */
  if (local_ranks > 2 * online) return (struct hccl_spin){500, 1};
  if (local_ranks > online) return (struct hccl_spin){3000, 2};
  /* Pinned to cores of our own (npu-launch's block binding): polling costs nobody, and a
   * futex wake-up would cost more than the wait. */
  if (mine * local_ranks <= online) return (struct hccl_spin){50000, 2};
  /* Enough cores, but unpinned: other load may share them, so stay short. */
  return (struct hccl_spin){5000, 2};
}

int hccl__wait_pinned_cpu(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1) return -1;
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (CPU_ISSET(i, &set)) return i;
  return -1;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, (uint32_t *)uaddr, op, val, ts, NULL, 0);
}

void hccl__post(_Atomic uint32_t *word, _Atomic uint32_t *waiting, uint32_t value) {
  atomic_store(word, value);
  if (atomic_load(waiting)) futex(word, FUTEX_WAKE, 1, NULL);
}

void hccl__wake_all(_Atomic uint32_t *word) {
  futex(word, FUTEX_WAKE, 0x7fffffff, NULL);
}

#define DEADLOCK_FIRST_NS 200000000LL
#define DEADLOCK_EVERY_NS 100000000LL

HcclResult hccl__wait_change(_Atomic uint32_t *word, _Atomic uint32_t *waiting, uint32_t old,
                             uint32_t peer, const struct hccl_wait *w,
                             HcclResult (*check)(void *arg, const struct hccl_wait *w,
                                                 uint32_t peer),
                             void *arg) {
  const struct hccl_waiter *wt = w->waiter;
  if (atomic_load_explicit(word, memory_order_acquire) != old) return HCCL_SUCCESS;
  int64_t poll_ns = wt->same_core && wt->same_core[peer] ? 0 : wt->spin.poll_ns;
  /* The budget runs from the end of the first 32 polls: with a core for each rank most answers
   * come within them, and no clock is read (a pause took 13 ns and a clock read 26 ns on the
   * 2-core test machine, where a peer's message takes 100-200 ns to cross). */
  for (int64_t spin_end = 0;;) {
    for (int i = 0; i < 32; i++) {
      if (atomic_load_explicit(word, memory_order_acquire) != old) return HCCL_SUCCESS;
      cpu_relax();
    }
    int64_t now = hccl__now_ns();
    if (!spin_end) spin_end = now + poll_ns;
    if (now >= spin_end) break;
  }
  for (int i = 0; i < wt->spin.yields; i++) {
    sched_yield();
    if (atomic_load_explicit(word, memory_order_acquire) != old) return HCCL_SUCCESS;
  }
  /* Asleep from here on: say for whom, and keep a heartbeat, for the peers' timeout
   * messages (progress.h). */
  struct hccl_progress *pg = w->progress;
  if (pg) {
    atomic_fetch_add_explicit(&pg->wait_no, 1, memory_order_relaxed);
    atomic_store_explicit(&pg->waiting_for, peer + 1, memory_order_release);
  }
  int64_t slept_from = wt->slept ? hccl__now_ns() : 0;
  /* A deadlock (progress.h) is looked for after DEADLOCK_FIRST_NS asleep, then every
   * DEADLOCK_EVERY_NS; the same cycle of the same waits seen twice fails the call. */
  int64_t cycle_check = hccl__now_ns() + DEADLOCK_FIRST_NS, cycle_seen_ms = 0;
  uint64_t cycle_sig = 0;
  HcclResult r = HCCL_SUCCESS;
  for (;;) {
    atomic_store(waiting, 1);
    if (atomic_load(word) != old) break;
    int64_t now = hccl__now_ns();
    if (pg) atomic_store_explicit(&pg->beat_ms, now / 1000000, memory_order_relaxed);
    if (pg && now >= cycle_check) {
      char cycle[480];
      int64_t oldest_ms;
      uint64_t sig = wt->cycle(wt->arg, peer, cycle, sizeof(cycle), &oldest_ms);
      if (sig && sig == cycle_sig && oldest_ms > cycle_seen_ms) {
        r = hccl__fail(HCCL_E_PARA,
                       "%s: deadlock: the ranks wait for each other in a cycle, so their calls "
                       "differ: %s",
                       w->what, cycle);
        break;
      }
      if (sig != cycle_sig) cycle_seen_ms = now / 1000000;
      cycle_sig = sig;
      cycle_check = now + DEADLOCK_EVERY_NS;
    }
    int64_t left = w->deadline_ns - now;
    if (left <= 0) {
      char why[400];
      wt->explain(wt->arg, peer, why, sizeof(why));
      r = hccl__fail(HCCL_E_TIMEOUT, "%s timed out after %.3g s waiting for rank %u (%s); %s",
                     w->what, (double)wt->timeout_ms / 1000, peer, wt->timeout_src, why);
      break;
    }
    int64_t slice = left < 10000000 ? left : 10000000;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = slice};
    futex(word, FUTEX_WAIT, old, &ts);
    if (atomic_load(word) != old) break;
    /* An abort may reach this rank over any transport (a local peer's mark in shared memory, an
     * ABORT frame over TCP) while it waits on a link of another: look at all of them, before
     * the link's own check of its peer, so the origin's reason wins over a peer's later exit. */
    hccl__log_quiet(1);
    r = wt->aborted(wt->arg, w->what);
    if (r == HCCL_SUCCESS && check) r = check(arg, w, peer);
    hccl__log_quiet(0);
    if (r != HCCL_SUCCESS) {
      /* A peer posts its last word, then leaves (destroys its communicator, exits): if it
       * posted between the read above and the check, the word is ours to take and this wait
       * succeeded (a failure that is real fails the next one); else the failure is logged. */
      if (atomic_load(word) != old) {
        r = HCCL_SUCCESS;
      } else {
        char why[1024]; /* hccl__fail writes the quiet buffer itself when the caller is quiet */
        snprintf(why, sizeof(why), "%s", hccl__quiet_error());
        hccl__fail(r, "%s", why);
      }
      break;
    }
  }
  atomic_store(waiting, 0);
  if (slept_from) wt->slept(wt->arg, slept_from, hccl__now_ns(), peer, w->what);
  /* A failed wait stays published: a peer explaining its own timeout at the same moment
   * follows it on to the rank that is really behind instead of blaming this one. */
  if (pg && r == HCCL_SUCCESS) atomic_store_explicit(&pg->waiting_for, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  return r;
}
