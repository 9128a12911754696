/*
 * test_placement.c - where comm.c puts ranks: devices (DEVICE_ID, duplicates refused), the
 * topology rule (HCCL_TOPO_FILE=ascend910: a 2- or 4-device job inside 0-3 or 4-7), the ring
 * order (grouped by device group, so it crosses between the 910's groups exactly twice), and
 * the settings every rank must share (HCCL_BUFFSIZE, HCCL_ALGO). Each refusal must happen on
 * every rank, with a message naming the values, within seconds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm.h"
#include "harness.h"
#include "hccl.h"

#define TIMEOUT_S 60

struct placement {
  const int *devices;         /* DEVICE_ID per rank */
  const char *topo;           /* HCCL_TOPO_FILE, or NULL */
  HcclResult want;            /* init's result on every rank */
  const char *must_say;       /* in the message when refused */
  const char *buffsize_rank1; /* HCCL_BUFFSIZE on rank 1 only, or NULL */
};

static int sum_works(HcclComm comm, int nranks) {
  int32_t v[3] = {1, 2, 3};
  HcclResult rc = HcclAllReduce(v, v, 3, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
  RANK_CHECK(rc == HCCL_SUCCESS, "allreduce: %s", HcclGetLastErrorMessage());
  RANK_CHECK(v[0] == nranks && v[1] == 2 * nranks && v[2] == 3 * nranks, "sum %d %d %d", v[0], v[1],
             v[2]);
  return 0;
}

static int placement_body(int rank, int nranks, void *argp) {
  const struct placement *p = argp;
  char dev[16];
  snprintf(dev, sizeof(dev), "%d", p->devices[rank]);
  setenv("DEVICE_ID", dev, 1);
  setenv("HCCL_CONNECT_TIMEOUT", "10", 1);
  setenv("HCCL_LOG_LEVEL", "error", 1);
  if (p->topo) setenv("HCCL_TOPO_FILE", p->topo, 1);
  if (p->buffsize_rank1 && rank == 1) setenv("HCCL_BUFFSIZE", p->buffsize_rank1, 1);
  HcclComm comm = NULL;
  HcclResult rc = HcclCommInitFromEnv(&comm);
  const char *msg = HcclGetLastErrorMessage();
  RANK_CHECK(rc == p->want, "init returned %d (%s), want %d", rc, msg, p->want);
  if (rc != HCCL_SUCCESS) {
    RANK_CHECK(strstr(msg, p->must_say) != NULL, "message lacks '%s': %s", p->must_say, msg);
    return 0;
  }
  int32_t d;
  RANK_CHECK(HcclGetDeviceId(comm, &d) == HCCL_SUCCESS && d == p->devices[rank], "device %d", d);
  /* The ring visits devices grouped by the topology's groups, sorted inside a group. */
  struct hccl_comm *c = comm;
  for (uint32_t i = 0; i + 1 < c->nranks; i++) {
    int a = c->peers[c->world.ring[i]].device, b = c->peers[c->world.ring[i + 1]].device;
    RANK_CHECK(a < b, "ring position %u: device %d then %d", i, a, b);
  }
  if (sum_works(comm, nranks)) return 1;
  return HcclCommDestroy(comm) == HCCL_SUCCESS ? 0 : 1;
}

static void run(int n, struct placement *p) {
  int failed = harness_run_ranks(n, TIMEOUT_S, placement_body, p);
  assert_int_equal(failed, 0);
}

static void test_ascend910_spanning_groups_refused(void **st) {
  (void)st;
  static const int devs[] = {0, 1, 4, 5};
  struct placement p = {devs, "ascend910", HCCL_E_PARA, "spans groups", NULL};
  run(4, &p);
}

static void test_ascend910_one_group_works(void **st) {
  (void)st;
  static const int devs[] = {7, 6, 5, 4};
  struct placement p = {devs, "ascend910", HCCL_SUCCESS, NULL, NULL};
  run(4, &p);
}

static void test_flat_lifts_the_rule(void **st) {
  (void)st;
  static const int devs[] = {0, 1, 4, 5};
  struct placement p = {devs, NULL, HCCL_SUCCESS, NULL, NULL};
  run(4, &p);
}

/* 8 ranks given devices out of order: the ring follows devices 0..7, so it crosses from group
 * 0-3 to 4-7 once and back once (the minimum), whatever the rank numbers. */
static void test_ascend910_ring_order(void **st) {
  (void)st;
  static const int devs[] = {5, 2, 7, 0, 3, 6, 1, 4};
  struct placement p = {devs, "ascend910", HCCL_SUCCESS, NULL, NULL};
  run(8, &p);
}

static void test_duplicate_device_refused(void **st) {
  (void)st;
  static const int devs[] = {0, 1, 1, 3};
  struct placement p = {devs, NULL, HCCL_E_PARA, "ranks 1 and 2 both drive device 1", NULL};
  run(4, &p);
}

static void test_device_out_of_topology_refused(void **st) {
  (void)st;
  static const int devs[] = {0, 9};
  struct placement p = {devs, "ascend910", HCCL_E_PARA, "9", NULL};
  run(2, &p);
}

static void test_buffsize_must_agree(void **st) {
  (void)st;
  static const int devs[] = {0, 1};
  struct placement p = {devs, NULL, HCCL_E_PARA, "HCCL_BUFFSIZE differs", "7"};
  run(2, &p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ascend910_spanning_groups_refused),
      cmocka_unit_test(test_ascend910_one_group_works),
      cmocka_unit_test(test_flat_lifts_the_rule),
      cmocka_unit_test(test_ascend910_ring_order),
      cmocka_unit_test(test_duplicate_device_refused),
      cmocka_unit_test(test_device_out_of_topology_refused),
      cmocka_unit_test(test_buffsize_must_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
