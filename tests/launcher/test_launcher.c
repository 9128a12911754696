/*
 * test_launcher.c - npu-launch, run as users run it: each test forks the built program
 * (HCCL_BIN_DIR/npu-launch) with small shell programs as ranks and checks what they saw
 * (variables, CPU affinity read back from /proc/self/status), what the launcher printed, its
 * exit code, and that no process is left behind.
 *
 * Covered: device-to-rank mapping, the variables, --nnodes/--node-rank (via --dry-run, and
 * launchers of servers with different device counts meeting on this machine, with the pure
 * numbering of launcher/ranks.c called directly), CPU
 * binding (block, explicit lists, none, --report-bindings), each refusal (exit 2), the master
 * port check, fail-fast with exit codes, --on-failure continue (the others go on after a
 * failure), signals and the grace period, signal forwarding, no orphans (leftovers, strays, a
 * SIGKILLed launcher), --log-dir, --tag-output, and an end-to-end allreduce_perf run at
 * 1/2/4/8 and 3 devices (in its own test: it needs the library).
 * Every launcher run has a deadline, and each test is capped with alarm().
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "launch.h" /* launch_number_ranks (launcher/ranks.c, compiled in) */

#define LAUNCHER HCCL_BIN_DIR "/npu-launch"
#define MAX_ARGS 40

struct run {
  int code; /* exit status, or 128 + signal; -1 when the deadline killed it */
  double seconds;
  char out[1 << 16];
  char err[1 << 16];
};

static struct run g_run; /* large: not on the stack */
static char g_port[16];  /* --master-port of the next run; renewed by each start() */
static bool g_keep_port; /* the port test needs the port it occupies to stay the same */
static char g_dir[64];

static double mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* A port outside the kernel's ephemeral range (so no other test's outgoing connection takes
 * it between our check and the launcher's), free a moment ago, into g_port. */
static void fresh_port(void) {
  static unsigned seed;
  if (!seed) seed = (unsigned)getpid() ^ (unsigned)time(NULL);
  for (int i = 0; i < 100; i++) {
    int port = 20000 + (int)(rand_r(&seed) % 12000);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    close(fd);
    if (rc == 0) {
      snprintf(g_port, sizeof(g_port), "%d", port);
      return;
    }
  }
  snprintf(g_port, sizeof(g_port), "%u", harness_free_port());
}

/* Starts npu-launch with args (NULL-terminated, without argv[0]). env entries are "NAME=VALUE"
 * to set or "NAME" to unset; OMP_NUM_THREADS and HCCL_TOPO_FILE are unset unless given. */
static pid_t start(const char *const *args, const char *const *env, int *out_fd, int *err_fd) {
  int o[2], e[2];
  assert_int_equal(pipe2(o, O_CLOEXEC), 0);
  assert_int_equal(pipe2(e, O_CLOEXEC), 0);
  if (!g_keep_port) fresh_port(); /* args point at g_port: they see the new value */
  const char *argv[MAX_ARGS + 2] = {LAUNCHER};
  int n = 1;
  for (; args[n - 1] && n <= MAX_ARGS; n++)
    argv[n] = args[n - 1];
  argv[n] = NULL;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(o[1], 1);
    dup2(e[1], 2);
    unsetenv("OMP_NUM_THREADS");
    unsetenv("HCCL_TOPO_FILE");
    for (int i = 0; env && env[i]; i++) {
      if (strchr(env[i], '='))
        putenv((char *)env[i]);
      else
        unsetenv(env[i]);
    }
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    execv(LAUNCHER, (char *const *)argv);
    fprintf(stderr, "cannot run %s: %s\n", LAUNCHER, strerror(errno));
    _exit(126);
  }
  close(o[1]);
  close(e[1]);
  *out_fd = o[0];
  *err_fd = e[0];
  return pid;
}

/* Reads the launcher's output until EOF and reaps it; SIGKILL at the deadline. */
static int finish(pid_t pid, int out_fd, int err_fd, double t0, int timeout_s, struct run *r) {
  size_t lens[2] = {0, 0};
  char *bufs[2] = {r->out, r->err};
  int fds[2] = {out_fd, err_fd};
  double deadline = t0 + timeout_s;
  while (fds[0] >= 0 || fds[1] >= 0) {
    struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    int ms = (int)((deadline - mono()) * 1000);
    if (ms <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    if (poll(p, 2, ms) < 0 && errno != EINTR) break;
    for (int k = 0; k < 2; k++) {
      if (fds[k] < 0 || !p[k].revents) continue;
      ssize_t got = read(fds[k], bufs[k] + lens[k], sizeof(r->out) - 1 - lens[k]);
      if (got <= 0) {
        close(fds[k]);
        fds[k] = -1;
      } else {
        lens[k] += (size_t)got;
      }
    }
  }
  for (int k = 0; k < 2; k++)
    if (fds[k] >= 0) close(fds[k]);
  r->out[lens[0]] = r->err[lens[1]] = '\0';
  int status;
  waitpid(pid, &status, 0);
  r->seconds = mono() - t0;
  bool timed_out = r->seconds >= timeout_s;
  r->code = timed_out ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (r->code != 0)
    printf("# npu-launch exit %d after %.2f s; stderr:\n%s", r->code, r->seconds, r->err);
  return r->code;
}

static int run_env(const char *const *env, const char *const *args) {
  int o, e;
  double t0 = mono();
  pid_t pid = start(args, env, &o, &e);
  return finish(pid, o, e, t0, 30, &g_run);
}

#define RUN(...) run_env(NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_ENV(env, ...) run_env(env, (const char *const[]){__VA_ARGS__, NULL})

/* A job across servers on this machine: one npu-launch per server k, each with --nnodes n,
 * --node-rank k, the same --master-port and then its own args[k] (NULL-terminated), all
 * started at once and each given env (NULL: none). Results in runs[0..n); returns how many
 * launchers exited non-zero. Each run has the deadline timeout_s. */
static int run_servers(int n, const char *const *const *args, const char *const *env,
                       int timeout_s, struct run *runs) {
  pid_t pids[4];
  int o[4], e[4];
  double t0 = mono();
  bool keep = g_keep_port;
  char nn[8], ranks[4][8];
  assert_true(n <= 4);
  if (!keep) fresh_port();
  g_keep_port = true; /* every launcher of the job on the same port */
  snprintf(nn, sizeof(nn), "%d", n);
  for (int k = 0; k < n; k++) {
    const char *argv[MAX_ARGS + 1] = {"--nnodes", nn, "--node-rank", ranks[k], "--master-port",
                                      g_port};
    int m = 6;
    snprintf(ranks[k], sizeof(ranks[k]), "%d", k);
    for (int i = 0; args[k][i] && m < MAX_ARGS; i++)
      argv[m++] = args[k][i];
    argv[m] = NULL;
    pids[k] = start(argv, env, &o[k], &e[k]);
  }
  g_keep_port = keep;
  int bad = 0;
  for (int k = 0; k < n; k++)
    bad += finish(pids[k], o[k], e[k], t0, timeout_s, &runs[k]) != 0;
  return bad;
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
    n++;
  return n;
}

#define ASSERT_HAS(hay, needle)                                                                    \
  do {                                                                                             \
    if (!strstr((hay), (needle))) fail_msg("expected '%s' in:\n%s", (needle), (hay));              \
  } while (0)
#define ASSERT_LACKS(hay, needle)                                                                  \
  do {                                                                                             \
    if (strstr((hay), (needle))) fail_msg("did not expect '%s' in:\n%s", (needle), (hay));         \
  } while (0)

static const char *path_in_dir(const char *name) {
  static char bufs[8][256];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, 256, "%s/%s", g_dir, name);
  return b;
}

static bool file_exists(const char *path) {
  return access(path, F_OK) == 0;
}

