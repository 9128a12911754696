/*
 * test_tcp.c - the TCP transport (hccl/src/transport/tcp/) between "servers" made of network
 * namespaces. The test makes two, hcclt<pid>a and hcclt<pid>b, joined by a veth pair with
 * 10.231.<x>.1 and .2 (and fd00:231::1 and ::2), and forks ranks that enter one (setns) before
 * they make their communicator: their server identities differ, so every link between the two
 * is TCP. Rank 0 serves the bootstrap store on its namespace's veth address. No packet goes
 * anywhere but inside those namespaces.
 *
 * Covered: every collective and send/recv at 2 servers x 1 and x 2 ranks, counts 0, 1, 7 and
 * 1 Mi + 3, in place and not, checked exactly against a local reference, with every buffer
 * scribbled over the moment the call returns (no byte may be read after it); the same under
 * injected 1-byte writes, short reads, EINTR and EAGAIN (the system-call table of tcp_sys.h); an
 * injected reset and a killed rank (every rank fails within seconds, the other server's naming
 * the dead rank); no byte of a failed call's buffer sent after the call returned (a stopped
 * peer, then let go), nor written by a receive in place after it failed (an abort while 64 MiB
 * are in flight); hellos of another job and of no job refused at the listener while the job
 * completes; HCCL_SOCKET_IFNAME's syntax. Each run of ranks is capped (harness deadline). The
 * namespaces are removed at the end, after a failure too (and stale ones of a killed run at the
 * next start); without the right to make them the multi-server tests skip, saying why.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* Ranks end with _exit (harness.c), which skips LeakSanitizer's exit check: run it here. */
#define LEAK_CHECK() RANK_CHECK(__lsan_do_recoverable_leak_check() == 0, "memory leaked (above)")
#else
#define LEAK_CHECK() ((void)0)
#endif

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"
#include "comm.h"
#include "settings.h"
#include "tcp.h"
#include "tcp_sys.h"

#define RUN_TIMEOUT_S 120
#define BIG_COUNT ((1u << 20) + 3)

/* ---- the two servers ---- */

static int g_netns_ok;
static char g_netns_why[256];
static char g_ns[2][32], g_veth[2][16], g_addr[2][32], g_addr6[2][48];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  int rc = system(cmd);
  return rc == 0 ? 0 : -1;
}

static void netns_remove(void) {
  for (int s = 0; s < 2; s++)
    if (g_ns[s][0]) sh("ip netns del %s 2>/dev/null", g_ns[s]);
}

/* Namespaces of an earlier run that was killed before its teardown. */
static void netns_remove_stale(void) {
  DIR *d = opendir("/var/run/netns");
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "hcclt", 5) != 0) continue;
    long pid = strtol(e->d_name + 5, NULL, 10);
    if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
      sh("ip netns del %s 2>/dev/null", e->d_name);
  }
  closedir(d);
}

static int group_setup(void **state) {
  (void)state;
  int pid = (int)getpid(), x = pid % 250 + 1;
  netns_remove_stale();
  for (int s = 0; s < 2; s++) {
    snprintf(g_ns[s], sizeof(g_ns[s]), "hcclt%d%c", pid, 'a' + s);
    snprintf(g_veth[s], sizeof(g_veth[s]), "hct%d%c", pid, 'a' + s);
    snprintf(g_addr[s], sizeof(g_addr[s]), "10.231.%d.%d", x, s + 1);
    snprintf(g_addr6[s], sizeof(g_addr6[s]), "fd00:231::%d", s + 1);
  }
  if (sh("ip netns add %s 2>/dev/null", g_ns[0]) != 0) {
    g_ns[0][0] = '\0';
    snprintf(g_netns_why, sizeof(g_netns_why),
             "'ip netns add' failed: making network namespaces needs root (CAP_SYS_ADMIN) and "
             "iproute2");
    return 0;
  }
  atexit(netns_remove);
  if (sh("ip netns add %s", g_ns[1]) != 0 ||
      sh("ip -n %s link add %s type veth peer name %s netns %s", g_ns[0], g_veth[0], g_veth[1],
         g_ns[1]) != 0) {
    snprintf(g_netns_why, sizeof(g_netns_why), "cannot make a veth pair between namespaces");
    return 0;
  }
  for (int s = 0; s < 2; s++)
    if (sh("ip -n %s addr add %s/24 dev %s", g_ns[s], g_addr[s], g_veth[s]) != 0 ||
        sh("ip -n %s addr add %s/64 dev %s nodad", g_ns[s], g_addr6[s], g_veth[s]) != 0 ||
        sh("ip -n %s link set %s up", g_ns[s], g_veth[s]) != 0 ||
        sh("ip -n %s link set lo up", g_ns[s]) != 0) {
      snprintf(g_netns_why, sizeof(g_netns_why), "cannot configure namespace %s", g_ns[s]);
      return 0;
    }
  g_netns_ok = 1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  netns_remove();
  g_ns[0][0] = g_ns[1][0] = '\0';
  return 0;
}

#define NEED_NETNS()                                                                               \
  do {                                                                                             \
    if (!g_netns_ok) {                                                                             \
      printf("  skipped: %s\n", g_netns_why);                                                      \
      skip();                                                                                      \
    }                                                                                              \
  } while (0)

/* Shared between the ranks of one run (MAP_SHARED before fork). */
struct shared {
  _Atomic int64_t inject_ns; /* when a fault was injected (CLOCK_MONOTONIC), 0 = not yet */
  _Atomic int root_ready;
  HcclRootInfo root;
  _Atomic int stopped_pid; /* test_no_read_after_failure: rank 1, stopped */
};
static struct shared *g_sh;

struct job {
  int per;        /* ranks per server */
  int ipv6;       /* HCCL_IF_IP = this server's IPv6 address */
  int root_info;  /* HcclCommInitRootInfo instead of the launcher's variables */
  int faults;     /* short writes, short reads, EINTR, EAGAIN */
  int reset_rank; /* this rank injects a reset, -1 none */
  int kill_rank;  /* this rank kills itself mid-call, -1 none */
  int probe_rank; /* this rank's listener gets foreign hellos, -1 none */
};

