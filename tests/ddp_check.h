/*
 * ddp_check.h - what the DDP layer's tests share: a communicator from the launcher's variables
 * with short timeouts, forking N ranks under a deadline (harness.h) and asserting that every
 * rank succeeded and released its device links (harness.c), and the deterministic gradient a rank
 * produces for (step, parameter, element).
 */
#ifndef DDP_CHECK_H
#define DDP_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"
#include "ddp.h"
#include "harness.h"
#include "hccl.h"

#define DDP_RUN_TIMEOUT_S 60

static inline HcclResult ddp_test_comm(HcclComm *comm) {
  setenv("HCCL_BUFFSIZE", "8", 1);
  setenv("HCCL_EXEC_TIMEOUT", "30", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
  unsetenv("HCCL_ALGO");
  unsetenv("DEVICE_ID");
  return HcclCommInitFromEnv(comm);
}

/* Forks n ranks running body; every rank must return 0 and leave no shm entry behind. */
static inline void ddp_run(int n, harness_rank_fn body, void *arg) {
  double t0 = cc_now();
  int failed = harness_run_ranks(n, DDP_RUN_TIMEOUT_S, body, arg);
  printf("  %d ranks: %d failed, %.2f s\n", n, failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

/* Gradient element e of parameter p that `rank` produces in `step`: exact in fp32, different
 * on every rank, so a mean over ranks is checkable bit for bit (ranks 1, 2, 4, 8 divide
 * exactly). */
static inline float ddp_test_grad(int rank, int step, size_t p, uint64_t e) {
  return (float)((int)((e * 7 + p * 13 + (uint64_t)step * 5) % 97) - 48) * 0.25f +
         (float)rank * 0.5f;
}

/* The mean over n ranks of ddp_test_grad, summed over the steps in [s0, s1]. */
static inline float ddp_test_mean(int n, int s0, int s1, size_t p, uint64_t e) {
  double sum = 0;
  for (int r = 0; r < n; r++)
    for (int s = s0; s <= s1; s++)
      sum += ddp_test_grad(r, s, p, e);
  return (float)(sum / n);
}

#define DDP_OK(expr)                                                                               \
  do {                                                                                             \
    HcclResult rc_ = (expr);                                                                       \
    RANK_CHECK(rc_ == HCCL_SUCCESS, "%s returned %d: %s", #expr, rc_, ddp_last_error());           \
  } while (0)

#endif
