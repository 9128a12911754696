/*
 * test_trace.c - HCCL_TRACE_FILE (core/trace.c): each rank writes a Chrome trace of its calls
 * and of the waits that slept.
 *
 * 2 ranks, HCCL_TRACE_FILE=<dir>/tr.%r.json: allreduce, a second allreduce that rank 1 joins
 * 150 ms late, broadcast from rank 1, barrier. Both files must parse as JSON, hold the four
 * calls in order with their numbers, arguments, algorithm and result, and rank 0's file a
 * "wait" on rank 1 of at least 100 ms inside its second call. The allreduces' algorithm is
 * the one HcclAllReduceAlgoName names for their size (one plan, algo/plan.c, gives both). A
 * path without "%r" gets ".<rank>.json" appended; a path that cannot be written fails init,
 * naming the variable. Two communicators in one process write two files (".c2" before ".json"
 * for the second, or "%c" in the path), each with its own calls.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"

static char g_dir[64];

static int trace_body(int rank, int n, void *arg) {
  (void)n;
  setenv("HCCL_TRACE_FILE", (const char *)arg, 1);
  HcclComm comm = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  float x[1000] = {0};
  RANK_CHECK(HcclAllReduce(x, x, 1000, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL) == 0,
             "allreduce 1");
  if (rank == 1) usleep(150000);
  RANK_CHECK(HcclAllReduce(x, x, 1000, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, comm, NULL) == 0,
             "allreduce 2");
  RANK_CHECK(HcclBroadcast(x, 10, HCCL_DATA_TYPE_INT32, 1, comm, NULL) == 0, "broadcast");
  RANK_CHECK(HcclBarrier(comm, NULL) == 0, "barrier");
  /* What HcclAllReduceAlgoName says of the allreduces' size, for check_rank. */
  char path[128];
  snprintf(path, sizeof(path), "%s/word.%d", g_dir, rank);
  FILE *f = fopen(path, "w");
  RANK_CHECK(f != NULL, "cannot write %s", path);
  fputs(HcclAllReduceAlgoName(comm, sizeof(x)), f);
  fclose(f);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

/* HcclAllReduceAlgoName's word (hccl.h) -> the trace's name of the same algorithm. */
static const char *traced_name(const char *word) {
  static const char *const names[][2] = {
      {"ring", "ring"},
      {"hd", "halving-doubling"},
      {"hier-ring", "two-level, ring between servers"},
      {"hier-hd", "two-level, halving-doubling between servers"},
      {"oneshot", "one-shot"}};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (!strcmp(word, names[i][0])) return names[i][1];
  fail_msg("HcclAllReduceAlgoName said \"%s\"", word);
  return NULL;
}

static cJSON *load(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("%s was not written", path);
  static char buf[1 << 20];
  size_t len = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[len] = '\0';
  cJSON *j = cJSON_Parse(buf);
  if (!j) fail_msg("%s is not JSON", path);
  return j;
}

static const char *str(const cJSON *o, const char *k) {
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}
static double num(const cJSON *o, const char *k) {
  return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static void check_rank(int rank) {
  char path[128];
  snprintf(path, sizeof(path), "%s/tr.%d.json", g_dir, rank);
  cJSON *j = load(path);
  char word[64] = "";
  snprintf(path, sizeof(path), "%s/word.%d", g_dir, rank);
  FILE *f = fopen(path, "r");
  if (!f || !fgets(word, sizeof(word), f)) fail_msg("%s was not written", path);
  fclose(f);
  const char *allreduce_algo = traced_name(word);
  static const char *const names[4] = {"allreduce", "allreduce", "broadcast", "barrier"};
  static const char *const ops[4] = {"sum", "max", "none", "none"};
  int ncalls = 0;
  double call2_ts = 0, call2_end = 0, last_ts = 0, longest_wait = 0, wait_ts = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "traceEvents")) {
    const char *cat = str(e, "cat");
    if (!cat) continue; /* metadata */
    assert_int_equal((int)num(e, "pid"), rank);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (!strcmp(cat, "collective")) {
      assert_true(ncalls < 4);
      assert_string_equal(str(e, "name"), names[ncalls]);
      assert_int_equal((int)num(a, "call"), ncalls + 1);
      assert_string_equal(str(a, "op"), ops[ncalls]);
      assert_string_equal(str(a, "result"), "success");
      assert_non_null(str(a, "algo"));
      if (ncalls < 2) assert_string_equal(str(a, "algo"), allreduce_algo);
      assert_true(num(e, "ts") >= last_ts);
      last_ts = num(e, "ts");
      if (ncalls == 1) {
        call2_ts = num(e, "ts");
        call2_end = call2_ts + num(e, "dur");
        assert_int_equal((int)num(a, "count"), 1000);
        assert_string_equal(str(a, "dtype"), "float");
      }
      if (ncalls == 2) assert_int_equal((int)num(a, "root"), 1);
      ncalls++;
    } else if (!strcmp(cat, "wait")) {
      assert_int_equal((int)num(a, "peer"), 1 - rank);
      if (num(e, "dur") > longest_wait) longest_wait = num(e, "dur"), wait_ts = num(e, "ts");
    }
  }
  assert_int_equal(ncalls, 4);
  if (rank == 0) {
    printf("  rank 0: longest wait %.1f ms at +%.1f ms into call 2 (%.1f ms long)\n",
           longest_wait / 1e3, (wait_ts - call2_ts) / 1e3, (call2_end - call2_ts) / 1e3);
    assert_true(longest_wait >= 100e3);
    assert_true(wait_ts >= call2_ts && wait_ts + longest_wait <= call2_end + 1);
  }
  cJSON_Delete(j);
}

