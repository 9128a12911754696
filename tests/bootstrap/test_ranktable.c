/*
 * test_ranktable.c - HCCL's rank table (bootstrap/ranktable.c) and the inits that read it
 * (HcclCommInitClusterInfo, HcclCommInitFromEnv with RANK_TABLE_FILE; core/comm_init.c).
 *
 * Parsing: topologies/ranktables/2x8.json and 1x4_local.json give the right ranks, servers and
 * devices, and a table of 3 devices on a server parses (the topology rules at placement);
 * numbers as strings or as JSON numbers; unknown fields ignored. Every refusal names
 * the field path and the value: not JSON, wrong version, status not completed, server_count
 * disagreeing with server_list, unequal or invalid device counts, device_id or rank_id out of
 * range, not a number, duplicated, a duplicated server_id, a server_id too long to keep, a
 * missing field.
 *
 * Jobs: 4 forked ranks each call HcclCommInitClusterInfo(1x4_local.json, rank) and allreduce;
 * 4 more do the same through RANK_TABLE_FILE + RANK_ID; their devices are the table's. A rank
 * not in the table, and a table whose server_id is not an address of this host, are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"
#include "ranktable.h"

#ifndef HCCL_SOURCE_DIR
#error "HCCL_SOURCE_DIR must name the source tree"
#endif
#define TABLES HCCL_SOURCE_DIR "/topologies/ranktables/"

static void test_example_tables(void **st) {
  (void)st;
  struct hccl_ranktable *t = NULL;
  assert_int_equal(hccl__ranktable_load(TABLES "2x8.json", &t), HCCL_SUCCESS);
  assert_int_equal(t->nranks, 16);
  assert_int_equal(t->nservers, 2);
  assert_int_equal(t->per_server, 8);
  assert_int_equal(t->rank[9].server, 1);
  assert_int_equal(t->rank[9].local_rank, 1);
  assert_int_equal(t->rank[9].device, 1);
  assert_string_equal(t->rank[9].server_id, "10.0.0.2");
  free(t);
  assert_int_equal(hccl__ranktable_load(TABLES "1x4_local.json", &t), HCCL_SUCCESS);
  assert_int_equal(t->nranks, 4);
  free(t);
  /* JSON numbers, ranks out of device order, extra fields. */
  const char *ok = "{\"version\": \"1.0\", \"server_count\": 2, \"status\": \"completed\", "
                   "\"extra\": 1, \"server_list\": ["
                   "{\"server_id\": \"a\", \"container_ip\": \"x\", \"device\": ["
                   "{\"device_id\": 5, \"rank_id\": 3}, {\"device_id\": 4, \"rank_id\": 0}]},"
                   "{\"server_id\": \"b\", \"device\": ["
                   "{\"device_id\": \"0\", \"rank_id\": \"1\"}, {\"device_id\": \"1\", "
                   "\"rank_id\": \"2\", \"device_ip\": \"1.2.3.4\"}]}]}";
  assert_int_equal(hccl__ranktable_parse(ok, "ok.json", &t), HCCL_SUCCESS);
  assert_int_equal(t->rank[3].device, 5);
  assert_int_equal(t->rank[3].server, 0);
  assert_int_equal(t->rank[3].local_rank, 0);
  assert_int_equal(t->rank[2].server, 1);
  free(t);

  /* Any count a server (the topology's rule is placement's): 3 devices on one server. */
  const char *three = "{\"version\": \"1.0\", \"server_count\": \"1\", \"status\": \"completed\", "
                      "\"server_list\": [{\"server_id\": \"a\", \"device\": ["
                      "{\"device_id\": 0, \"rank_id\": 0}, {\"device_id\": 1, \"rank_id\": 1}, "
                      "{\"device_id\": 2, \"rank_id\": 2}]}]}";
  assert_int_equal(hccl__ranktable_parse(three, "three.json", &t), HCCL_SUCCESS);
  assert_int_equal(t->nranks, 3);
  assert_int_equal(t->per_server, 3);
  free(t);
}