static char *read_text(const char *path) {
  static char buf[1 << 16];
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static bool wait_for_file(const char *path, double timeout_s) {
  double end = mono() + timeout_s;
  while (!file_exists(path) || !read_text(path) || !strchr(read_text(path), '\n')) {
    if (mono() > end) return false;
    usleep(10000);
  }
  return true;
}

static pid_t pid_from_file(const char *path) {
  char *t = read_text(path);
  assert_non_null(t);
  return (pid_t)atoi(t);
}

/* Alive and not a zombie. */
static bool alive(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static bool gone_within(pid_t pid, double timeout_s) {
  double end = mono() + timeout_s;
  while (alive(pid)) {
    if (mono() > end) return false;
    usleep(10000);
  }
  return true;
}

/* Something accepts TCP connections on 127.0.0.1:port within timeout_s. */
static bool accepting(int port, double timeout_s) {
  double end = mono() + timeout_s;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    close(fd);
    if (rc == 0) return true;
    if (mono() > end) return false;
    usleep(20000);
  }
}

static int setup(void **state) {
  (void)state;
  g_keep_port = false;
  fresh_port();
  snprintf(g_dir, sizeof(g_dir), "/tmp/test_launcher_XXXXXX");
  assert_non_null(mkdtemp(g_dir));
  alarm(60);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  alarm(0);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- CPU sets ---- */

static void parse_cpu_list(const char *s, cpu_set_t *set) {
  CPU_ZERO(set);
  while (*s >= '0' && *s <= '9') { /* up to the end of the line */
    char *end;
    long lo = strtol(s, &end, 10), hi = lo;
    if (end == s) break;
    if (*end == '-') hi = strtol(end + 1, &end, 10);
    for (long c = lo; c <= hi; c++)
      CPU_SET((int)c, set);
    s = *end == ',' ? end + 1 : end;
  }
}

static int my_cpus(int *cpus) {
  cpu_set_t set;
  int m = 0;
  assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) cpus[m++] = c;
  return m;
}

/* The docs' block rule, computed here independently of the launcher. */
static void expected_block(int n, int r, cpu_set_t *out) {
  int cpus[CPU_SETSIZE], m = my_cpus(cpus);
  CPU_ZERO(out);
  if (m < n) {
    CPU_SET(cpus[r % m], out);
    return;
  }
  int k = m / n;
  for (int c = r * k; c < (r + 1) * k; c++)
    CPU_SET(cpus[c], out);
}

/* From output lines "<rank> <Cpus_allowed_list value>", the set of rank r. */
static bool rank_cpus(const char *out, int r, cpu_set_t *set) {
  char key[32];
  snprintf(key, sizeof(key), "\n%d ", r);
  char *buf = malloc(strlen(out) + 2);
  sprintf(buf, "\n%s", out);
  char *p = strstr(buf, key);
  if (p) parse_cpu_list(p + strlen(key), set);
  free(buf);
  return p != NULL;
}

#define PRINT_CPUS "echo $RANK $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"

/* ---- tests ---- */

static void test_mapping_sorted(void **state) {
  (void)state;
  const char *prog = "echo R$RANK D$DEVICE_ID A$ASCEND_DEVICE_ID L$LOCAL_RANK";
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "7,5,6,4", "--", "sh", "-c", prog),
                   0);
  for (int r = 0; r < 4; r++) {
    char want[64];
    snprintf(want, sizeof(want), "R%d D%d A%d L%d\n", r, 4 + r, 4 + r, r);
    ASSERT_HAS(g_run.out, want);
  }
  assert_int_equal(count_of(g_run.out, "\n"), 4);
  /* ranges, unsorted, with spaces */
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "6-7, 0-1", "sh", "-c", prog), 0);
  ASSERT_HAS(g_run.out, "R0 D0 ");
  ASSERT_HAS(g_run.out, "R1 D1 ");
  ASSERT_HAS(g_run.out, "R2 D6 ");
  ASSERT_HAS(g_run.out, "R3 D7 ");
  /* --nproc-per-node N: devices 0..N-1 */
  assert_int_equal(RUN("--master-port", g_port, "--nproc-per-node", "2", "sh", "-c", prog), 0);
  ASSERT_HAS(g_run.out, "R0 D0 A0 L0");
  ASSERT_HAS(g_run.out, "R1 D1 A1 L1");
}

static void test_variables(void **state) {
  (void)state;
  const char *prog = "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
                     "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK "
                     "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT RANK_ID=$RANK_ID "
                     "RANK_SIZE=$RANK_SIZE DEVICE_ID=$DEVICE_ID ASCEND_DEVICE_ID=$ASCEND_DEVICE_ID "
                     "OMP_NUM_THREADS=$OMP_NUM_THREADS MINE=$MINE";
  const char *env[] = {"MINE=kept", NULL};
  assert_int_equal(RUN_ENV(env, "--master-port", g_port, "--device-list", "2,3", "sh", "-c", prog),
                   0);
  cpu_set_t want_cpus;
  expected_block(2, 1, &want_cpus);
  char want[512];
  snprintf(want, sizeof(want),
           "RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 "
           "MASTER_ADDR=127.0.0.1 MASTER_PORT=%s RANK_ID=1 RANK_SIZE=2 DEVICE_ID=3 "
           "ASCEND_DEVICE_ID=3 OMP_NUM_THREADS=%d MINE=kept\n",
           g_port, CPU_COUNT(&want_cpus));
  ASSERT_HAS(g_run.out, want);
  ASSERT_HAS(g_run.out, "RANK=0 LOCAL_RANK=0 WORLD_SIZE=2");
  assert_int_equal(count_of(g_run.err, "OMP_NUM_THREADS is not set"), 1); /* said once */

  /* the user's OMP_NUM_THREADS and the launcher's variables' own values win as documented */
  const char *env2[] = {"OMP_NUM_THREADS=3", "RANK=99", NULL};
  assert_int_equal(RUN_ENV(env2, "--master-port", g_port, "--device-list", "0", "--master-addr",
                           "localhost", "sh", "-c", prog),
                   0);
  ASSERT_HAS(g_run.out, "RANK=0 ");
  ASSERT_HAS(g_run.out, "OMP_NUM_THREADS=3 ");
  ASSERT_HAS(g_run.out, "MASTER_ADDR=127.0.0.1 "); /* localhost never becomes ::1 */
  ASSERT_LACKS(g_run.err, "OMP_NUM_THREADS is not set");

  /* --topology is passed on, so that libhccl applies the same server description */
  assert_int_equal(RUN("--master-port", g_port, "--topology", "ascend910", "--device-list", "4,5",
                       "sh", "-c", "echo T=$HCCL_TOPO_FILE"),
                   0);
  ASSERT_HAS(g_run.out, "T=ascend910\nT=ascend910\n");
}

