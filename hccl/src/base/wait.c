/*
 * wait.c - the clock, the polling budget, and the futex post and wake. See wait.h.
 */
#define _GNU_SOURCE
#include "wait.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int64_t hccl__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct hccl_spin hccl__wait_spin_budget(int local_ranks, int spin_setting) {
  /* A budget in time, not in polls: one `pause` costs 10 to 140 cycles depending on the CPU. */
  long online = sysconf(_SC_NPROCESSORS_ONLN), mine = online;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) mine = CPU_COUNT(&set);
  if (online < 1) online = 1;
  if (spin_setting >= 0) return (struct hccl_spin){(int64_t)spin_setting * 1000, 2};
  /* Oversubscribed: whoever we wait for needs our core. */
  if (local_ranks > online) return (struct hccl_spin){500, 1};
  /* Pinned to cores of our own (npu-launch's block binding): polling costs nobody, and a
   * futex wake-up would cost more than the wait. */
  if (mine * local_ranks <= online) return (struct hccl_spin){50000, 2};
  /* Enough cores, but unpinned: other load may share them, so stay short. */
  return (struct hccl_spin){5000, 2};
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
