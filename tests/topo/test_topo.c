/*
 * test_topo.c - the topology module (hccl/src/topo/topo.c): parsing good and bad documents, loading
 * by name and by path, the flat server, the device-list rules of check_devices, and the ring
 * order's group crossings.
 *
 * Each failure case checks that the message names the problem (the value and the rule), since
 * that message is what a user sees from npu-launch and libhccl.
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

#include "topo.h"

#define TOPO_DIR HCCL_SOURCE_DIR "/topologies"

static const char *const ascend910_json =
    "{\"name\":\"ascend910\",\"devices\":8,\"groups\":[[0,1,2,3],[4,5,6,7]],"
    "\"intra_group_link\":\"HCCS\",\"inter_group_link\":\"PCIe\","
    "\"partial_jobs_within_group\":true,\"device_counts\":[1,2,4,8]}";

/* Asserts that parsing doc fails with a message containing every given fragment. */
static void expect_parse_error(const char *doc, const char *frag1, const char *frag2) {
  struct hccl_topo t;
  char err[512] = "";
  memset(&t, 0x5a, sizeof(t));
  struct hccl_topo before = t;
  HcclResult r = hccl__topo_parse(doc, &t, err, sizeof(err));
  if (r == HCCL_SUCCESS) fail_msg("document was accepted: %s", doc);
  if (!strstr(err, frag1)) fail_msg("message '%s' does not contain '%s'", err, frag1);
  if (frag2 && !strstr(err, frag2)) fail_msg("message '%s' does not contain '%s'", err, frag2);
  /* out is set only on success */
  assert_memory_equal(&t, &before, sizeof(t));
}

static void test_parse_good(void **state) {
  (void)state;
  struct hccl_topo t;
  char err[256] = "";
  assert_int_equal(hccl__topo_parse(ascend910_json, &t, err, sizeof(err)), HCCL_SUCCESS);
  assert_string_equal(t.name, "ascend910");
  assert_int_equal(t.ndevices, 8);
  assert_int_equal(t.ngroups, 2);
  for (int d = 0; d < 8; d++)
    assert_int_equal(t.group_of[d], d < 4 ? 0 : 1);
  assert_true(t.partial_jobs_within_group);
  assert_int_equal(t.counts, 0x8b); /* 1, 2, 4, 8 */
  assert_true(hccl__topo_count_ok(&t, 4));
  assert_false(hccl__topo_count_ok(&t, 3));

  /* optional fields absent: the rules are off; groups may list devices in any order */
  assert_int_equal(hccl__topo_parse("{\"name\":\"odd\",\"devices\":4,\"groups\":[[3,1],[0,2]],"
                                    "\"_comment\":\"ok\"}",
                                    &t, err, sizeof(err)),
                   HCCL_SUCCESS);
  assert_false(t.partial_jobs_within_group);
  assert_int_equal(t.counts, 0);
  assert_true(hccl__topo_count_ok(&t, 3));
  assert_int_equal(t.group_of[0], 1);
  assert_int_equal(t.group_of[3], 0);
}