static void test_nnodes_dry_run(void **state) {
  (void)state;
  const char *marker = path_in_dir("started");
  char prog[300];
  snprintf(prog, sizeof(prog), "touch %s", marker);
  for (int node = 0; node < 2; node++) {
    char node_s[4];
    snprintf(node_s, sizeof(node_s), "%d", node);
    assert_int_equal(RUN("--nnodes", "2", "--node-rank", node_s, "--device-list", "0-3",
                         "--master-addr", "10.0.0.1", "--master-port", "29700", "--dry-run", "sh",
                         "-c", prog),
                     0);
    for (int l = 0; l < 4; l++) {
      char want[256];
      snprintf(want, sizeof(want), "rank %d: device %d, local rank %d", node * 4 + l, l, l);
      ASSERT_HAS(g_run.out, want);
      snprintf(want, sizeof(want),
               "RANK=%d LOCAL_RANK=%d WORLD_SIZE=8 LOCAL_WORLD_SIZE=4 GROUP_RANK=%d "
               "MASTER_ADDR=10.0.0.1 MASTER_PORT=29700 RANK_ID=%d RANK_SIZE=8 DEVICE_ID=%d",
               node * 4 + l, l, node, node * 4 + l, l);
      ASSERT_HAS(g_run.out, want);
    }
    ASSERT_HAS(g_run.out, "command: taskset -c ");
    /* it does not meet the other servers, and says what it assumed */
    ASSERT_HAS(g_run.out, "a dry run does not meet the other servers: it takes each to have 4 "
                          "devices");
  }
  usleep(100000);
  assert_false(file_exists(marker)); /* a dry run starts nothing */
  assert_int_equal(RUN("--device-list", "0", "--dry-run", "true"), 0);
  ASSERT_LACKS(g_run.out, "does not meet");

  /* A dry run plans a command that may not exist here yet: warned, printed, exit 0; the real
   * run is refused with 127. */
  assert_int_equal(RUN("--device-list", "0,1", "--dry-run", "./no-such-train.py"), 0);
  ASSERT_HAS(g_run.err, "no such file (dry run: printed anyway)");
  ASSERT_HAS(g_run.out, "command: taskset -c ");
  assert_int_equal(RUN("--device-list", "0,1", "./no-such-train.py"), 127);

  /* Any count on the default flat server; more ranks than its 8 devices widen it, as libhccl
   * does (devices 0-9, topology flat10). */
  assert_int_equal(RUN("--device-list", "0,1,2", "--dry-run", "true"), 0);
  ASSERT_HAS(g_run.out, "3 ranks on this server (server 0 of 1), world size 3, topology flat8");
  ASSERT_HAS(g_run.out, "rank 2: device 2, local rank 2");
  assert_int_equal(RUN("--nproc-per-node", "10", "--dry-run", "true"), 0);
  ASSERT_HAS(g_run.out, "10 ranks on this server (server 0 of 1), world size 10, topology flat10");
  ASSERT_HAS(g_run.out, "LOCAL_WORLD_SIZE=10");
  ASSERT_HAS(g_run.out, "rank 9: device 9, local rank 9");
}

/* launcher/ranks.c, called directly: a server's first rank is the sum of the counts of the
 * servers before it, the world their sum (torchrun's rule); equal counts give node_rank x n as
 * before; a count out of range, or counts that differ under a topology that needs them equal,
 * are refused naming the server, and the outputs are left alone. */
static void test_number_ranks(void **state) {
  (void)state;
  static const struct {
    int n, counts[4], firsts[4], world;
  } cases[] = {
      {2, {3, 2}, {0, 3}, 5},       {3, {1, 3, 2}, {0, 1, 4}, 6}, {2, {4, 4}, {0, 4}, 8},
      {4, {2, 2, 2, 2}, {0, 2, 4, 6}, 8}, {1, {5}, {0}, 5},          {3, {64, 1, 64}, {0, 64, 65}, 129},
  };
  char err[512];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    for (int k = 0; k < cases[i].n; k++) {
      int first = -1, world = -1;
      assert_int_equal(launch_number_ranks(cases[i].counts, cases[i].n, k, NULL, &first, &world,
                                           err, sizeof(err)),
                       0);
      assert_int_equal(first, cases[i].firsts[k]);
      assert_int_equal(world, cases[i].world);
    }
  int first = -1, world = -1;
  const int same[] = {4, 4}, zero[] = {3, 0}, big[] = {3, 65}, uneven[] = {4, 2};
  assert_int_equal(launch_number_ranks(same, 2, 1, "ascend910", &first, &world, err, sizeof(err)),
                   0);
  assert_int_equal(first, 4);
  first = world = -1;
  assert_int_equal(launch_number_ranks(zero, 2, 0, NULL, &first, &world, err, sizeof(err)), -1);
  ASSERT_HAS(err, "server 1 says it has 0 devices; a server has 1 to 64");
  assert_int_equal(launch_number_ranks(big, 2, 0, NULL, &first, &world, err, sizeof(err)), -1);
  ASSERT_HAS(err, "server 1 says it has 65 devices");
  assert_int_equal(
      launch_number_ranks(uneven, 2, 0, "ascend910", &first, &world, err, sizeof(err)), -1);
  ASSERT_HAS(err, "server 1 has 2 devices but server 0 has 4; topology ascend910 needs the same "
                  "number on every server");
  assert_int_equal(launch_number_ranks(uneven, 2, 2, NULL, &first, &world, err, sizeof(err)), -1);
  ASSERT_HAS(err, "server 2 of 2");
  assert_int_equal(first, -1); /* untouched on failure */
  assert_int_equal(world, -1);
}

/* Servers of different device counts (--nnodes, one launcher per pretend server on this
 * machine): the launchers meet on --master-port + 1 and each server's ranks follow those of
 * the servers before it, the world being the sum: 3 + 2, 1 + 3 + 2, and 2 + 2 as before; a
 * one-server job serves no launchers' store. A
 * server that never comes fails every launcher that did within HCCL_CONNECT_TIMEOUT (1 s here),
 * naming it; so do a second launcher for one server, a different --nnodes, and counts that
 * differ where the topology needs them equal (ascend910). */
static void test_servers_uneven(void **state) {
  (void)state;
  static struct run runs[4];
  static const char *const lists[] = {"0", "0-1", "0-2", "0-3"};
  const char *prog = "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
                     "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK "
                     "RANK_SIZE=$RANK_SIZE DEVICE_ID=$DEVICE_ID";
  static const int layouts[][4] = {{3, 2}, {1, 3, 2}, {2, 2}};
  for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++) {
    const int *c = layouts[li];
    int n = 0, world = 0;
    while (n < 4 && c[n])
      world += c[n++];
    const char *args[4][6];
    const char *const *argp[4];
    for (int k = 0; k < n; k++) {
      const char *a[] = {"--device-list", lists[c[k] - 1], "sh", "-c", prog, NULL};
      memcpy(args[k], a, sizeof(a));
      argp[k] = args[k];
    }
    if (run_servers(n, argp, NULL, 30, runs) != 0) fail_msg("layout %zu: a launcher failed", li);
    char want[256], counts[32] = "";
    for (int k = 0; k < n; k++)
      snprintf(counts + strlen(counts), sizeof(counts) - strlen(counts), "%s%d", k ? "+" : "",
               c[k]);
    for (int k = 0, first = 0; k < n; first += c[k++]) {
      for (int l = 0; l < c[k]; l++) {
        snprintf(want, sizeof(want),
                 "RANK=%d LOCAL_RANK=%d WORLD_SIZE=%d LOCAL_WORLD_SIZE=%d GROUP_RANK=%d "
                 "RANK_SIZE=%d DEVICE_ID=%d\n",
                 first + l, l, world, c[k], k, world, l);
        ASSERT_HAS(runs[k].out, want);
      }
      assert_int_equal(count_of(runs[k].out, "\n"), c[k]);
      snprintf(want, sizeof(want),
               "servers met: ranks %d-%d of world size %d here (server %d of %d; devices per "
               "server %s)",
               first, first + c[k] - 1, world, k, n, counts);
      ASSERT_HAS(runs[k].err, want);
    }
  }

  /* one server: no launchers' store, nothing listens on the port above --master-port */
  const char *const solo[] = {"--master-port", g_port, "--device-list", "0", "sleep", "1", NULL};
  int so, se;
  double ts = mono();
  pid_t lone = start(solo, NULL, &so, &se);
  usleep(300000);
  assert_false(accepting(atoi(g_port) + 1, 0.3));
  assert_int_equal(finish(lone, so, se, ts, 30, &runs[0]), 0);
  ASSERT_LACKS(runs[0].err, "servers met");

  /* servers 1 and 2 of 3 never come: server 0 gives up after 1 s, naming them */
  const char *marker = path_in_dir("started");
  char touch[300];
  snprintf(touch, sizeof(touch), "touch %s", marker);
  const char *short_wait[] = {"HCCL_CONNECT_TIMEOUT=1", NULL};
  const char *const alone[] = {"--nnodes", "3", "--device-list", "0,1", "sh", "-c", touch, NULL};
  const char *const *one[] = {alone};
  assert_int_equal(run_servers(1, one, short_wait, 30, runs), 1);
  assert_int_equal(runs[0].code, 2);
  assert_true(runs[0].seconds < 10);
  ASSERT_HAS(runs[0].err, "servers 1, 2 of 3 never said their device count within 1 s "
                          "(HCCL_CONNECT_TIMEOUT, else 60 s)");
  /* server 2 of 3 never comes: server 1 fails with server 0's message */
  const char *const came[] = {"--nnodes", "3", "--device-list", "0", "sh", "-c", touch, NULL};
  const char *const *two[] = {came, came};
  assert_int_equal(run_servers(2, two, short_wait, 30, runs), 2);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(runs[k].code, 2);
    ASSERT_HAS(runs[k].err, "server 2 of 3 never said its device count within 1 s");
  }
  ASSERT_HAS(runs[1].err, "server 0 says: server 2 of 3");
  /* server 0 never comes: server 1 cannot reach the launchers' store */
  const char *const second[] = {"--nnodes", "2", "--node-rank", "1", "--device-list", "0", "sh",
                                "-c",       touch, NULL};
  const char *const *lone1[] = {second};
  assert_int_equal(run_servers(1, lone1, short_wait, 30, runs), 1);
  assert_int_equal(runs[0].code, 2);
  ASSERT_HAS(runs[0].err, "cannot reach it within 1 s (HCCL_CONNECT_TIMEOUT, else 60 s); is "
                          "server 0's npu-launch (--node-rank 0) running");
  assert_false(file_exists(marker));

  /* two launchers say they are server 1: the later one is refused, the job runs without it */
  const char *wait5[] = {"HCCL_CONNECT_TIMEOUT=5", NULL};
  const char *const s0[] = {"--nnodes", "2", "--device-list", "0", "sh", "-c", "sleep 1", NULL};
  const char *const s1[] = {"--nnodes", "2", "--node-rank", "1", "--device-list", "0", "sh",
                            "-c",       "sleep 1", NULL};
  const char *const *dup[] = {s0, s1, s1};
  assert_int_equal(run_servers(3, dup, wait5, 30, runs), 1);
  assert_int_equal(runs[0].code, 0);
  int refused = runs[1].code == 2 ? 1 : 2;
  assert_int_equal(runs[refused].code, 2);
  assert_int_equal(runs[3 - refused].code, 0);
  ASSERT_HAS(runs[refused].err, "another launcher already joined this job as server 1 "
                                "(--node-rank 1): each server needs its own --node-rank, 0-1");
  /* a different --nnodes on server 1 */
  const char *const n2[] = {"--nnodes", "2", "--device-list", "0", "true", NULL};
  const char *const n3[] = {"--nnodes", "3", "--device-list", "0", "true", NULL};
  const char *const *mixed[] = {n2, n3};
  assert_int_equal(run_servers(2, mixed, wait5, 30, runs), 1);
  assert_int_equal(runs[0].code, 0);
  assert_int_equal(runs[1].code, 2);
  ASSERT_HAS(runs[1].err, "server 0 counted the devices of 2 servers (its --nnodes), but this "
                          "server has --nnodes 3; give every server the same --nnodes");
  /* ascend910 needs the same count on every server: 4 + 2 is refused on both */
  const char *const t4[] = {"--topology", "ascend910", "--device-list", "0-3", "true", NULL};
  const char *const t2[] = {"--topology", "ascend910", "--device-list", "0,1", "true", NULL};
  const char *const *topo[] = {t4, t2};
  assert_int_equal(run_servers(2, topo, wait5, 30, runs), 2);
  for (int k = 0; k < 2; k++)
    ASSERT_HAS(runs[k].err, "server 1 has 2 devices but server 0 has 4; topology ascend910 "
                            "needs the same number on every server");
}

