/*
 * test_perf.c - runs the real allreduce_perf program (HCCL_BIN_DIR/allreduce_perf) and checks
 * what a user sees: the nccl-tests-shaped header and columns, one line per (size, type, op) in
 * the documented loop order, "# Out of bounds values : 0 OK" and exit 0; bad flags exit 2 with
 * a message naming the flag; and 2- and 4-rank runs (fork + exec with the launcher variables
 * set, as npu-launch would) agree.
 *
 * Every child is killed if it outlives its deadline, and each test is capped with alarm().
 * Output goes to files under /tmp (not pipes), so a chatty rank can never block.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define PERF_BIN HCCL_BIN_DIR "/allreduce_perf"
#ifndef HCCL_PERF_MPI_BUILT
#define HCCL_PERF_MPI_BUILT 0
#endif
#define MAX_RANKS 8

static const char *const column_header =
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
    "time   algbw   busbw #wrong";

struct run_result {
  int exit_code[MAX_RANKS]; /* exit status, 128 + signal, or -1 when killed at the deadline */
  char *out;                /* rank 0's stdout */
  char *err;                /* rank 0's stderr */
};

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return strdup("");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  fclose(f);
  return s;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs nranks copies of allreduce_perf with args (NULL-terminated). nranks == 1 runs it with
 * no launcher variables at all; otherwise each gets RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR and a free MASTER_PORT. Waits at most timeout_s. */
