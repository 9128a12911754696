/*
 * test_comm_shrink.c - HcclCommShrink (core/comm_shrink.c): the survivors of a killed rank
 * make a communicator without it and every collective is right on it; bad lists fail with
 * their value named, at once.
 *
 * after_kill: 4 ranks, HCCL_EXEC_TIMEOUT=5. Rank 2 SIGKILLs itself just before the 4th
 * allreduce; the others' 4th allreduce fails (the dead peer, or the timeout at the latest),
 * they shrink with HCCL_SHRINK_ABORT excluding 2 (listed as {2}) and, on the 3 ranks (parent
 * ranks 0, 1, 3 renumbered 0, 1, 2), run allreduce, broadcast, reduce, allgather,
 * reduce-scatter, alltoall, send/recv and barrier, each checked against inputs named by the
 * parent rank; then a second shrink of the shrunk one (excluding its rank 2) runs an
 * allreduce on 2 ranks. All within 10 s of the kill.
 *
 * bad_lists: 4 live ranks. Out of range (4, -1), listed twice, the caller listed and a bad
 * flag fail with HCCL_E_PARA at once; survivors passing different lists (ranks 0 and 1 exclude
 * {3}, rank 2 excludes {1, 3}) fail on every one of them, rank 0 and 1 naming both lists;
 * excluding rank 0 (whose store it was) is HCCL_E_UNAVAIL on the others. The parent still
 * works after all of it (DEFAULT never aborts).
 */
#include <setjmp.h>
#include <signal.h>
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

#define RUN_TIMEOUT_S 60
#define N 64 /* elements per rank */

/* What parent rank p puts at element i. */
static int32_t val(int p, int i) { return (p + 1) * 1000 + i; }

/* Every collective on the 3 ranks made of parent ranks {0, 1, 3}. */
static int check_all(HcclComm c, int parent) {
  static const int of[3] = {0, 1, 3}; /* new rank -> parent rank */
  uint32_t me, n;
  RANK_CHECK(HcclGetRankId(c, &me) == HCCL_SUCCESS && HcclGetRankSize(c, &n) == HCCL_SUCCESS,
             "getters");
  RANK_CHECK(n == 3 && of[me] == parent, "parent rank %d became rank %u of %u", parent, me, n);
  int32_t a[3 * N], b[3 * N];
  for (int i = 0; i < N; i++)
    a[i] = val(parent, i);
  RANK_CHECK(HcclAllReduce(a, b, N, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, c, NULL) == 0,
             "allreduce: %s", HcclGetLastErrorMessage());
  for (int i = 0; i < N; i++)
    RANK_CHECK(b[i] == val(0, i) + val(1, i) + val(3, i), "allreduce[%d] = %d", i, b[i]);
  memcpy(b, a, sizeof(int32_t) * N);
  RANK_CHECK(HcclBroadcast(b, N, HCCL_DATA_TYPE_INT32, 2, c, NULL) == 0, "broadcast: %s",
             HcclGetLastErrorMessage());
  for (int i = 0; i < N; i++)
    RANK_CHECK(b[i] == val(3, i), "broadcast[%d] = %d", i, b[i]);
  RANK_CHECK(HcclReduce(a, b, N, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, 1, c, NULL) == 0,
             "reduce: %s", HcclGetLastErrorMessage());
  for (int i = 0; me == 1 && i < N; i++)
    RANK_CHECK(b[i] == val(3, i), "reduce[%d] = %d", i, b[i]);
  RANK_CHECK(HcclAllGather(a, b, N, HCCL_DATA_TYPE_INT32, c, NULL) == 0, "allgather: %s",
             HcclGetLastErrorMessage());
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < N; i++)
      RANK_CHECK(b[r * N + i] == val(of[r], i), "allgather[%d][%d] = %d", r, i, b[r * N + i]);
  for (int i = 0; i < 3 * N; i++)
    a[i] = val(parent, i);
  RANK_CHECK(HcclReduceScatter(a, b, N, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, c, NULL) == 0,
             "reduce-scatter: %s", HcclGetLastErrorMessage());
  for (int i = 0; i < N; i++) {
    int j = (int)me * N + i;
    RANK_CHECK(b[i] == val(0, j) + val(1, j) + val(3, j), "reduce-scatter[%d] = %d", i, b[i]);
  }
  RANK_CHECK(HcclAlltoAll(a, N, HCCL_DATA_TYPE_INT32, b, N, HCCL_DATA_TYPE_INT32, c, NULL) == 0,
             "alltoall: %s", HcclGetLastErrorMessage());
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < N; i++)
      RANK_CHECK(b[r * N + i] == val(of[r], (int)me * N + i), "alltoall[%d][%d] = %d", r, i,
                 b[r * N + i]);
  /* A ring of send/recv: to the next rank, from the previous (even ranks send first). */
  uint32_t to = (me + 1) % 3, from = (me + 2) % 3;
  for (int k = 0; k < 2; k++) {
    if ((k == 0) == (me % 2 == 0)) {
      RANK_CHECK(HcclSend(a, N, HCCL_DATA_TYPE_INT32, to, c, NULL) == 0, "send: %s",
                 HcclGetLastErrorMessage());
    } else {
      RANK_CHECK(HcclRecv(b, N, HCCL_DATA_TYPE_INT32, from, c, NULL) == 0, "recv: %s",
                 HcclGetLastErrorMessage());
    }
  }
  for (int i = 0; i < N; i++)
    RANK_CHECK(b[i] == val(of[from], i), "recv[%d] = %d", i, b[i]);
  RANK_CHECK(HcclBarrier(c, NULL) == 0, "barrier: %s", HcclGetLastErrorMessage());
  return 0;
}

