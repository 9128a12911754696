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
 *
 * Runs: two jobs of 2 ranks in one folder, each making a communicator, a second one while the
 * first is live, and, after destroying both, a third (a restart): the folder must hold all 12
 * files (the communicators' hashes repeat from job to job, the runs must not), in 4 runs, each
 * shared by every rank of its communicators and started in order. Two jobs for hccl-fr: the
 * hang, then the SIGUSR1 job, in one folder: hccl-fr lists both, reads the SIGUSR1 one (every
 * rank wrote a file), and with --run and the hang's run id reads the hang (rank 3 wrote none).
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
#include <sys/wait.h>
#include <time.h>
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

/* How many files of rank's the folder holds. */
static int files_of(int rank) {
  char suffix[32];
  snprintf(suffix, sizeof(suffix), "-%d.jsonl", rank);
  DIR *d = opendir(g_dir);
  int mine = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len > strlen(suffix) && strcmp(e->d_name + len - strlen(suffix), suffix) == 0) mine++;
  }
  if (d) closedir(d);
  return mine;
}

/* SIGUSR1 to this process, then waits (up to 2 s) until rank's files number `want`: the dump
 * is written by the recorder's thread. */
static void dump_and_wait(int rank, int want) {
  raise(SIGUSR1); /* the recorder's handler, not the default (which would end the process) */
  for (int i = 0; i < 200 && files_of(rank) < want; i++)
    usleep(10000);
}

static int usr1_body(int rank, int n, void *arg) {
  (void)arg;
  setenv("HCCL_FLIGHT_RECORDER_DIR", g_dir, 1);
  HcclComm comm = NULL;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  if (calls(comm, rank, n)) return 1;
  dump_and_wait(rank, files_of(rank) + 1);
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
    /* plan.c: a small allreduce on 4 ranks of a server (one-shot only where not a power of 2) */
    assert_string_equal(str(e[39], "algo"), "halving-doubling");
    cJSON_Delete(h);
    for (int i = 0; i < n; i++)
      cJSON_Delete(e[i]);
  }
  remove_dir();
}

/* A job of the runs test: communicator A, B while A lives, a dump of both; after both are
 * destroyed, C (a restart in the same process) and a dump of it. */
static int runs_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  setenv("HCCL_FLIGHT_RECORDER_DIR", g_dir, 1);
  HcclComm a = NULL, b = NULL, c = NULL;
  int had = files_of(rank);
  RANK_CHECK(HcclCommInitFromEnv(&a) == HCCL_SUCCESS, "init A: %s", HcclGetLastErrorMessage());
  RANK_CHECK(HcclCommInitFromEnv(&b) == HCCL_SUCCESS, "init B: %s", HcclGetLastErrorMessage());
  dump_and_wait(rank, had + 2);
  RANK_CHECK(files_of(rank) == had + 2, "%d files of rank %d, expected %d", files_of(rank), rank,
             had + 2);
  RANK_CHECK(HcclBarrier(b, NULL) == 0, "barrier B");
  RANK_CHECK(HcclCommDestroy(b) == HCCL_SUCCESS, "destroy B");
  RANK_CHECK(HcclCommDestroy(a) == HCCL_SUCCESS, "destroy A");
  RANK_CHECK(HcclCommInitFromEnv(&c) == HCCL_SUCCESS, "init C: %s", HcclGetLastErrorMessage());
  dump_and_wait(rank, had + 3);
  RANK_CHECK(HcclBarrier(c, NULL) == 0, "barrier C");
  RANK_CHECK(HcclCommDestroy(c) == HCCL_SUCCESS, "destroy C");
  return 0;
}

struct fr_file {
  char run[17], comm[17];
  int rank;
  long long start_us;
};

/* Every file of the folder: its run, communicator and rank from its name, which its header
 * must repeat (with format 2 and the run's start). Returns how many (at most max). */
static int list_files(struct fr_file *f, int max) {
  DIR *d = opendir(g_dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    struct fr_file x;
    int used = 0;
    if (sscanf(e->d_name, "hccl-fr-%16[0-9a-f]-%16[0-9a-f]-%d.jsonl%n", x.run, x.comm, &x.rank,
               &used) != 3 ||
        e->d_name[used] != '\0')
      continue;
    assert_true(n < max);
    assert_int_equal(strlen(x.run), 16);
    char path[600], line[4096];
    snprintf(path, sizeof(path), "%s/%s", g_dir, e->d_name);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    assert_non_null(fgets(line, sizeof(line), fp));
    fclose(fp);
    cJSON *h = cJSON_Parse(line);
    assert_non_null(h);
    assert_int_equal((int)num(h, "version"), 2);
    assert_string_equal(str(h, "run"), x.run);
    assert_string_equal(str(h, "comm"), x.comm);
    assert_int_equal((int)num(h, "rank"), x.rank);
    x.start_us = (long long)num(h, "run_start_us");
    cJSON_Delete(h);
    f[n++] = x;
  }
  closedir(d);
  return n;
}