static void test_trace_two_ranks(void **st) {
  (void)st;
  char tmpl[128];
  snprintf(tmpl, sizeof(tmpl), "%s/tr.%%r.json", g_dir);
  assert_int_equal(harness_run_ranks(2, 60, trace_body, tmpl), 0);
  check_rank(0);
  check_rank(1);
}

static int one_rank_body(int rank, int n, void *arg) {
  (void)rank;
  (void)n;
  const char *tmpl = arg;
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("LOCAL_RANK");
  unsetenv("LOCAL_WORLD_SIZE");
  setenv("HCCL_TRACE_FILE", tmpl, 1);
  HcclComm comm = NULL;
  HcclResult r = HcclCommInitFromEnv(&comm);
  if (strstr(tmpl, "/nonexistent/")) {
    RANK_CHECK(r != HCCL_SUCCESS, "init with an unwritable trace file succeeded");
    RANK_CHECK(strstr(HcclGetLastErrorMessage(), "HCCL_TRACE_FILE") != NULL, "message: %s",
               HcclGetLastErrorMessage());
    return 0;
  }
  RANK_CHECK(r == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  RANK_CHECK(HcclBarrier(comm, NULL) == 0, "barrier");
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

/* Two communicators alive at once in one process: an allreduce on the first, a broadcast on
 * the second, destroyed in reverse order. */
static int two_comms_body(int rank, int n, void *arg) {
  (void)rank;
  (void)n;
  setenv("HCCL_TRACE_FILE", (const char *)arg, 1);
  HcclComm a = NULL, b = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&a) == HCCL_SUCCESS, "init 1: %s", HcclGetLastErrorMessage());
  RANK_CHECK(HcclCommInitFromEnv(&b) == HCCL_SUCCESS, "init 2: %s", HcclGetLastErrorMessage());
  int x[4] = {0};
  RANK_CHECK(HcclAllReduce(x, x, 4, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, a, NULL) == 0, "ar");
  RANK_CHECK(HcclBroadcast(x, 4, HCCL_DATA_TYPE_INT32, 0, b, NULL) == 0, "broadcast");
  RANK_CHECK(HcclCommDestroy(b) == HCCL_SUCCESS, "destroy 2");
  RANK_CHECK(HcclCommDestroy(a) == HCCL_SUCCESS, "destroy 1");
  return 0;
}

/* The file at path holds exactly one call, named name. */
static void expect_one_call(const char *path, const char *name) {
  cJSON *doc = load(path);
  const cJSON *ev, *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
  int calls = 0;
  cJSON_ArrayForEach(ev, events) {
    const char *cat = str(ev, "cat"), *what = str(ev, "name");
    if (!cat || strcmp(cat, "collective") != 0) continue;
    calls++;
    if (!what || strcmp(what, name) != 0) fail_msg("%s: a %s call, not %s", path, what, name);
  }
  if (calls != 1) fail_msg("%s: %d calls, expected one %s", path, calls, name);
  cJSON_Delete(doc);
}

static void test_trace_two_comms(void **st) {
  (void)st;
  char tmpl[128], path[192];
  for (int with_c = 0; with_c < 2; with_c++) {
    snprintf(tmpl, sizeof(tmpl), "%s/two%s.json", g_dir, with_c ? ".%c" : "");
    assert_int_equal(harness_run_ranks(2, 60, two_comms_body, tmpl), 0);
    for (int r = 0; r < 2; r++) {
      snprintf(path, sizeof(path), "%s/two%s.json.%d.json", g_dir, with_c ? ".1" : "", r);
      expect_one_call(path, "allreduce");
      snprintf(path, sizeof(path), "%s/two%s.json.%d%s.json", g_dir, with_c ? ".2" : "", r,
               with_c ? "" : ".c2");
      expect_one_call(path, "broadcast");
    }
  }
}

static void test_trace_paths(void **st) {
  (void)st;
  char tmpl[128], path[160];
  snprintf(tmpl, sizeof(tmpl), "%s/plain", g_dir);
  assert_int_equal(harness_run_ranks(1, 30, one_rank_body, tmpl), 0);
  snprintf(path, sizeof(path), "%s.0.json", tmpl);
  cJSON_Delete(load(path));
  assert_int_equal(harness_run_ranks(1, 30, one_rank_body, "/nonexistent/dir/t.json"), 0);
}

static int setup(void **st) {
  (void)st;
  snprintf(g_dir, sizeof(g_dir), "/tmp/hccl-trace.XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **st) {
  (void)st;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_two_ranks),
      cmocka_unit_test(test_trace_paths),
      cmocka_unit_test(test_trace_two_comms),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