/* Puts this process on server rank / per: its namespace, its launcher's variables. */
static int enter_server(int rank, const struct job *j) {
  int s = rank / j->per;
  char path[96], buf[16];
  snprintf(path, sizeof(path), "/var/run/netns/%s", g_ns[s]);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  RANK_CHECK(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "setns %s: %s", path, strerror(errno));
  close(fd);
  setenv("MASTER_ADDR", g_addr[0], 1);
  snprintf(buf, sizeof(buf), "%d", rank % j->per);
  setenv("LOCAL_RANK", buf, 1);
  snprintf(buf, sizeof(buf), "%d", j->per);
  setenv("LOCAL_WORLD_SIZE", buf, 1);
  setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
  setenv("HCCL_EXEC_TIMEOUT", "30", 1);
  unsetenv("HCCL_IF_IP");
  unsetenv("HCCL_SOCKET_IFNAME");
  unsetenv("HCCL_BUFFSIZE");
  unsetenv("HCCL_ALGO");
  if (j->ipv6) setenv("HCCL_IF_IP", g_addr6[s], 1);
  return 0;
}

static int make_comm(int rank, int nranks, const struct job *j, HcclComm *comm) {
  HcclResult rc;
  if (j->root_info) {
    if (rank == 0) {
      setenv("HCCL_IF_IP", g_addr[0], 1); /* the store's address, and rank 0's listener */
      rc = HcclGetRootInfo(&g_sh->root);
      RANK_CHECK(rc == HCCL_SUCCESS, "root info: %d %s", rc, HcclGetLastErrorMessage());
      atomic_store(&g_sh->root_ready, 1);
    }
    double t0 = cc_now();
    while (!atomic_load(&g_sh->root_ready) && cc_now() - t0 < 30)
      usleep(2000);
    HcclRootInfo info = g_sh->root;
    rc = HcclCommInitRootInfo((uint32_t)nranks, &info, (uint32_t)rank, comm);
  } else {
    rc = HcclCommInitFromEnv(comm);
  }
  RANK_CHECK(rc == HCCL_SUCCESS && *comm, "init: %d %s", rc, HcclGetLastErrorMessage());
  uint32_t v = 0;
  RANK_CHECK(HcclGetLocalRankSize(*comm, &v) == HCCL_SUCCESS && v == (uint32_t)j->per,
             "%u ranks on this server, expected %d: the namespaces did not make servers", v,
             j->per);
  return 0;
}

/* ---- the collectives, checked exactly ---- */

#define CHECK_EQ(got, want, dt, count, ...)                                                        \
  do {                                                                                             \
    int64_t bad_ = cc_first_mismatch(got, want, dt, count);                                        \
    char g_[64], w_[64];                                                                           \
    RANK_CHECK(bad_ < 0, "%s: element %lld is %s, expected %s", __VA_ARGS__, (long long)bad_,      \
               bad_ >= 0 ? cc_elem_str(dt, got, (uint64_t)bad_, g_, sizeof(g_)) : "",              \
               bad_ >= 0 ? cc_elem_str(dt, want, (uint64_t)bad_, w_, sizeof(w_)) : "");            \
  } while (0)

#define OK(call, what)                                                                             \
  do {                                                                                             \
    HcclResult rc_ = (call);                                                                       \
    RANK_CHECK(rc_ == HCCL_SUCCESS, "%s: %d %s", what, rc_, HcclGetLastErrorMessage());            \
  } while (0)

/* Right after a call returns, as a training loop reuses its buffers: keeps what the call wrote
 * to out (bytes) and scribbles over out and over `in` (in_bytes; NULL: none). A rank whose
 * transport still read either after the call returned (a message sent by reference and not
 * flushed, prims.h) hands its peers the scribble, and their checks fail. Returns the copy. */
static void *take_and_scribble(void *out, size_t bytes, void *in, size_t in_bytes) {
  void *got = malloc(bytes + 1);
  if (bytes) memcpy(got, out, bytes);
  memset(out, 0x5a, bytes);
  if (in) memset(in, 0x5a, in_bytes);
  return got;
}

static int check_allreduce(HcclComm comm, int rank, int n, HcclDataType dt, HcclReduceOp op,
                           uint64_t count, int inplace, uint32_t salt) {
  size_t es = cc_dtype_size(dt), bytes = count * es;
  cc_buf in, out;
  cc_buf_alloc(&in, bytes);
  cc_buf_alloc(&out, bytes);
  void *want = malloc(bytes + 1);
  cc_fill_input(in.p, dt, op, salt, rank, 0, count);
  cc_reduce_expect(want, dt, op, salt, n, 0, count);
  void *recv = inplace ? in.p : out.p;
  char what[96];
  snprintf(what, sizeof(what), "allreduce %s %s of %llu%s", cc_dtype_name(dt), cc_op_name(op),
           (unsigned long long)count, inplace ? " in place" : "");
  OK(HcclAllReduce(in.p, recv, count, dt, op, comm, NULL), what);
  void *got = take_and_scribble(recv, bytes, in.p, bytes);
  CHECK_EQ(got, want, dt, count, what);
  free(got);
  RANK_CHECK(!cc_buf_guard_damage(&in) && !cc_buf_guard_damage(&out), "%s: guard bytes", what);
  free(want);
  cc_buf_free(&in);
  cc_buf_free(&out);
  return 0;
}

static int check_broadcast(HcclComm comm, int rank, int n, uint64_t count, uint32_t salt) {
  const HcclDataType dt = HCCL_DATA_TYPE_INT32;
  uint32_t root = (uint32_t)(count % (uint64_t)n);
  cc_buf b;
  cc_buf_alloc(&b, count * 4);
  int32_t *want = malloc(count * 4 + 1);
  cc_fill_input(want, dt, HCCL_REDUCE_SUM, salt, (int)root, 0, count);
  if ((uint32_t)rank == root) memcpy(b.p, want, count * 4);
  char what[64];
  snprintf(what, sizeof(what), "broadcast of %llu from %u", (unsigned long long)count, root);
  OK(HcclBroadcast(b.p, count, dt, root, comm, NULL), what);
  void *got = take_and_scribble(b.p, count * 4, NULL, 0);
  CHECK_EQ(got, want, dt, count, what);
  free(got);
  RANK_CHECK(!cc_buf_guard_damage(&b), "%s: guard bytes", what);
  free(want);
  cc_buf_free(&b);
  return 0;
}

static int check_allgather(HcclComm comm, int rank, int n, uint64_t count, int inplace,
                           uint32_t salt) {
  const HcclDataType dt = HCCL_DATA_TYPE_INT32;
  cc_buf in, out;
  cc_buf_alloc(&in, count * 4);
  cc_buf_alloc(&out, count * 4 * (size_t)n);
  int32_t *want = malloc(count * 4 * (size_t)n + 1);
  for (int r = 0; r < n; r++)
    cc_fill_input(want + (size_t)r * count, dt, HCCL_REDUCE_SUM, salt, r, 0, count);
  void *send = inplace ? out.p + (size_t)rank * count * 4 : in.p;
  memcpy(send, want + (size_t)rank * count, count * 4);
  char what[64];
  snprintf(what, sizeof(what), "allgather of %llu%s", (unsigned long long)count,
           inplace ? " in place" : "");
  OK(HcclAllGather(send, out.p, count, dt, comm, NULL), what);
  void *got = take_and_scribble(out.p, count * 4 * (size_t)n, in.p, count * 4);
  CHECK_EQ(got, want, dt, count * (uint64_t)n, what);
  free(got);
  RANK_CHECK(!cc_buf_guard_damage(&in) && !cc_buf_guard_damage(&out), "%s: guard bytes", what);
  free(want);
  cc_buf_free(&in);
  cc_buf_free(&out);
  return 0;
}

