/*
 * test_comm.c - multi-process tests of a communicator's life: how it is made (from the
 * launcher's variables, from a root info shared through pipes), what its getters say, that 3
 * and 6 ranks on a server work by default and are refused under ascend910, which groups and
 * settings are refused and how (HCCL_E_PARA on every rank, a message naming the
 * variable and the value, no hang), and how it fails: a rank that never joins, a rank killed
 * in the middle of a collective, a rank that skips a collective (its timeout named by the
 * setting the user set: HCCL_EXEC_TIMEOUT, or a config's field or timeoutSource), bad
 * arguments. Every rank that
 * succeeds must have released its device links (harness.c), and init + destroy must work 20
 * times in a row.
 *
 * Every failure case also checks its time: an error that takes the full default timeout to
 * appear is as bad as a hang for a user.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_check.h"
#include "comm.h"
#include "harness.h"
#include "hccl.h"
#include "settings.h"

#define RUN_TIMEOUT_S 60

/* Shared between the ranks of one run (MAP_SHARED before fork): flags and counters. */
static volatile int *g_shared;
#define SHARED_INTS 64
enum { FLAG_DONE = 0 };

static void set_flag(int k) {
  __atomic_store_n(&g_shared[k], 1, __ATOMIC_SEQ_CST);
}

/* Waits until flag k is set or max_s passes; returns whether it was set. */
static int wait_flag(int k, double max_s) {
  double t0 = cc_now();
  while (!__atomic_load_n(&g_shared[k], __ATOMIC_SEQ_CST)) {
    if (cc_now() - t0 > max_s) return 0;
    usleep(5000);
  }
  return 1;
}

