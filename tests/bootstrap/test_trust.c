/*
 * test_trust.c - who may talk to a job (bootstrap/trust.c and its use by the store server and
 * client, server_conn.c / client.c, and by communicator init, core/comm_init.c).
 *
 * Whitelist files: a good one; every refusal names the file and the field (missing file, not
 * JSON, not an object, unknown field, host_ip missing, not a list, empty, an entry that is
 * not an address, with its index); allows() for listed, unlisted and IPv4-mapped addresses,
 * and an entry written IPv4-mapped.
 *
 * Store: a server with a job token serves a client presenting it; a client with another
 * token, or none, is refused with "another job" and the server's data is untouched; a
 * server without a token refuses a client that has one; a whitelist that does not list
 * 127.0.0.1 turns a local client away, one that does lets it in.
 *
 * Jobs: a 4-rank job (HCCL_JOB_TOKEN=job-a) whose rank 3 joins 1.5 s late, so its store
 * is up, and a stray process of another job (HCCL_JOB_TOKEN=job-b) that claims to be rank 1
 * of 4 on the same MASTER_ADDR/MASTER_PORT. The stray fails within seconds (not at the
 * connect timeout) saying it met another job's store; the job's allreduce is right.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"
#include "log.h"
#include "store.h"
#include "trust.h"

static char g_dir[64];

static const char *write_file(const char *name, const char *text) {
  static char path[160];
  snprintf(path, sizeof(path), "%s/%s", g_dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static int setup(void **st) {
  (void)st;
  snprintf(g_dir, sizeof(g_dir), "/tmp/hccl-trust.XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **st) {
  (void)st;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void expect_refused(const char *name, const char *text, const char *words) {
  const char *path = text ? write_file(name, text) : "/nonexistent/hccl-whitelist.json";
  struct hccl_whitelist *wl = NULL;
  HcclResult r = hccl__whitelist_load(path, &wl);
  const char *msg = HcclGetLastErrorMessage();
  if (r == HCCL_SUCCESS || !strstr(msg, words) || !strstr(msg, path))
    fail_msg("%s: result %d, message '%s' (want '%s' and the path)", name, r, msg, words);
  assert_null(wl);
}

static void test_whitelist_file(void **st) {
  (void)st;
  expect_refused("missing", NULL, "cannot be opened");
  expect_refused("notjson", "{host_ip: [", "is not JSON");
  expect_refused("array", "[\"127.0.0.1\"]", "must be an object");
  expect_refused("unknown", "{\"host_ip\": [\"127.0.0.1\"], \"hosts\": []}",
                 "unknown field 'hosts'");
  expect_refused("nohosts", "{\"device_ip\": []}", "host_ip is missing");
  expect_refused("notlist", "{\"host_ip\": \"127.0.0.1\"}", "host_ip is not a list");
  expect_refused("empty", "{\"host_ip\": []}", "host_ip has 0 addresses");
  expect_refused("badaddr", "{\"host_ip\": [\"10.0.0.1\", \"::1\", \"10.0.0.x\"]}",
                 "host_ip[2]: \"10.0.0.x\" is not an IPv4 or IPv6 address");
  expect_refused("number", "{\"host_ip\": [7]}", "host_ip[0]: 7 is not");

  const char *good =
      write_file("good", "{\"host_ip\": [\"10.1.2.3\", \"fe80::1\"], \"device_ip\": []}");
  struct hccl_whitelist *wl = NULL;
  assert_int_equal(hccl__whitelist_load(good, &wl), HCCL_SUCCESS);
  assert_string_equal(hccl__whitelist_file(wl), good);
  struct sockaddr_in a4 = {.sin_family = AF_INET};
  inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
  assert_true(hccl__whitelist_allows(wl, (struct sockaddr *)&a4));
  inet_pton(AF_INET, "10.1.2.4", &a4.sin_addr);
  assert_false(hccl__whitelist_allows(wl, (struct sockaddr *)&a4));
  struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
  inet_pton(AF_INET6, "::ffff:10.1.2.3", &a6.sin6_addr);
  assert_true(hccl__whitelist_allows(wl, (struct sockaddr *)&a6));
  inet_pton(AF_INET6, "fe80::1", &a6.sin6_addr);
  assert_true(hccl__whitelist_allows(wl, (struct sockaddr *)&a6));
  inet_pton(AF_INET6, "fe80::2", &a6.sin6_addr);
  assert_false(hccl__whitelist_allows(wl, (struct sockaddr *)&a6));
  assert_true(hccl__whitelist_allows(NULL, (struct sockaddr *)&a6));
  hccl__whitelist_free(wl);
  /* An entry written IPv4-mapped is that IPv4 peer, however it arrives (found by
   * tests/fuzz/fuzz_whitelist). */
  assert_int_equal(hccl__whitelist_parse("{\"host_ip\": [\"::ffff:10.1.2.3\"]}", "mapped", &wl),
                   HCCL_SUCCESS);
  inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
  assert_true(hccl__whitelist_allows(wl, (struct sockaddr *)&a4));
  inet_pton(AF_INET6, "::ffff:10.1.2.3", &a6.sin6_addr);
  assert_true(hccl__whitelist_allows(wl, (struct sockaddr *)&a6));
  hccl__whitelist_free(wl);

  assert_true(hccl__token_equal("abc", 3, "abc", 3));
  assert_false(hccl__token_equal("abc", 3, "abd", 3));
  assert_false(hccl__token_equal("abc", 3, "abcd", 4));
}

/* ---- store ---- */