static void test_parse_bad(void **state) {
  (void)state;
  expect_parse_error("{\"name\": \"x\", \"devices\": 8,", "not valid JSON", "line 1");
  expect_parse_error("devices: 8", "not valid JSON", NULL);
  expect_parse_error("{\"name\":\"x\",\n\"devices\":8 \"groups\":[[0]]}", "not valid JSON",
                     "line 2");
  expect_parse_error("[1,2]", "must be a JSON object", NULL);
  expect_parse_error("{\"devices\":8,\"groups\":[[0,1,2,3,4,5,6,7]]}", "no field 'name'", NULL);
  expect_parse_error("{\"name\":\"x\",\"groups\":[[0]]}", "no field 'devices'", "topology x");
  expect_parse_error("{\"name\":\"x\",\"devices\":2}", "no field 'groups'", NULL);
  expect_parse_error("{\"name\":\"x\",\"devices\":0,\"groups\":[[0]]}", "'devices'",
                     "from 1 to 64");
  expect_parse_error("{\"name\":\"x\",\"devices\":\"8\",\"groups\":[[0]]}", "'devices'", "integer");
  expect_parse_error("{\"name\":\"x\",\"devices\":2,\"groups\":[]}", "'groups'", "non-empty");
  expect_parse_error("{\"name\":\"x\",\"devices\":2,\"groups\":[[0,1],[]]}", "group 1",
                     "non-empty");
  expect_parse_error("{\"name\":\"x\",\"devices\":2,\"groups\":[[0,1.5]]}", "group 0",
                     "not an integer");
  expect_parse_error("{\"name\":\"x\",\"devices\":8,\"groups\":[[0,1,2,3],[3,4,5,6,7]]}",
                     "device 3 is in group 0 and in group 1", "exactly one group");
  expect_parse_error("{\"name\":\"x\",\"devices\":4,\"groups\":[[0,1,1,2,3]]}",
                     "device 1 is listed twice", NULL);
  expect_parse_error("{\"name\":\"x\",\"devices\":8,\"groups\":[[0,1,2,3],[4,5,6,7,8]]}",
                     "device 8 in group 1 is out of range", "0-7");
  expect_parse_error("{\"name\":\"x\",\"devices\":4,\"groups\":[[0,-1]]}", "device -1",
                     "out of range");
  expect_parse_error("{\"name\":\"x\",\"devices\":8,\"groups\":[[0,1,2,3],[4,5,6]]}",
                     "device 7 is in no group", NULL);
  expect_parse_error("{\"name\":\"x\",\"devices\":2,\"groups\":[[0,1]],\"group\":[]}",
                     "unknown field 'group'", NULL);
  expect_parse_error("{\"name\":\"x\",\"devices\":2,\"groups\":[[0,1]],"
                     "\"partial_jobs_within_group\":1}",
                     "'partial_jobs_within_group'", "true or false");
  expect_parse_error("{\"name\":\"\",\"devices\":2,\"groups\":[[0,1]]}", "'name'", "non-empty");
  expect_parse_error("{\"name\":\"x\",\"devices\":4,\"groups\":[[0,1,2,3]],"
                     "\"device_counts\":[1,2,8]}",
                     "'device_counts' holds 8", "from 1 to 4");
  expect_parse_error("{\"name\":\"x\",\"devices\":4,\"groups\":[[0,1,2,3]],"
                     "\"device_counts\":[]}",
                     "'device_counts'", "non-empty array");
  expect_parse_error("{\"name\":\"x\",\"devices\":4,\"groups\":[[0,1,2,3]],"
                     "\"device_counts\":[\"2\"]}",
                     "'device_counts'", "not an integer");
}

