/*
 * test_flight.c - the flight recorder (core/flight.c) and its reader, hccl-fr
 * (scripts/hccl_fr.py), on 4 ranks of one server.
 *
 * A hang: with HCCL_FLIGHT_RECORDER_DIR and HCCL_FLIGHT_RECORDER_ENTRIES=16, the ranks make 40
 * allreduces and a send/recv ring, then ranks 0-2 call allreduce number 41 while rank 3 sleeps
 * (HCCL_EXEC_TIMEOUT=2). Ranks 0-2 time out, and each writes its file, which must hold: a header
 * with its rank, the reason "timeout" (or "peer failure": another rank timed out first), its
 * error naming rank 3, 41 calls started, inside a call;
 * exactly 16 entries (the ring's size), the send and the receive with their peers, and last
 * allreduce 41 "failed". hccl-fr on the folder must say that rank 3 wrote no file and that the
 * waits lead to it. Then SIGUSR1: the same job without a failure, every rank signalled after
 * its calls, must leave 4 files whose reason is "SIGUSR1" and whose last entry finished.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"

static char g_dir[64];

static int calls(HcclComm comm, int rank, int n) {
  float x[256] = {0};
  for (int i = 0; i < 40; i++)
    RANK_CHECK(HcclAllReduce(x, x, 256, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL) == 0,
               "allreduce %d: %s", i, HcclGetLastErrorMessage());
  int32_t v = rank, got = -1;
  HcclRequest req = NULL;
  RANK_CHECK(HcclSend(&v, 1, HCCL_DATA_TYPE_INT32, (uint32_t)(rank + 1) % (uint32_t)n, comm,
                      &req) == 0,
             "send");
  RANK_CHECK(HcclRecv(&got, 1, HCCL_DATA_TYPE_INT32, (uint32_t)(rank + n - 1) % (uint32_t)n, comm,
                      NULL) == 0,
             "recv");
  RANK_CHECK(HcclRequestWait(req) == 0, "send wait");
  return 0;
}

static int hang_body(int rank, int n, void *arg) {
  (void)arg;
  setenv("HCCL_FLIGHT_RECORDER_DIR", g_dir, 1);
  setenv("HCCL_FLIGHT_RECORDER_ENTRIES", "16", 1);
  setenv("HCCL_EXEC_TIMEOUT", "2", 1);
  HcclComm comm = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  if (calls(comm, rank, n)) return 1;
  if (rank == 3) {
    sleep(4); /* stays away from call 41 until the others have timed out */
  } else {
    float x[256] = {0};
    HcclResult r = HcclAllReduce(x, x, 256, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    RANK_CHECK(r != HCCL_SUCCESS, "allreduce 41 succeeded without rank 3");
  }
  HcclCommDestroy(comm);
  return 0;
}

static int usr1_body(int rank, int n, void *arg) {
  (void)arg;
  setenv("HCCL_FLIGHT_RECORDER_DIR", g_dir, 1);
  HcclComm comm = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  if (calls(comm, rank, n)) return 1;
  raise(SIGUSR1); /* the recorder's handler, not the default (which would end the process) */
  char path[128];
  for (int i = 0; i < 200; i++) { /* the dump is written by the recorder's thread */
    DIR *d = opendir(g_dir);
    int mine = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
      size_t len = strlen(e->d_name);
      snprintf(path, sizeof(path), "-%d.jsonl", rank);
      if (len > strlen(path) && strcmp(e->d_name + len - strlen(path), path) == 0) mine = 1;
    }
    if (d) closedir(d);
    if (mine) break;
    usleep(10000);
  }
  RANK_CHECK(HcclBarrier(comm, NULL) == 0, "barrier");
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

/* Rank r's file (there is one communicator), parsed: the header and the entries. */
static int load_rank(int rank, cJSON **header, cJSON *entries[], int max) {
  DIR *d = opendir(g_dir);
  char suffix[32], path[600] = "";
  snprintf(suffix, sizeof(suffix), "-%d.jsonl", rank);
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, "hccl-fr-", 8) == 0 && len > strlen(suffix) &&
        strcmp(e->d_name + len - strlen(suffix), suffix) == 0)
      snprintf(path, sizeof(path), "%s/%s", g_dir, e->d_name);
  }
  if (d) closedir(d);
  *header = NULL;
  if (!path[0]) return -1;
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[4096];
  int n = -1;
  while (fgets(line, sizeof(line), f)) {
    cJSON *j = cJSON_Parse(line);
    if (!j) fail_msg("%s: a line is not JSON: %s", path, line);
    if (n < 0)
      *header = j;
    else if (n < max)
      entries[n] = j;
    else
      cJSON_Delete(j);
    n++;
  }
  fclose(f);
  return n;
}