static int check_reduce_scatter(HcclComm comm, int rank, int n, uint64_t count, int inplace,
                                uint32_t salt) {
  const HcclDataType dt = HCCL_DATA_TYPE_FP32;
  const HcclReduceOp op = HCCL_REDUCE_SUM;
  cc_buf in, out;
  cc_buf_alloc(&in, count * 4 * (size_t)n);
  cc_buf_alloc(&out, count * 4);
  float *want = malloc(count * 4 + 1);
  cc_fill_input(in.p, dt, op, salt, rank, 0, count * (uint64_t)n);
  cc_reduce_expect(want, dt, op, salt, n, (uint64_t)rank * count, count);
  void *recv = inplace ? in.p + (size_t)rank * count * 4 : out.p;
  char what[64];
  snprintf(what, sizeof(what), "reduce-scatter of %llu%s", (unsigned long long)count,
           inplace ? " in place" : "");
  OK(HcclReduceScatter(in.p, recv, count, dt, op, comm, NULL), what);
  void *got = take_and_scribble(recv, count * 4, in.p, count * 4 * (size_t)n);
  CHECK_EQ(got, want, dt, count, what);
  free(got);
  RANK_CHECK(!cc_buf_guard_damage(&in) && !cc_buf_guard_damage(&out), "%s: guard bytes", what);
  free(want);
  cc_buf_free(&in);
  cc_buf_free(&out);
  return 0;
}

static int check_reduce(HcclComm comm, int rank, int n, uint64_t count, int inplace,
                        uint32_t salt) {
  const HcclDataType dt = HCCL_DATA_TYPE_INT32;
  const HcclReduceOp op = HCCL_REDUCE_SUM;
  uint32_t root = (uint32_t)(n - 1 - (int)(count % (uint64_t)n));
  cc_buf in, out;
  cc_buf_alloc(&in, count * 4);
  cc_buf_alloc(&out, count * 4);
  int32_t *want = malloc(count * 4 + 1);
  cc_fill_input(in.p, dt, op, salt, rank, 0, count);
  cc_reduce_expect(want, dt, op, salt, n, 0, count);
  void *recv = inplace ? in.p : out.p;
  char what[64];
  snprintf(what, sizeof(what), "reduce of %llu to %u%s", (unsigned long long)count, root,
           inplace ? " in place" : "");
  OK(HcclReduce(in.p, recv, count, dt, op, root, comm, NULL), what);
  if ((uint32_t)rank == root) CHECK_EQ(recv, want, dt, count, what);
  RANK_CHECK(!cc_buf_guard_damage(&in) && !cc_buf_guard_damage(&out), "%s: guard bytes", what);
  free(want);
  cc_buf_free(&in);
  cc_buf_free(&out);
  return 0;
}

/* Each rank sends to the next and receives from the previous (both servers' pairs). */
static int check_sendrecv(HcclComm comm, int rank, int n, uint64_t count, uint32_t salt) {
  const HcclDataType dt = HCCL_DATA_TYPE_INT32;
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  cc_buf in, out;
  cc_buf_alloc(&in, count * 4);
  cc_buf_alloc(&out, count * 4);
  int32_t *want = malloc(count * 4 + 1);
  cc_fill_input(in.p, dt, HCCL_REDUCE_SUM, salt, rank, 0, count);
  cc_fill_input(want, dt, HCCL_REDUCE_SUM, salt, prev, 0, count);
  char what[64];
  snprintf(what, sizeof(what), "send/recv of %llu", (unsigned long long)count);
  HcclRequest req = NULL;
  OK(HcclSend(in.p, count, dt, (uint32_t)next, comm, &req), what);
  OK(HcclRecv(out.p, count, dt, (uint32_t)prev, comm, NULL), what);
  OK(HcclRequestWait(req), what);
  /* The send went by reference: once it completes, its buffer is the caller's again. */
  if (count) memset(in.p, 0x5a, count * 4);
  CHECK_EQ(out.p, want, dt, count, what);
  RANK_CHECK(!cc_buf_guard_damage(&in) && !cc_buf_guard_damage(&out), "%s: guard bytes", what);
  free(want);
  cc_buf_free(&in);
  cc_buf_free(&out);
  return 0;
}

static int run_suite(HcclComm comm, int rank, int n) {
  static const uint64_t counts[] = {0, 1, 7, BIG_COUNT};
  uint32_t salt = 100;
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    uint64_t k = counts[c];
    for (int inplace = 0; inplace < 2; inplace++) {
      salt++;
      if (check_allreduce(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, k, inplace, salt) ||
          check_allreduce(comm, rank, n, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, k, inplace, salt) ||
          check_allgather(comm, rank, n, k, inplace, salt) ||
          check_reduce_scatter(comm, rank, n, k, inplace, salt) ||
          check_reduce(comm, rank, n, k, inplace, salt))
        return 1;
    }
    if (check_broadcast(comm, rank, n, k, salt) || check_sendrecv(comm, rank, n, k, salt)) return 1;
    OK(HcclBarrier(comm, NULL), "barrier");
  }
  return 0;
}

/* ---- injected faults (hccl__tcp_sys) ---- */

static _Atomic long g_nsend, g_nrecv, g_nconnect, g_naccept;

/* 1 byte per call for the first 4000 calls, then every 5th call short; every 11th EAGAIN. */
static ssize_t fault_sendmsg(int fd, const struct msghdr *m, int flags) {
  long k = atomic_fetch_add(&g_nsend, 1);
  if (k % 11 == 5) {
    errno = EAGAIN;
    return -1;
  }
  size_t limit = k < 4000 ? 1 : k % 5 == 0 ? (size_t)(k % 997) + 1 : 0;
  for (size_t i = 0; limit && i < m->msg_iovlen; i++)
    if (m->msg_iov[i].iov_len > 0) {
      struct iovec v = {m->msg_iov[i].iov_base,
                        m->msg_iov[i].iov_len < limit ? m->msg_iov[i].iov_len : limit};
      struct msghdr one = {.msg_iov = &v, .msg_iovlen = 1};
      return hccl__tcp_sys_default.sendmsg(fd, &one, flags);
    }
  return hccl__tcp_sys_default.sendmsg(fd, m, flags);
}