static long long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void test_runs(void **st) {
  (void)st;
  make_dir();
  long long t0 = now_us();
  assert_int_equal(harness_run_ranks(2, 60, runs_body, NULL), 0);
  assert_int_equal(harness_run_ranks(2, 60, runs_body, NULL), 0);
  long long t1 = now_us();
  struct fr_file f[32];
  int n = list_files(f, 32);
  /* 2 jobs x 3 communicators x 2 ranks: none overwrote another's. */
  assert_int_equal(n, 12);
  /* The communicators' hashes are the same in both jobs (their store keys are): only the run
   * tells the jobs apart. */
  int ncomms = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++)
      seen |= strcmp(f[i].comm, f[j].comm) == 0;
    ncomms += !seen;
  }
  assert_int_equal(ncomms, 3);
  /* The runs, by start: job 1 (A and B), its restart (C), job 2 (A and B), its restart (C). */
  struct run_seen {
    const char *run;
    long long start;
    int files;
  } runs[8];
  int nruns = 0;
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < nruns && strcmp(runs[k].run, f[i].run) != 0)
      k++;
    if (k == nruns) {
      assert_true(nruns < 8);
      runs[nruns++] = (struct run_seen){f[i].run, f[i].start_us, 0};
    }
    if (runs[k].start != f[i].start_us)
      fail_msg("run %s: one file says it started at %lld, another at %lld", f[i].run,
               runs[k].start, f[i].start_us);
    runs[k].files++;
  }
  assert_int_equal(nruns, 4);
  for (int i = 0; i < nruns; i++) /* by start, oldest first */
    for (int j = i + 1; j < nruns; j++)
      if (runs[j].start < runs[i].start) {
        struct run_seen t = runs[i];
        runs[i] = runs[j];
        runs[j] = t;
      }
  const int want[4] = {4, 2, 4, 2};
  for (int i = 0; i < 4; i++) {
    if (runs[i].files != want[i])
      fail_msg("run %d (%s) has %d files, expected %d", i, runs[i].run, runs[i].files, want[i]);
    assert_true(runs[i].start >= t0 && runs[i].start <= t1);
    if (i) assert_true(runs[i].start > runs[i - 1].start);
  }
  /* Each run's communicators have a file from both ranks. */
  for (int i = 0; i < n; i++) {
    int other = 0;
    for (int j = 0; j < n; j++)
      other += !strcmp(f[j].run, f[i].run) && !strcmp(f[j].comm, f[i].comm) &&
               f[j].rank == 1 - f[i].rank;
    if (other != 1)
      fail_msg("run %s, communicator %s: rank %d's file has %d partners", f[i].run, f[i].comm,
               f[i].rank, other);
  }
  remove_dir();
}

/* Runs hccl-fr with args on the folder: its output (stderr too) in out; returns its status. */
static int run_fr(const char *args, char *out, size_t len) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "%s/hccl-fr %s %s 2>&1", HCCL_BIN_DIR, g_dir, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t got = fread(out, 1, len - 1, p);
  out[got] = '\0';
  int st = pclose(p);
  printf("$ hccl-fr DIR %s\n%s", args, out);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect(const char *out, const char *what) {
  if (!strstr(out, what)) fail_msg("hccl-fr did not say \"%s\":\n%s", what, out);
}

static void test_reader_jobs(void **st) {
  (void)st;
  make_dir();
  assert_int_equal(harness_run_ranks(4, 60, hang_body, NULL), 0);
  assert_int_equal(harness_run_ranks(4, 60, usr1_body, NULL), 0);
  struct fr_file f[16];
  int n = list_files(f, 16);
  assert_int_equal(n, 7); /* the hang's ranks 0-2, the SIGUSR1 job's 0-3 */
  char old[17] = "", cur[17] = "";
  for (int i = 0; i < n; i++) /* rank 3 wrote a file only in the newer job */
    if (f[i].rank == 3) memcpy(cur, f[i].run, 17);
  for (int i = 0; i < n; i++)
    if (strcmp(f[i].run, cur) != 0) memcpy(old, f[i].run, 17);
  assert_int_equal(strlen(cur), 16);
  assert_int_equal(strlen(old), 16);
  assert_string_not_equal(old, cur);
  for (int i = 0; i < n; i++)
    if (strcmp(f[i].run, old) != 0 && strcmp(f[i].run, cur) != 0)
      fail_msg("a third run: %s", f[i].run);

  char out[8192], want[128];
  assert_int_equal(run_fr("", out, sizeof(out)), 0);
  expect(out, "2 jobs in ");
  snprintf(want, sizeof(want), "\n  run %s: started ", old);
  expect(out, want);
  snprintf(want, sizeof(want), "\n  run %s: started ", cur);
  expect(out, want);
  assert_true(strstr(out, old) < strstr(out, cur)); /* oldest first */
  snprintf(want, sizeof(want), "reading run %s (the newest", cur);
  expect(out, want);
  expect(out, "ignoring 3 files of 1 earlier job\n");
  expect(out, ": 4 ranks, files from 4\n");
  assert_null(strstr(out, "no file from rank"));
  const char *c1 = strstr(out, "\ncommunicator ");
  assert_non_null(c1);
  assert_null(strstr(c1 + 1, "\ncommunicator ")); /* one job's one communicator */

  char args[64];
  snprintf(args, sizeof(args), "--run %.6s", old); /* a prefix will do */
  assert_int_equal(run_fr(args, out, sizeof(out)), 0);
  snprintf(want, sizeof(want), "reading run %s (--run %.6s); ignoring 4 files of 1 later job\n",
           old, old);
  expect(out, want);
  expect(out, ": 4 ranks, files from 3\n");
  expect(out, "=> look at rank 3\n");

  snprintf(args, sizeof(args), "--run=%s --json", old);
  assert_int_equal(run_fr(args, out, sizeof(out)), 0);
  cJSON *j = cJSON_Parse(strchr(out, '['));
  assert_non_null(j);
  assert_int_equal(cJSON_GetArraySize(j), 1);
  assert_string_equal(str(cJSON_GetArrayItem(j, 0), "run"), old);
  cJSON_Delete(j);

  assert_int_equal(run_fr("--run 0123456789abcdef0", out, sizeof(out)), 2);
  expect(out, "no job in ");
  remove_dir();
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_hang), cmocka_unit_test(test_sigusr1),
                                     cmocka_unit_test(test_runs),
                                     cmocka_unit_test(test_reader_jobs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