static const char *str(const cJSON *o, const char *k) {
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}
static double num(const cJSON *o, const char *k) {
  return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static void make_dir(void) {
  snprintf(g_dir, sizeof(g_dir), "/tmp/hccl-fr-test-%d", (int)getpid());
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", g_dir, g_dir);
  assert_int_equal(system(cmd), 0);
}

static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
  assert_int_equal(system(cmd), 0);
}

static void test_hang(void **st) {
  (void)st;
  make_dir();
  assert_int_equal(harness_run_ranks(4, 60, hang_body, NULL), 0);
  for (int r = 0; r < 3; r++) {
    cJSON *h, *e[16];
    int n = load_rank(r, &h, e, 16);
    assert_int_equal(n, 16);
    assert_string_equal(str(h, "format"), "hccl-flight-recorder");
    assert_int_equal((int)num(h, "rank"), r);
    assert_int_equal((int)num(h, "nranks"), 4);
    /* Its own timeout, or the failure of a rank that timed out first. */
    const char *why = str(h, "reason");
    if (strcmp(why, "timeout") != 0 && strcmp(why, "peer failure") != 0)
      fail_msg("rank %d's reason: %s", r, why);
    const char *err = str(h, "error");
    if (!cc_msg_names_rank(err, 3)) fail_msg("rank %d's error does not name rank 3: %s", r, err);
    assert_int_equal((int)num(h, "calls_started"), 41);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "in_call")));
    int sends = 0, recvs = 0;
    for (int i = 0; i < 16; i++) {
      if (!strcmp(str(e[i], "kind"), "send")) {
        sends++;
        assert_int_equal((int)num(e[i], "peer"), (r + 1) % 4);
        assert_string_equal(str(e[i], "state"), "finished");
      }
      if (!strcmp(str(e[i], "kind"), "recv")) {
        recvs++;
        assert_int_equal((int)num(e[i], "peer"), (r + 3) % 4);
      }
    }
    assert_int_equal(sends, 1);
    assert_int_equal(recvs, 1);
    assert_string_equal(str(e[15], "kind"), "allreduce");
    assert_int_equal((int)num(e[15], "seq"), 41);
    assert_string_equal(str(e[15], "state"), "failed");
    assert_int_equal((int)num(e[15], "count"), 256);
    assert_string_equal(str(e[15], "dtype"), "float");
    assert_true(num(e[15], "t_started_us") >= num(e[15], "t_enqueued_us"));
    assert_true(num(e[15], "t_finished_us") >= num(e[15], "t_started_us") + 1.9e6);
    cJSON_Delete(h);
    for (int i = 0; i < 16; i++)
      cJSON_Delete(e[i]);
  }
  cJSON *h3;
  assert_int_equal(load_rank(3, &h3, NULL, 0), -1); /* rank 3 never failed: no file */

  char cmd[256], out[8192];
  snprintf(cmd, sizeof(cmd), "%s/hccl-fr %s 2>&1", HCCL_BIN_DIR, g_dir);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, sizeof(out) - 1, p);
  out[len] = '\0';
  assert_int_equal(pclose(p), 0);
  printf("%s", out);
  if (!strstr(out, "no file from rank 3:") || !strstr(out, "lead to rank 3: it wrote no file") ||
      !strstr(out, "=> look at rank 3\n"))
    fail_msg("hccl-fr does not name rank 3:\n%s", out);
  remove_dir();
}

static void test_sigusr1(void **st) {
  (void)st;
  make_dir();
  assert_int_equal(harness_run_ranks(4, 60, usr1_body, NULL), 0);
  for (int r = 0; r < 4; r++) {
    cJSON *h, *e[64];
    int n = load_rank(r, &h, e, 64);
    assert_int_equal(n, 42); /* 40 allreduces, a send, a receive */
    assert_string_equal(str(h, "reason"), "SIGUSR1");
    assert_string_equal(str(h, "error"), "");
    assert_string_equal(str(e[39], "state"), "finished");
    assert_int_equal((int)num(e[39], "seq"), 40);
    assert_string_equal(str(e[39], "algo"), "halving-doubling");
    cJSON_Delete(h);
    for (int i = 0; i < n; i++)
      cJSON_Delete(e[i]);
  }
  remove_dir();
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_hang), cmocka_unit_test(test_sigusr1)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