static struct hccl_store_server *serve(const char *token, const char *whitelist_text,
                                       uint16_t *port) {
  struct hccl_store_trust t;
  memset(&t, 0, sizeof(t));
  snprintf(t.token, sizeof(t.token), "%s", token);
  if (whitelist_text)
    assert_int_equal(hccl__whitelist_load(write_file("wl", whitelist_text), &t.whitelist),
                     HCCL_SUCCESS);
  struct hccl_store_server *s = NULL;
  assert_int_equal(hccl__store_server_start_trusted("127.0.0.1", 0, &t, &s, port), HCCL_SUCCESS);
  return s;
}

/* Connects, presents token (NULL: none), then sets key; returns the result of the first
 * failing step and leaves its message in HcclGetLastErrorMessage(). */
static HcclResult client_set(uint16_t port, const char *token, const char *key) {
  struct hccl_store *c = NULL;
  HcclResult r = hccl__store_tcp_connect("127.0.0.1", port, 3000, &c);
  if (r == HCCL_SUCCESS && token) r = hccl__store_tcp_hello(c, token);
  if (r == HCCL_SUCCESS) r = hccl__store_set(c, key, "v", 1);
  if (c) hccl__store_close(c);
  return r;
}

static void expect_denied(uint16_t port, const char *token, const char *words) {
  HcclResult r = client_set(port, token, "intruder");
  const char *msg = HcclGetLastErrorMessage();
  if (r == HCCL_SUCCESS || !strstr(msg, words))
    fail_msg("token %s: result %d, message '%s' (want '%s')", token ? token : "(none)", r, msg,
             words);
}

static void test_store_token(void **st) {
  (void)st;
  uint16_t port;
  struct hccl_store_server *s = serve("job-a", NULL, &port);
  assert_int_equal(client_set(port, "job-a", "good"), HCCL_SUCCESS);
  expect_denied(port, "job-b", "token differs");
  expect_denied(port, "job-a-but-longer", "token differs");
  expect_denied(port, NULL, "presented none");
  /* The job's own data is untouched and the intruders' keys were never stored. */
  struct hccl_store *c = NULL;
  assert_int_equal(hccl__store_tcp_connect("127.0.0.1", port, 3000, &c), HCCL_SUCCESS);
  assert_int_equal(hccl__store_tcp_hello(c, "job-a"), HCCL_SUCCESS);
  void *val = NULL;
  size_t len = 0;
  assert_int_equal(hccl__store_get(c, "good", &val, &len, 1000), HCCL_SUCCESS);
  assert_int_equal(len, 1);
  free(val);
  assert_int_equal(hccl__store_get(c, "intruder", &val, &len, 200), HCCL_E_TIMEOUT);
  hccl__store_close(c);
  hccl__store_server_stop(s);

  s = serve("", NULL, &port);
  assert_int_equal(client_set(port, NULL, "good"), HCCL_SUCCESS);
  expect_denied(port, "job-b", "without a job token");
  hccl__store_server_stop(s);
}

static void test_store_whitelist(void **st) {
  (void)st;
  uint16_t port;
  struct hccl_store_server *s = serve("", "{\"host_ip\": [\"127.0.0.2\"]}", &port);
  assert_int_not_equal(client_set(port, NULL, "k"), HCCL_SUCCESS);
  const char *msg = HcclGetLastErrorMessage();
  if (!strstr(msg, "127.0.0.1 is not in this job's whitelist")) fail_msg("message: %s", msg);
  hccl__store_server_stop(s);
  s = serve("", "{\"host_ip\": [\"10.9.9.9\", \"127.0.0.1\"]}", &port);
  assert_int_equal(client_set(port, NULL, "k"), HCCL_SUCCESS);
  hccl__store_server_stop(s);
}

/* ---- two jobs on one port ---- */

static int jobs_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
  if (rank == 4) { /* the stray: another job's process, claiming rank 1 */
    setenv("RANK", "1", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("HCCL_JOB_TOKEN", "job-b", 1);
    usleep(500000);
    HcclComm comm = NULL;
    double t0 = cc_now();
    HcclResult r = HcclCommInitFromEnv(&comm);
    double dt = cc_now() - t0;
    const char *msg = HcclGetLastErrorMessage();
    printf("  stray: %d after %.2f s: %s\n", r, dt, msg);
    RANK_CHECK(r != HCCL_SUCCESS, "the stray process joined the job");
    RANK_CHECK(dt < 5.0, "the stray was refused only after %.2f s", dt);
    RANK_CHECK(strstr(msg, "another job") != NULL, "message: %s", msg);
    return 0;
  }
  setenv("HCCL_JOB_TOKEN", "job-a", 1);
  if (rank == 3) sleep(1);
  if (rank == 3) usleep(500000);
  HcclComm comm = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "rank %d: init: %s", rank,
             HcclGetLastErrorMessage());
  int32_t x[100];
  for (int i = 0; i < 100; i++)
    x[i] = rank + i;
  RANK_CHECK(HcclAllReduce(x, x, 100, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL) ==
                 HCCL_SUCCESS,
             "allreduce: %s", HcclGetLastErrorMessage());
  for (int i = 0; i < 100; i++)
    RANK_CHECK(x[i] == 6 + 4 * i, "x[%d] = %d, want %d", i, x[i], 6 + 4 * i);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_two_jobs_one_port(void **st) {
  (void)st;
  assert_int_equal(harness_run_ranks(5, 60, jobs_body, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_whitelist_file),
      cmocka_unit_test(test_store_token),
      cmocka_unit_test(test_store_whitelist),
      cmocka_unit_test(test_two_jobs_one_port),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