/* Under srun (one npu-launch per server) Slurm's variables give the server count, this
 * server's number and the master (first host of the node list); flags still win. */
static void test_slurm_defaults(void **state) {
  (void)state;
  setenv("SLURM_NNODES", "2", 1);
  setenv("SLURM_NODEID", "1", 1);
  setenv("SLURM_JOB_NODELIST", "localhost,node[02-03]", 1);
  int rc = RUN("--device-list", "0,1", "--master-port", "29701", "--dry-run", "true");
  static char out1[1 << 16];
  snprintf(out1, sizeof(out1), "%s", g_run.out);
  int rc2 = RUN("--device-list", "0,1", "--nnodes", "2", "--node-rank", "0", "--master-addr",
                "10.0.0.9", "--dry-run", "true");
  static char out2[1 << 16];
  snprintf(out2, sizeof(out2), "%s", g_run.out);
  setenv("SLURM_JOB_NODELIST", "node[", 1);
  int rc3 = RUN("--device-list", "0,1", "--dry-run", "true");
  unsetenv("SLURM_NNODES");
  unsetenv("SLURM_NODEID");
  unsetenv("SLURM_JOB_NODELIST");
  assert_int_equal(rc, 0);
  if (!strstr(out1, "(server 1 of 2), world size 4") ||
      !strstr(out1, "RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 "
                    "MASTER_ADDR=127.0.0.1 MASTER_PORT=29701"))
    fail_msg("Slurm's variables were not used:\n%s", out1);
  assert_int_equal(rc2, 0);
  if (!strstr(out2, "RANK=1 LOCAL_RANK=1 WORLD_SIZE=4") || !strstr(out2, "MASTER_ADDR=10.0.0.9"))
    fail_msg("flags did not win over Slurm's variables:\n%s", out2);
  assert_int_equal(rc3, 2);
  ASSERT_HAS(g_run.err, "SLURM_JOB_NODELIST='node[' does not start with a host");
}

static void test_binding_block(void **state) {
  (void)state;
  static const char *const lists[] = {"0", "0-1", "0-3", "0-7"};
  for (int i = 0; i < 4; i++) {
    int n = 1 << i;
    assert_int_equal(RUN("--master-port", g_port, "--device-list", lists[i], "--report-bindings",
                         "sh", "-c", PRINT_CPUS),
                     0);
    for (int r = 0; r < n; r++) {
      cpu_set_t got, want;
      expected_block(n, r, &want);
      if (!rank_cpus(g_run.out, r, &got)) fail_msg("no line for rank %d in:\n%s", r, g_run.out);
      if (!CPU_EQUAL(&got, &want)) fail_msg("rank %d of %d: wrong CPUs in:\n%s", r, n, g_run.out);
      char want_s[64];
      snprintf(want_s, sizeof(want_s), "rank %d (device %d) bound to CPUs ", r, r);
      ASSERT_HAS(g_run.err, want_s);
    }
    int cpus[CPU_SETSIZE];
    if (my_cpus(cpus) < n)
      assert_int_equal(count_of(g_run.err, "share"), 1); /* round-robin, said once */
  }
}

static void test_binding_explicit_and_none(void **state) {
  (void)state;
  int cpus[CPU_SETSIZE], m = my_cpus(cpus);
  int a = cpus[0], b = cpus[m > 1 ? 1 : 0];
  char list[64];
  snprintf(list, sizeof(list), "%d,%d", b, a); /* rank 0 on b, rank 1 on a, then again */
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "0-3", "--cpu-bind", list, "sh",
                       "-c", PRINT_CPUS),
                   0);
  for (int r = 0; r < 4; r++) {
    cpu_set_t got;
    assert_true(rank_cpus(g_run.out, r, &got));
    assert_int_equal(CPU_COUNT(&got), 1);
    assert_true(CPU_ISSET(r % 2 == 0 ? b : a, &got));
  }
  ASSERT_HAS(g_run.err, "reused round-robin");

  snprintf(list, sizeof(list), "%d+%d", a, b); /* one entry: both CPUs for the only rank */
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "5", "--cpu-bind", list, "sh",
                       "-c", PRINT_CPUS),
                   0);
  cpu_set_t got, mine;
  assert_true(rank_cpus(g_run.out, 0, &got));
  assert_true(CPU_ISSET(a, &got) && CPU_ISSET(b, &got) && CPU_COUNT(&got) == (a == b ? 1 : 2));

  /* none: each rank keeps the launcher's (here: this test's) affinity */
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "0,1", "--cpu-bind", "none", "sh",
                       "-c", PRINT_CPUS),
                   0);
  sched_getaffinity(0, sizeof(mine), &mine);
  for (int r = 0; r < 2; r++) {
    assert_true(rank_cpus(g_run.out, r, &got));
    assert_true(CPU_EQUAL(&got, &mine));
  }
}

