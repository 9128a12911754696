/*
 * test_place.c - hccl/src/topo/place.c: servers in order of their lowest rank, local indices,
 * devices (each rank's choice, else its local index), the world ring in each server's
 * topology order, and every refusal with a message that names the server, the ranks and the
 * rule. Pure function: no processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "place.h"

#define TOPO_DIR HCCL_SOURCE_DIR "/topologies"
#define MAXR 16

struct job {
  struct hccl_place_rank r[MAXR];
  uint32_t server_of[MAXR], local_index[MAXR], ring[MAXR];
  struct hccl_place out;
  char err[512];
};

/* Ranks k = 0..n-1 on server hosts[k] ('a', 'b', ...) with devices devs[k] (-1: none). */
static HcclResult place(struct job *j, const char *hosts, const int *devs,
                        const struct hccl_topo *topo) {
  static const char *const names[] = {"srv-a", "srv-b", "srv-c", "srv-d"};
  uint32_t n = (uint32_t)strlen(hosts);
  memset(j, 0, sizeof(*j));
  for (uint32_t k = 0; k < n; k++)
    j->r[k] = (struct hccl_place_rank){(uint64_t)(hosts[k] - 'a' + 100), devs ? devs[k] : -1,
                                       names[hosts[k] - 'a'], devs ? "DEVICE_ID" : "its index"};
  j->out = (struct hccl_place){
      .server_of = j->server_of, .local_index = j->local_index, .ring = j->ring};
  return hccl__place(j->r, n, topo, &j->out, j->err, sizeof(j->err));
}

static void test_two_servers_interleaved(void **state) {
  (void)state;
  struct job j;
  /* Ranks alternate between servers b and a: server 0 is b (rank 0's). */
  assert_int_equal(place(&j, "babababa", NULL, NULL), HCCL_SUCCESS);
  assert_int_equal(j.out.nservers, 2);
  assert_int_equal(j.out.per_server, 4);
  const uint32_t server[] = {0, 1, 0, 1, 0, 1, 0, 1}, local[] = {0, 0, 1, 1, 2, 2, 3, 3};
  for (int k = 0; k < 8; k++) {
    assert_int_equal(j.server_of[k], server[k]);
    assert_int_equal(j.local_index[k], local[k]);
    assert_int_equal(j.r[k].device, (int)local[k]);
  }
  /* Flat servers: each server's ranks in device order, servers in order. */
  const uint32_t ring[] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (int k = 0; k < 8; k++)
    assert_int_equal(j.ring[k], ring[k]);
}

static void test_devices_chosen(void **state) {
  (void)state;
  struct job j;
  /* Devices 6, 4, 7, 5 on one server: the ring follows the devices, not the ranks. */
  const int devs[] = {6, 4, 7, 5};
  assert_int_equal(place(&j, "aaaa", devs, NULL), HCCL_SUCCESS);
  const uint32_t ring[] = {1, 3, 0, 2};
  for (int k = 0; k < 4; k++) {
    assert_int_equal(j.r[k].device, devs[k]);
    assert_int_equal(j.ring[k], ring[k]);
  }
}

static void test_refusals(void **state) {
  (void)state;
  struct job j;
  const int clash[] = {1, 1};
  assert_int_equal(place(&j, "aa", clash, NULL), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "ranks 0 and 1 both drive device 1 on server srv-a"));
  assert_non_null(strstr(j.err, "rank 0's from DEVICE_ID"));
  /* A chosen device may clash with another rank's local index. */
  const int mixed[] = {1, -1};
  assert_int_equal(place(&j, "aa", mixed, NULL), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "both drive device 1"));
}

/* A flat server (the default, and flat8 by name) takes any count per server, and servers of
 * different counts (uneven); 3, 5, 6 and 7 ranks, 3 + 2, 1 + 4 + 2. More ranks than the
 * default's 8 devices widen it (devices 0-9); a named flat8 has devices 0-7 only. */