/* Every 3rd call EINTR; every 7th at most 13 bytes. */
static ssize_t fault_recv(int fd, void *buf, size_t len, int flags) {
  long k = atomic_fetch_add(&g_nrecv, 1);
  if (k % 3 == 1) {
    errno = EINTR;
    return -1;
  }
  if (k % 7 == 2 && len > 13) len = (size_t)(k % 13) + 1;
  return hccl__tcp_sys_default.recv(fd, buf, len, flags);
}

/* The first connect is "interrupted" after it started, as a signal would. */
static int fault_connect(int fd, const struct sockaddr *a, socklen_t len) {
  int r = hccl__tcp_sys_default.connect(fd, a, len);
  if (atomic_fetch_add(&g_nconnect, 1) == 0 && r != 0 && errno == EINPROGRESS) errno = EINTR;
  return r;
}

static int fault_accept4(int fd, struct sockaddr *a, socklen_t *len, int flags) {
  if (atomic_fetch_add(&g_naccept, 1) == 0) {
    errno = EINTR;
    return -1;
  }
  return hccl__tcp_sys_default.accept4(fd, a, len, flags);
}

static _Atomic int g_reset_armed;

static ssize_t reset_recv(int fd, void *buf, size_t len, int flags) {
  if (atomic_load(&g_reset_armed) && atomic_exchange(&g_reset_armed, 0)) {
    atomic_store(&g_sh->inject_ns, (int64_t)(cc_now() * 1e9));
    errno = ECONNRESET;
    return -1;
  }
  return hccl__tcp_sys_default.recv(fd, buf, len, flags);
}

/* Foreign hellos: on the listener's first accept, three raw connections arrive first: one
 * with another job's token, one that is not libhccl at all, one that says nothing. */
static int g_probe_fd[3] = {-1, -1, -1};

static int probe_accept4(int fd, struct sockaddr *a, socklen_t *len, int flags) {
  if (atomic_fetch_add(&g_naccept, 1) == 0) {
    struct sockaddr_storage me;
    socklen_t ml = sizeof(me);
    getsockname(fd, (struct sockaddr *)&me, &ml);
    struct {
      uint64_t magic;
      uint32_t version, rank, channel, slot_bytes;
      uint64_t comm_id, token_hash;
    } other_job = {0x31706374636c6368ULL, 1, 0, 0, 4096, 0x1234, 0x5678};
    char http[sizeof(other_job)];
    memset(http, ' ', sizeof(http));
    memcpy(http, "GET / HTTP/1.0\r\n\r\n", 18);
    for (int i = 0; i < 3; i++) {
      g_probe_fd[i] = socket(me.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(g_probe_fd[i], (struct sockaddr *)&me, ml) != 0) continue;
      if (i == 0) (void)!write(g_probe_fd[i], &other_job, sizeof(other_job));
      if (i == 1) (void)!write(g_probe_fd[i], http, sizeof(http));
    }
    usleep(20000); /* the hellos are in before the real accept */
  }
  return hccl__tcp_sys_default.accept4(fd, a, len, flags);
}

/* ---- (a, b) collectives across servers, with and without faults ---- */

