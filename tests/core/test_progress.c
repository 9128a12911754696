/*
 * test_progress.c - a timeout names the rank that is really behind (core/progress.c), not
 * just the peer this rank happened to wait for.
 *
 * Frozen: 4 ranks run allreduces of 1 Mi floats in a loop; rank 2 stops itself with SIGSTOP
 * from a second thread, 30 ms into its 20th call. With HCCL_EXEC_TIMEOUT=2, ranks 0, 1 and 3 must
 * fail within 1.5-8 s of the stop with HCCL_E_TIMEOUT (the first to time out) or HCCL_E_REMOTE (its
 * abort), and every message must say "rank 2 is behind", whichever peer each rank waited for (rank
 * 0's ring neighbours are 1 and 3, which were themselves waiting for rank 2).
 *
 * Late: rank 2 does its first allreduce, then stays outside the library for 6 s before the
 * second; the others' second call times out (HCCL_EXEC_TIMEOUT=2) with "rank 2 is behind: it
 * has not started call 2; its last was call 1 (allreduce)". Rank 2's own late call fails
 * (the others aborted), naming the failure.
 *
 * Deadlock: 2 ranks each call HcclReduce as its own root, so each waits to receive from the
 * other. With HCCL_EXEC_TIMEOUT=20 (the old way out), both must fail within 2 s with a message
 * that names the deadlock and both calls ("root 0", "root 1"); the frozen case above must not
 * be mistaken for one (a stopped rank renews no heartbeat).
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"

#define RUN_TIMEOUT_S 40
#define COUNT (1u << 20)

static HcclResult init(HcclComm *comm) {
  setenv("HCCL_EXEC_TIMEOUT", "2", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
  unsetenv("HCCL_ALGO");
  return HcclCommInitFromEnv(comm);
}

static _Atomic int g_calls;

/* Rank 2's second thread stops the whole process (SIGSTOP) 30 ms after its 20th call began:
 * inside a call, mid-transfer, most likely. */
static void *freezer(void *arg) {
  (void)arg;
  while (atomic_load(&g_calls) < 20)
    usleep(1000);
  usleep(30000);
  kill(getpid(), SIGSTOP);
  return NULL;
}

static int frozen_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  pthread_t th;
  if (rank == 2) RANK_CHECK(pthread_create(&th, NULL, freezer, NULL) == 0, "thread");
  HcclComm comm = NULL;
  RANK_CHECK(init(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  float *buf = calloc(COUNT, sizeof(float));
  HcclResult rc = HCCL_SUCCESS;
  double t_last_ok = cc_now();
  int calls = 0;
  /* Rank 2 stops itself; the others run until they fail. */
  while (rc == HCCL_SUCCESS && cc_now() - t_last_ok < 20) {
    rc = HcclAllReduce(buf, buf, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    if (rc == HCCL_SUCCESS) {
      t_last_ok = cc_now();
      calls++;
      atomic_store(&g_calls, calls);
    }
  }
  double dt = cc_now() - t_last_ok;
  const char *msg = HcclGetLastErrorMessage();
  printf("  rank %d after %d calls: %d after %.2f s: %s\n", rank, calls, rc, dt, msg);
  RANK_CHECK(rc == HCCL_E_TIMEOUT || rc == HCCL_E_REMOTE, "rank %d: result %d", rank, rc);
  RANK_CHECK(dt >= 1.0 && dt < 8.0, "rank %d failed %.2f s after its last good call", rank, dt);
  RANK_CHECK(strstr(msg, "rank 2 is behind") != NULL, "rank %d blames someone else: %s", rank, msg);
  free(buf);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static int late_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  HcclComm comm = NULL;
  RANK_CHECK(init(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  int32_t x[64] = {0};
  HcclResult rc = HcclAllReduce(x, x, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
  RANK_CHECK(rc == HCCL_SUCCESS, "first allreduce: %s", HcclGetLastErrorMessage());
  if (rank == 2) sleep(6);
  double t0 = cc_now();
  rc = HcclAllReduce(x, x, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
  double dt = cc_now() - t0;
  const char *msg = HcclGetLastErrorMessage();
  printf("  rank %d: %d after %.2f s: %s\n", rank, rc, dt, msg);
  RANK_CHECK(rc != HCCL_SUCCESS, "rank %d's second allreduce succeeded", rank);
  if (rank != 2) {
    RANK_CHECK(dt >= 1.5 && dt < 8.0, "rank %d failed after %.2f s (HCCL_EXEC_TIMEOUT=2)", rank,
               dt);
    RANK_CHECK(strstr(msg, "rank 2 is behind: it has not started call 2; its last was call 1 "
                           "(allreduce)") != NULL,
               "rank %d: %s", rank, msg);
  }
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static int roots_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  setenv("HCCL_EXEC_TIMEOUT", "20", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
  unsetenv("HCCL_ALGO");
  HcclComm comm = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  float x[1024] = {0};
  HcclResult rc = HcclAllReduce(x, x, 1024, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
  RANK_CHECK(rc == HCCL_SUCCESS, "first allreduce: %s", HcclGetLastErrorMessage());
  double t0 = cc_now();
  rc = HcclReduce(x, x, 1024, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, (uint32_t)rank, comm, NULL);
  double dt = cc_now() - t0;
  const char *msg = HcclGetLastErrorMessage();
  printf("  rank %d: %d after %.2f s: %s\n", rank, rc, dt, msg);
  RANK_CHECK(rc == HCCL_E_PARA || rc == HCCL_E_REMOTE, "rank %d: result %d", rank, rc);
  RANK_CHECK(dt < 2.0, "rank %d failed after %.2f s, not within 2 s", rank, dt);
  RANK_CHECK(strstr(msg, "deadlock") != NULL && strstr(msg, "call 2 (reduce, root 0)") != NULL &&
                 strstr(msg, "call 2 (reduce, root 1)") != NULL,
             "rank %d: %s", rank, msg);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_mismatched_roots(void **st) {
  (void)st;
  double t0 = cc_now();
  int failed = harness_run_ranks(2, RUN_TIMEOUT_S, roots_body, NULL);
  printf("  mismatched roots at 2 ranks: %d failed, %.2f s\n", failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

static void test_frozen_rank(void **st) {
  (void)st;
  double t0 = cc_now();
  /* Signal 0 sends nothing: rank 2 stops itself; the harness ends it after the others. */
  int failed = harness_run_ranks_signal(4, RUN_TIMEOUT_S, frozen_body, NULL, 2, 0, 0);
  printf("  frozen rank 2 of 4: %d failed, %.2f s\n", failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

static void test_late_rank(void **st) {
  (void)st;
  double t0 = cc_now();
  int failed = harness_run_ranks(4, RUN_TIMEOUT_S, late_body, NULL);
  printf("  late rank 2 of 4: %d failed, %.2f s\n", failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frozen_rank),
      cmocka_unit_test(test_late_rank),
      cmocka_unit_test(test_mismatched_roots),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