static int after_kill_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  setenv("HCCL_EXEC_TIMEOUT", "5", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "20", 1);
  HcclComm comm = NULL, small = NULL, smaller = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  int32_t x[N];
  HcclResult rc = HCCL_SUCCESS;
  int step;
  for (step = 0; step < 10 && rc == HCCL_SUCCESS; step++) {
    if (rank == 2 && step == 3) raise(SIGKILL);
    for (int i = 0; i < N; i++)
      x[i] = val(rank, i);
    rc = HcclAllReduce(x, x, N, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
  }
  double t0 = cc_now();
  RANK_CHECK(rc != HCCL_SUCCESS && step == 4, "rank %d: step %d gave %d", rank, step - 1, rc);
  printf("  rank %d: step 3 failed (%d): %s\n", rank, rc, HcclGetLastErrorMessage());
  const int dead[] = {2};
  RANK_CHECK(HcclCommShrink(comm, dead, 1, &small, NULL, HCCL_SHRINK_ABORT) == HCCL_SUCCESS,
             "shrink: %s", HcclGetLastErrorMessage());
  double t_shrink = cc_now() - t0;
  if (check_all(small, rank)) return 1;
  /* The shrunk one shrinks again: its rank 2 (parent rank 3) leaves, the others go on. */
  if (rank != 3) {
    const int last[] = {2};
    RANK_CHECK(HcclCommShrink(small, last, 1, &smaller, NULL, HCCL_SHRINK_DEFAULT) == 0,
               "second shrink: %s", HcclGetLastErrorMessage());
    for (int i = 0; i < N; i++)
      x[i] = val(rank, i);
    RANK_CHECK(HcclAllReduce(x, x, N, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, smaller, NULL) == 0,
               "allreduce on 2: %s", HcclGetLastErrorMessage());
    for (int i = 0; i < N; i++)
      RANK_CHECK(x[i] == val(0, i) + val(1, i), "allreduce on 2 [%d] = %d", i, x[i]);
    RANK_CHECK(HcclCommDestroy(smaller) == HCCL_SUCCESS, "destroy smaller");
  }
  printf("  rank %d: shrunk in %.2f s, all checked %.2f s after the failure\n", rank, t_shrink,
         cc_now() - t0);
  RANK_CHECK(cc_now() - t0 < 10.0, "rank %d: %.2f s from the failure to the end", rank,
             cc_now() - t0);
  RANK_CHECK(HcclCommDestroy(small) == HCCL_SUCCESS, "destroy small");
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy parent");
  return 0;
}