static int coll_body(int rank, int nranks, void *argp) {
  const struct job *j = argp;
  if (enter_server(rank, j)) return 1;
  if (j->faults) {
    hccl__tcp_sys.sendmsg = fault_sendmsg;
    hccl__tcp_sys.recv = fault_recv;
    hccl__tcp_sys.connect = fault_connect;
    hccl__tcp_sys.accept4 = fault_accept4;
  }
  int log_fd = -1, saved = -1;
  char log_path[64] = "";
  if (rank == j->probe_rank) {
    hccl__tcp_sys.accept4 = probe_accept4;
    snprintf(log_path, sizeof(log_path), "/tmp/hccl-test-tcp-%d.log", (int)getpid());
    log_fd = open(log_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    fflush(stderr);
    saved = dup(2);
    dup2(log_fd, 2);
  }
  HcclComm comm = NULL;
  double t0 = cc_now();
  int bad = make_comm(rank, nranks, j, &comm);
  if (saved >= 0) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
  }
  if (bad) return 1;
  double t1 = cc_now();
  if (run_suite(comm, rank, nranks)) return 1;
  if (rank == 0)
    printf("  %d x %d ranks%s%s: init %.2f s, suite %.2f s\n", nranks / j->per, j->per,
           j->ipv6 ? ", IPv6" : "", j->faults ? ", with faults" : "", t1 - t0, cc_now() - t1);
  OK(HcclCommDestroy(comm), "destroy");
  if (j->faults) {
    printf("  rank %d: %ld socket writes, %ld reads, faults injected\n", rank,
           atomic_load(&g_nsend), atomic_load(&g_nrecv));
    RANK_CHECK(atomic_load(&g_nsend) > 4000, "only %ld writes: the 1-byte phase never ended",
               atomic_load(&g_nsend));
  }
  if (rank == j->probe_rank) {
    /* Every foreign connection was closed by the listener's side. */
    for (int i = 0; i < 3; i++) {
      struct timeval tv = {.tv_sec = 2};
      setsockopt(g_probe_fd[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char c;
      ssize_t k = read(g_probe_fd[i], &c, 1);
      RANK_CHECK(k == 0 || (k < 0 && errno == ECONNRESET),
                 "foreign connection %d still open after the job (read %zd, %s)", i, k,
                 strerror(errno));
      close(g_probe_fd[i]);
    }
    char text[8192] = "";
    ssize_t k = pread(log_fd, text, sizeof(text) - 1, 0);
    text[k > 0 ? k : 0] = '\0';
    close(log_fd);
    unlink(log_path);
    RANK_CHECK(strstr(text, "refused a connection from") && strstr(text, "job token") &&
                   strstr(text, "not a libhccl hello"),
               "the listener did not log both refusals; its log:\n%s", text);
    printf("  rank %d refused the foreign hellos:\n%s", rank, text);
  }
  LEAK_CHECK();
  return 0;
}

/* ---- links made on first use (transport/links.c) ---- */

/* 2 servers x 4: after init a rank has device links to its server and channel-0 links to its
 * algorithms' partners only; a recv-any at rank 0 from all 7 others (most of them higher ranks
 * with no link to it: each asks rank 0 to dial back), sends between ranks 3 apart (never
 * partners), and an all-to-all (links made inside a collective) then all arrive right. */
static int links_body(int rank, int nranks, void *argp) {
  const struct job *j = argp;
  if (enter_server(rank, j)) return 1;
  HcclComm comm = NULL;
  if (make_comm(rank, nranks, j, &comm)) return 1;
  struct hccl_comm *c = comm;
  bool need[8] = {false};
  hccl__group_partners(&c->world, need);
  hccl__group_partners(&c->cross, need);
  int lazy = 0;
  struct hccl_link **coll = c->tx.links[HCCL_CHANNEL_COLL], **p2p = c->tx.links[HCCL_CHANNEL_P2P];
  for (int r = 0; r < nranks; r++) {
    if (r == rank) continue;
    bool local = r / j->per == rank / j->per;
    RANK_CHECK((coll[r] != NULL) == (local || need[r]),
               "after init the collective link to rank %d is %s (local %d, partner %d)", r,
               coll[r] ? "made" : "missing", local, need[r]);
    RANK_CHECK((p2p[r] != NULL) == local, "after init the p2p link to rank %d is %s", r,
               p2p[r] ? "made" : "missing");
    lazy += !local && !need[r];
  }
  RANK_CHECK(lazy > 0, "every remote rank is a partner of rank %d: the test proves nothing", rank);
  /* Zero-copy runs inside a server only: the groups across servers keep no memo (group.h). */
  RANK_CHECK(c->local.zmemo && !c->world.zmemo && !c->cross.zmemo,
             "zero-copy memos: local %p, world %p, cross %p", (void *)c->local.zmemo,
             (void *)c->world.zmemo, (void *)c->cross.zmemo);

  int32_t v = rank * 10 + 1;
  if (rank == 0) {
    bool seen[8] = {false};
    for (int k = 1; k < nranks; k++) {
      uint32_t src = 99;
      OK(HcclRecvAny(&v, 1, HCCL_DATA_TYPE_INT32, &src, comm, NULL), "recv-any");
      RANK_CHECK(src > 0 && src < 8 && !seen[src] && v == (int32_t)src * 10 + 1,
                 "recv-any %d: %d from rank %u", k, v, src);
      seen[src] = true;
    }
  } else {
    OK(HcclSend(&v, 1, HCCL_DATA_TYPE_INT32, 0, comm, NULL), "send to rank 0");
  }
  /* Rank 5's next send goes to rank 0 as well: not before rank 0's receives from any rank are
   * done, which one of them could otherwise match. */
  OK(HcclBarrier(comm, NULL), "barrier");

  int32_t out = rank * 1000 + 7, in = -1;
  uint32_t to = (uint32_t)(rank + 3) % 8, from = (uint32_t)(rank + 5) % 8;
  HcclRequest req = NULL;
  OK(HcclSend(&out, 1, HCCL_DATA_TYPE_INT32, to, comm, &req), "send 3 ahead");
  OK(HcclRecv(&in, 1, HCCL_DATA_TYPE_INT32, from, comm, NULL), "recv 3 behind");
  OK(HcclRequestWait(req), "send 3 ahead");
  RANK_CHECK(in == (int32_t)from * 1000 + 7, "got %d from rank %u", in, from);

  int32_t sb[8], rb[8];
  for (int k = 0; k < 8; k++)
    sb[k] = rank * 100 + k;
  OK(HcclAlltoAll(sb, 1, HCCL_DATA_TYPE_INT32, rb, 1, HCCL_DATA_TYPE_INT32, comm, NULL),
     "all-to-all");
  for (int k = 0; k < 8; k++)
    RANK_CHECK(rb[k] == k * 100 + rank, "all-to-all: %d from rank %d", rb[k], k);
  for (int r = 0; r < nranks; r++)
    RANK_CHECK(r == rank || coll[r], "after the all-to-all no link to rank %d", r);

  /* A split child whose members are each on a server of their own (ranks k and k + 4) makes
   * no link at creation; its first allreduce makes exactly its partners' (comm_split.c). */
  HcclComm child = NULL;
  OK(HcclCommSplit(comm, rank % j->per, rank, &child, NULL), "split");
  struct hccl_comm *cc = child;
  int made = 0;
  for (uint32_t r = 0; r < cc->nranks; r++)
    made += (cc->tx.links[HCCL_CHANNEL_COLL][r] != NULL) + (cc->tx.links[HCCL_CHANNEL_P2P][r] != NULL);
  RANK_CHECK(made == 0, "the split child has %d links after creation (0 expected)", made);
  int32_t x = rank;
  OK(HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, child, NULL), "child allreduce");
  RANK_CHECK(x == 2 * (rank % j->per) + j->per, "child allreduce: %d", x);
  bool cneed[2] = {false};
  hccl__group_partners(&cc->world, cneed);
  hccl__group_partners(&cc->cross, cneed);
  for (uint32_t r = 0; r < cc->nranks; r++) {
    struct hccl_link *l = cc->tx.links[HCCL_CHANNEL_COLL][r];
    RANK_CHECK(r == cc->rank || (l != NULL) == cneed[r] ,
               "after the child's allreduce its link to rank %u is %s (partner %d)", r,
               l ? "made" : "missing", cneed[r]);
    RANK_CHECK(!cc->tx.links[HCCL_CHANNEL_P2P][r], "the child made a p2p link to rank %u", r);
    /* The figures planned with before any link existed are the link's. */
    RANK_CHECK(!l || (cc->world.chunk_bytes <= l->slot_bytes &&
                      cc->world.alpha_ns == l->ops->alpha_ns),
               "the child's figures (chunk %zu, alpha %.0f) are not its link's (%zu, %.0f)",
               cc->world.chunk_bytes, cc->world.alpha_ns, l ? l->slot_bytes : 0,
               l ? l->ops->alpha_ns : 0.0);
  }
  OK(HcclCommDestroy(child), "destroy the child");
  OK(HcclCommDestroy(comm), "destroy");
  return 0;
}

static void test_links_on_demand(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 4, .reset_rank = -1, .kill_rank = -1, .probe_rank = -1};
  memset(g_sh, 0, sizeof(*g_sh));
  assert_int_equal(harness_run_ranks(8, RUN_TIMEOUT_S, links_body, &j), 0);
}

static void run_job(int nranks, struct job *j) {
  memset(g_sh, 0, sizeof(*g_sh));
  double t0 = cc_now();
  int failed = harness_run_ranks(nranks, RUN_TIMEOUT_S, coll_body, j);
  printf("  %d ranks: %d failed, %.2f s\n", nranks, failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

static void test_coll_2x1(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 1, .reset_rank = -1, .kill_rank = -1, .probe_rank = -1};
  run_job(2, &j);
}

static void test_coll_2x2(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 2, .reset_rank = -1, .kill_rank = -1, .probe_rank = -1};
  run_job(4, &j);
}