static void test_load_by_name_and_path(void **state) {
  (void)state;
  struct hccl_topo t;
  char err[512] = "";
  assert_int_equal(hccl__topo_load("ascend910", NULL, &t, err, sizeof(err)), HCCL_SUCCESS);
  assert_string_equal(t.name, "ascend910");
  assert_int_equal(t.ngroups, 2);
  assert_true(t.partial_jobs_within_group);

  assert_int_equal(hccl__topo_load("ascend910", TOPO_DIR, &t, err, sizeof(err)), HCCL_SUCCESS);
  assert_int_equal(hccl__topo_load(TOPO_DIR "/flat4.json", NULL, &t, err, sizeof(err)),
                   HCCL_SUCCESS);
  assert_string_equal(t.name, "flat4");
  assert_int_equal(t.ndevices, 4);
  assert_int_equal(t.ngroups, 1);
  assert_false(t.partial_jobs_within_group);

  static const int sizes[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; i++) {
    char name[16];
    snprintf(name, sizeof(name), "flat%d", sizes[i]);
    assert_int_equal(hccl__topo_load(name, NULL, &t, err, sizeof(err)), HCCL_SUCCESS);
    assert_int_equal(t.ndevices, sizes[i]);
    assert_int_equal(t.ngroups, 1);
  }

  /* a file of our own, by path, and a broken one: the message names the file */
  char path[] = "/tmp/test_topo_XXXXXX.json";
  int fd = mkstemps(path, 5);
  assert_true(fd >= 0);
  const char *doc = "{\"name\":\"mine\",\"devices\":2,\"groups\":[[0],[1]],"
                    "\"partial_jobs_within_group\":true}";
  assert_int_equal(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
  close(fd);
  assert_int_equal(hccl__topo_load(path, NULL, &t, err, sizeof(err)), HCCL_SUCCESS);
  assert_string_equal(t.name, "mine");
  assert_int_equal(t.ngroups, 2);
  FILE *f = fopen(path, "w");
  fputs("{\"name\":\"mine\"", f);
  fclose(f);
  assert_int_not_equal(hccl__topo_load(path, NULL, &t, err, sizeof(err)), HCCL_SUCCESS);
  assert_non_null(strstr(err, path));
  assert_non_null(strstr(err, "not valid JSON"));
  unlink(path);

  assert_int_equal(hccl__topo_load("no_such_server", NULL, &t, err, sizeof(err)), HCCL_E_NOT_FOUND);
  assert_non_null(strstr(err, "unknown topology 'no_such_server'"));
  assert_non_null(strstr(err, "no_such_server.json"));
  assert_int_equal(hccl__topo_load("/nonexistent/x.json", NULL, &t, err, sizeof(err)),
                   HCCL_E_OPEN_FILE_FAILURE);
  assert_non_null(strstr(err, "/nonexistent/x.json"));
  assert_int_not_equal(hccl__topo_load("", NULL, &t, err, sizeof(err)), HCCL_SUCCESS);
  assert_non_null(strstr(err, "empty"));
}

static void test_flat(void **state) {
  (void)state;
  struct hccl_topo t;
  hccl__topo_flat(8, &t);
  assert_string_equal(t.name, "flat8");
  assert_int_equal(t.ndevices, 8);
  assert_int_equal(t.ngroups, 1);
  assert_false(t.partial_jobs_within_group);
  for (int d = 0; d < 8; d++)
    assert_int_equal(t.group_of[d], 0);
  hccl__topo_flat(HCCL_TOPO_MAX_DEVICES + 5, &t);
  assert_int_equal(t.ndevices, HCCL_TOPO_MAX_DEVICES);
}

static void check_devs(const struct hccl_topo *t, const int *devs, int n, const char *frag1,
                       const char *frag2) {
  char err[512] = "";
  HcclResult r = hccl__topo_check_devices(t, devs, n, err, sizeof(err));
  if (!frag1) {
    if (r != HCCL_SUCCESS) fail_msg("refused on %s: %s", t->name, err);
    return;
  }
  if (r == HCCL_SUCCESS) fail_msg("accepted on %s, expected '%s'", t->name, frag1);
  if (!strstr(err, frag1)) fail_msg("message '%s' does not contain '%s'", err, frag1);
  if (frag2 && !strstr(err, frag2)) fail_msg("message '%s' does not contain '%s'", err, frag2);
}

static void test_check_devices(void **state) {
  (void)state;
  struct hccl_topo a, flat;
  char err[256];
  assert_int_equal(hccl__topo_load("ascend910", NULL, &a, err, sizeof(err)), HCCL_SUCCESS);
  hccl__topo_flat(8, &flat);

  static const int three[] = {0, 1, 2}, dup[] = {0, 1, 1, 2}, out[] = {0, 9};
  static const int neg[] = {-1, 0}, spans[] = {0, 1, 4, 5}, pair_span[] = {3, 4};
  static const int all[] = {0, 1, 2, 3, 4, 5, 6, 7}, low[] = {0, 1, 2, 3}, high[] = {7, 6, 5, 4};
  static const int pair[] = {4, 5}, one[] = {6}, six[] = {0, 1, 2, 3, 4, 5};

  /* ascend910 keeps HCCL's counts and says how to leave them; a flat server takes any. */
  check_devs(&a, three, 3, "device list '0,1,2' has 3 devices",
             "topology ascend910 allows 1, 2, 4 or 8 devices on a server");
  check_devs(&a, three, 3, "for any count choose a flat topology",
             "HCCL_TOPO_FILE=flat8, npu-launch --topology flat8");
  check_devs(&a, six, 6, "6 devices; topology ascend910 allows 1, 2, 4 or 8", NULL);
  static const int five[] = {0, 2, 4, 6, 7}, seven[] = {0, 1, 2, 3, 4, 5, 6};
  check_devs(&flat, three, 3, NULL, NULL);
  check_devs(&flat, five, 5, NULL, NULL);
  check_devs(&flat, six, 6, NULL, NULL);
  check_devs(&flat, seven, 7, NULL, NULL);
  check_devs(&a, dup, 4, "device 1 appears twice", "'0,1,1,2'");
  check_devs(&a, out, 2, "device 9 in device list '0,9' is out of range",
             "topology ascend910 has devices 0-7");
  check_devs(&flat, neg, 2, "device -1", "out of range");
  check_devs(&a, NULL, 0, "device list is empty", NULL);

  check_devs(&a, spans, 4, "device list 0,1,4,5 spans groups 0-3 and 4-7 of topology ascend910",
             "a 2- or 4-device job must sit inside one group (a flat topology has no groups: "
             "HCCL_TOPO_FILE=flat8, npu-launch --topology flat8)");
  check_devs(&a, pair_span, 2, "spans groups 0-3 and 4-7", NULL);
  check_devs(&flat, spans, 4, NULL, NULL);
  check_devs(&flat, pair_span, 2, NULL, NULL);
  check_devs(&a, all, 8, NULL, NULL);
  check_devs(&flat, all, 8, NULL, NULL);
  check_devs(&a, low, 4, NULL, NULL);
  check_devs(&a, high, 4, NULL, NULL);
  check_devs(&a, pair, 2, NULL, NULL);
  check_devs(&a, one, 1, NULL, NULL);

  /* a smaller flat server: device 4 does not exist on flat4 */
  struct hccl_topo f4;
  hccl__topo_flat(4, &f4);
  check_devs(&f4, pair, 2, "device 4 in device list '4,5' is out of range",
             "topology flat4 has devices 0-3");
}

static int group_of(const struct hccl_topo *t, int dev) {
  return dev >= 0 && dev < t->ndevices ? t->group_of[dev] : -1;
}

/* Number of ring edges (including the wrap-around) joining devices of different groups. */
static int ring_crossings(const struct hccl_topo *t, const int *devs, int n, const int *order) {
  int c = 0;
  if (n < 2) return 0;
  for (int i = 0; i < n; i++)
    if (group_of(t, devs[order[i]]) != group_of(t, devs[order[(i + 1) % n]])) c++;
  return c;
}

static void check_ring(const struct hccl_topo *t, const int *devs, int n, int want_crossings) {
  int order[HCCL_TOPO_MAX_DEVICES];
  bool used[HCCL_TOPO_MAX_DEVICES] = {false};
  hccl__topo_ring(t, devs, n, order);
  for (int i = 0; i < n; i++) {
    assert_true(order[i] >= 0 && order[i] < n);
    assert_false(used[order[i]]); /* a permutation */
    used[order[i]] = true;
  }
  assert_int_equal(ring_crossings(t, devs, n, order), want_crossings);
}

static void test_ring(void **state) {
  (void)state;
  struct hccl_topo a, flat, four;
  char err[256];
  assert_int_equal(hccl__topo_load("ascend910", NULL, &a, err, sizeof(err)), HCCL_SUCCESS);
  hccl__topo_flat(8, &flat);
  assert_int_equal(hccl__topo_parse("{\"name\":\"quad\",\"devices\":8,"
                                    "\"groups\":[[0,1],[2,3],[4,5],[6,7]]}",
                                    &four, err, sizeof(err)),
                   HCCL_SUCCESS);

  static const int interleaved[] = {0, 4, 1, 5, 2, 6, 3, 7};
  static const int mixed[] = {7, 0, 5, 2};
  static const int low[] = {3, 1, 2, 0};
  static const int pairs[] = {6, 0, 3, 4, 1, 7};

  check_ring(&a, interleaved, 8, 2); /* naive order would cross 8 times */
  check_ring(&a, mixed, 4, 2);
  check_ring(&a, low, 4, 0);
  check_ring(&flat, interleaved, 8, 0);
  check_ring(&four, interleaved, 8, 4);
  check_ring(&four, pairs, 6, 4); /* groups {0,1},{3},{4},{6,7}: each touched once */
  check_ring(&a, low, 1, 0);

  /* the exact order on the 910: group 0 by id, then group 1 by id */
  int order[8];
  hccl__topo_ring(&a, interleaved, 8, order);
  static const int want[] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int i = 0; i < 8; i++)
    assert_int_equal(interleaved[order[i]], want[i]);

  /* devices unknown to the topology go last */
  static const int unknown[] = {9, 5, 1};
  hccl__topo_ring(&a, unknown, 3, order);
  assert_int_equal(unknown[order[0]], 1);
  assert_int_equal(unknown[order[1]], 5);
  assert_int_equal(unknown[order[2]], 9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_good),
      cmocka_unit_test(test_parse_bad),
      cmocka_unit_test(test_load_by_name_and_path),
      cmocka_unit_test(test_flat),
      cmocka_unit_test(test_check_devices),
      cmocka_unit_test(test_ring),
  };
  alarm(60);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
