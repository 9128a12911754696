/*
 * test_hostile.c - clients that are not ranks against the bootstrap store of a real job: the
 * store server's limits (bootstrap/server_conn.c's opening paragraph) seen from outside.
 *
 * Each test forks a 4-rank job (HcclCommInitFromEnv, then an allreduce; rank 0 hosts the
 * store, which lives until every rank has joined) and an attacker process that finds rank 0's
 * store as soon as it listens. The attack is in place before ranks 1 and 2 join and goes on
 * while they wait in the bootstrap for rank 3, a rank slow to start (as ranks loading a large
 * program are), which joins once the attacker has made its checks:
 *
 *   - slowloris: one byte of a header a second, never finished, and a connection that says
 *     nothing; the server cuts both about 10 s after they connected, with a reply saying why.
 *   - flood: 200 connections opened and held (the job has a token, they present none); once
 *     a second old, the ones over the cap of 128 are closed as the ranks connect, and the
 *     rest by the 10 s deadline.
 *   - oversized: lengths over the limits (refused at once, naming them) and SETs that announce
 *     a value of the full 64 MiB and send 4 KiB of it, then stall.
 *   - truncated: every kind of request cut at a random byte, then the connection closed.
 *   - garbage: random bytes, random headers after a valid magic, and a client that sends
 *     GETs without ever reading the replies.
 *
 * Every test checks that each rank's init ends within its normal time (HOSTILE_INIT_MAX_S)
 * of the last rank's start and its allreduce is right, that rank 0's memory (VmRSS and VmData
 * in /proc/self/status, sampled by a thread from before its init to its end) stays within
 * bounds, and that the store still serves a well-formed client after the attack.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hccl.h"
#include "store.h"
#include "wire.h"

#define NRANKS 4
#define LATE (NRANKS - 1) /* joins once the attacker is done */
#define ATTACKER NRANKS   /* the harness's extra child */
#define RUN_TIMEOUT_S 90
/* A 4-rank init on this machine takes well under a second; starved ranks would take their
 * connect timeout (30 s here). */
#define HOSTILE_INIT_MAX_S 5.0
/* Rank 0's growth from before its init to the end of the attack. Its own communicator is a
 * few MiB; the attacks would take GiBs of address space and tens of MiB of memory unbounded. */
#define RSS_GROWTH_MAX_KB (32 * 1024)
#define DATA_GROWTH_MAX_KB (256 * 1024)
#define TOKEN "hostile-test-job"

/* Shared by the job's ranks, the attacker and the test (MAP_SHARED before the fork). */
struct shared {
  int attack_ready; /* the attack is in place: ranks 1 and 2 may join */
  int attack_done;  /* the attacker has made its checks: the late rank may join */
  int ranks_done;   /* ranks whose init and allreduce are done */
  double t_start[NRANKS], init_s[NRANKS];
  long rss_before_kb, rss_peak_kb, data_before_kb, data_peak_kb;
};
static struct shared *g;

struct scenario {
  int token; /* the job runs with HCCL_JOB_TOKEN */
  int (*attack)(uint16_t port);
};

/* ---- helpers ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int wait_until(int *flag, int want, double max_s) {
  double t0 = now_s();
  while (__atomic_load_n(flag, __ATOMIC_SEQ_CST) < want) {
    if (now_s() - t0 > max_s) return 0;
    sleep_s(0.005);
  }
  return 1;
}

static long status_kb(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  size_t n = strlen(field);
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') kb = atol(line + n + 1);
  if (f) fclose(f);
  return kb;
}

/* Rank 0's sampler thread: peaks of VmRSS and VmData until *stop. */
static void *sample_memory(void *stop) {
  while (!__atomic_load_n((int *)stop, __ATOMIC_SEQ_CST)) {
    long rss = status_kb("VmRSS"), data = status_kb("VmData");
    if (rss > g->rss_peak_kb) g->rss_peak_kb = rss;
    if (data > g->data_peak_kb) g->data_peak_kb = data;
    sleep_s(0.01);
  }
  return NULL;
}

/* A connection to the store, or -1. */
static int raw_connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