static void test_coll_2x1_ipv6(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 1, .ipv6 = 1, .reset_rank = -1, .kill_rank = -1, .probe_rank = -1};
  run_job(2, &j);
}

static void test_coll_2x2_root_info(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 2, .root_info = 1, .reset_rank = -1, .kill_rank = -1, .probe_rank = -1};
  run_job(4, &j);
}

static void test_coll_faults(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 2, .faults = 1, .reset_rank = -1, .kill_rank = -1, .probe_rank = -1};
  run_job(4, &j);
}

/* (d) rank 2 accepts ranks 0 and 1; foreign hellos reach its listener first. */
static void test_foreign_hello(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 2, .reset_rank = -1, .kill_rank = -1, .probe_rank = 2};
  run_job(4, &j);
}

/* ---- (c) a reset, a killed rank ---- */

#define FAIL_COUNT (1u << 18) /* 1 MiB of fp32 */

static void *kill_soon(void *arg) {
  (void)arg;
  usleep(3000);
  kill(getpid(), SIGKILL);
  return NULL;
}

static int fail_body(int rank, int nranks, void *argp) {
  const struct job *j = argp;
  if (enter_server(rank, j)) return 1;
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  if (rank == j->reset_rank) hccl__tcp_sys.recv = reset_recv;
  HcclComm comm = NULL;
  if (make_comm(rank, nranks, j, &comm)) return 1;
  float *buf = malloc(FAIL_COUNT * sizeof(float));
  int iters = 0;
  HcclResult rc = HCCL_SUCCESS;
  double t0 = cc_now();
  while (cc_now() - t0 < 40) {
    if (iters == 20 && rank == j->reset_rank) atomic_store(&g_reset_armed, 1);
    if (iters == 20 && rank == j->kill_rank) {
      atomic_store(&g_sh->inject_ns, (int64_t)(cc_now() * 1e9));
      pthread_t t;
      pthread_create(&t, NULL, kill_soon, NULL);
    }
    for (uint32_t i = 0; i < FAIL_COUNT; i++)
      buf[i] = (float)(rank + 1);
    rc = HcclAllReduce(buf, buf, FAIL_COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    if (rc != HCCL_SUCCESS) break;
    float want = (float)(nranks * (nranks + 1) / 2);
    RANK_CHECK(buf[0] == want && buf[FAIL_COUNT - 1] == want, "allreduce %d: %g", iters, buf[0]);
    iters++;
  }
  double now = cc_now(), injected = (double)atomic_load(&g_sh->inject_ns) / 1e9;
  const char *msg = HcclGetLastErrorMessage();
  printf("  rank %d: %d allreduces, then %d (%s) %.2f s after the fault: %s\n", rank, iters, rc,
         HcclGetErrorString(rc), injected > 0 ? now - injected : -1.0, msg);
  RANK_CHECK(rc != HCCL_SUCCESS, "allreduces kept succeeding for 40 s after the fault");
  RANK_CHECK(injected > 0 && now - injected < 5.0, "the failure took %.2f s (exec timeout 60 s)",
             now - injected);
  int victim = j->kill_rank >= 0 ? j->kill_rank : -1;
  if (victim >= 0 && rank / j->per != victim / j->per)
    RANK_CHECK(cc_msg_names_rank(msg, victim), "the message does not name rank %d: %s", victim,
               msg);
  double td = cc_now();
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy after failure");
  RANK_CHECK(cc_now() - td < 5.0, "destroy took %.2f s", cc_now() - td);
  free(buf);
  LEAK_CHECK();
  return 0;
}

static void test_reset(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 2, .reset_rank = 2, .kill_rank = -1, .probe_rank = -1};
  memset(g_sh, 0, sizeof(*g_sh));
  assert_int_equal(harness_run_ranks(4, RUN_TIMEOUT_S, fail_body, &j), 0);
}

static void test_killed_rank(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 2, .reset_rank = -1, .kill_rank = 1, .probe_rank = -1};
  memset(g_sh, 0, sizeof(*g_sh));
  /* The victim kills itself mid-call; the harness's own kill never comes (10 min). */
  assert_int_equal(harness_run_ranks_kill(4, RUN_TIMEOUT_S, fail_body, &j, 1, 600000), 0);
}

/* ---- no byte of a failed call's buffers is read after it returns ---- */

#define LATE_COUNT (16u << 20) /* 64 MiB of fp32: far more than the sockets hold */
static const char *_Atomic g_watch_lo, *_Atomic g_watch_hi;
static _Atomic long g_late_reads;

/* Counts the sendmsg calls that read [g_watch_lo, g_watch_hi) while it is set. */
static ssize_t watch_sendmsg(int fd, const struct msghdr *m, int flags) {
  const char *lo = atomic_load(&g_watch_lo), *hi = atomic_load(&g_watch_hi);
  for (size_t i = 0; lo && i < m->msg_iovlen; i++) {
    const char *b = m->msg_iov[i].iov_base;
    if (b < hi && b + m->msg_iov[i].iov_len > lo) atomic_fetch_add(&g_late_reads, 1);
  }
  return hccl__tcp_sys_default.sendmsg(fd, m, flags);
}

/* 2 servers x 1: rank 1 makes its communicator and stops itself (SIGSTOP), threads and all;
 * rank 0, the root of a broadcast of 64 MiB, sends by reference from its buffer (prims.h),
 * fills the socket and times out after 1 s with frames of that buffer queued. From its return
 * on, nothing may read the buffer: rank 0 lets rank 1 go on (SIGCONT), whose I/O thread
 * drains the socket, and rank 0's I/O thread must send those frames no further
 * (tcp_write.c's link_write after an abort). Rank 1's call then fails on the ABORT. */