struct refusal {
  const char *args[12];
  const char *env;
  const char *message;
};

static void test_refusals(void **state) {
  (void)state;
  static const struct refusal cases[] = {
      {{"--device-list", ""}, NULL, "device list '' is empty"},
      {{"--device-list", "0,a"}, NULL, "'a', which is not a device number"},
      {{"--device-list", "-1,0"}, NULL, "device -1; device numbers are 0 or more"},
      {{"--device-list", "0,1,1,2"}, NULL, "names device 1 twice"},
      {{"--device-list", "3-1"}, NULL, "runs backwards"},
      /* HCCL's counts only where the topology says so (ascend910), with the way out */
      {{"--topology", "ascend910", "--device-list", "0,1,2"},
       NULL,
       "device list '0,1,2' has 3 devices; topology ascend910 allows 1, 2, 4 or 8 devices on a "
       "server; for any count choose a flat topology (HCCL_TOPO_FILE=flat8, npu-launch "
       "--topology flat8)"},
      {{"--device-list", "0-5"}, "HCCL_TOPO_FILE=ascend910", "has 6 devices; topology ascend910"},
      {{"--topology", "ascend910", "--nproc-per-node", "3"}, NULL, "has 3 devices; topology"},
      {{"--topology", "flat8", "--device-list", "0,9"},
       NULL,
       "device 9 in device list '0,9' is out of range; topology flat8 has devices 0-7"},
      {{"--device-list", "0,64"},
       NULL,
       "device 64 in device list '0,64' is out of range; topology flat64 has devices 0-63 (the "
       "default flat server grows to the largest device id, up to 64 devices)"},
      {{"--nproc-per-node", "65"}, NULL, "--nproc-per-node 65: a server has at most 64 devices"},
      {{"--topology", "ascend910", "--device-list", "0,1,4,5"},
       NULL,
       "device list 0,1,4,5 spans groups 0-3 and 4-7 of topology ascend910; a 2- or 4-device "
       "job must sit inside one group"},
      {{"--topology", "ascend910", "--device-list", "3,4"}, NULL, "spans groups 0-3 and 4-7"},
      {{"--device-list", "2-5"}, "HCCL_TOPO_FILE=ascend910", "spans groups 0-3 and 4-7"},
      {{"--topology", "nosuch", "--device-list", "0"}, NULL, "unknown topology 'nosuch'"},
      {{"--master-port", "0", "--device-list", "0"}, NULL, "--master-port '0' must be a port"},
      {{"--nnodes", "2", "--node-rank", "2", "--device-list", "0"},
       NULL,
       "--node-rank 2 is not below --nnodes 2"},
      {{"--nnodes", "2", "--device-list", "0"}, NULL, "--nnodes 2 without --node-rank"},
      {{"--nnodes", "2", "--device-list", "0"}, NULL, "give --node-rank K (0-1) on each"},
      {{"--nnodes", "2", "--node-rank", "1", "--device-list", "0"},
       "HCCL_CONNECT_TIMEOUT=soon",
       "HCCL_CONNECT_TIMEOUT='soon' must be a whole number of seconds from 1 to 7200"},
      {{"--cpu-bind", "0,1000", "--device-list", "0,1"}, NULL, "names CPU 1000"},
      {{"--cpu-bind", "0,0,0", "--device-list", "0,1"}, NULL, "more entries than the 2 ranks"},
      {{"--bogus", "--device-list", "0"}, NULL, "unknown option '--bogus'; see"},
      {{"--device-lsit", "0,1"}, NULL, "unknown option '--device-lsit' (did you mean --device-list?)"},
      {{"--device-lsit=0,1"}, NULL, "unknown option '--device-lsit' (did you mean --device-list?)"},
      {{"--nproc-pre-node", "2"}, NULL, "(did you mean --nproc-per-node?)"},
      {{"--master-prot", "1", "--device-list", "0"}, NULL, "(did you mean --master-port?)"},
      {{"--master-addr", "::1", "--device-list", "0"}, NULL, "is an IPv6 address"},
      {{"--grace-period", "-1", "--device-list", "0"}, NULL, "--grace-period '-1'"},
      {{"sh"}, NULL, "no devices given"},
  };
  const char *marker = path_in_dir("started");
  char prog[300];
  snprintf(prog, sizeof(prog), "touch %s", marker);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *args[MAX_ARGS] = {NULL};
    int n = 0;
    for (int k = 0; cases[i].args[k]; k++)
      args[n++] = cases[i].args[k];
    if (strcmp(cases[i].args[0], "sh") != 0) {
      args[n++] = "sh";
      args[n++] = "-c";
      args[n++] = prog;
    }
    const char *env[] = {cases[i].env, NULL};
    int code = run_env(env, args);
    if (code != 2) fail_msg("case %zu (%s): exit %d, expected 2", i, cases[i].message, code);
    ASSERT_HAS(g_run.err, cases[i].message);
    assert_false(file_exists(marker));
  }
  /* the same lists pass where the rule does not apply: any count on a flat server */
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "0,1,4,5", "true"), 0);
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "0,1,2", "true"), 0);
  assert_int_equal(RUN("--master-port", g_port, "--nproc-per-node", "3", "true"), 0);
  assert_int_equal(
      RUN("--master-port", g_port, "--topology", "flat8", "--device-list", "0-5", "true"), 0);
  assert_int_equal(
      RUN("--master-port", g_port, "--topology", "flat8", "--device-list", "0,1,4,5", "true"), 0);
  assert_int_equal(
      RUN("--master-port", g_port, "--topology", "ascend910", "--device-list", "0-7", "true"), 0);
  assert_int_equal(
      RUN("--master-port", g_port, "--topology", "ascend910", "--device-list", "4-7", "true"), 0);
  assert_int_equal(RUN("--device-list", "0", "no-such-program-xyz"), 127);
  ASSERT_HAS(g_run.err, "cannot run program 'no-such-program-xyz'");
}

static void test_master_port_in_use(void **state) {
  (void)state;
  g_keep_port = true;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(g_port))};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fd, 4), 0);
  const char *marker = path_in_dir("started");
  char prog[300], want[200];
  snprintf(prog, sizeof(prog), "touch %s", marker);
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "0,1", "sh", "-c", prog), 2);
  snprintf(want, sizeof(want),
           "master port %s on 127.0.0.1 is already in use (another job?); choose another with "
           "--master-port",
           g_port);
  ASSERT_HAS(g_run.err, want);
  assert_false(file_exists(marker));
  /* only server 0 checks: server 1 does not listen there. Server 0 starts while the port is
   * free; once it serves the launchers' store on the port above (its check is behind it) the
   * port is taken again, and server 1 still starts its ranks. */
  close(fd);
  const char *m0 = path_in_dir("started0"), *m1 = path_in_dir("started1");
  char prog0[300], prog1[300];
  snprintf(prog0, sizeof(prog0), "touch %s", m0);
  snprintf(prog1, sizeof(prog1), "touch %s", m1);
  const char *args0[] = {"--master-port", g_port, "--nnodes", "2", "--node-rank", "0",
                         "--device-list", "0,1", "sh", "-c", prog0, NULL};
  int o0, e0;
  double t0 = mono();
  pid_t server0 = start(args0, NULL, &o0, &e0);
  assert_true(accepting(atoi(g_port) + 1, 10));
  fd = socket(AF_INET, SOCK_STREAM, 0);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fd, 4), 0);
  assert_int_equal(RUN("--master-port", g_port, "--nnodes", "2", "--node-rank", "1",
                       "--device-list", "0,1", "sh", "-c", prog1),
                   0);
  assert_true(file_exists(m1));
  static struct run r0;
  assert_int_equal(finish(server0, o0, e0, t0, 30, &r0), 0);
  assert_true(file_exists(m0));
  close(fd);
  /* held on another address of this server only: rank 0's store (torch's binds every
   * address) would fail, so the launcher refuses too */
  fd = socket(AF_INET, SOCK_STREAM, 0);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1); /* 127.0.0.2 */
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fd, 4), 0);
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "0,1", "sh", "-c", prog), 2);
  snprintf(want, sizeof(want), "master port %s is free on 127.0.0.1 but held on another address",
           g_port);
  ASSERT_HAS(g_run.err, want);
  close(fd);
  /* the probe is closed before ranks start: rank 0 can bind the port itself */
  if (access("/usr/bin/python3", X_OK) == 0) {
    const char *py = "import os, socket; s = socket.socket(); "
                     "s.bind((os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']))); "
                     "print('bound', os.environ['RANK'])";
    assert_int_equal(RUN("--master-port", g_port, "--device-list", "0", "python3", "-c", py), 0);
    ASSERT_HAS(g_run.out, "bound 0");
  }
}