static int raw_send(int fd, const void *buf, size_t len) {
  return send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static size_t pack(unsigned char *out, uint8_t op, uint32_t key_len, uint64_t arg) {
  struct hccl_store_header h = {.op = op, .key_len = key_len, .arg = arg};
  hccl__store_header_pack(&h, out);
  return HCCL_STORE_HEADER_LEN;
}

/* Reads what the server says until it closes (at most max_s): the reply's status (-1: none)
 * and its text in msg. Returns 0 when it closed, -1 when it did not in time. */
static int read_to_close(int fd, double max_s, int *status, char *msg, size_t cap) {
  char buf[2048];
  size_t have = 0;
  double end = now_s() + max_s;
  for (;;) {
    double left = end - now_s();
    if (left <= 0) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
    ssize_t r = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
    if (r <= 0) break;
    have += (size_t)r;
    if (have == sizeof(buf) - 1) have = HCCL_STORE_HEADER_LEN; /* keep the header */
  }
  struct hccl_store_header h;
  *status =
      have >= HCCL_STORE_HEADER_LEN && hccl__store_header_unpack((unsigned char *)buf, &h) == 0
          ? h.op
          : -1;
  buf[have] = '\0';
  const char *text = have > HCCL_STORE_HEADER_LEN ? buf + HCCL_STORE_HEADER_LEN : "";
  size_t len = strlen(text) < cap ? strlen(text) : cap - 1;
  memcpy(msg, text, len);
  msg[len] = '\0';
  return 0;
}

/* Whether the server has closed fd (EOF or reset, after any reply); does not block. */
static int closed_by_server(int fd) {
  char buf[1024];
  for (;;) {
    ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r == 0) return 1;
    if (r < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

/* A well-formed client still gets served, and `absent` (if any) was never set. */
static int store_still_serves(uint16_t port, int token, const char *absent) {
  struct hccl_store *s = NULL;
  RANK_CHECK(hccl__store_tcp_connect("127.0.0.1", port, 5000, &s) == HCCL_SUCCESS, "%s",
             HcclGetLastErrorMessage());
  if (token)
    RANK_CHECK(hccl__store_tcp_hello(s, TOKEN) == HCCL_SUCCESS, "%s", HcclGetLastErrorMessage());
  RANK_CHECK(hccl__store_set(s, "hostile/check", "fine", 4) == HCCL_SUCCESS, "%s",
             HcclGetLastErrorMessage());
  void *val = NULL;
  size_t len = 0;
  RANK_CHECK(hccl__store_get(s, "hostile/check", &val, &len, 5000) == HCCL_SUCCESS, "%s",
             HcclGetLastErrorMessage());
  int same = len == 4 && memcmp(val, "fine", 4) == 0;
  free(val);
  RANK_CHECK(same, "the store gave back another value");
  hccl__store_close(s);
  if (absent) {
    RANK_CHECK(hccl__store_tcp_connect("127.0.0.1", port, 5000, &s) == HCCL_SUCCESS, "connect");
    HcclResult r = hccl__store_get(s, absent, &val, &len, 200);
    hccl__store_close(s);
    RANK_CHECK(r == HCCL_E_TIMEOUT, "key '%s' of a request never finished is set (%d)", absent, r);
  }
  return 0;
}

static void ready(void) {
  __atomic_store_n(&g->attack_ready, 1, __ATOMIC_SEQ_CST);
}

/* ---- the attacks (each runs in the attacker process; 0 = its checks passed) ---- */

static int slowloris(uint16_t port) {
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
  pack(hdr, HCCL_STORE_OP_GET, 4, 0);
  double t0 = now_s();
  int slow = raw_connect(port), idle = raw_connect(port), half = raw_connect(port);
  RANK_CHECK(slow >= 0 && idle >= 0 && half >= 0, "connect");
  RANK_CHECK(raw_send(slow, hdr, 1) == 0 && raw_send(half, hdr, 8) == 0, "send");
  ready();
  double slow_closed = 0, idle_closed = 0;
  size_t sent = 1;
  while ((!slow_closed || !idle_closed) && now_s() - t0 < 20) {
    sleep_s(0.1);
    if (!slow_closed && now_s() - t0 >= (double)sent && sent < sizeof(hdr) &&
        raw_send(slow, hdr + sent, 1) == 0)
      sent++;
    if (!slow_closed && closed_by_server(slow)) slow_closed = now_s() - t0;
    if (!idle_closed && closed_by_server(idle)) idle_closed = now_s() - t0;
  }
  fprintf(stderr, "slowloris: %zu header bytes sent; closed after %.1f s, idle after %.1f s\n",
          sent, slow_closed, idle_closed);
  RANK_CHECK(slow_closed >= 9 && slow_closed <= 13, "slowloris closed after %.1f s", slow_closed);
  RANK_CHECK(idle_closed >= 9 && idle_closed <= 13, "idle closed after %.1f s", idle_closed);
  RANK_CHECK(sent < sizeof(hdr), "the whole header went out before the deadline");
  close(slow);
  close(idle);
  /* What the server says to a stalled client: half a header, then nothing. */
  int status;
  char msg[600];
  RANK_CHECK(read_to_close(half, 3, &status, msg, sizeof(msg)) == 0, "half header: not closed");
  close(half);
  RANK_CHECK(status == HCCL_STORE_STATUS_BAD_REQUEST && strstr(msg, "not whole 10 s"),
             "said %d '%s'", status, msg);
  return store_still_serves(port, 0, NULL);
}

#define FLOOD 200

static int flood(uint16_t port) {
  static int fds[FLOOD];
  for (int i = 0; i < FLOOD; i++) {
    fds[i] = raw_connect(port);
    RANK_CHECK(fds[i] >= 0, "flood connection %d: %s", i, strerror(errno));
  }
  double t0 = now_s();
  sleep_s(1.2); /* older than the eviction age */
  ready();
  double closed_at[FLOOD] = {0};
  int left = FLOOD;
  while (left > 0 && now_s() - t0 < 14) {
    sleep_s(0.05);
    for (int i = 0; i < FLOOD; i++)
      if (!closed_at[i] && closed_by_server(fds[i])) {
        closed_at[i] = now_s() - t0;
        left--;
      }
  }
  int early = 0;
  double last = 0;
  for (int i = 0; i < FLOOD; i++) {
    if (closed_at[i] && closed_at[i] < 5) early++;
    if (closed_at[i] > last) last = closed_at[i];
    close(fds[i]);
  }
  fprintf(stderr, "flood: %d of %d closed as the ranks came (cap 128), the last after %.1f s\n",
          early, FLOOD, last);
  RANK_CHECK(left == 0, "%d flood connections still open after 14 s", left);
  RANK_CHECK(early >= FLOOD - 128, "only %d over the cap were closed early", early);
  RANK_CHECK(last <= 13, "the last flood connection lasted %.1f s", last);
  return store_still_serves(port, 1, NULL);
}

#define STALLED 48

/* SETs announcing the full 64 MiB, 4 KiB sent, then stalled; fds[] keeps them. */
static int stall_big_sets(uint16_t port, int *fds, int n, int base) {
  static char chunk[4096];
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
  char key[32];
  for (int i = 0; i < n; i++) {
    int k = snprintf(key, sizeof(key), "big/%d", base + i);
    fds[i] = raw_connect(port);
    pack(hdr, HCCL_STORE_OP_SET, (uint32_t)k, HCCL_STORE_MAX_VALUE_LEN);
    RANK_CHECK(fds[i] >= 0 && raw_send(fds[i], hdr, sizeof(hdr)) == 0 &&
                   raw_send(fds[i], key, (size_t)k) == 0 &&
                   raw_send(fds[i], chunk, sizeof(chunk)) == 0,
               "stalled SET %d", i);
  }
  return 0;
}

static int expect_refusal(uint16_t port, uint8_t op, uint32_t key_len, uint64_t arg,
                          const char *words) {
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
  int fd = raw_connect(port), status;
  char msg[600];
  pack(hdr, op, key_len, arg);
  RANK_CHECK(fd >= 0 && raw_send(fd, hdr, sizeof(hdr)) == 0, "connect");
  RANK_CHECK(read_to_close(fd, 3, &status, msg, sizeof(msg)) == 0, "not closed at once");
  close(fd);
  RANK_CHECK(status == HCCL_STORE_STATUS_BAD_REQUEST && strstr(msg, words), "said %d '%s'", status,
             msg);
  return 0;
}

static int oversized(uint16_t port) {
  static int fds[2 * STALLED];
  RANK_CHECK(stall_big_sets(port, fds, STALLED, 0) == 0, "first stalled SETs");
  ready();
  RANK_CHECK(expect_refusal(port, HCCL_STORE_OP_GET, 0xffffffffu, 0, "keys need 1 to 1024") == 0,
             "huge key");
  RANK_CHECK(expect_refusal(port, HCCL_STORE_OP_SET, 3, 1ull << 63, "the limit is") == 0,
             "huge value");
  RANK_CHECK(expect_refusal(port, HCCL_STORE_OP_SET, 3, HCCL_STORE_MAX_VALUE_LEN + 1ull,
                            "the limit is") == 0,
             "value one over");
  RANK_CHECK(expect_refusal(port, HCCL_STORE_OP_HELLO, 4096, 0, "job token of 4096 bytes") == 0,
             "huge token");
  RANK_CHECK(stall_big_sets(port, fds + STALLED, STALLED, STALLED) == 0, "more stalled SETs");
  sleep_s(0.3); /* rank 0 samples its memory with all of them held */
  for (int i = 0; i < 2 * STALLED; i++)
    close(fds[i]); /* truncated: the SETs never happen */
  return store_still_serves(port, 0, "big/0");
}

static uint32_t g_rng = 12345;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return g_rng;
}

/* One well-formed request of a random kind into buf; its length. */
static size_t random_request(unsigned char *buf, char *key, size_t key_cap) {
  uint8_t op = (uint8_t)(1 + rnd() % 4);
  int k = snprintf(key, key_cap, "cut/%u", rnd() % 1000);
  uint64_t arg = op == HCCL_STORE_OP_SET ? 200 : op == HCCL_STORE_OP_ADD ? 7 : 0;
  size_t n = pack(buf, op, (uint32_t)k, arg);
  memcpy(buf + n, key, (size_t)k);
  n += (size_t)k;
  if (op == HCCL_STORE_OP_SET) {
    memset(buf + n, 'v', 200);
    n += 200;
  }
  return n;
}

static int truncated_round(uint16_t port, int count) {
  unsigned char buf[512];
  char key[32];
  for (int i = 0; i < count; i++) {
    size_t n = random_request(buf, key, sizeof(key));
    size_t cut = 1 + rnd() % (n - 1);
    int fd = raw_connect(port);
    RANK_CHECK(fd >= 0 && raw_send(fd, buf, cut) == 0, "truncated %d", i);
    close(fd);
  }
  return 0;
}

static int truncated(uint16_t port) {
  RANK_CHECK(truncated_round(port, 150) == 0, "before the ranks");
  ready();
  RANK_CHECK(truncated_round(port, 300) == 0, "with the ranks");
  return store_still_serves(port, 0, "cut/1");
}

/* Sends len random bytes (after a valid magic when framed), closes its side, and expects the
 * server to close too, with a well-formed reply if any. */
static int garbage_one(uint16_t port, size_t len, int framed) {
  unsigned char buf[4096];
  for (size_t i = 0; i < len; i++)
    buf[i] = (unsigned char)rnd();
  if (framed && len >= 3) {
    buf[0] = HCCL_STORE_MAGIC >> 8;
    buf[1] = HCCL_STORE_MAGIC & 0xff;
    buf[2] = HCCL_STORE_VERSION;
  }
  int fd = raw_connect(port), status;
  char msg[600];
  RANK_CHECK(fd >= 0, "connect");
  send(fd, buf, len, MSG_NOSIGNAL); /* the server may hang up midway */
  shutdown(fd, SHUT_WR);
  RANK_CHECK(read_to_close(fd, 3, &status, msg, sizeof(msg)) == 0, "garbage: not closed");
  close(fd);
  RANK_CHECK(status == -1 || status <= HCCL_STORE_STATUS_DENIED, "reply status %d", status);
  return 0;
}

/* A client that sends GETs and never reads a reply, then leaves: the server stops reading it
 * once its replies back up, so its requests stay in the kernel's buffers. */
#define NEVER_READ_GETS 240000 /* 4 MB of requests */
static int never_reads(uint16_t port) {
  static unsigned char reqs[NEVER_READ_GETS * (HCCL_STORE_HEADER_LEN + 1)];
  struct hccl_store *s = NULL;
  static char value[16384];
  RANK_CHECK(hccl__store_tcp_connect("127.0.0.1", port, 5000, &s) == HCCL_SUCCESS &&
                 hccl__store_set(s, "g", value, sizeof(value)) == HCCL_SUCCESS,
             "%s", HcclGetLastErrorMessage());
  hccl__store_close(s);
  size_t n = 0;
  while (n < sizeof(reqs)) {
    n += pack(reqs + n, HCCL_STORE_OP_GET, 1, 0);
    reqs[n++] = 'g';
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  RANK_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect");
  fcntl(fd, F_SETFL, O_NONBLOCK);
  size_t sent = 0;
  double end = now_s() + 1.0;
  while (sent < n && now_s() < end) {
    ssize_t w = send(fd, reqs + sent, n - sent, MSG_NOSIGNAL);
    if (w > 0)
      sent += (size_t)w;
    else
      sleep_s(0.01);
  }
  fprintf(stderr, "never_reads: %zu of %zu request bytes taken before the server stopped reading\n",
          sent, n);
  RANK_CHECK(sent < n, "the server read %d GETs whose replies nobody reads", NEVER_READ_GETS);
  close(fd);
  return 0;
}

static int garbage(uint16_t port) {
  for (int i = 0; i < 100; i++)
    RANK_CHECK(garbage_one(port, 1 + rnd() % 4096, i % 3 == 0) == 0, "garbage %d", i);
  ready();
  for (int i = 0; i < 200; i++)
    RANK_CHECK(garbage_one(port, 1 + rnd() % 4096, i % 3 == 0) == 0, "garbage %d", i);
  RANK_CHECK(never_reads(port) == 0, "never reads");
  return store_still_serves(port, 0, NULL);
}

/* ---- the job ---- */

static int attacker(const struct scenario *sc) {
  uint16_t port = (uint16_t)atoi(getenv("MASTER_PORT"));
  double t0 = now_s();
  int fd;
  while ((fd = raw_connect(port)) < 0) { /* until rank 0's store listens */
    RANK_CHECK(now_s() - t0 < 20, "rank 0's store never listened on port %u", port);
    sleep_s(0.01);
  }
  close(fd);
  int rc = sc->attack(port);
  __atomic_store_n(&g->attack_done, 1, __ATOMIC_SEQ_CST);
  return rc;
}

static int rank_body(int rank, int n, void *arg) {
  const struct scenario *sc = arg;
  if (rank == ATTACKER) return attacker(sc);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  setenv("HCCL_BUFFSIZE", "8", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "60", 1);
  setenv("HCCL_EXEC_TIMEOUT", "30", 1);
  if (sc->token)
    setenv("HCCL_JOB_TOKEN", TOKEN, 1);
  else
    unsetenv("HCCL_JOB_TOKEN");
  pthread_t sampler;
  int stop = 0;
  if (rank == 0) {
    g->rss_before_kb = g->rss_peak_kb = status_kb("VmRSS");
    g->data_before_kb = g->data_peak_kb = status_kb("VmData");
    RANK_CHECK(pthread_create(&sampler, NULL, sample_memory, &stop) == 0, "sampler");
  } else if (rank != LATE) {
    RANK_CHECK(wait_until(&g->attack_ready, 1, 30), "the attack never got ready");
  } else {
    RANK_CHECK(wait_until(&g->attack_done, 1, 45), "the attack never ended");
  }
  g->t_start[rank] = now_s();
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  HcclComm comm = NULL;
  HcclResult r = HcclCommInitFromEnv(&comm);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  double last_start = 0;
  for (int i = 0; i < NRANKS; i++)
    if (g->t_start[i] > last_start) last_start = g->t_start[i];
  g->init_s[rank] = now_s() - last_start;
  if (rank == 0) {
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(sampler, NULL);
  }
  RANK_CHECK(r == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  RANK_CHECK(g->init_s[rank] < HOSTILE_INIT_MAX_S, "init ended %.2f s after the last rank's start",
             g->init_s[rank]);
  int32_t buf[1000];
  for (int i = 0; i < 1000; i++)
    buf[i] = (rank + 1) * i;
  RANK_CHECK(HcclAllReduce(buf, buf, 1000, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL) ==
                 HCCL_SUCCESS,
             "allreduce: %s", HcclGetLastErrorMessage());
  for (int i = 0; i < 1000; i++)
    RANK_CHECK(buf[i] == 10 * i, "allreduce element %d: %d", i, buf[i]);
  __atomic_add_fetch(&g->ranks_done, 1, __ATOMIC_SEQ_CST);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy: %s", HcclGetLastErrorMessage());
  return 0;
}

static void run(int (*attack)(uint16_t), int token) {
  struct scenario sc = {.token = token, .attack = attack};
  memset(g, 0, sizeof(*g));
  int failed = harness_run_ranks(NRANKS + 1, RUN_TIMEOUT_S, rank_body, &sc);
  fprintf(stderr,
          "init under attack: %.2f %.2f %.2f %.2f s; rank 0 grew VmRSS %ld KiB, VmData %ld KiB\n",
          g->init_s[0], g->init_s[1], g->init_s[2], g->init_s[3], g->rss_peak_kb - g->rss_before_kb,
          g->data_peak_kb - g->data_before_kb);
  assert_int_equal(failed, 0);
  assert_int_equal(g->ranks_done, NRANKS);
  assert_true(g->rss_peak_kb - g->rss_before_kb < RSS_GROWTH_MAX_KB);
  assert_true(g->data_peak_kb - g->data_before_kb < DATA_GROWTH_MAX_KB);
}

static void test_slowloris(void **st) {
  run(slowloris, 0);
}
static void test_flood(void **st) {
  run(flood, 1);
}
static void test_oversized(void **st) {
  run(oversized, 0);
}
static void test_truncated(void **st) {
  run(truncated, 0);
}
static void test_garbage(void **st) {
  run(garbage, 0);
}

int main(void) {
  g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g == MAP_FAILED) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slowloris), cmocka_unit_test(test_flood),
      cmocka_unit_test(test_oversized), cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_garbage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