static int late_body(int rank, int nranks, void *argp) {
  const struct job *j = argp;
  if (enter_server(rank, j)) return 1;
  setenv("HCCL_EXEC_TIMEOUT", "1", 1);
  if (rank == 0) hccl__tcp_sys.sendmsg = watch_sendmsg;
  HcclComm comm = NULL;
  if (make_comm(rank, nranks, j, &comm)) return 1;
  float *buf = malloc(LATE_COUNT * sizeof(float));
  RANK_CHECK(buf, "malloc");
  for (uint32_t i = 0; i < LATE_COUNT; i++)
    buf[i] = 1.0f;
  if (rank == 1) {
    atomic_store(&g_sh->stopped_pid, (int)getpid());
    raise(SIGSTOP);
  } else {
    while (!atomic_load(&g_sh->stopped_pid))
      usleep(1000);
    usleep(200000);
    atomic_store(&g_watch_hi, (const char *)(buf + LATE_COUNT));
    atomic_store(&g_watch_lo, (const char *)buf);
  }
  HcclResult rc = HcclBroadcast(buf, LATE_COUNT, HCCL_DATA_TYPE_FP32, 0, comm, NULL);
  RANK_CHECK(rc != HCCL_SUCCESS, "rank %d: the broadcast succeeded with rank 1 stopped", rank);
  if (rank == 0) {
    long during = atomic_exchange(&g_late_reads, 0);
    RANK_CHECK(during > 0, "the buffer was never sent by reference (%ld calls)", during);
    kill(atomic_load(&g_sh->stopped_pid), SIGCONT);
    usleep(2000000); /* rank 1 drains the socket and calls meanwhile */
    long late = atomic_load(&g_late_reads);
    printf("  rank 0: %ld sendmsg calls read the buffer after the failed call returned\n", late);
    RANK_CHECK(late == 0, "%ld sendmsg calls read the buffer after the call returned", late);
  }
  HcclCommDestroy(comm);
  free(buf);
  return 0;
}

/* 2 servers x 1, no fault injected by the job: body on each rank. */
static void run_2x1(int (*body)(int, int, void *)) {
  struct job j = {.per = 1, .reset_rank = -1, .kill_rank = -1, .probe_rank = -1};
  memset(g_sh, 0, sizeof(*g_sh));
  assert_int_equal(harness_run_ranks(2, RUN_TIMEOUT_S, body, &j), 0);
}

static void test_no_read_after_failure(void **st) {
  (void)st;
  NEED_NETNS();
  run_2x1(late_body);
}

/* ---- no byte is written to a failed receive's buffer after it returns ---- */

static _Atomic int g_hold;

/* Counts the recv calls that write into [g_watch_lo, g_watch_hi) while it is set, and then
 * reads slowly (2 ms a call), so that the sender's window is full of frames in flight when the
 * receiver fails; while g_hold is set the socket has nothing yet (EAGAIN): those frames come
 * only after the failed call returned, as bytes still on the wire would. Installed before the
 * communicator's threads start (they read the table without a lock). */
static ssize_t watch_recv(int fd, void *buf, size_t len, int flags) {
  if (atomic_load(&g_hold)) {
    errno = EAGAIN;
    return -1;
  }
  const char *lo = atomic_load(&g_watch_lo), *hi = atomic_load(&g_watch_hi), *b = buf;
  if (lo && b < hi && b + len > lo) atomic_fetch_add(&g_late_reads, 1);
  if (lo) usleep(2000);
  return hccl__tcp_sys_default.recv(fd, buf, len, flags);
}

/* 2 servers x 1: rank 1 receives 64 MiB from rank 0 in place (the I/O thread reads the
 * payloads straight into the buffer, tcp_data.c's recv_post) and aborts its communicator once
 * some have landed there; the frames still in flight, which arrive after the failed receive
 * returned, must go to the slots, not the buffer (tcp_read.c's post_sync). Rank 0's send fails on
 * the ABORT. */
static int late_recv_body(int rank, int nranks, void *argp) {
  const struct job *j = argp;
  if (enter_server(rank, j)) return 1;
  if (rank == 1) hccl__tcp_sys.recv = watch_recv;
  HcclComm comm = NULL;
  if (make_comm(rank, nranks, j, &comm)) return 1;
  float *buf = malloc(LATE_COUNT * sizeof(float));
  RANK_CHECK(buf, "malloc");
  memset(buf, 0xee, LATE_COUNT * sizeof(float));
  if (rank == 0) {
    HcclResult rc = HcclSend(buf, LATE_COUNT, HCCL_DATA_TYPE_FP32, 1, comm, NULL);
    RANK_CHECK(rc != HCCL_SUCCESS, "rank 0: the send succeeded though rank 1 aborted");
  } else {
    atomic_store(&g_watch_hi, (const char *)(buf + LATE_COUNT));
    atomic_store(&g_watch_lo, (const char *)buf);
    HcclRequest req = NULL;
    OK(HcclRecv(buf, LATE_COUNT, HCCL_DATA_TYPE_FP32, 0, comm, &req), "recv");
    double t0 = cc_now();
    while (atomic_load(&g_late_reads) < 4 && cc_now() - t0 < 30)
      usleep(1000);
    atomic_store(&g_hold, 1);
    OK(HcclCommAbort(comm), "abort");
    RANK_CHECK(HcclRequestWait(req) != HCCL_SUCCESS, "rank 1: the receive succeeded");
    long during = atomic_exchange(&g_late_reads, 0);
    atomic_store(&g_hold, 0);
    RANK_CHECK(during >= 4, "the payloads never landed in the buffer (%ld reads)", during);
    usleep(1500000); /* the frames in flight arrive meanwhile */
    long late = atomic_load(&g_late_reads);
    printf("  rank 1: %ld recv calls wrote into the buffer after the failed receive returned\n",
           late);
    RANK_CHECK(late == 0, "%ld recv calls wrote into the buffer after the call returned", late);
    atomic_store(&g_watch_lo, NULL);
  }
  HcclCommDestroy(comm);
  hccl__tcp_sys.recv = hccl__tcp_sys_default.recv;
  free(buf);
  return 0;
}

static void test_no_write_after_failure(void **st) {
  (void)st;
  NEED_NETNS();
  atomic_store(&g_late_reads, 0);
  atomic_store(&g_hold, 0);
  run_2x1(late_recv_body);
}

/* ---- a frozen rank named across servers (core/progress.c, PROGQ / PROGA frames) ---- */

#define FROZEN_RANK 3

/* 2 servers x 2: rank 3 (server 1) is stopped (SIGSTOP) in the middle of a run of allreduces;
 * every other rank's call times out after HCCL_EXEC_TIMEOUT (3 s), and the ranks of server 0,
 * whose records of server 1 are out of reach, name rank 3 all the same: their peer on server 1
 * answers a progress query with its own chain of waits, or rank 3 itself does not answer. */
