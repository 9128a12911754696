/*
 * test_comm_abort.c - HcclCommAbort (core/comm.c) ends outstanding calls on other threads and
 * on every peer, at once, and the communicator then refuses calls naming the abort.
 *
 * 4 ranks, HCCL_EXEC_TIMEOUT=60 (so nothing ends by timeout). Rank 3 stays away for 3 s, so
 * the others' blocking allreduce cannot finish; rank 1 also has a queued allreduce behind it.
 * 300 ms in, a second thread of rank 1 calls HcclCommAbort. Every rank's outstanding call
 * must fail within 1 s of the abort (rank 3's, made late, at once) with HCCL_E_REMOTE and a
 * message naming "HcclCommAbort on rank 1"; the next call must be refused with that reason;
 * a second abort is harmless; destroy succeeds.
 */
#include <pthread.h>
#include <setjmp.h>
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

static void *aborter(void *arg) {
  usleep(300000);
  HcclCommAbort((HcclComm)arg);
  return NULL;
}

static int abort_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
  HcclComm comm = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  RANK_CHECK(HcclBarrier(comm, NULL) == HCCL_SUCCESS, "barrier: %s", HcclGetLastErrorMessage());
  HcclResult async = HCCL_E_INTERNAL;
  RANK_CHECK(HcclGetCommAsyncError(comm, &async) == HCCL_SUCCESS && async == HCCL_SUCCESS,
             "rank %d: a working communicator's async error is %d", rank, async);
  int32_t x[256] = {0}, y[256] = {0};
  pthread_t th;
  if (rank == 1) RANK_CHECK(pthread_create(&th, NULL, aborter, comm) == 0, "thread");
  if (rank == 3) sleep(3);
  double t0 = cc_now();
  HcclRequest q = NULL;
  HcclResult rq = HCCL_SUCCESS;
  HcclResult rc = HcclAllReduce(x, x, 256, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
  if (rank == 1) {
    rq = HcclAllReduce(y, y, 256, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, &q);
    if (rq == HCCL_SUCCESS) rq = HcclRequestWait(q);
  }
  double dt = cc_now() - t0;
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", HcclGetLastErrorMessage());
  printf("  rank %d: %d after %.2f s: %s\n", rank, rc, dt, msg);
  RANK_CHECK(rc == HCCL_E_REMOTE, "rank %d: allreduce returned %d, want HCCL_E_REMOTE", rank, rc);
  RANK_CHECK(strstr(msg, "HcclCommAbort on rank 1") != NULL, "rank %d: %s", rank, msg);
  RANK_CHECK(rank == 3 ? dt < 1.0 : dt < 1.3, "rank %d: the call ended %.2f s after it began", rank,
             dt);
  if (rank == 1) {
    RANK_CHECK(rq != HCCL_SUCCESS, "the queued allreduce succeeded after the abort");
    pthread_join(th, NULL);
    RANK_CHECK(HcclCommAbort(comm) == HCCL_SUCCESS, "second abort");
  }
  rc = HcclBroadcast(x, 256, HCCL_DATA_TYPE_INT32, 0, comm, NULL);
  RANK_CHECK(rc != HCCL_SUCCESS && strstr(HcclGetLastErrorMessage(), "HcclCommAbort on rank 1"),
             "rank %d: a call after the abort gave %d: %s", rank, rc, HcclGetLastErrorMessage());
  RANK_CHECK(HcclCommAbort(NULL) == HCCL_E_PTR, "abort(NULL)");
  RANK_CHECK(HcclGetCommAsyncError(comm, &async) == HCCL_SUCCESS && async == HCCL_E_REMOTE,
             "rank %d: after the abort the async error is %d, want HCCL_E_REMOTE", rank, async);
  RANK_CHECK(HcclGetCommAsyncError(NULL, &async) == HCCL_E_PTR, "HcclGetCommAsyncError(NULL)");
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_abort_4(void **st) {
  (void)st;
  double t0 = cc_now();
  int failed = harness_run_ranks(4, RUN_TIMEOUT_S, abort_body, NULL);
  printf("  abort from a second thread of rank 1 of 4: %d failed, %.2f s\n", failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_abort_4),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
