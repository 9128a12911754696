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
  assert_int_equal(place(&j, "aaa", NULL, NULL), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "3 ranks on server srv-a; a group must have 1, 2, 4 or 8"));
  assert_int_equal(place(&j, "aabbbb", NULL, NULL), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "server srv-b has 4 ranks but server srv-a has 2"));
  const int clash[] = {1, 1};
  assert_int_equal(place(&j, "aa", clash, NULL), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "ranks 0 and 1 both drive device 1 on server srv-a"));
  assert_non_null(strstr(j.err, "rank 0's from DEVICE_ID"));
  /* A chosen device may clash with another rank's local index. */
  const int mixed[] = {1, -1};
  assert_int_equal(place(&j, "aa", mixed, NULL), HCCL_E_PARA);
  assert_non_null(strstr(j.err, "both drive device 1"));
}

/* A shrink's survivors (any_count): 2 + 1 across two servers is placed, marked uneven; the
 * same ranks in a new communicator are refused. */
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
  assert_int_equal(hccl__place(j.r, 3, NULL, &j.out, j.err, sizeof(j.err)), HCCL_SUCCESS);
  assert_true(j.out.uneven);
  assert_int_equal(j.out.nservers, 2);
  const uint32_t server[] = {0, 0, 1}, local[] = {0, 1, 0};
  for (int k = 0; k < 3; k++) {
    assert_int_equal(j.server_of[k], server[k]);
    assert_int_equal(j.local_index[k], local[k]);
    assert_int_equal(j.ring[k], (uint32_t)k);
  }
  assert_int_equal(place(&j, "aabb", NULL, NULL), HCCL_SUCCESS);
  assert_false(j.out.uneven);
  assert_int_equal(place(&j, "aab", NULL, NULL), HCCL_E_PARA);
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
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_servers_interleaved),
      cmocka_unit_test(test_devices_chosen),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_shrink_survivors_uneven),
      cmocka_unit_test(test_topology_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