/* A two-server, two-device table with one substitution applied. */
static void expect_refused(const char *from, const char *to, const char *words) {
  char text[4096];
  const char *base = "{\"version\": \"1.0\", \"server_count\": \"2\", \"status\": \"completed\", "
                     "\"server_list\": [{\"server_id\": \"10.0.0.1\", \"device\": ["
                     "{\"device_id\": \"0\", \"device_ip\": \"1.1.1.1\", \"rank_id\": \"0\"}, "
                     "{\"device_id\": \"1\", \"device_ip\": \"1.1.1.2\", \"rank_id\": \"1\"}]}, "
                     "{\"server_id\": \"10.0.0.2\", \"device\": ["
                     "{\"device_id\": \"0\", \"device_ip\": \"1.1.2.1\", \"rank_id\": \"2\"}, "
                     "{\"device_id\": \"1\", \"device_ip\": \"1.1.2.2\", \"rank_id\": \"3\"}]}]}";
  const char *at = strstr(base, from);
  if (!at) fail_msg("test bug: '%s' not in the base table", from);
  snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
  struct hccl_ranktable *t = NULL;
  HcclResult r = hccl__ranktable_parse(text, "t.json", &t);
  const char *msg = HcclGetLastErrorMessage();
  if (r == HCCL_SUCCESS || !strstr(msg, words) || !strstr(msg, "t.json"))
    fail_msg("'%s' -> '%s': result %d, message '%s' (want '%s')", from, to, r, msg, words);
  assert_null(t);
}

static void test_refusals(void **st) {
  (void)st;
  expect_refused("{\"version\"", "[{\"version\"", "is not JSON");
  expect_refused("\"1.0\"", "\"2.0\"", "version: \"2.0\" is not supported");
  expect_refused("\"completed\"", "\"initializing\"", "status: \"initializing\"");
  expect_refused("\"server_count\": \"2\"", "\"server_count\": \"3\"",
                 "server_count: 3, but server_list has 2 servers");
  expect_refused("\"server_count\": \"2\"", "\"server_count\": \"two\"",
                 "server_count: \"two\" is not a whole number");
  expect_refused("\"rank_id\": \"3\"", "\"rank_id\": \"9\"",
                 "server_list[1].device[1].rank_id: 9 is out of range 0-3");
  expect_refused("\"rank_id\": \"3\"", "\"rank_id\": \"1\"",
                 "server_list[1].device[1].rank_id: 1 is also server_list[0].device[1]'s");
  expect_refused("\"rank_id\": \"3\"", "\"rank_id\": -3",
                 "server_list[1].device[1].rank_id: -3 is not a whole number");
  expect_refused("\"device_id\": \"1\", \"device_ip\": \"1.1.2.2\"",
                 "\"device_id\": \"0\", \"device_ip\": \"1.1.2.2\"",
                 "server_list[1].device[1].device_id: 0 is also server_list[1].device[0]'s");
  expect_refused("\"device_id\": \"1\", \"device_ip\": \"1.1.2.2\"",
                 "\"device_id\": \"4096\", \"device_ip\": \"1.1.2.2\"",
                 "server_list[1].device[1].device_id: 4096 is out of range 0-1023");
  expect_refused("\"server_id\": \"10.0.0.2\"", "\"server_id\": \"10.0.0.1\"",
                 "server_list[1].server_id: \"10.0.0.1\" is also server_list[0]'s");
  expect_refused("\"server_id\": \"10.0.0.2\"", "\"server\": \"10.0.0.2\"",
                 "server_list[1].server_id: missing is not a non-empty string");
  expect_refused(", {\"device_id\": \"1\", \"device_ip\": \"1.1.2.2\", \"rank_id\": \"3\"}", "",
                 "server_list[1].device: 1 devices, but server_list[0] has 2");
  expect_refused("\"device\": [{\"device_id\": \"0\", \"device_ip\": \"1.1.1.1\", "
                 "\"rank_id\": \"0\"}, {\"device_id\": \"1\", \"device_ip\": \"1.1.1.2\", "
                 "\"rank_id\": \"1\"}]",
                 "\"device\": []", "server_list[0].device: 0 devices; a server has 1 to 64");
  expect_refused("\"device_ip\": \"1.1.1.2\"", "\"device_ip\": 7",
                 "server_list[0].device[1].device_ip: is not a string");
  /* Ids too long to keep whole are refused: cut short, two could become one (found by
   * tests/fuzz/fuzz_ranktable's check that servers keep different ids). */
  char id[400];
  memset(id, 'h', sizeof(id));
  snprintf(id + 300, sizeof(id) - 300, "2\"");
  char sid[420];
  snprintf(sid, sizeof(sid), "\"server_id\": \"%s", id);
  expect_refused("\"server_id\": \"10.0.0.2\"", sid, "server_list[1].server_id: \"hhhh");
  expect_refused("\"server_id\": \"10.0.0.2\"", sid,
                 "has 301 characters; a host name or "
                 "address has at most 255");
}