static void test_any_count_flat(void **state) {
  (void)state;
  struct hccl_topo flat8;
  char err[256];
  assert_int_equal(hccl__topo_load("flat8", TOPO_DIR, &flat8, err, sizeof(err)), HCCL_SUCCESS);
  static const char *const one_server[] = {"aaa", "aaaaa", "aaaaaa", "aaaaaaa"};
  struct job j;
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < 4; i++) {
      uint32_t n = (uint32_t)strlen(one_server[i]);
      assert_int_equal(place(&j, one_server[i], NULL, t ? &flat8 : NULL), HCCL_SUCCESS);
      assert_int_equal(j.out.nservers, 1);
      assert_int_equal(j.out.per_server, n);
      assert_false(j.out.uneven);
      for (uint32_t k = 0; k < n; k++)
        assert_int_equal(j.ring[k], k);
    }
  assert_int_equal(place(&j, "aaabb", NULL, &flat8), HCCL_SUCCESS);
  assert_true(j.out.uneven);
  assert_int_equal(j.out.nservers, 2);
  const uint32_t local[] = {0, 1, 2, 0, 1};
  for (int k = 0; k < 5; k++)
    assert_int_equal(j.local_index[k], local[k]);
  assert_int_equal(place(&j, "abbbbcc", NULL, NULL), HCCL_SUCCESS);
  assert_true(j.out.uneven);
  assert_int_equal(j.out.nservers, 3);
  assert_int_equal(place(&j, "aaaaaaaaaa", NULL, NULL), HCCL_SUCCESS);
  assert_int_equal(j.r[9].device, 9);
  assert_int_equal(place(&j, "aaaaaaaaaa", NULL, &flat8), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "server srv-a: device 8 in device list"));
  assert_non_null(strstr(j.err, "topology flat8 has devices 0-7"));
}

/* A shrink's survivors (any_count) under ascend910: 2 + 1 across two servers is placed (the
 * survivors cannot choose their number); the same ranks in a new communicator are refused. */
static void test_shrink_survivors_uneven(void **state) {
  (void)state;
  struct job j;
  memset(&j, 0, sizeof(j));
  const char *hosts = "aab";
  for (uint32_t k = 0; k < 3; k++)
    j.r[k] = (struct hccl_place_rank){(uint64_t)(hosts[k] - 'a' + 100), -1,
                                      hosts[k] == 'a' ? "srv-a" : "srv-b", "its index"};
  j.out = (struct hccl_place){.server_of = j.server_of, .local_index = j.local_index,
                              .ring = j.ring, .any_count = true};
  struct hccl_topo a;
  char err[256];
  assert_int_equal(hccl__topo_load("ascend910", TOPO_DIR, &a, err, sizeof(err)), HCCL_SUCCESS);
  assert_int_equal(hccl__place(j.r, 3, &a, &j.out, j.err, sizeof(j.err)), HCCL_SUCCESS);
  assert_true(j.out.uneven);
  assert_int_equal(j.out.nservers, 2);
  const uint32_t server[] = {0, 0, 1}, local[] = {0, 1, 0};
  for (int k = 0; k < 3; k++) {
    assert_int_equal(j.server_of[k], server[k]);
    assert_int_equal(j.local_index[k], local[k]);
    assert_int_equal(j.ring[k], (uint32_t)k);
  }
  assert_int_equal(place(&j, "aabb", NULL, &a), HCCL_SUCCESS);
  assert_false(j.out.uneven);
  assert_int_equal(place(&j, "aab", NULL, &a), HCCL_E_PARA);
}

static void test_topology_rules(void **state) {
  (void)state;
  struct hccl_topo t;
  char err[256];
  assert_int_equal(hccl__topo_load("ascend910", TOPO_DIR, &t, err, sizeof(err)), HCCL_SUCCESS);
  struct job j;
  /* Two devices in different 4-device groups break the Ascend 910's rule, named per server. */
  const int across[] = {0, 4};
  assert_int_equal(place(&j, "aa", across, &t), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "server srv-a: "));
  const int inside[] = {4, 5, 0, 1};
  assert_int_equal(place(&j, "aabb", inside, &t), HCCL_SUCCESS);
  assert_int_equal(j.out.nservers, 2);
  /* HCCL's counts: 1, 2, 4 or 8 ranks a server, the same on every server; each refusal says
   * how to choose a flat topology instead. */
  assert_int_equal(place(&j, "aaa", NULL, &t), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "3 ranks on server srv-a; topology ascend910 allows 1, 2, 4 or 8 "
                                "devices on a server; for any count choose a flat topology "
                                "(HCCL_TOPO_FILE=flat8, npu-launch --topology flat8)"));
  assert_int_equal(place(&j, "aaaaaa", NULL, &t), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "6 ranks on server srv-a"));
  assert_int_equal(place(&j, "aabbbb", NULL, &t), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "server srv-b has 4 ranks but server srv-a has 2; topology "
                                "ascend910 needs the same number on every server"));
  assert_non_null(strstr(j.err, "HCCL_TOPO_FILE=flat8"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_servers_interleaved),
      cmocka_unit_test(test_devices_chosen),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_any_count_flat),
      cmocka_unit_test(test_shrink_survivors_uneven),
      cmocka_unit_test(test_topology_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