static void test_fail_fast_exit_code(void **state) {
  (void)state;
  const char *prog = "if [ $RANK = 2 ]; then sleep 0.3; exit 7; fi; sleep 30";
  assert_int_equal(
      RUN("--master-port", g_port, "--grace-period", "1", "--device-list", "0-3", "sh", "-c", prog),
      7);
  assert_true(g_run.seconds < 10); /* not the 30 s the others would sleep */
  ASSERT_HAS(g_run.err, "rank 2 (device 2, pid ");
  ASSERT_HAS(g_run.err, "failed first: exit code 7, at ");
  ASSERT_HAS(g_run.err, "s after start");
  ASSERT_HAS(g_run.err, "exit code 7 (first failure)");
  assert_int_equal(count_of(g_run.err, "SIGTERM from npu-launch"), 3);
  /* all ranks exit 0, some later than others: no fail-fast, exit 0, no summary */
  assert_int_equal(RUN("--master-port", g_port, "--device-list", "0,1", "sh", "-c",
                       "[ $RANK = 0 ] || sleep 0.3; exit 0"),
                   0);
  ASSERT_LACKS(g_run.err, "failed first");
}

/* --max-restarts: rank 1 fails in the first two starts; each time every rank is stopped (rank
 * 0 would sleep 30 s) and the whole group is started again, with the count in
 * TORCHELASTIC_RESTART_COUNT and NPU_LAUNCH_RESTART_COUNT; the third start succeeds. With one
 * restart allowed the job ends with rank 1's code after two starts. */
static void test_max_restarts(void **state) {
  (void)state;
  const char *log = path_in_dir("starts");
  char prog[512];
  snprintf(prog, sizeof(prog),
           "echo \"$RANK $TORCHELASTIC_RESTART_COUNT $NPU_LAUNCH_RESTART_COUNT "
           "$TORCHELASTIC_MAX_RESTARTS $HCCL_JOB_TOKEN\" >> %s; "
           "if [ $TORCHELASTIC_RESTART_COUNT -lt 2 ]; then "
           "[ $RANK = 1 ] && { sleep 0.3; exit 5; }; sleep 30; fi; exit 0",
           log);
  unlink(log);
  assert_int_equal(RUN("--master-port", g_port, "--grace-period", "1", "--max-restarts", "2",
                       "--device-list", "0,1", "sh", "-c", prog),
                   0);
  assert_true(g_run.seconds < 15); /* rank 0's 30 s sleeps were cut */
  const char *text = read_text(log);
  assert_int_equal(count_of(text, "\n"), 6);
  for (int start = 0; start <= 2; start++)
    for (int rank = 0; rank <= 1; rank++) {
      char want[64];
      snprintf(want, sizeof(want), "%d %d %d 2 ", rank, start, start);
      ASSERT_HAS(text, want);
    }
  ASSERT_HAS(g_run.err, "starting every rank again: restart 1 of 2");
  ASSERT_HAS(g_run.err, "starting every rank again: restart 2 of 2");
  ASSERT_HAS(g_run.err, "rank 1 (device 1, pid ");
  unlink(log);
  assert_int_equal(RUN("--master-port", g_port, "--grace-period", "1", "--max-restarts", "1",
                       "--device-list", "0,1", "sh", "-c", prog),
                   5);
  assert_int_equal(count_of(read_text(log), "\n"), 4);
  ASSERT_LACKS(g_run.err, "restart 2 of");
  /* Refused: a bad count, and several servers with no port above --master-port for the
   * launchers' store (across servers they agree there: tests/multi/test_multiserver.sh). */
  assert_int_equal(RUN("--max-restarts", "x", "--device-list", "0", "true"), 2);
  ASSERT_HAS(g_run.err, "--max-restarts 'x' must be a whole number from 0 to 1000");
  assert_int_equal(RUN("--max-restarts", "1", "--nnodes", "2", "--node-rank", "0", "--master-port",
                       "65535", "--device-list", "0", "true"),
                   2);
  ASSERT_HAS(g_run.err, "the launchers meet on --master-port + 1, and --master-port is 65535");
}

/* --on-failure continue: rank 1 exits 3; the others see it gone, go on, and exit 0: the job
 * exits 0, with rank 1's failure reported when it happened and in the summary, no rank
 * stopped, and what rank 1 left in its group stopped at once. A survivor failing later fails
 * the job with its code and stops the rest. A lone rank's failure gives its code, on one server
 * and across servers (the others go on there, but a job whose every rank dies must not end 0). Refused
 * together with --max-restarts, naming both. */
static void test_on_failure_continue(void **state) {
  (void)state;
  char prog[600];
  /* rank 1 leaves a sleep behind in its group: stopped when rank 1 fails, not at the end */
  snprintf(prog, sizeof(prog),
           "cd %s; if [ $RANK = 1 ]; then sleep 30 & echo $! > left; touch dead; exit 3; fi; "
           "while [ ! -e dead ]; do sleep 0.02; done; sleep 0.3; "
           "kill -0 $(cat left) 2>/dev/null && touch left_alive; echo $RANK > done$RANK; exit 0",
           g_dir);
  assert_int_equal(RUN("--master-port", g_port, "--grace-period", "1", "--on-failure", "continue",
                       "--device-list", "0-3", "sh", "-c", prog),
                   0);
  ASSERT_HAS(g_run.err, "rank 1 (device 1, pid ");
  ASSERT_HAS(g_run.err, "failed: exit code 3, at ");
  ASSERT_HAS(g_run.err, "; the other ranks go on (--on-failure continue)");
  ASSERT_HAS(g_run.err, "exit code 3 (went on without it)");
  ASSERT_LACKS(g_run.err, "from npu-launch");
  ASSERT_LACKS(g_run.err, "failed first");
  for (int r = 0; r < 4; r++) {
    char name[16];
    snprintf(name, sizeof(name), "done%d", r);
    assert_true(file_exists(path_in_dir(name)) == (r != 1));
  }
  assert_false(file_exists(path_in_dir("left_alive")));

  /* rank 2 fails after rank 1: the job's failure, the other two (asleep) are stopped */
  unlink(path_in_dir("dead"));
  snprintf(prog, sizeof(prog),
           "if [ $RANK = 1 ]; then touch %s/dead; exit 3; fi; "
           "if [ $RANK = 2 ]; then while [ ! -e %s/dead ]; do sleep 0.02; done; sleep 0.3; "
           "exit 4; fi; sleep 30",
           g_dir, g_dir);
  assert_int_equal(RUN("--master-port", g_port, "--grace-period", "1", "--on-failure", "continue",
                       "--device-list", "0-3", "sh", "-c", prog),
                   4);
  assert_true(g_run.seconds < 10);
  ASSERT_HAS(g_run.err, "failed: exit code 3, at ");
  ASSERT_HAS(g_run.err, "rank 2 (device 2, pid ");
  ASSERT_HAS(g_run.err, "failed after rank 1 (a second failure): exit code 4, at ");
  ASSERT_HAS(g_run.err, "exit code 4 (second failure)");
  ASSERT_HAS(g_run.err, "exit code 4 (rank 2's)");
  assert_int_equal(count_of(g_run.err, "SIGTERM from npu-launch"), 2);

  /* one rank: nobody went on, so its failure is the job's */
  assert_int_equal(RUN("--master-port", g_port, "--on-failure", "continue", "--device-list", "0",
                       "sh", "-c", "exit 3"),
                   3);
  ASSERT_HAS(g_run.err, "exit code 3 (rank 0's: no other rank went on)");
  /* the only rank of server 1 of 2: the job goes on on server 0, and this launcher still exits
   * with the rank's code (without --max-restarts it needs nothing more from server 0 once the
   * launchers have met) */
  static struct run runs[2];
  const char *const on0[] = {"--on-failure", "continue", "--device-list", "0", "true", NULL};
  const char *const on1[] = {"--on-failure", "continue", "--device-list", "0",
                             "sh",           "-c",       "exit 3",        NULL};
  const char *const *on[] = {on0, on1};
  assert_int_equal(run_servers(2, on, NULL, 30, runs), 1);
  assert_int_equal(runs[0].code, 0);
  assert_int_equal(runs[1].code, 3);
  ASSERT_HAS(runs[1].err, "failed: exit code 3, at ");
  ASSERT_HAS(runs[1].err, "it was this server's only rank: the job goes on on the other servers, "
                          "and this launcher exits with its code");

  assert_int_equal(RUN("--on-failure", "continue", "--max-restarts", "2", "--device-list", "0",
                       "true"),
                   2);
  ASSERT_HAS(g_run.err, "--on-failure continue with --max-restarts 2: continue keeps the other "
                        "ranks running after a failure, --max-restarts stops them all");
  assert_int_equal(RUN("--on-failure", "maybe", "--device-list", "0", "true"), 2);
  ASSERT_HAS(g_run.err, "--on-failure 'maybe' must be stop or continue");
}