static int job_body(int rank, int n, void *arg) {
  (void)n;
  int via_env = arg != NULL;
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("LOCAL_RANK");
  unsetenv("LOCAL_WORLD_SIZE");
  unsetenv("MASTER_ADDR"); /* the table says where rank 0 is; the port stays the harness's */
  HcclComm comm = NULL;
  HcclResult r;
  if (via_env) {
    char v[16];
    snprintf(v, sizeof(v), "%d", rank);
    setenv("RANK_ID", v, 1);
    setenv("RANK_TABLE_FILE", TABLES "1x4_local.json", 1);
    r = HcclCommInitFromEnv(&comm);
  } else {
    r = HcclCommInitClusterInfo(TABLES "1x4_local.json", (uint32_t)rank, &comm);
  }
  RANK_CHECK(r == HCCL_SUCCESS, "rank %d: init: %s", rank, HcclGetLastErrorMessage());
  int32_t dev = -1;
  uint32_t size = 0;
  HcclGetDeviceId(comm, &dev);
  HcclGetRankSize(comm, &size);
  RANK_CHECK(dev == rank && size == 4, "rank %d: device %d, size %u", rank, dev, size);
  int32_t x[64];
  for (int i = 0; i < 64; i++)
    x[i] = rank * 100 + i;
  RANK_CHECK(HcclAllReduce(x, x, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL) == 0,
             "allreduce: %s", HcclGetLastErrorMessage());
  for (int i = 0; i < 64; i++)
    RANK_CHECK(x[i] == 600 + 4 * i, "x[%d] = %d", i, x[i]);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_cluster_info_job(void **st) {
  (void)st;
  assert_int_equal(harness_run_ranks(4, 60, job_body, NULL), 0);
  assert_int_equal(harness_run_ranks(4, 60, job_body, (void *)1), 0);
}

static void test_cluster_info_refusals(void **st) {
  (void)st;
  HcclComm comm = NULL;
  assert_int_not_equal(HcclCommInitClusterInfo(TABLES "1x4_local.json", 4, &comm), HCCL_SUCCESS);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "rank 4 is not in rank table"));
  /* 2x8.json puts rank 0 on 10.0.0.1, which is not this machine. */
  assert_int_not_equal(HcclCommInitClusterInfo(TABLES "2x8.json", 0, &comm), HCCL_SUCCESS);
  const char *msg = HcclGetLastErrorMessage();
  if (!strstr(msg, "server_list[0].server_id: \"10.0.0.1\" holds rank 0"))
    fail_msg("message: %s", msg);
  assert_int_not_equal(HcclCommInitClusterInfo("/nonexistent/t.json", 0, &comm), HCCL_SUCCESS);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "cannot be opened"));
  assert_int_equal(HcclCommInitClusterInfo(NULL, 0, &comm), HCCL_E_PTR);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_example_tables),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_cluster_info_job),
      cmocka_unit_test(test_cluster_info_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