/* One int32 sum allreduce of (rank + 1) * (i + 1) + salt; checks every element. */
static int allreduce_works(HcclComm comm, int rank, int nranks, int salt) {
  enum { C = 257 };
  int32_t buf[C];
  for (int i = 0; i < C; i++)
    buf[i] = (rank + 1) * (i + 1) + salt;
  HcclResult rc = HcclAllReduce(buf, buf, C, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
  RANK_CHECK(rc == HCCL_SUCCESS, "allreduce: %d %s", rc, HcclGetLastErrorMessage());
  for (int i = 0; i < C; i++) {
    int32_t want = nranks * (nranks + 1) / 2 * (i + 1) + nranks * salt;
    RANK_CHECK(buf[i] == want, "allreduce element %d: expected %d got %d", i, want, buf[i]);
  }
  return 0;
}

/* Forks n ranks, asserts that all succeed and that no hccl* shm entry is left behind. A
 * victim >= 0 is killed after kill_ms. */
static void run_and_check(int n, harness_rank_fn body, void *arg, int victim, int kill_ms) {
  for (int k = 0; k < SHARED_INTS; k++)
    g_shared[k] = 0;
  double t0 = cc_now();
  int failed = victim < 0 ? harness_run_ranks(n, RUN_TIMEOUT_S, body, arg)
                          : harness_run_ranks_kill(n, RUN_TIMEOUT_S, body, arg, victim, kill_ms);
  printf("  %d ranks: %d failed, %.2f s\n", n, failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

/* ---- init from the launcher's variables; getters ---- */

struct env_arg {
  char port2[16]; /* MASTER_PORT of the second communicator (DEVICE_ID set) */
};

static int check_getters(HcclComm comm, int rank, int nranks, int32_t device) {
  uint32_t v = 99;
  int32_t d = -99;
  RANK_CHECK(HcclGetRankSize(comm, &v) == HCCL_SUCCESS && v == (uint32_t)nranks, "size %u", v);
  RANK_CHECK(HcclGetRankId(comm, &v) == HCCL_SUCCESS && v == (uint32_t)rank, "rank %u", v);
  RANK_CHECK(HcclGetLocalRankSize(comm, &v) == HCCL_SUCCESS && v == (uint32_t)nranks,
             "local size %u, want %d", v, nranks);
  RANK_CHECK(HcclGetLocalRankId(comm, &v) == HCCL_SUCCESS && v == (uint32_t)rank,
             "local rank %u, want %d", v, rank);
  RANK_CHECK(HcclGetDeviceId(comm, &d) == HCCL_SUCCESS && d == device, "device %d, want %d", d,
             device);
  /* Transport counters: RDMA's are all zero on one server (no RDMA link, or no RDMA transport
   * built); tcp and shm count nothing; another name or NULL is refused. */
  HcclTransportStats ts;
  memset(&ts, 0x55, sizeof(ts));
  HcclResult rc = HcclGetCommTransportStats(comm, "rdma", &ts);
  RANK_CHECK(rc == HCCL_SUCCESS && ts.links == 0 && ts.bytesSent == 0 && ts.bytesCopiedSend == 0 &&
                 ts.bytesCopiedRecv == 0,
             "rdma stats: %d, links %u, sent %llu", rc, ts.links,
             (unsigned long long)ts.bytesSent);
  RANK_CHECK(HcclGetCommTransportStats(comm, "tcp", &ts) == HCCL_E_NOT_SUPPORT &&
                 strstr(HcclGetLastErrorMessage(), "keeps no counters"),
             "tcp stats: %s", HcclGetLastErrorMessage());
  RANK_CHECK(HcclGetCommTransportStats(comm, "shm", &ts) == HCCL_E_NOT_SUPPORT, "shm stats");
  RANK_CHECK(HcclGetCommTransportStats(comm, "ib", &ts) == HCCL_E_PARA &&
                 strstr(HcclGetLastErrorMessage(), "'ib'"),
             "stats of 'ib': %s", HcclGetLastErrorMessage());
  RANK_CHECK(HcclGetCommTransportStats(comm, NULL, &ts) == HCCL_E_PTR, "stats of NULL");
  RANK_CHECK(HcclGetCommTransportStats(comm, "rdma", NULL) == HCCL_E_PTR, "stats into NULL");
  RANK_CHECK(HcclGetCommTransportStats(NULL, "rdma", &ts) == HCCL_E_PTR, "stats of no comm");
  return 0;
}

static int env_body(int rank, int nranks, void *argp) {
  const struct env_arg *arg = argp;
  harness_base_env();
  HcclComm comm = NULL;
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS && comm, "init: %d %s", rc, HcclGetLastErrorMessage());
  if (check_getters(comm, rank, nranks, rank)) return 1; /* default device = local rank */
  if (allreduce_works(comm, rank, nranks, 3)) return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");

  /* DEVICE_ID set per rank (a permutation, so it differs from LOCAL_RANK) is respected, and
   * HCCL's own spelling of the halving-doubling choice is accepted. */
  char dev[16];
  snprintf(dev, sizeof(dev), "%d", nranks - 1 - rank);
  setenv("DEVICE_ID", dev, 1);
  setenv("MASTER_PORT", arg->port2, 1);
  setenv("HCCL_ALGO", "level0:NA;level1:H-D_R", 1);
  comm = NULL;
  rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS && comm, "init with DEVICE_ID=%s: %d %s", dev, rc,
             HcclGetLastErrorMessage());
  if (check_getters(comm, rank, nranks, nranks - 1 - rank)) return 1;
  const char *algo = HcclAllReduceAlgoName(comm, 64u << 20);
  RANK_CHECK(nranks == 1 || (algo && strcmp(algo, "hd") == 0),
             "HCCL_ALGO=level0:NA;level1:H-D_R but a 64 MiB allreduce would use %s",
             algo ? algo : "(null)");
  if (allreduce_works(comm, rank, nranks, -5)) return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void env_test(int n) {
  struct env_arg a;
  snprintf(a.port2, sizeof(a.port2), "%u", harness_free_port());
  run_and_check(n, env_body, &a, -1, 0);
}

static void test_init_env_1(void **st) {
  (void)st;
  env_test(1);
}
static void test_init_env_2(void **st) {
  (void)st;
  env_test(2);
}
static void test_init_env_4(void **st) {
  (void)st;
  env_test(4);
}
static void test_init_env_8(void **st) {
  (void)st;
  env_test(8);
}

/* A process with none of the launcher's variables gets a communicator of one rank. */
static int bare_body(int rank, int nranks, void *argp) {
  (void)argp;
  (void)nranks;
  harness_base_env();
  static const char *const vars[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                     "MASTER_ADDR", "MASTER_PORT", "RANK_ID",    "RANK_SIZE"};
  for (size_t k = 0; k < sizeof(vars) / sizeof(vars[0]); k++)
    unsetenv(vars[k]);
  HcclComm comm = NULL;
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS && comm, "init with no variables: %d %s", rc,
             HcclGetLastErrorMessage());
  if (check_getters(comm, rank, 1, 0)) return 1;
  if (allreduce_works(comm, 0, 1, 11)) return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_init_no_variables(void **st) {
  (void)st;
  run_and_check(1, bare_body, NULL, -1, 0);
}

/* Ascend's spelling of the launcher's variables: RANK_ID and RANK_SIZE instead of RANK and
 * WORLD_SIZE. */
static int rank_id_body(int rank, int nranks, void *argp) {
  (void)argp;
  harness_base_env();
  char buf[16];
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  snprintf(buf, sizeof(buf), "%d", rank);
  setenv("RANK_ID", buf, 1);
  snprintf(buf, sizeof(buf), "%d", nranks);
  setenv("RANK_SIZE", buf, 1);
  HcclComm comm = NULL;
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS && comm, "init from RANK_ID/RANK_SIZE: %d %s", rc,
             HcclGetLastErrorMessage());
  if (check_getters(comm, rank, nranks, rank)) return 1;
  if (allreduce_works(comm, rank, nranks, 4)) return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_init_rank_id(void **st) {
  (void)st;
  run_and_check(4, rank_id_body, NULL, -1, 0);
}

/* Two communicators over the same processes alive at once (as with two process groups), their
 * collectives interleaved, each with its own data. */
static int two_comms_body(int rank, int nranks, void *argp) {
  const struct env_arg *arg = argp;
  harness_base_env();
  HcclComm a = NULL, b = NULL;
  HcclResult rc = HcclCommInitFromEnv(&a);
  RANK_CHECK(rc == HCCL_SUCCESS, "init A: %d %s", rc, HcclGetLastErrorMessage());
  setenv("MASTER_PORT", arg->port2, 1);
  setenv("HCCL_ALGO", "ring", 1);
  rc = HcclCommInitFromEnv(&b);
  RANK_CHECK(rc == HCCL_SUCCESS, "init B: %d %s", rc, HcclGetLastErrorMessage());
  for (int k = 0; k < 5; k++) {
    if (allreduce_works(a, rank, nranks, 10 * k)) return 1;
    if (allreduce_works(b, rank, nranks, 10 * k + 1)) return 1;
  }
  /* Queued on A, blocking on B meanwhile, then A's result. */
  int32_t qa[4099], qb[4099];
  for (int i = 0; i < 4099; i++)
    qa[i] = rank + i, qb[i] = 2 * rank - i;
  HcclRequest req = NULL;
  rc = HcclAllReduce(qa, qa, 4099, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, a, &req);
  RANK_CHECK(rc == HCCL_SUCCESS, "queue on A: %d", rc);
  rc = HcclAllReduce(qb, qb, 4099, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MIN, b, NULL);
  RANK_CHECK(rc == HCCL_SUCCESS, "blocking on B: %d %s", rc, HcclGetLastErrorMessage());
  RANK_CHECK(HcclRequestWait(req) == HCCL_SUCCESS, "wait on A: %s", HcclGetLastErrorMessage());
  for (int i = 0; i < 4099; i++) {
    RANK_CHECK(qa[i] == nranks - 1 + i, "A max[%d] = %d, want %d", i, qa[i], nranks - 1 + i);
    RANK_CHECK(qb[i] == -i, "B min[%d] = %d, want %d", i, qb[i], -i);
  }
  RANK_CHECK(HcclCommDestroy(a) == HCCL_SUCCESS, "destroy A");
  if (allreduce_works(b, rank, nranks, 99)) return 1; /* B outlives A */
  RANK_CHECK(HcclCommDestroy(b) == HCCL_SUCCESS, "destroy B");
  return 0;
}

static void test_two_communicators(void **st) {
  (void)st;
  struct env_arg a;
  snprintf(a.port2, sizeof(a.port2), "%u", harness_free_port());
  run_and_check(4, two_comms_body, &a, -1, 0);
}

/* ---- init from a root info ----
 * One pipe per receiving rank, made before fork: HCCL_ROOT_INFO_BYTES is larger than
 * PIPE_BUF, so readers sharing one pipe could each get part of another's copy. */

#define RI_RANKS 4
struct rootinfo_arg {
  int fds[RI_RANKS][2];
};

static int read_full(int fd, void *p, size_t n, int timeout_ms) {
  size_t got = 0;
  double t0 = cc_now();
  while (got < n) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int left = timeout_ms - (int)((cc_now() - t0) * 1000);
    if (left <= 0 || poll(&pfd, 1, left) <= 0) return -1;
    ssize_t k = read(fd, (char *)p + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    got += (size_t)k;
  }
  return 0;
}

static int rootinfo_body(int rank, int nranks, void *argp) {
  struct rootinfo_arg *arg = argp;
  harness_base_env();
  setenv("HCCL_CONNECT_TIMEOUT", "10", 1);
  /* The root info alone must be enough: no launcher variables. */
  static const char *const vars[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK",
                                     "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"};
  for (size_t k = 0; k < sizeof(vars) / sizeof(vars[0]); k++)
    unsetenv(vars[k]);
  HcclRootInfo root;
  memset(&root, 0, sizeof(root));
  if (rank == 0) {
    HcclResult rc = HcclGetRootInfo(&root);
    RANK_CHECK(rc == HCCL_SUCCESS, "HcclGetRootInfo: %d %s", rc, HcclGetLastErrorMessage());
    for (int r = 1; r < nranks; r++)
      RANK_CHECK(write(arg->fds[r][1], &root, sizeof(root)) == (ssize_t)sizeof(root),
                 "write root info for rank %d", r);
  } else {
    RANK_CHECK(read_full(arg->fds[rank][0], &root, sizeof(root), 30000) == 0,
               "no root info from rank 0 within 30 s");
  }
  HcclComm comm = NULL;
  /* Local argument checks come first and leave nothing behind. */
  HcclResult rc = HcclCommInitRootInfo((uint32_t)nranks, NULL, (uint32_t)rank, &comm);
  RANK_CHECK(rc == HCCL_E_PTR && comm == NULL, "NULL root info: %d", rc);
  rc = HcclCommInitRootInfo((uint32_t)nranks, &root, (uint32_t)nranks, &comm);
  RANK_CHECK(rc == HCCL_E_PARA && comm == NULL, "rank == nRanks: %d", rc);

  double t0 = cc_now();
  rc = HcclCommInitRootInfo((uint32_t)nranks, &root, (uint32_t)rank, &comm);
  RANK_CHECK(rc == HCCL_SUCCESS && comm, "HcclCommInitRootInfo: %d %s", rc,
             HcclGetLastErrorMessage());
  uint32_t v = 0;
  RANK_CHECK(HcclGetRankSize(comm, &v) == HCCL_SUCCESS && v == (uint32_t)nranks, "size %u", v);
  RANK_CHECK(HcclGetRankId(comm, &v) == HCCL_SUCCESS && v == (uint32_t)rank, "rank %u", v);
  if (allreduce_works(comm, rank, nranks, 7)) return 1;
  if (rank == 0) printf("  root-info init + allreduce: %.3f s\n", cc_now() - t0);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_init_root_info(void **st) {
  (void)st;
  struct rootinfo_arg a;
  for (int r = 0; r < RI_RANKS; r++)
    assert_int_equal(pipe(a.fds[r]), 0);
  run_and_check(RI_RANKS, rootinfo_body, &a, -1, 0);
  for (int r = 0; r < RI_RANKS; r++) {
    close(a.fds[r][0]);
    close(a.fds[r][1]);
  }
}

/* ---- group sizes: any on the default flat server, HCCL's on ascend910 ---- */

/* 3 and 6 ranks on one server: the default topology (flat8) takes them and an allreduce
 * works; under HCCL_TOPO_FILE=ascend910 every rank refuses at once, naming the count, the
 * topology's rule and how to choose a flat one. */
static int any_count_body(int rank, int nranks, void *argp) {
  (void)argp;
  harness_base_env();
  setenv("HCCL_CONNECT_TIMEOUT", "10", 1);
  HcclComm comm = NULL;
  unsetenv("HCCL_TOPO_FILE");
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS && comm, "%d ranks on the default topology: init %d (%s)", nranks,
             rc, HcclGetLastErrorMessage());
  if (allreduce_works(comm, rank, nranks, 11)) return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  comm = NULL;

  setenv("HCCL_TOPO_FILE", "ascend910", 1);
  double t0 = cc_now();
  rc = HcclCommInitFromEnv(&comm);
  double dt = cc_now() - t0;
  unsetenv("HCCL_TOPO_FILE");
  const char *msg = HcclGetLastErrorMessage();
  if (rank == 0) printf("  %d ranks refused on ascend910 in %.3f s: %s\n", nranks, dt, msg);
  RANK_CHECK(rc == HCCL_E_PARA, "%d ranks: init returned %d (%s), want HCCL_E_PARA", nranks, rc,
             msg);
  RANK_CHECK(comm == NULL, "comm set on failure");
  char want[64];
  snprintf(want, sizeof(want), "%d ranks on server ", nranks);
  RANK_CHECK(strstr(msg, want) && strstr(msg, "topology ascend910 allows 1, 2, 4 or 8") &&
                 strstr(msg, "HCCL_TOPO_FILE=flat8"),
             "message does not name the count, the rule and the way out: %s", msg);
  RANK_CHECK(dt < 5.0, "refusal took %.2f s", dt);
  return 0;
}

static void test_any_count_3(void **st) {
  (void)st;
  run_and_check(3, any_count_body, NULL, -1, 0);
}
static void test_any_count_6(void **st) {
  (void)st;
  run_and_check(6, any_count_body, NULL, -1, 0);
}

/* ---- bad variables ----
 * Both ranks carry the same bad setting, so each must refuse on its own. Then a correct init
 * in the same processes must still work (nothing held from the refused ones). */

static int bad_vars_body(int rank, int nranks, void *argp) {
  (void)argp;
  harness_base_env();
  setenv("HCCL_CONNECT_TIMEOUT", "5", 1);
  char rank_bad[16];
  snprintf(rank_bad, sizeof(rank_bad), "%d", nranks + rank); /* RANK >= WORLD_SIZE */
  const struct {
    const char *var, *value;
  } cases[] = {
      {"RANK", rank_bad},     {"MASTER_PORT", "abc"}, {"WORLD_SIZE", "0"},
      {"HCCL_BUFFSIZE", "0"}, {"HCCL_ALGO", "bogus"},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    const char *old = getenv(cases[k].var);
    char saved[64] = "";
    if (old) snprintf(saved, sizeof(saved), "%s", old);
    setenv(cases[k].var, cases[k].value, 1);
    HcclComm comm = NULL;
    double t0 = cc_now();
    HcclResult rc = HcclCommInitFromEnv(&comm);
    double dt = cc_now() - t0;
    const char *msg = HcclGetLastErrorMessage();
    if (rank == 0) printf("  %s=%s: %d in %.3f s: %s\n", cases[k].var, cases[k].value, rc, dt, msg);
    RANK_CHECK(rc == HCCL_E_PARA && comm == NULL, "%s=%s: init returned %d (%s), want HCCL_E_PARA",
               cases[k].var, cases[k].value, rc, msg);
    RANK_CHECK(strstr(msg, cases[k].var) && strstr(msg, cases[k].value),
               "%s=%s: the message does not name the variable and its value: %s", cases[k].var,
               cases[k].value, msg);
    RANK_CHECK(dt < 3.0, "%s=%s: refusal took %.2f s", cases[k].var, cases[k].value, dt);
    if (old)
      setenv(cases[k].var, saved, 1);
    else
      unsetenv(cases[k].var);
  }
  /* A host name that does not resolve: an error naming it, at once, not after the timeout. */
  {
    setenv("HCCL_CONNECT_TIMEOUT", "10", 1);
    setenv("MASTER_ADDR", "nosuchhost.invalid", 1);
    HcclComm comm = NULL;
    double t0 = cc_now();
    HcclResult rc = HcclCommInitFromEnv(&comm);
    double dt = cc_now() - t0;
    const char *msg = HcclGetLastErrorMessage();
    if (rank == 0) printf("  MASTER_ADDR=nosuchhost.invalid: %d in %.3f s: %s\n", rc, dt, msg);
    RANK_CHECK(rc != HCCL_SUCCESS && comm == NULL, "init with an unknown MASTER_ADDR succeeded");
    RANK_CHECK(strstr(msg, "nosuchhost.invalid"), "the message does not name the host: %s", msg);
    RANK_CHECK(dt < 5.0, "an unknown host took %.2f s to be reported", dt);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
  }
  HcclComm comm = NULL;
  setenv("HCCL_CONNECT_TIMEOUT", "20", 1);
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "a correct init after the refused ones: %d %s", rc,
             HcclGetLastErrorMessage());
  if (allreduce_works(comm, rank, nranks, 1)) return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_bad_variables(void **st) {
  (void)st;
  run_and_check(2, bad_vars_body, NULL, -1, 0);
}

/* ---- a rank that never joins ---- */

static int never_joins_body(int rank, int nranks, void *argp) {
  (void)argp;
  (void)nranks;
  if (rank == 1) { /* never calls init; leaves once rank 0 has given up */
    RANK_CHECK(wait_flag(FLAG_DONE, 20), "rank 0 never gave up");
    return 0;
  }
  harness_base_env();
  setenv("HCCL_CONNECT_TIMEOUT", "2", 1);
  HcclComm comm = NULL;
  double t0 = cc_now();
  HcclResult rc = HcclCommInitFromEnv(&comm);
  double dt = cc_now() - t0;
  const char *msg = HcclGetLastErrorMessage();
  set_flag(FLAG_DONE);
  printf("  rank 0 alone: %d after %.2f s: %s\n", rc, dt, msg);
  RANK_CHECK(rc == HCCL_E_TIMEOUT && comm == NULL, "init returned %d (%s), want HCCL_E_TIMEOUT", rc,
             msg);
  RANK_CHECK(dt >= 1.5 && dt <= 4.0, "HCCL_CONNECT_TIMEOUT=2 but init gave up after %.2f s", dt);
  RANK_CHECK(strstr(msg, "(HCCL_CONNECT_TIMEOUT)"), "the message does not name the setting: %s",
             msg);
  return 0;
}

static void test_rank_never_joins(void **st) {
  (void)st;
  run_and_check(2, never_joins_body, NULL, -1, 0);
}

/* ---- a peer killed in the middle of a collective ---- */

#define DEAD_VICTIM 2
#define DEAD_COUNT (1u << 20) /* 4 MiB of fp32 */

static int dead_peer_body(int rank, int nranks, void *argp) {
  (void)argp;
  harness_base_env();
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  float *buf = malloc(DEAD_COUNT * sizeof(float));
  for (uint32_t i = 0; i < DEAD_COUNT; i++)
    buf[i] = (float)(rank + 1);
  HcclComm comm = NULL;
  double t0 = cc_now();
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s (after %.2f s)", rc,
             HcclGetLastErrorMessage(), cc_now() - t0);
  int iters = 0;
  double tcall = 0;
  while (cc_now() - t0 < 30) {
    tcall = cc_now();
    rc = HcclAllReduce(buf, buf, DEAD_COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, comm, NULL);
    if (rc != HCCL_SUCCESS) break;
    RANK_CHECK(buf[0] == (float)nranks && buf[DEAD_COUNT - 1] == (float)nranks,
               "allreduce %d: wrong result %g", iters, buf[0]);
    iters++;
    /* The victim dies once two allreduces are done, so every other rank has finished one (a
     * kill at a fixed time came before the first 4 MiB allreduce under ASan on a loaded
     * machine); the harness's kill at 20 s is only a backstop. */
    if (rank == DEAD_VICTIM && iters == 2) raise(SIGKILL);
  }
  double fail_after = cc_now() - tcall;
  const char *msg = HcclGetLastErrorMessage();
  printf("  rank %d: %d allreduces, then %d (%s) %.2f s into the call, %.2f s after start: %s\n",
         rank, iters, rc, HcclGetErrorString(rc), fail_after, cc_now() - t0, msg);
  RANK_CHECK(iters > 0, "no allreduce finished before the kill");
  RANK_CHECK(rc != HCCL_SUCCESS, "the collectives kept succeeding for 30 s after rank %d died",
             DEAD_VICTIM);
  RANK_CHECK(fail_after < 10.0, "the failure took %.2f s to appear (exec timeout 60 s)",
             fail_after);
  RANK_CHECK(cc_msg_names_rank(msg, DEAD_VICTIM), "the message does not name rank %d: %s",
             DEAD_VICTIM, msg);
  /* The communicator stays failed: the next call is refused at once, it does not hang. */
  double tn = cc_now();
  HcclResult rc2 = HcclAllReduce(buf, buf, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
  RANK_CHECK(rc2 != HCCL_SUCCESS && cc_now() - tn < 2.0,
             "a call on the failed communicator returned %d after %.2f s", rc2, cc_now() - tn);
  double td = cc_now();
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy after failure");
  RANK_CHECK(cc_now() - td < 5.0, "destroy took %.2f s", cc_now() - td);
  free(buf);
  return 0;
}

static void test_dead_peer(void **st) {
  (void)st;
  run_and_check(4, dead_peer_body, NULL, DEAD_VICTIM, 20000);
}

/* ---- a peer that skips a collective ----
 * Blocking, and queued (the timeout then reaches the thread that waits on the request, with
 * its message). In the third form rank 1 makes the call late, after rank 0 has given up: it
 * must fail too (rank 0 left the collective half done), neither hang nor succeed. */

struct missing_arg {
  int queued;    /* rank 0 queues its call and waits on the request */
  int late_call; /* rank 1 makes the call after rank 0 has given up */
};

static int missing_peer_body(int rank, int nranks, void *argp) {
  const struct missing_arg *arg = argp;
  harness_base_env();
  setenv("HCCL_EXEC_TIMEOUT", "2", 1);
  HcclComm comm = NULL;
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  if (allreduce_works(comm, rank, nranks, 2)) return 1;
  if (rank == 1) { /* skips the next allreduce, leaves once rank 0 has given up */
    RANK_CHECK(wait_flag(FLAG_DONE, 20), "rank 0 never gave up");
    if (arg->late_call) {
      int32_t y[64];
      for (int i = 0; i < 64; i++)
        y[i] = 1000 + i;
      double ty = cc_now();
      rc = HcclAllReduce(y, y, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
      double dy = cc_now() - ty;
      printf("  rank 1 calling late: %d after %.2f s (y[0] = %d, y[63] = %d): %s\n", rc, dy, y[0],
             y[63], rc ? HcclGetLastErrorMessage() : "");
      RANK_CHECK(rc != HCCL_SUCCESS,
                 "rank 1's allreduce after rank 0 had given up on it succeeded (y[0] = %d): it "
                 "completed with the data rank 0 left behind",
                 y[0]);
      RANK_CHECK(dy < 4.0, "rank 1's late allreduce took %.2f s to fail", dy);
      RANK_CHECK(cc_msg_names_rank(HcclGetLastErrorMessage(), 0),
                 "the message does not name rank 0: %s", HcclGetLastErrorMessage());
    }
    double td = cc_now();
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
    RANK_CHECK(cc_now() - td < 5.0, "destroy took %.2f s", cc_now() - td);
    return 0;
  }
  int32_t x[64];
  for (int i = 0; i < 64; i++)
    x[i] = 1 + i;
  double t0 = cc_now();
  if (arg->queued) {
    HcclRequest req = NULL;
    rc = HcclAllReduce(x, x, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, &req);
    RANK_CHECK(rc == HCCL_SUCCESS && req, "queueing: %d", rc);
    rc = HcclRequestWait(req);
  } else {
    rc = HcclAllReduce(x, x, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
  }
  double dt = cc_now() - t0;
  const char *msg = HcclGetLastErrorMessage();
  set_flag(FLAG_DONE);
  printf("  rank 0 without rank 1 (%s): %d after %.2f s: %s\n", arg->queued ? "queued" : "blocking",
         rc, dt, msg);
  RANK_CHECK(rc == HCCL_E_TIMEOUT, "allreduce returned %d (%s), want HCCL_E_TIMEOUT", rc, msg);
  RANK_CHECK(dt >= 1.5 && dt <= 5.0, "HCCL_EXEC_TIMEOUT=2 but the allreduce gave up after %.2f s",
             dt);
  RANK_CHECK(cc_msg_names_rank(msg, 1), "the message does not name rank 1: %s", msg);
  RANK_CHECK(strstr(msg, "allreduce timed out after 2 s waiting for rank 1 (HCCL_EXEC_TIMEOUT); "),
             "the message does not name the setting: %s", msg);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy after timeout");
  return 0;
}

/* A config's timeout is named as its caller says the user set it, else as the field. */
static void test_timeout_source(void **st) {
  (void)st;
  struct hccl_settings s;
  memset(&s, 0, sizeof(s));
  snprintf(s.exec_timeout_src, sizeof(s.exec_timeout_src), "HCCL_EXEC_TIMEOUT");
  snprintf(s.connect_timeout_src, sizeof(s.connect_timeout_src), "HCCL_CONNECT_TIMEOUT");
  HcclCommConfig cf;
  HcclCommConfigInit(&cf);
  assert_int_equal(hccl__comm_config_apply(&cf, &s), HCCL_SUCCESS);
  assert_string_equal(s.exec_timeout_src, "HCCL_EXEC_TIMEOUT"); /* no timeout set: unchanged */
  cf.execTimeoutMs = 3000;
  assert_int_equal(hccl__comm_config_apply(&cf, &s), HCCL_SUCCESS);
  assert_string_equal(s.exec_timeout_src, "HcclCommConfig.execTimeoutMs");
  snprintf(cf.timeoutSource, sizeof(cf.timeoutSource), "timeout= of init_process_group");
  assert_int_equal(hccl__comm_config_apply(&cf, &s), HCCL_SUCCESS);
  assert_string_equal(s.exec_timeout_src, "timeout= of init_process_group");
  assert_int_equal(s.exec_timeout_ms, 3000);
  assert_string_equal(s.connect_timeout_src, "HCCL_CONNECT_TIMEOUT"); /* not set: unchanged */
  cf.connectTimeoutMs = 4000;
  assert_int_equal(hccl__comm_config_apply(&cf, &s), HCCL_SUCCESS);
  assert_string_equal(s.connect_timeout_src, "timeout= of init_process_group");
  assert_int_equal(s.connect_timeout_ms, 4000);
  cf.timeoutSource[0] = 0;
  assert_int_equal(hccl__comm_config_apply(&cf, &s), HCCL_SUCCESS);
  assert_string_equal(s.connect_timeout_src, "HcclCommConfig.connectTimeoutMs");
  /* Not NUL-terminated: the first 63 bytes. */
  memset(cf.timeoutSource, 'x', sizeof(cf.timeoutSource));
  assert_int_equal(hccl__comm_config_apply(&cf, &s), HCCL_SUCCESS);
  assert_int_equal(strlen(s.exec_timeout_src), sizeof(s.exec_timeout_src) - 1);
  assert_int_equal(strlen(s.connect_timeout_src), sizeof(s.connect_timeout_src) - 1);
}

static void test_missing_peer(void **st) {
  (void)st;
  struct missing_arg a = {.queued = 0};
  run_and_check(2, missing_peer_body, &a, -1, 0);
}

static void test_missing_peer_queued(void **st) {
  (void)st;
  struct missing_arg a = {.queued = 1};
  run_and_check(2, missing_peer_body, &a, -1, 0);
}

static void test_late_peer_after_timeout(void **st) {
  (void)st;
  struct missing_arg a = {.late_call = 1};
  run_and_check(2, missing_peer_body, &a, -1, 0);
}

/* ---- a peer that destroys its communicator instead of joining a collective ----
 * Rank 0 must hear of it long before HCCL_EXEC_TIMEOUT (30 s), with rank 1 named. */

static int peer_destroys_body(int rank, int nranks, void *argp) {
  (void)argp;
  harness_base_env();
  HcclComm comm = NULL;
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  if (allreduce_works(comm, rank, nranks, 5)) return 1;
  if (rank == 1) {
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
    RANK_CHECK(wait_flag(FLAG_DONE, 40), "rank 0 never gave up"); /* stay alive meanwhile */
    return 0;
  }
  int32_t x[4096] = {0};
  double t0 = cc_now();
  rc = HcclAllReduce(x, x, 4096, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL);
  double dt = cc_now() - t0;
  const char *msg = HcclGetLastErrorMessage();
  set_flag(FLAG_DONE);
  printf("  rank 0 after rank 1 destroyed: %d after %.2f s: %s\n", rc, dt, msg);
  RANK_CHECK(rc != HCCL_SUCCESS, "allreduce with a destroyed peer succeeded");
  RANK_CHECK(dt < 5.0, "it took %.2f s to notice (HCCL_EXEC_TIMEOUT=30)", dt);
  RANK_CHECK(cc_msg_names_rank(msg, 1), "the message does not name rank 1: %s", msg);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_peer_destroys(void **st) {
  (void)st;
  run_and_check(2, peer_destroys_body, NULL, -1, 0);
}

/* ---- bad arguments ----
 * Every rank makes the same bad calls; they fail locally and leave the communicator usable. */

static int expect_rc(HcclResult got, HcclResult want, const char *what, const char *must_name) {
  const char *msg = HcclGetLastErrorMessage();
  RANK_CHECK(got == want, "%s: returned %d (%s), want %d: %s", what, got, HcclGetErrorString(got),
             want, msg);
  RANK_CHECK(!must_name || strstr(msg, must_name), "%s: the message does not name '%s': %s", what,
             must_name, msg);
  return 0;
}

static int bad_args_body(int rank, int nranks, void *argp) {
  (void)argp;
  harness_base_env();
  HcclComm comm = NULL;
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  int64_t a[8] = {0}, b[8 * 8] = {0};
  const HcclDataType I32 = HCCL_DATA_TYPE_INT32;
  const HcclReduceOp SUM = HCCL_REDUCE_SUM;
  HcclRequest req = NULL;
  int bad = 0;
  /* NULL buffers with count > 0 */
  bad |= expect_rc(HcclAllReduce(NULL, a, 4, I32, SUM, comm, NULL), HCCL_E_PTR,
                   "allreduce NULL send", NULL);
  bad |= expect_rc(HcclAllReduce(a, NULL, 4, I32, SUM, comm, &req), HCCL_E_PTR,
                   "allreduce NULL recv (queued)", NULL);
  RANK_CHECK(req == NULL, "a failed call set its request");
  bad |= expect_rc(HcclBroadcast(NULL, 4, I32, 0, comm, NULL), HCCL_E_PTR, "broadcast NULL", NULL);
  bad |= expect_rc(HcclAllGather(NULL, b, 4, I32, comm, NULL), HCCL_E_PTR, "allgather NULL send",
                   NULL);
  bad |= expect_rc(HcclAllGather(a, NULL, 4, I32, comm, NULL), HCCL_E_PTR, "allgather NULL recv",
                   NULL);
  bad |= expect_rc(HcclReduceScatter(NULL, a, 4, I32, SUM, comm, NULL), HCCL_E_PTR,
                   "reduce-scatter NULL send", NULL);
  bad |= expect_rc(HcclReduceScatter(b, NULL, 4, I32, SUM, comm, NULL), HCCL_E_PTR,
                   "reduce-scatter NULL recv", NULL);
  bad |= expect_rc(HcclReduce(NULL, a, 4, I32, SUM, 0, comm, NULL), HCCL_E_PTR, "reduce NULL send",
                   NULL);
  /* root out of range */
  char root_s[16];
  snprintf(root_s, sizeof(root_s), "%d", nranks);
  bad |= expect_rc(HcclBroadcast(a, 4, I32, (uint32_t)nranks, comm, NULL), HCCL_E_PARA,
                   "broadcast root == nranks", root_s);
  bad |=
      expect_rc(HcclReduce(a, b, 4, I32, SUM, 77, comm, NULL), HCCL_E_PARA, "reduce root 77", "77");
  /* a bitwise reduction of a float type is refused, the message naming the op and the type */
  rc = HcclReduce(a, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_BAND, 0, comm, NULL);
  RANK_CHECK(rc == HCCL_E_NOT_SUPPORT, "reduce fp32 band: %d", rc);
  RANK_CHECK(strstr(HcclGetLastErrorMessage(), "band") &&
                 strstr(HcclGetLastErrorMessage(), "float"),
             "reduce fp32 band: message: %s", HcclGetLastErrorMessage());
  rc = HcclAllReduce(a, b, 2, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_BXOR, comm, NULL);
  RANK_CHECK(rc == HCCL_E_NOT_SUPPORT, "allreduce fp64 bxor: %d", rc);
  /* premul sum ops: made per communicator, for one type; anything else is refused by name */
  HcclReduceOp pm;
  float half_f = 0.5f;
  RANK_CHECK(HcclRedOpCreatePreMulSum(&pm, &half_f, HCCL_DATA_TYPE_FP32, HCCL_SCALAR_HOST_IMMEDIATE,
                                      comm) == HCCL_SUCCESS,
             "premul create: %s", HcclGetLastErrorMessage());
  rc = HcclAllReduce(a, b, 4, I32, pm, comm, NULL);
  RANK_CHECK(rc == HCCL_E_PARA && strstr(HcclGetLastErrorMessage(), "made for data type float"),
             "premul op on int32: %d %s", rc, HcclGetLastErrorMessage());
  RANK_CHECK(HcclRedOpDestroy(pm, comm) == HCCL_SUCCESS, "premul destroy");
  rc = HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, pm, comm, NULL);
  RANK_CHECK(rc == HCCL_E_PARA && strstr(HcclGetLastErrorMessage(), "not valid"),
             "destroyed premul op: %d %s", rc, HcclGetLastErrorMessage());
  RANK_CHECK(HcclRedOpDestroy(HCCL_REDUCE_SUM, comm) == HCCL_E_PARA, "destroy of sum");
  RANK_CHECK(HcclRedOpCreatePreMulSum(&pm, &half_f, HCCL_DATA_TYPE_FP32, (HcclScalarResidence)7,
                                      comm) == HCCL_E_PARA,
             "residence 7");
  rc = HcclAllReduce(a, b, 4, I32, HCCL_REDUCE_RESERVED, comm, NULL);
  RANK_CHECK(rc == HCCL_E_NOT_SUPPORT || rc == HCCL_E_PARA, "allreduce bad op: %d", rc);
  rc = HcclBroadcast(a, 4, HCCL_DATA_TYPE_RESERVED, 0, comm, NULL);
  RANK_CHECK(rc == HCCL_E_NOT_SUPPORT || rc == HCCL_E_PARA, "broadcast bad dtype: %d", rc);
  /* NULL communicator and NULL outputs */
  bad |= expect_rc(HcclAllReduce(a, a, 4, I32, SUM, NULL, NULL), HCCL_E_PTR, "allreduce NULL comm",
                   NULL);
  bad |=
      expect_rc(HcclBroadcast(a, 4, I32, 0, NULL, NULL), HCCL_E_PTR, "broadcast NULL comm", NULL);
  bad |= expect_rc(HcclBarrier(NULL, NULL), HCCL_E_PTR, "barrier NULL comm", NULL);
  uint32_t v;
  bad |= expect_rc(HcclGetRankSize(NULL, &v), HCCL_E_PTR, "size of NULL comm", NULL);
  bad |= expect_rc(HcclGetRankId(comm, NULL), HCCL_E_PTR, "rank into NULL", NULL);
  bad |= expect_rc(HcclCommInitFromEnv(NULL), HCCL_E_PTR, "init into NULL", NULL);
  bad |= expect_rc(HcclCommDestroy(NULL), HCCL_SUCCESS, "destroy NULL", NULL);
  RANK_CHECK(HcclGetErrorString(HCCL_E_PTR) && HcclGetErrorString((HcclResult)999),
             "HcclGetErrorString returned NULL");
  RANK_CHECK(bad == 0, "some bad arguments were not refused as expected");

  /* Still usable, and count 0 is a no-op that returns at once. */
  if (allreduce_works(comm, rank, nranks, 9)) return 1;
  RANK_CHECK(HcclAllReduce(a, b, 0, I32, SUM, comm, NULL) == HCCL_SUCCESS, "count 0");
  if (allreduce_works(comm, rank, nranks, 10)) return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_bad_arguments(void **st) {
  (void)st;
  run_and_check(2, bad_args_body, NULL, -1, 0);
}

/* ---- init + destroy, 20 times ---- */

#define REPEATS 20

static int repeat_body(int rank, int nranks, void *argp) {
  (void)argp;
  harness_base_env();
  setenv("HCCL_CONNECT_TIMEOUT", "20", 1);
  double t0 = cc_now();
  for (int k = 0; k < REPEATS; k++) {
    HcclComm comm = NULL;
    HcclResult rc = HcclCommInitFromEnv(&comm);
    RANK_CHECK(rc == HCCL_SUCCESS, "init %d: %d %s", k, rc, HcclGetLastErrorMessage());
    if (allreduce_works(comm, rank, nranks, k)) return 1;
    rc = HcclBarrier(comm, NULL);
    RANK_CHECK(rc == HCCL_SUCCESS, "barrier %d: %d %s", k, rc, HcclGetLastErrorMessage());
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy %d", k);
  }
  if (rank == 0)
    printf("  %d x (init, allreduce, barrier, destroy): %.2f s\n", REPEATS, cc_now() - t0);
  return 0;
}

static void test_init_destroy_repeated(void **st) {
  (void)st;
  run_and_check(4, repeat_body, NULL, -1, 0);
}

int main(void) {
  g_shared = mmap(NULL, SHARED_INTS * sizeof(int), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_shared == MAP_FAILED) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_env_1),
      cmocka_unit_test(test_init_env_2),
      cmocka_unit_test(test_init_env_4),
      cmocka_unit_test(test_init_env_8),
      cmocka_unit_test(test_init_no_variables),
      cmocka_unit_test(test_init_rank_id),
      cmocka_unit_test(test_two_communicators),
      cmocka_unit_test(test_init_root_info),
      cmocka_unit_test(test_any_count_3),
      cmocka_unit_test(test_any_count_6),
      cmocka_unit_test(test_bad_variables),
      cmocka_unit_test(test_rank_never_joins),
      cmocka_unit_test(test_dead_peer),
      cmocka_unit_test(test_timeout_source), cmocka_unit_test(test_missing_peer),
      cmocka_unit_test(test_missing_peer_queued),
      cmocka_unit_test(test_late_peer_after_timeout),
      cmocka_unit_test(test_peer_destroys),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_init_destroy_repeated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