static void test_after_kill(void **st) {
  (void)st;
  double t0 = cc_now();
  int failed = harness_run_ranks_kill(4, RUN_TIMEOUT_S, after_kill_body, NULL, 2, 50000);
  printf("  rank 2 of 4 killed, the others shrank: %d failed, %.2f s\n", failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

/* HcclCommShrink on comm that must fail with `want` and a message holding `says`. */
#define SHRINK_FAILS(comm, list, count, flags, want, says)                                         \
  do {                                                                                             \
    HcclComm nc_ = NULL;                                                                           \
    HcclResult r_ = HcclCommShrink(comm, list, count, &nc_, NULL, flags);                          \
    RANK_CHECK(r_ == (want) && nc_ == NULL && strstr(HcclGetLastErrorMessage(), says),            \
               "rank %d: shrink gave %d (want %d): %s", rank, r_, want,                            \
               HcclGetLastErrorMessage());                                                         \
  } while (0)

static int bad_lists_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  setenv("HCCL_CONNECT_TIMEOUT", "20", 1);
  HcclComm comm = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  const int four[] = {4}, neg[] = {-1}, twice[] = {3, 1, 3}, self[] = {rank};
  SHRINK_FAILS(comm, four, 1, HCCL_SHRINK_DEFAULT, HCCL_E_PARA, "excludeRanks[0] = 4");
  SHRINK_FAILS(comm, neg, 1, HCCL_SHRINK_DEFAULT, HCCL_E_PARA, "excludeRanks[0] = -1");
  if (rank != 3 && rank != 1)
    SHRINK_FAILS(comm, twice, 3, HCCL_SHRINK_DEFAULT, HCCL_E_PARA, "rank 3 is listed twice");
  SHRINK_FAILS(comm, self, 1, HCCL_SHRINK_DEFAULT, HCCL_E_PARA, "excludes itself");
  SHRINK_FAILS(comm, four, 1, 7, HCCL_E_PARA, "shrinkFlags 7");
  RANK_CHECK(HcclCommShrink(NULL, four, 1, NULL, NULL, 0) == HCCL_E_PTR, "NULL comm");
  double t0 = cc_now();
  const int three[] = {3}, one_three[] = {1, 3};
  if (rank == 0 || rank == 1)
    SHRINK_FAILS(comm, three, 1, HCCL_SHRINK_DEFAULT, HCCL_E_PARA,
                 "rank 2 excludes [1, 3]; every surviving rank must pass the same list");
  if (rank == 2) {
    HcclComm nc = NULL;
    RANK_CHECK(HcclCommShrink(comm, one_three, 2, &nc, NULL, HCCL_SHRINK_DEFAULT) != 0 && !nc,
               "rank 2: a shrink with a list the others do not share succeeded");
  }
  RANK_CHECK(cc_now() - t0 < 5.0, "rank %d: the disagreement took %.2f s", rank, cc_now() - t0);
  const int zero[] = {0};
  if (rank != 0)
    SHRINK_FAILS(comm, zero, 1, HCCL_SHRINK_DEFAULT, HCCL_E_UNAVAIL, "rank 0 is excluded");
  int32_t x[N];
  for (int i = 0; i < N; i++)
    x[i] = val(rank, i);
  RANK_CHECK(HcclAllReduce(x, x, N, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL) == 0,
             "the parent after the failed shrinks: %s", HcclGetLastErrorMessage());
  RANK_CHECK(x[5] == val(0, 5) + val(1, 5) + val(2, 5) + val(3, 5), "parent allreduce");
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_bad_lists(void **st) {
  (void)st;
  assert_int_equal(harness_run_ranks(4, RUN_TIMEOUT_S, bad_lists_body, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_after_kill),
      cmocka_unit_test(test_bad_lists),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