static void test_fail_fast_signal_and_grace(void **state) {
  (void)state;
  /* a rank killed by a signal: 128 + its number, named in the summary */
  assert_int_equal(RUN("--master-port", g_port, "--grace-period", "1", "--device-list", "0,1", "sh",
                       "-c", "if [ $RANK = 1 ]; then kill -SEGV $$; fi; sleep 30"),
                   128 + SIGSEGV);
  ASSERT_HAS(g_run.err, "rank 1 (device 1, pid ");
  ASSERT_HAS(g_run.err, "killed by SIGSEGV");
  assert_true(g_run.seconds < 10);

  /* ranks that ignore SIGTERM get SIGKILL after the grace period, and are gone */
  /* rank 0 fails once the others have started their sleeps, so the test does not race */
  char prog[600];
  snprintf(prog, sizeof(prog),
           "trap '' TERM; if [ $RANK = 0 ]; then for r in 1 2 3; do "
           "while [ ! -s %s/sleep$r ]; do sleep 0.02; done; done; exit 3; fi; "
           "sleep 30 & echo $! > %s/sleep$RANK; wait",
           g_dir, g_dir);
  assert_int_equal(
      RUN("--master-port", g_port, "--grace-period", "1", "--device-list", "0-3", "sh", "-c", prog),
      3);
  assert_true(g_run.seconds >= 1.0 && g_run.seconds < 10);
  assert_int_equal(count_of(g_run.err, "SIGKILL from npu-launch"), 3);
  for (int r = 1; r < 4; r++) {
    char name[16];
    snprintf(name, sizeof(name), "sleep%d", r);
    assert_true(gone_within(pid_from_file(path_in_dir(name)), 2));
  }
}

static void test_signal_forwarding(void **state) {
  (void)state;
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (int k = 0; k < 3; k++) {
    char prog[400], pid0[256], pid1[256];
    snprintf(pid0, sizeof(pid0), "%s/pid%d_0", g_dir, k);
    snprintf(pid1, sizeof(pid1), "%s/pid%d_1", g_dir, k);
    snprintf(prog, sizeof(prog),
             "trap 'echo caught $RANK; exit 0' INT TERM HUP; echo $$ > %s/pid%d_$RANK; "
             "while :; do sleep 0.05; done",
             g_dir, k);
    const char *args[] = {"--master-port", g_port, "--device-list", "0,1", "sh", "-c", prog, NULL};
    int o, e;
    double t0 = mono();
    pid_t pid = start(args, NULL, &o, &e);
    assert_true(wait_for_file(pid0, 10) && wait_for_file(pid1, 10));
    kill(pid, sigs[k]);
    assert_int_equal(finish(pid, o, e, t0, 20, &g_run), 128 + sigs[k]);
    ASSERT_HAS(g_run.out, "caught 0");
    ASSERT_HAS(g_run.out, "caught 1");
    ASSERT_HAS(g_run.err, "received SIG");
    assert_true(gone_within(pid_from_file(pid0), 2));
    assert_true(gone_within(pid_from_file(pid1), 2));
  }

  /* ranks that ignore SIGTERM: a second signal to the launcher sends SIGKILL at once, long
   * before the 30 s grace period */
  char prog[300];
  snprintf(prog, sizeof(prog), "trap '' TERM INT; echo $$ > %s/deaf$RANK; exec sleep 60", g_dir);
  const char *args[] = {"--master-port",
                        g_port,
                        "--grace-period",
                        "30",
                        "--device-list",
                        "0,1",
                        "sh",
                        "-c",
                        prog,
                        NULL};
  int o, e;
  double t0 = mono();
  pid_t pid = start(args, NULL, &o, &e);
  assert_true(wait_for_file(path_in_dir("deaf0"), 10) && wait_for_file(path_in_dir("deaf1"), 10));
  kill(pid, SIGTERM);
  kill(pid, SIGINT);
  int code = finish(pid, o, e, t0, 20, &g_run);
  /* pending signals are read lowest number first, so either may count as the first */
  assert_true(code == 128 + SIGTERM || code == 128 + SIGINT);
  assert_true(g_run.seconds < 10);
  ASSERT_HAS(g_run.err, "sending SIGKILL now");
  assert_true(gone_within(pid_from_file(path_in_dir("deaf0")), 2));
  assert_true(gone_within(pid_from_file(path_in_dir("deaf1")), 2));
}

/* SIGUSR1 stops nothing: each rank gets it (the flight recorder's dump) and the job goes on to
 * its own end, exit 0. */
static void test_sigusr1_passed_on(void **state) {
  (void)state;
  char prog[400];
  snprintf(prog, sizeof(prog),
           "n=0; trap 'n=$((n+1))' USR1; echo $$ > %s/usr1_$RANK; "
           "while [ $n = 0 ]; do sleep 0.05; done; echo got $RANK",
           g_dir);
  const char *args[] = {"--master-port", g_port, "--device-list", "0,1", "sh", "-c", prog, NULL};
  int o, e;
  double t0 = mono();
  pid_t pid = start(args, NULL, &o, &e);
  assert_true(wait_for_file(path_in_dir("usr1_0"), 10) && wait_for_file(path_in_dir("usr1_1"), 10));
  usleep(100000); /* the traps are set before the files are written; give sh a moment */
  kill(pid, SIGUSR1);
  assert_int_equal(finish(pid, o, e, t0, 20, &g_run), 0);
  ASSERT_HAS(g_run.out, "got 0");
  ASSERT_HAS(g_run.out, "got 1");
  ASSERT_HAS(g_run.err, "received SIGUSR1; sending it to every rank");
}

