/*
 * harness.h - what the multi-process tests share: forking N ranks under a deadline, with the
 * launcher's variables set in each, and checking that a rank's destroyed communicators left no
 * device-link area behind.
 *
 * A rank body returns 0 on success; anything else (or a signal, or the deadline) counts as a
 * failure of that rank, which the harness prints (rank, exit code or signal) before returning.
 */
#ifndef HCCL_TEST_HARNESS_H
#define HCCL_TEST_HARNESS_H

#include <stdint.h>

/* 1 in a ThreadSanitizer build (GCC says __SANITIZE_THREAD__, clang __has_feature), whose
 * instrumentation runs the code 10-20x slower: the one place a test asks, for a longer deadline
 * or a check that needs speed. tests/CMakeLists.txt lengthens ctest's cap for the same reason. */
#if defined(__SANITIZE_THREAD__)
#define HARNESS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HARNESS_TSAN 1
#endif
#endif
#ifndef HARNESS_TSAN
#define HARNESS_TSAN 0
#endif

typedef int (*harness_rank_fn)(int rank, int nranks, void *arg);

/* Forks nranks children. Child r gets RANK=r, WORLD_SIZE, LOCAL_RANK=r, LOCAL_WORLD_SIZE,
 * MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, then runs fn and exits with its result.
 * Children still running after timeout_s seconds are killed (SIGKILL) and count as failed.
 * Returns the number of ranks that failed; 0 means every rank returned 0. */
int harness_run_ranks(int nranks, int timeout_s, harness_rank_fn fn, void *arg);

/* Same, but rank `victim` is sent SIGKILL `kill_after_ms` after start; its death is expected
 * and not counted. Returns the number of other ranks that failed. */
int harness_run_ranks_kill(int nranks, int timeout_s, harness_rank_fn fn, void *arg, int victim,
                           int kill_after_ms);

/* Same, but rank `victim` gets `signo` (e.g. SIGSTOP; 0 sends nothing) after `after_ms`; once every
 * other rank has ended it is killed, and its fate is not counted. */
int harness_run_ranks_signal(int nranks, int timeout_s, harness_rank_fn fn, void *arg, int victim,
                             int after_ms, int signo);

/* A TCP port on 127.0.0.1 that was free a moment ago, from 20000-28999 (below the kernel's
 * ephemeral ports, so no socket the kernel numbers can take it before the test binds it). */
uint16_t harness_free_port(void);

/* Device-link areas (memfds named hccl-device-links) and HcclMemAlloc regions (hccl-mem-<n>)
 * this process still has open or mapped. The harness checks it is 0 in every rank whose body
 * returned 0: destroy must release the areas and the peers' regions it mapped, and a test
 * frees its own regions before it returns. */
int harness_links_left(void);

/* The environment most multi-process tests start from: no HCCL_ALGO, HCCL_BUFFSIZE or
 * DEVICE_ID from the caller's shell, and 30 s exec and connect timeouts. */
void harness_base_env(void);

/* Reports a failed check inside a rank body and returns 1 from it. */
#define RANK_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

#endif