static void run_perf(int nranks, const char *const *args, int timeout_s, struct run_result *res) {
  static const char *const launcher_vars[] = {
      "RANK",        "WORLD_SIZE",  "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK_ID", "RANK_SIZE",
      "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "DEVICE_ID",        NULL};
  char out_path[64], err_path[64], port[16];
  snprintf(out_path, sizeof(out_path), "/tmp/test_perf_out_%d.txt", (int)getpid());
  snprintf(err_path, sizeof(err_path), "/tmp/test_perf_err_%d.txt", (int)getpid());
  snprintf(port, sizeof(port), "%u", (unsigned)harness_free_port());

  const char *argv[64] = {PERF_BIN};
  int argc = 1;
  for (; args[argc - 1] && argc < 63; argc++)
    argv[argc] = args[argc - 1];
  argv[argc] = NULL;

  pid_t pids[MAX_RANKS];
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nranks; r++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      char buf[16];
      for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
      if (nranks > 1) {
        snprintf(buf, sizeof(buf), "%d", r);
        setenv("RANK", buf, 1);
        setenv("LOCAL_RANK", buf, 1);
        snprintf(buf, sizeof(buf), "%d", nranks);
        setenv("WORLD_SIZE", buf, 1);
        setenv("LOCAL_WORLD_SIZE", buf, 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", port, 1);
      }
      /* rank 0's output is what the test reads; the others' goes to /dev/null */
      if (!freopen(r == 0 ? out_path : "/dev/null", "w", stdout) ||
          !freopen(r == 0 ? err_path : "/dev/null", "w", stderr))
        _exit(126);
      execv(PERF_BIN, (char *const *)argv);
      fprintf(stderr, "cannot run %s: %s\n", PERF_BIN, strerror(errno));
      _exit(127);
    }
    pids[r] = pid;
  }

  double deadline = now_s() + timeout_s;
  int left = nranks, done[MAX_RANKS] = {0};
  while (left > 0) {
    for (int r = 0; r < nranks; r++) {
      int status;
      if (done[r] || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = 1;
      left--;
      res->exit_code[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (left > 0 && now_s() > deadline) {
      for (int r = 0; r < nranks; r++) {
        if (done[r]) continue;
        fprintf(stderr, "test_perf: rank %d of %d still running after %d s: killed\n", r, nranks,
                timeout_s);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], NULL, 0);
        res->exit_code[r] = -1;
      }
      break;
    }
    usleep(5000);
  }
  res->out = slurp(out_path);
  res->err = slurp(err_path);
  unlink(out_path);
  unlink(err_path);
}

static void free_result(struct run_result *res) {
  free(res->out);
  free(res->err);
}

/* Prints what a failed run said, so a failing assertion comes with its reason. */
static void dump(const struct run_result *res) {
  fprintf(stderr, "---- rank 0 stdout ----\n%s---- rank 0 stderr ----\n%s-----------------\n",
          res->out, res->err);
}

/*
 * Checks the table in out: every non-'#' line has 13 columns, root -1 and #wrong "0" (or
 * "N/A" when !checked), and the lines come in the documented order: for each size (min_bytes
 * times factor^i), for each type (int8 int32 half float), for each op (sum prod max min).
 * Returns the number of data lines, or -1 after printing the first mismatch.
 */
static int check_table(const char *out, size_t min_bytes, size_t factor, int nsizes, int checked) {
  static const char *const types[] = {"int8", "int32", "half", "float"};
  static const size_t tsize[] = {1, 4, 2, 4};
  static const char *const ops[] = {"sum", "prod", "max", "min"};
  int n = 0;
  for (const char *line = out; *line;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    char buf[512], orig[512];
    snprintf(orig, sizeof(orig), "%.*s", (int)(len < sizeof(orig) ? len : sizeof(orig) - 1), line);
    memcpy(buf, orig, sizeof(buf));
    line += len + (eol ? 1 : 0);
    if (buf[0] == '#' || buf[0] == '\0') continue;
    char f[16][32];
    int nf = 0;
    for (char *save, *tok = strtok_r(buf, " ", &save); tok && nf < 16;
         tok = strtok_r(NULL, " ", &save))
      snprintf(f[nf++], sizeof(f[0]), "%s", tok);
    int size_i = n / 16, type_i = (n / 4) % 4, op_i = n % 4;
    size_t bytes = min_bytes;
    for (int i = 0; i < size_i; i++)
      bytes *= factor;
    char want_bytes[32], want_count[32];
    snprintf(want_bytes, sizeof(want_bytes), "%zu", bytes / tsize[type_i] * tsize[type_i]);
    snprintf(want_count, sizeof(want_count), "%zu", bytes / tsize[type_i]);
    const char *wrong = checked ? "0" : "N/A";
    if (nf != 13 || size_i >= nsizes || strcmp(f[0], want_bytes) || strcmp(f[1], want_count) ||
        strcmp(f[2], types[type_i]) || strcmp(f[3], ops[op_i]) || strcmp(f[4], "-1") ||
        strcmp(f[8], wrong) || strcmp(f[12], wrong)) {
      fprintf(stderr, "data line %d is not the expected (%s B, %s, %s, #wrong %s): '%s'\n", n,
              want_bytes, types[type_i], ops[op_i], wrong, orig);
      return -1;
    }
    n++;
  }
  return n;
}

static void test_one_rank_sweep(void **state) {
  alarm(120);
  const char *args[] = {"-b", "8",   "-e", "64", "-f", "2", "-d", "all",
                        "-o", "all", "-n", "2",  "-w", "1", NULL};
  struct run_result res = {.out = NULL};
  run_perf(1, args, 60, &res);
  if (res.exit_code[0] != 0) dump(&res);
  assert_int_equal(res.exit_code[0], 0);
  assert_non_null(strstr(res.out, "# allreduce_perf"));
  assert_non_null(strstr(res.out, "nranks 1"));
  assert_non_null(strstr(res.out, "#  Rank  0 Group  0 Pid"));
  assert_non_null(strstr(res.out, "out-of-place"));
  assert_non_null(strstr(res.out, column_header));
  assert_int_equal(check_table(res.out, 8, 2, 4, 1), 4 * 4 * 4);
  assert_non_null(strstr(res.out, "# Out of bounds values : 0 OK"));
  assert_non_null(strstr(res.out, "# Avg bus bandwidth    : "));
  free_result(&res);
  alarm(0);
}

static void test_no_check_prints_na(void **state) {
  alarm(60);
  const char *args[] = {"-b", "1K", "-e", "1K", "-d", "all", "-o", "all",
                        "-c", "0",  "-n", "1",  "-w", "0",   NULL};
  struct run_result res = {.out = NULL};
  run_perf(1, args, 30, &res);
  if (res.exit_code[0] != 0) dump(&res);
  assert_int_equal(res.exit_code[0], 0);
  assert_int_equal(check_table(res.out, 1024, 2, 1, 0), 16);
  assert_non_null(strstr(res.out, "# Out of bounds values : 0 OK"));
  free_result(&res);
  alarm(0);
}

/* A bad value exits 2, prints no table, and the message names the flag and the value. */
static void expect_usage_error(const char *const *args, const char *flag, const char *value) {
  struct run_result res = {.out = NULL};
  run_perf(1, args, 20, &res);
  if (res.exit_code[0] != 2 || !strstr(res.err, flag) || !strstr(res.err, value)) {
    fprintf(stderr, "expected exit 2 and a message naming %s and '%s'\n", flag, value);
    dump(&res);
  }
  assert_int_equal(res.exit_code[0], 2);
  assert_non_null(strstr(res.err, flag));
  assert_non_null(strstr(res.err, value));
  assert_null(strstr(res.out, "# Out of bounds"));
  free_result(&res);
}

static void test_bad_flags_exit_2(void **state) {
  alarm(120);
  const char *bad_type[] = {"-d", "int64x", NULL};
  const char *bad_size[] = {"-b", "abc", NULL};
  const char *max_below_min[] = {"-b", "64", "-e", "8", NULL};
  const char *bad_factor[] = {"-f", "1", NULL};
  const char *unknown[] = {"-q", "1", NULL};
  expect_usage_error(bad_type, "-d", "int64x");
  expect_usage_error(bad_size, "-b", "abc");
  expect_usage_error(max_below_min, "-e", "8");
  expect_usage_error(bad_factor, "-f", "1");
  expect_usage_error(unknown, "-q", "unknown");
  alarm(0);
}

static void run_ranks_and_check(int nranks) {
  alarm(240);
  const char *args[] = {"-b", "8",   "-e", "4K", "-f", "8", "-d", "all",
                        "-o", "all", "-n", "2",  "-w", "1", NULL};
  struct run_result res = {.out = NULL};
  run_perf(nranks, args, 180, &res);
  int failed = 0;
  for (int r = 0; r < nranks; r++) {
    if (res.exit_code[r] == 0) continue;
    fprintf(stderr, "rank %d of %d exited with %d\n", r, nranks, res.exit_code[r]);
    failed++;
  }
  if (failed) dump(&res);
  assert_int_equal(failed, 0);
  char want[32];
  snprintf(want, sizeof(want), "nranks %d\n", nranks);
  assert_non_null(strstr(res.out, want));
  for (int r = 0; r < nranks; r++) {
    snprintf(want, sizeof(want), "#  Rank %2d Group  0 Pid", r);
    assert_non_null(strstr(res.out, want));
  }
  assert_non_null(strstr(res.out, column_header));
  int lines = check_table(res.out, 8, 8, 4, 1); /* 8, 64, 512, 4096 bytes */
  if (lines != 4 * 4 * 4) dump(&res);
  assert_int_equal(lines, 4 * 4 * 4);
  assert_non_null(strstr(res.out, "# Out of bounds values : 0 OK"));
  free_result(&res);
  alarm(0);
}

static void test_two_ranks(void **state) {
  run_ranks_and_check(2);
}
static void test_four_ranks(void **state) {
  run_ranks_and_check(4);
}

/* mpirun -np N allreduce_perf: ranks from Open MPI's variables, the root info by MPI_Bcast.
 * Skipped (with the reason) where mpirun or the MPI build is missing. */
static void mpirun_and_check(int nranks, int all_types) {
  alarm(240);
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR "
           "-u MASTER_PORT HCCL_IF_BASE_PORT=%u mpirun --allow-run-as-root --oversubscribe "
           "-np %d %s -b 8 -e 4K -f 8 %s -n 2 -w 1 -c 1 2>&1",
           (unsigned)harness_free_port(), nranks, PERF_BIN,
           all_types ? "-d all -o all" : "-d float -o sum");
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  static char out[1 << 18];
  size_t n = fread(out, 1, sizeof(out) - 1, p);
  out[n] = '\0';
  int rc = pclose(p);
  if (rc != 0) fprintf(stderr, "%s\n-> %d\n%s\n", cmd, rc, out);
  assert_int_equal(rc, 0);
  char want[32];
  snprintf(want, sizeof(want), "nranks %d\n", nranks);
  assert_non_null(strstr(out, want));
  for (int r = 0; r < nranks; r++) {
    snprintf(want, sizeof(want), "#  Rank %2d Group  0 Pid", r);
    assert_non_null(strstr(out, want));
  }
  int lines = all_types ? check_table(out, 8, 8, 4, 1) : -2;
  if (all_types) assert_int_equal(lines, 4 * 4 * 4);
  assert_non_null(strstr(out, "# Out of bounds values : 0 OK"));
  alarm(0);
}

static int have_mpirun(void) {
  return system("command -v mpirun >/dev/null 2>&1") == 0 && HCCL_PERF_MPI_BUILT;
}

static void test_mpirun(void **state) {
  (void)state;
  if (!have_mpirun()) {
    printf("  skipped: mpirun or an MPI build of allreduce_perf is missing "
           "(Debian: openmpi-bin libopenmpi-dev)\n");
    skip();
  }
  mpirun_and_check(4, 0);
  mpirun_and_check(2, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_flags_exit_2),   cmocka_unit_test(test_one_rank_sweep),
      cmocka_unit_test(test_no_check_prints_na), cmocka_unit_test(test_two_ranks),
      cmocka_unit_test(test_four_ranks),         cmocka_unit_test(test_mpirun),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