static int frozen_body(int rank, int nranks, void *argp) {
  const struct job *j = argp;
  if (enter_server(rank, j)) return 1;
  setenv("HCCL_EXEC_TIMEOUT", "3", 1);
  HcclComm comm = NULL;
  if (make_comm(rank, nranks, j, &comm)) return 1;
  float buf[256];
  HcclResult rc = HCCL_SUCCESS;
  double t0 = cc_now(), t_last = t0;
  while (cc_now() - t0 < 40) {
    for (int i = 0; i < 256; i++)
      buf[i] = 1.0f;
    t_last = cc_now();
    rc = HcclAllReduce(buf, buf, 256, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    if (rc != HCCL_SUCCESS) break;
  }
  const char *msg = HcclGetLastErrorMessage();
  printf("  rank %d: %d (%s) after %.1f s in the call: %s\n", rank, rc, HcclGetErrorString(rc),
         cc_now() - t_last, msg);
  RANK_CHECK(rc != HCCL_SUCCESS, "allreduces kept succeeding for 40 s with rank %d stopped",
             FROZEN_RANK);
  RANK_CHECK(cc_now() - t_last < 3 + 2 * 1.5 + 2, "the failure took %.1f s (exec timeout 3 s)",
             cc_now() - t_last);
  RANK_CHECK(cc_msg_names_rank(msg, FROZEN_RANK), "the message does not name rank %d: %s",
             FROZEN_RANK, msg);
  HcclCommDestroy(comm);
  return 0;
}

static void test_frozen_rank_named(void **st) {
  (void)st;
  NEED_NETNS();
  struct job j = {.per = 2, .reset_rank = -1, .kill_rank = -1, .probe_rank = -1};
  memset(g_sh, 0, sizeof(*g_sh));
  assert_int_equal(
      harness_run_ranks_signal(4, RUN_TIMEOUT_S, frozen_body, &j, FROZEN_RANK, 2500, SIGSTOP), 0);
}

/* ---- (e) HCCL_SOCKET_IFNAME ---- */

static struct hccl_tcp_if iface(const char *name, bool up, bool lo, const char *addr) {
  struct hccl_tcp_if f;
  memset(&f, 0, sizeof(f));
  snprintf(f.name, sizeof(f.name), "%s", name);
  f.up = up;
  f.loopback = lo;
  if (strchr(addr, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&f.addr;
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &a->sin6_addr);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&f.addr;
    a->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &a->sin_addr);
  }
  return f;
}

static void test_ifname(void **st) {
  (void)st;
  assert_true(hccl__tcp_if_match("", "anything"));
  assert_true(hccl__tcp_if_match("eth,ib", "ib0"));
  assert_true(hccl__tcp_if_match("eth,ib", "eth12"));
  assert_false(hccl__tcp_if_match("eth,ib", "enp3s0"));
  assert_true(hccl__tcp_if_match("=eth0", "eth0"));
  assert_false(hccl__tcp_if_match("=eth0", "eth01"));
  assert_false(hccl__tcp_if_match("^docker,lo", "docker0"));
  assert_false(hccl__tcp_if_match("^docker,lo", "lo"));
  assert_true(hccl__tcp_if_match("^docker,lo", "eth0"));
  assert_false(hccl__tcp_if_match("^=docker0", "docker0"));
  assert_true(hccl__tcp_if_match("^=docker0", "docker01"));
  assert_true(hccl__tcp_if_match("eth,", "eth9"));

  struct hccl_tcp_if ifs[] = {
      iface("lo", true, true, "127.0.0.1"),     iface("docker0", true, false, "172.17.0.1"),
      iface("ib0", true, false, "2001:db8::1"), iface("eth1", false, false, "10.0.1.5"),
      iface("enp3s0", true, false, "fe80::1"),  iface("enp3s0", true, false, "192.168.1.2"),
      iface("eth0", true, false, "10.0.0.5"),
  };
  int n = (int)(sizeof(ifs) / sizeof(ifs[0]));
  assert_int_equal(hccl__tcp_if_pick(ifs, n, ""), 5);    /* IPv4 first: enp3s0 */
  assert_int_equal(hccl__tcp_if_pick(ifs, n, "eth"), 6); /* eth1 is down */
  assert_int_equal(hccl__tcp_if_pick(ifs, n, "=eth1"), -1);
  assert_int_equal(hccl__tcp_if_pick(ifs, n, "ib"), 2); /* IPv6 when nothing else */
  assert_int_equal(hccl__tcp_if_pick(ifs, n, "^enp,docker,lo"), 6);
  assert_int_equal(hccl__tcp_if_pick(ifs, n, "^=enp3s0"), 0); /* a spec may pick lo */
  assert_int_equal(hccl__tcp_if_pick(ifs, n, "=eth"), -1);
  assert_int_equal(hccl__tcp_if_pick(ifs, n, "docker"), 1);
  assert_int_equal(hccl__tcp_if_pick(ifs, 2, ""), 0);      /* only lo and docker: lo */
  assert_int_equal(hccl__tcp_if_pick(ifs + 1, 1, ""), -1); /* only docker: nothing */
  assert_int_equal(hccl__tcp_if_pick(ifs + 4, 1, ""), -1); /* link-local IPv6 only */

  struct hccl_settings cfg;
  memset(&cfg, 0, sizeof(cfg));
  struct sockaddr_storage a;
  char why[64], text[80];
  snprintf(cfg.if_ip, sizeof(cfg.if_ip), "::1");
  assert_int_equal(hccl__tcp_local_addr(&cfg, &a, why, sizeof(why)), HCCL_SUCCESS);
  hccl__tcp_addr_str(&a, text, sizeof(text));
  assert_string_equal(text, "[::1]:0");
  snprintf(cfg.if_ip, sizeof(cfg.if_ip), "not-an-address");
  assert_int_equal(hccl__tcp_local_addr(&cfg, &a, why, sizeof(why)), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "HCCL_IF_IP='not-an-address'"));
  cfg.if_ip[0] = '\0';
  snprintf(cfg.socket_ifname, sizeof(cfg.socket_ifname), "=no-such-if0");
  assert_int_equal(hccl__tcp_local_addr(&cfg, &a, why, sizeof(why)), HCCL_E_NOT_FOUND);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "HCCL_SOCKET_IFNAME='=no-such-if0'"));
  /* HCCL_IF_IP=localhost is 127.0.0.1 (settings.c). */
  setenv("HCCL_IF_IP", "localhost", 1);
  assert_int_equal(hccl__settings_load_no_master(&cfg), HCCL_SUCCESS);
  assert_string_equal(cfg.if_ip, "127.0.0.1");
  unsetenv("HCCL_IF_IP");
}

int main(void) {
  g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_sh == MAP_FAILED) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ifname),
      cmocka_unit_test(test_coll_2x1),
      cmocka_unit_test(test_coll_2x2),
      cmocka_unit_test(test_coll_2x1_ipv6),
      cmocka_unit_test(test_coll_2x2_root_info),
      cmocka_unit_test(test_links_on_demand),
      cmocka_unit_test(test_coll_faults),
      cmocka_unit_test(test_foreign_hello),
      cmocka_unit_test(test_reset),
      cmocka_unit_test(test_killed_rank),
      cmocka_unit_test(test_frozen_rank_named),
      cmocka_unit_test(test_no_read_after_failure),
      cmocka_unit_test(test_no_write_after_failure),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
