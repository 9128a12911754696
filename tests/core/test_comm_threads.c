/*
 * test_comm_threads.c - two communicators of one process driven by two threads at once
 * (core/comm.c, core/coll_run.c): each rank makes two communicators over the same ranks, then one
 * thread runs allreduces and broadcasts on the first while another runs them, with other
 * sizes and types, on the second. Every result is checked; nothing one communicator does may
 * reach the other (own links, own queue, own call numbers, own log context). 4 ranks, 150
 * calls per thread, sizes from 1 element to several slots.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"

#define NRANKS 4
#define CALLS 150
#define RUN_TIMEOUT_S 120

struct driver {
  HcclComm comm;
  int rank, which;
  HcclDataType dt;
  char error[512];
};

static void *drive(void *arg) {
  struct driver *d = arg;
  size_t es = cc_dtype_size(d->dt);
  for (int i = 0; i < CALLS; i++) {
    uint64_t count = 1 + (uint64_t)(i * 7919 + d->which * 104729) % 70000;
    uint32_t salt = (uint32_t)(i * 2 + d->which + 1);
    void *buf = malloc(count * es), *want = malloc(count * es);
    HcclResult r;
    if (i % 3 == 2) {
      uint32_t root = (uint32_t)(i % NRANKS);
      cc_fill_input(buf, d->dt, HCCL_REDUCE_SUM, salt, d->rank, 0, count);
      cc_fill_input(want, d->dt, HCCL_REDUCE_SUM, salt, (int)root, 0, count);
      r = HcclBroadcast(buf, count, d->dt, root, d->comm, NULL);
    } else {
      cc_fill_input(buf, d->dt, HCCL_REDUCE_SUM, salt, d->rank, 0, count);
      cc_reduce_expect(want, d->dt, HCCL_REDUCE_SUM, salt, NRANKS, 0, count);
      r = HcclAllReduce(buf, buf, count, d->dt, HCCL_REDUCE_SUM, d->comm, NULL);
    }
    int64_t bad = r == HCCL_SUCCESS ? cc_first_mismatch(buf, want, d->dt, count) : -1;
    free(buf);
    free(want);
    if (r != HCCL_SUCCESS || bad >= 0) {
      snprintf(d->error, sizeof(d->error), "communicator %d call %d (count %llu): %s", d->which, i,
               (unsigned long long)count,
               r != HCCL_SUCCESS ? HcclGetLastErrorMessage() : "wrong element");
      return NULL;
    }
  }
  return NULL;
}

static int threads_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
  setenv("HCCL_BUFFSIZE", "1", 1);
  struct driver d[2] = {{.rank = rank, .which = 0, .dt = HCCL_DATA_TYPE_FP32},
                        {.rank = rank, .which = 1, .dt = HCCL_DATA_TYPE_INT32}};
  for (int k = 0; k < 2; k++)
    RANK_CHECK(HcclCommInitFromEnv(&d[k].comm) == HCCL_SUCCESS, "init %d: %s", k,
               HcclGetLastErrorMessage());
  pthread_t th[2];
  for (int k = 0; k < 2; k++)
    RANK_CHECK(pthread_create(&th[k], NULL, drive, &d[k]) == 0, "thread");
  for (int k = 0; k < 2; k++)
    pthread_join(th[k], NULL);
  for (int k = 0; k < 2; k++)
    RANK_CHECK(d[k].error[0] == '\0', "%s", d[k].error);
  for (int k = 0; k < 2; k++)
    RANK_CHECK(HcclCommDestroy(d[k].comm) == HCCL_SUCCESS, "destroy %d", k);
  return 0;
}

static void test_two_communicators_two_threads(void **st) {
  (void)st;
  assert_int_equal(harness_run_ranks(NRANKS, RUN_TIMEOUT_S, threads_body, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_communicators_two_threads)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