static void test_no_orphans(void **state) {
  (void)state;
  char prog[400];
  /* (a) a failure: the background child of a still-running rank is stopped too */
  snprintf(prog, sizeof(prog),
           "sleep 60 & echo $! > %s/bg$RANK; if [ $RANK = 1 ]; then "
           "while [ ! -s %s/bg0 ]; do sleep 0.02; done; exit 3; fi; wait",
           g_dir, g_dir);
  assert_int_equal(
      RUN("--master-port", g_port, "--grace-period", "1", "--device-list", "0,1", "sh", "-c", prog),
      3);
  assert_true(gone_within(pid_from_file(path_in_dir("bg0")), 2));
  assert_true(gone_within(pid_from_file(path_in_dir("bg1")), 2));

  /* (b) success, but a rank left a process behind: stopped, still exit 0 */
  snprintf(prog, sizeof(prog), "sleep 60 & echo $! > %s/left$RANK; exit 0", g_dir);
  assert_int_equal(
      RUN("--master-port", g_port, "--grace-period", "1", "--device-list", "0", "sh", "-c", prog),
      0);
  ASSERT_HAS(g_run.err, "stopping processes they left running");
  assert_true(gone_within(pid_from_file(path_in_dir("left0")), 2));

  /* (c) a stray that left the rank's process group (setsid) is adopted and killed */
  if (access("/usr/bin/setsid", X_OK) == 0) {
    snprintf(prog, sizeof(prog), "setsid sleep 60 & echo $! > %s/stray$RANK; exit 0", g_dir);
    assert_int_equal(
        RUN("--master-port", g_port, "--grace-period", "1", "--device-list", "0", "sh", "-c", prog),
        0);
    assert_true(gone_within(pid_from_file(path_in_dir("stray0")), 2));
  }

  /* (d) the launcher itself killed with SIGKILL: its ranks die with it (PDEATHSIG) */
  snprintf(prog, sizeof(prog), "echo $$ > %s/k$RANK; exec sleep 60", g_dir);
  const char *args[] = {"--master-port", g_port, "--device-list", "0,1", "sh", "-c", prog, NULL};
  int o, e;
  double t0 = mono();
  pid_t pid = start(args, NULL, &o, &e);
  assert_true(wait_for_file(path_in_dir("k0"), 10) && wait_for_file(path_in_dir("k1"), 10));
  kill(pid, SIGKILL);
  finish(pid, o, e, t0, 10, &g_run);
  assert_true(gone_within(pid_from_file(path_in_dir("k0")), 2));
  assert_true(gone_within(pid_from_file(path_in_dir("k1")), 2));
}

static void test_log_dir(void **state) {
  (void)state;
  const char *dir = path_in_dir("logs/nested");
  /* rank 1 fails only once rank 0 has written everything, so the test does not race */
  char prog[512];
  snprintf(prog, sizeof(prog),
           "i=1; while [ $i -le 20 ]; do echo \"rank $RANK line $i\"; i=$((i+1)); done; "
           "echo \"err $RANK\" >&2; if [ $RANK = 0 ]; then touch %s/done0; exit 0; fi; "
           "while [ ! -e %s/done0 ]; do sleep 0.02; done; exit 5",
           g_dir, g_dir);
  assert_int_equal(
      RUN("--master-port", g_port, "--log-dir", dir, "--device-list", "0,1", "sh", "-c", prog), 5);
  ASSERT_LACKS(g_run.out, "line"); /* into the files, not the terminal */
  char path[300];
  snprintf(path, sizeof(path), "%s/rank_0.log", dir);
  char *log = read_text(path);
  assert_non_null(log);
  ASSERT_HAS(log, "rank 0 line 1\n");
  ASSERT_HAS(log, "rank 0 line 20\nerr 0\n"); /* stdout and stderr, in order */
  snprintf(path, sizeof(path), "%s/rank_1.log", dir);
  assert_non_null(read_text(path));
  /* the summary shows the failed rank's last 10 lines: 12..20 and the stderr line */
  char want[400];
  snprintf(want, sizeof(want), "last 10 lines of %s", path);
  ASSERT_HAS(g_run.err, want);
  ASSERT_HAS(g_run.err, "| rank 1 line 12\n");
  ASSERT_HAS(g_run.err, "| err 1\n");
  ASSERT_LACKS(g_run.err, "| rank 1 line 11\n");
  ASSERT_LACKS(g_run.err, "| rank 0 ");
}

static void test_tag_output(void **state) {
  (void)state;
  /* off by default: output passes through byte for byte */
  assert_int_equal(
      RUN("--master-port", g_port, "--device-list", "0", "sh", "-c", "printf 'a\\n b\\nno-eol'"),
      0);
  assert_string_equal(g_run.out, "a\n b\nno-eol");
  const char *prog = "echo out $RANK; echo err $RANK >&2; printf 'tail'";
  assert_int_equal(
      RUN("--master-port", g_port, "--tag-output", "--device-list", "0,1", "sh", "-c", prog), 0);
  ASSERT_HAS(g_run.out, "[rank 0] out 0\n");
  ASSERT_HAS(g_run.out, "[rank 1] out 1\n");
  ASSERT_HAS(g_run.out, "[rank 1] tail\n");
  ASSERT_HAS(g_run.err, "[rank 0] err 0\n");
  ASSERT_LACKS(g_run.out, "err 1");
  assert_int_equal(count_of(g_run.out, "[rank "), 4);
  /* with --log-dir as well: tagged on the terminal, untagged in the file */
  const char *dir = path_in_dir("taglogs");
  assert_int_equal(RUN("--master-port", g_port, "--tag-output", "--log-dir", dir, "--device-list",
                       "0", "sh", "-c", prog),
                   0);
  ASSERT_HAS(g_run.out, "[rank 0] out 0\n");
  char path[300];
  snprintf(path, sizeof(path), "%s/rank_0.log", dir);
  char *log = read_text(path);
  assert_non_null(log);
  ASSERT_HAS(log, "out 0\n");
  ASSERT_LACKS(log, "[rank");
}

static void test_help_version(void **state) {
  (void)state;
  assert_int_equal(RUN("--help"), 0);
  ASSERT_HAS(g_run.out, "--device-list");
  ASSERT_HAS(g_run.out, "--cpu-bind");
  assert_int_equal(RUN("--version"), 0);
  ASSERT_HAS(g_run.out, "npu-launch ");
  assert_int_equal(RUN("--device-list", "0"), 2);
  ASSERT_HAS(g_run.err, "no program given");
}

/* Needs allreduce_perf and the library; fails (reported) until both are built. */
static void test_allreduce_perf_end_to_end(void **state) {
  (void)state;
  const char *perf = HCCL_BIN_DIR "/allreduce_perf";
  if (access(perf, X_OK) != 0) fail_msg("%s is not built yet", perf);
  static const char *const lists[] = {"0", "0-1", "0-3", "0-7", "0-2"};
  static const int sizes[] = {1, 2, 4, 8, 3};
  alarm(600);
  for (int i = 0; i < 5; i++) {
    const char *args[] = {"--master-port",
                          g_port,
                          "--grace-period",
                          "1",
                          "--device-list",
                          lists[i],
                          "--",
                          perf,
                          "-b",
                          "8",
                          "-e",
                          "1M",
                          "-f",
                          "4",
                          "-c",
                          "1",
                          NULL};
    int o, e;
    double t0 = mono();
    pid_t pid = start(args, NULL, &o, &e);
    int code = finish(pid, o, e, t0, 120, &g_run);
    if (code != 0) fail_msg("%d devices: exit %d\n%s", sizes[i], code, g_run.out);
    ASSERT_HAS(g_run.out, "# Out of bounds values : 0 OK");
    printf("# allreduce_perf on %d devices: %.1f s\n", sizes[i], g_run.seconds);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_mapping_sorted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_variables, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nnodes_dry_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_number_ranks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_servers_uneven, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slurm_defaults, setup, teardown),
      cmocka_unit_test_setup_teardown(test_binding_block, setup, teardown),
      cmocka_unit_test_setup_teardown(test_binding_explicit_and_none, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_master_port_in_use, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fail_fast_exit_code, setup, teardown),
      cmocka_unit_test_setup_teardown(test_max_restarts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_on_failure_continue, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fail_fast_signal_and_grace, setup, teardown),
      cmocka_unit_test_setup_teardown(test_signal_forwarding, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sigusr1_passed_on, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_orphans, setup, teardown),
      cmocka_unit_test_setup_teardown(test_log_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tag_output, setup, teardown),
      cmocka_unit_test_setup_teardown(test_help_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_allreduce_perf_end_to_end, setup, teardown),
  };
  if (getenv("TEST_FILTER")) cmocka_set_test_filter(getenv("TEST_FILTER")); /* e.g. "*signal*" */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
