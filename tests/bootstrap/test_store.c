/*
 * test_store.c - the bootstrap key-value store: the in-memory store, the TCP client and the
 * libuv server (bootstrap/store_mem.c, client.c, server.c with server_conn.c and server_keys.c).
 *
 * The same contract checks (round trips, GET that waits for a SET from another thread, GET
 * deadline) run against both stores. The TCP store is then pushed where bootstraps fail:
 * GETs held until another process sets the key, a 32-process allgather through one server
 * hosted by rank 0, concurrent ADDs from 16 processes, 64 clients held at once, connect with
 * no server, unknown host, port in use, rebinding after a stop, the server stopping under a
 * blocked client, clients that vanish mid-request, and requests over the limits (checked by
 * the client, and by the server against a raw socket). Every test runs under an alarm; forked
 * ranks run under the harness deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "log.h"
#include "store.h"
#include "wire.h"

#define TEST_CAP_S 90

/* ---- helpers ---- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void on_alarm(int sig) {
  static const char msg[] = "test_store: a test ran past its time cap; killed by alarm\n";
  ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)w;
  (void)sig;
  _exit(1);
}

static int cap(void **state) {
  signal(SIGALRM, on_alarm);
  alarm(TEST_CAP_S);
  return 0;
}

static int uncap(void **state) {
  alarm(0);
  return 0;
}

static void assert_msg_has(const char *needle) {
  const char *msg = HcclGetLastErrorMessage();
  if (!strstr(msg, needle)) fail_msg("error message '%s' does not contain '%s'", msg, needle);
}

static struct hccl_store_server *start_server(uint16_t *port) {
  struct hccl_store_server *srv = NULL;
  assert_int_equal(hccl__store_server_start("127.0.0.1", 0, &srv, port), HCCL_SUCCESS);
  assert_non_null(srv);
  assert_true(*port != 0);
  return srv;
}

static struct hccl_store *connect_or_die(uint16_t port) {
  struct hccl_store *s = NULL;
  assert_int_equal(hccl__store_tcp_connect("127.0.0.1", port, 5000, &s), HCCL_SUCCESS);
  assert_non_null(s);
  return s;
}

static void assert_value(struct hccl_store *s, const char *key, const void *want, size_t want_len) {
  void *val = NULL;
  size_t len = 0;
  assert_int_equal(hccl__store_get(s, key, &val, &len, 5000), HCCL_SUCCESS);
  assert_int_equal(len, want_len);
  assert_memory_equal(val, want, want_len);
  assert_int_equal(((char *)val)[len], '\0'); /* values come back NUL-terminated */
  free(val);
}

/* ---- the contract, run against both stores ---- */

static void contract_roundtrip(struct hccl_store *s) {
  int64_t r = 0;
  assert_int_equal(hccl__store_set(s, "a", "hello", 5), HCCL_SUCCESS);
  assert_value(s, "a", "hello", 5);
  assert_int_equal(hccl__store_set(s, "a", "hi", 2), HCCL_SUCCESS); /* overwrite */
  assert_value(s, "a", "hi", 2);
  assert_int_equal(hccl__store_set(s, "empty", NULL, 0), HCCL_SUCCESS);
  assert_value(s, "empty", "", 0);
  const char bin[] = {0, 1, 2, 0, (char)0xff};
  assert_int_equal(hccl__store_set(s, "bin", bin, sizeof(bin)), HCCL_SUCCESS);
  assert_value(s, "bin", bin, sizeof(bin));

  assert_int_equal(hccl__store_add(s, "n", 5, &r), HCCL_SUCCESS);
  assert_int_equal(r, 5);
  assert_int_equal(hccl__store_add(s, "n", -7, &r), HCCL_SUCCESS);
  assert_int_equal(r, -2);
  assert_value(s, "n", "-2", 2);
  assert_int_equal(hccl__store_set(s, "n", "40", 2), HCCL_SUCCESS); /* set, then add on it */
  assert_int_equal(hccl__store_add(s, "n", 2, &r), HCCL_SUCCESS);
  assert_int_equal(r, 42);

  assert_int_equal(hccl__store_add(s, "a", 1, &r), HCCL_E_PARA); /* "hi" is not a number */
  assert_msg_has("'a'");
  assert_int_equal(hccl__store_set(s, "max", "9223372036854775807", 19), HCCL_SUCCESS);
  assert_int_equal(hccl__store_add(s, "max", 1, &r), HCCL_E_PARA);
  assert_msg_has("overflow");
  assert_value(s, "a", "hi", 2); /* still usable after refused requests */
}

struct late_set {
  struct hccl_store *s;
  int delay_ms;
};

static void *late_setter(void *arg) {
  struct late_set *ls = arg;
  sleep_ms(ls->delay_ms);
  HcclResult r = hccl__store_set(ls->s, "late", "arrived", 7);
  return (void *)(intptr_t)r;
}

/* getter waits on "late" while another thread sets it through setter (which may be getter
 * itself for a thread-safe store). */
static void contract_get_waits(struct hccl_store *getter, struct hccl_store *setter) {
  struct late_set ls = {setter, 300};
  pthread_t th;
  void *val = NULL, *ret;
  size_t len = 0;
  int64_t t0 = now_ms();
  assert_int_equal(pthread_create(&th, NULL, late_setter, &ls), 0);
  assert_int_equal(hccl__store_get(getter, "late", &val, &len, 10000), HCCL_SUCCESS);
  int64_t waited = now_ms() - t0;
  pthread_join(th, &ret);
  assert_int_equal((intptr_t)ret, HCCL_SUCCESS);
  assert_int_equal(len, 7);
  assert_memory_equal(val, "arrived", 7);
  free(val);
  assert_true(waited >= 250); /* it really waited for the set */
  assert_true(waited < 5000);
}

static void contract_get_timeout(struct hccl_store *s) {
  void *val = (void *)0x1;
  size_t len = 99;
  int64_t t0 = now_ms();
  assert_int_equal(hccl__store_get(s, "never-set-key", &val, &len, 400), HCCL_E_TIMEOUT);
  int64_t waited = now_ms() - t0;
  assert_msg_has("never-set-key");
  assert_ptr_equal(val, (void *)0x1); /* outputs untouched on failure */
  assert_int_equal(len, 99);
  if (waited < 350 || waited > 2000)
    fail_msg("get with a 400 ms deadline took %lld ms", (long long)waited);
}

static void contract_limits(struct hccl_store *s) {
  char key[HCCL_STORE_MAX_KEY_LEN + 2];
  memset(key, 'k', sizeof(key) - 1);
  key[sizeof(key) - 1] = '\0'; /* 1025 bytes */
  assert_int_equal(hccl__store_set(s, key, "x", 1), HCCL_E_PARA);
  assert_msg_has("1024");
  int64_t r;
  assert_int_equal(hccl__store_add(s, key, 1, &r), HCCL_E_PARA);
  void *val;
  size_t len;
  assert_int_equal(hccl__store_get(s, key, &val, &len, 100), HCCL_E_PARA);
  assert_int_equal(hccl__store_set(s, "", "x", 1), HCCL_E_PARA);
  key[HCCL_STORE_MAX_KEY_LEN] = '\0'; /* exactly the limit is fine */
  assert_int_equal(hccl__store_set(s, key, "x", 1), HCCL_SUCCESS);
  assert_value(s, key, "x", 1);
  char small[8] = {0}; /* the length is refused before the buffer is read */
  assert_int_equal(hccl__store_set(s, "huge", small, (size_t)HCCL_STORE_MAX_VALUE_LEN + 1),
                   HCCL_E_PARA);
  assert_msg_has("huge");
  assert_int_equal(hccl__store_get(s, "k", &val, &len, -1), HCCL_E_PARA); /* no deadline */
  assert_value(s, key, "x", 1);                                           /* still usable */
}

/* ---- in-memory store ---- */

static void test_mem_roundtrip(void **state) {
  struct hccl_store *s;
  assert_int_equal(hccl__store_mem_new(&s), HCCL_SUCCESS);
  contract_roundtrip(s);
  hccl__store_close(s);
}

static void test_mem_get_waits_for_thread(void **state) {
  struct hccl_store *s;
  assert_int_equal(hccl__store_mem_new(&s), HCCL_SUCCESS);
  contract_get_waits(s, s);
  hccl__store_close(s);
}

static void test_mem_get_timeout(void **state) {
  struct hccl_store *s;
  assert_int_equal(hccl__store_mem_new(&s), HCCL_SUCCESS);
  contract_get_timeout(s);
  hccl__store_close(s);
}

static void test_mem_limits(void **state) {
  struct hccl_store *s;
  assert_int_equal(hccl__store_mem_new(&s), HCCL_SUCCESS);
  contract_limits(s);
  hccl__store_close(s);
}

/* ---- TCP store, one process ---- */

static void test_tcp_roundtrip(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  struct hccl_store *s = connect_or_die(port);
  contract_roundtrip(s);
  /* A second client sees the same keys; "localhost" reaches a server bound to 127.0.0.1
   * only, so it was resolved to IPv4, not ::1. */
  struct hccl_store *s2 = NULL;
  assert_int_equal(hccl__store_tcp_connect("localhost", port, 5000, &s2), HCCL_SUCCESS);
  assert_value(s2, "a", "hi", 2);
  hccl__store_close(s2);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
}

static void test_tcp_get_waits_for_thread(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  struct hccl_store *getter = connect_or_die(port), *setter = connect_or_die(port);
  contract_get_waits(getter, setter);
  hccl__store_close(getter);
  hccl__store_close(setter);
  hccl__store_server_stop(srv);
}

static void test_tcp_get_waits_for_process(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  struct hccl_store *s = connect_or_die(port);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(20);
    sleep_ms(300);
    struct hccl_store *c = NULL;
    int ok = hccl__store_tcp_connect("127.0.0.1", port, 5000, &c) == HCCL_SUCCESS &&
             hccl__store_set(c, "from-child", "pid", 3) == HCCL_SUCCESS;
    hccl__store_close(c);
    _exit(ok ? 0 : 1);
  }
  int64_t t0 = now_ms();
  assert_value(s, "from-child", "pid", 3);
  assert_true(now_ms() - t0 >= 250);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
}

static void test_tcp_get_timeout(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  struct hccl_store *s = connect_or_die(port);
  contract_get_timeout(s);
  /* The client gave up mid-request, so it is marked broken: later calls fail at once. */
  int64_t t0 = now_ms();
  assert_int_equal(hccl__store_set(s, "x", "1", 1), HCCL_E_TCP_TRANSFER);
  assert_msg_has("unusable");
  assert_true(now_ms() - t0 < 100);
  hccl__store_close(s);
  /* The server dropped the abandoned GET and serves new clients; the key still works. */
  s = connect_or_die(port);
  assert_int_equal(hccl__store_set(s, "never-set-key", "now", 3), HCCL_SUCCESS);
  assert_value(s, "never-set-key", "now", 3);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
}

static void test_tcp_limits(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  struct hccl_store *s = connect_or_die(port);
  contract_limits(s);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
}

static void test_tcp_large_value(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  struct hccl_store *s = connect_or_die(port), *s2 = connect_or_die(port);
  size_t n = 1 << 20;
  unsigned char *big = malloc(n);
  assert_non_null(big);
  for (size_t i = 0; i < n; i++)
    big[i] = (unsigned char)(i * 2654435761u >> 13);
  assert_int_equal(hccl__store_set(s, "big", big, n), HCCL_SUCCESS);
  assert_value(s2, "big", big, n);
  /* Replace it while re-reading it: each reply carries one whole value. */
  memset(big, 0x5a, n);
  assert_int_equal(hccl__store_set(s, "big", big, n), HCCL_SUCCESS);
  assert_value(s2, "big", big, n);
  free(big);
  hccl__store_close(s);
  hccl__store_close(s2);
  hccl__store_server_stop(srv);
}

/* ---- TCP store, many clients and processes ---- */

static int allgather_rank(int rank, int nranks, void *arg) {
  const char *addr = getenv("MASTER_ADDR");
  uint16_t port = (uint16_t)atoi(getenv("MASTER_PORT"));
  struct hccl_store_server *srv = NULL;
  struct hccl_store *s = NULL;
  char key[64], val[128];
  if (rank == 0) {
    uint16_t got;
    RANK_CHECK(hccl__store_server_start(addr, port, &srv, &got) == HCCL_SUCCESS, "%s",
               HcclGetLastErrorMessage());
    RANK_CHECK(got == port, "bound %u, asked %u", got, port);
  }
  /* The other ranks may try before rank 0 listens: connect retries refused attempts. */
  RANK_CHECK(hccl__store_tcp_connect(addr, port, 20000, &s) == HCCL_SUCCESS, "%s",
             HcclGetLastErrorMessage());
  snprintf(key, sizeof(key), "ag/%d", rank);
  int n = snprintf(val, sizeof(val), "rank %d of %d says hello", rank, nranks);
  RANK_CHECK(hccl__store_set(s, key, val, (size_t)n) == HCCL_SUCCESS, "%s",
             HcclGetLastErrorMessage());
  for (int i = 1; i < nranks; i++) {
    int peer = (rank + i) % nranks;
    void *got;
    size_t len;
    snprintf(key, sizeof(key), "ag/%d", peer);
    n = snprintf(val, sizeof(val), "rank %d of %d says hello", peer, nranks);
    RANK_CHECK(hccl__store_get(s, key, &got, &len, 20000) == HCCL_SUCCESS, "%s",
               HcclGetLastErrorMessage());
    int same = len == (size_t)n && memcmp(got, val, len) == 0;
    free(got);
    RANK_CHECK(same, "wrong value for %s", key);
  }
  int64_t done;
  RANK_CHECK(hccl__store_add(s, "ag/done", 1, &done) == HCCL_SUCCESS, "%s",
             HcclGetLastErrorMessage());
  if (done == nranks) RANK_CHECK(hccl__store_set(s, "ag/exit", "1", 1) == HCCL_SUCCESS, "set");
  if (rank == 0) {
    /* The server lives in rank 0: keep it until every rank has finished with it. */
    void *got;
    size_t len;
    RANK_CHECK(hccl__store_get(s, "ag/exit", &got, &len, 20000) == HCCL_SUCCESS, "%s",
               HcclGetLastErrorMessage());
    free(got);
  }
  hccl__store_close(s);
  hccl__store_server_stop(srv);
  return 0;
}

static void test_tcp_allgather_32_processes(void **state) {
  assert_int_equal(harness_run_ranks(32, 60, allgather_rank, NULL), 0);
}

#define ADDS_PER_RANK 100

static int add_rank(int rank, int nranks, void *arg) {
  uint16_t port = *(uint16_t *)arg;
  struct hccl_store *s = NULL;
  RANK_CHECK(hccl__store_tcp_connect("127.0.0.1", port, 10000, &s) == HCCL_SUCCESS, "%s",
             HcclGetLastErrorMessage());
  for (int i = 0; i < ADDS_PER_RANK; i++) {
    int64_t r;
    RANK_CHECK(hccl__store_add(s, "counter", rank + 1, &r) == HCCL_SUCCESS, "%s",
               HcclGetLastErrorMessage());
    RANK_CHECK(r >= rank + 1, "counter went to %lld", (long long)r);
  }
  hccl__store_close(s);
  return 0;
}

static void test_tcp_add_16_processes(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  assert_int_equal(harness_run_ranks(16, 60, add_rank, &port), 0);
  struct hccl_store *s = connect_or_die(port);
  int64_t total;
  assert_int_equal(hccl__store_add(s, "counter", 0, &total), HCCL_SUCCESS);
  assert_int_equal(total, ADDS_PER_RANK * (16 * 17 / 2)); /* 13600: no add lost */
  assert_value(s, "counter", "13600", 5);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
}

#define HELD_CLIENTS 64

struct held {
  uint16_t port;
  HcclResult connect_r, get_r;
  struct hccl_store *s;
};

static void *held_getter(void *arg) {
  struct held *h = arg;
  void *val;
  size_t len;
  h->get_r = hccl__store_get(h->s, "go", &val, &len, 20000);
  if (h->get_r == HCCL_SUCCESS) free(val);
  return NULL;
}

static void test_tcp_64_clients_held_at_once(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  static struct held h[HELD_CLIENTS];
  pthread_t th[HELD_CLIENTS];
  for (int i = 0; i < HELD_CLIENTS; i++) {
    h[i].s = connect_or_die(port);
    assert_int_equal(pthread_create(&th[i], NULL, held_getter, &h[i]), 0);
  }
  sleep_ms(300); /* let every GET reach the server and be held */
  struct hccl_store *s = connect_or_die(port);
  assert_int_equal(hccl__store_set(s, "go", "now", 3), HCCL_SUCCESS);
  for (int i = 0; i < HELD_CLIENTS; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(h[i].get_r, HCCL_SUCCESS);
    int64_t r;
    assert_int_equal(hccl__store_add(h[i].s, "arrived", 1, &r), HCCL_SUCCESS);
    hccl__store_close(h[i].s);
  }
  int64_t r;
  assert_int_equal(hccl__store_add(s, "arrived", 0, &r), HCCL_SUCCESS);
  assert_int_equal(r, HELD_CLIENTS);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
}

/* ---- TCP store, failures ---- */

static void test_tcp_connect_no_server_times_out(void **state) {
  uint16_t port = harness_free_port();
  struct hccl_store *s = NULL;
  char where[32];
  int64_t t0 = now_ms();
  assert_int_equal(hccl__store_tcp_connect("127.0.0.1", port, 700, &s), HCCL_E_TIMEOUT);
  int64_t took = now_ms() - t0;
  assert_null(s);
  snprintf(where, sizeof(where), "127.0.0.1:%u", port);
  assert_msg_has(where);
  assert_msg_has("refused");
  if (took < 650 || took > 2500)
    fail_msg("connect with a 700 ms deadline took %lld ms", (long long)took);
}

static void test_tcp_connect_unknown_host(void **state) {
  struct hccl_store *s = NULL;
  int64_t t0 = now_ms();
  assert_int_equal(hccl__store_tcp_connect("no-such-host.invalid", 29688, 5000, &s),
                   HCCL_E_NOT_FOUND);
  assert_null(s);
  assert_msg_has("no-such-host.invalid");
  assert_true(now_ms() - t0 < 4000); /* no retrying a name that does not exist */
}

static void test_server_port_in_use(void **state) {
  uint16_t port, port2 = 0;
  char text[16];
  struct hccl_store_server *srv = start_server(&port), *srv2 = NULL;
  assert_int_equal(hccl__store_server_start("127.0.0.1", port, &srv2, &port2), HCCL_E_UNAVAIL);
  assert_null(srv2);
  assert_int_equal(port2, 0);
  assert_msg_has("in use");
  snprintf(text, sizeof(text), ":%u", port);
  assert_msg_has(text);
  /* The first server is unharmed. */
  struct hccl_store *s = connect_or_die(port);
  assert_int_equal(hccl__store_set(s, "still", "here", 4), HCCL_SUCCESS);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
  hccl__store_server_stop(NULL); /* accepted */
}

static void test_server_rebind_after_stop(void **state) {
  uint16_t port, port2;
  struct hccl_store_server *srv = start_server(&port);
  struct hccl_store *s = connect_or_die(port);
  assert_int_equal(hccl__store_set(s, "k", "v", 1), HCCL_SUCCESS);
  hccl__store_server_stop(srv); /* the server closes first: its side sits in TIME_WAIT */
  /* The old client finds out at once, with the server's address in the message. */
  int64_t t0 = now_ms();
  void *val;
  size_t len;
  assert_int_equal(hccl__store_get(s, "k", &val, &len, 10000), HCCL_E_TCP_TRANSFER);
  assert_true(now_ms() - t0 < 1000);
  char where[32];
  snprintf(where, sizeof(where), "127.0.0.1:%u", port);
  assert_msg_has(where);
  hccl__store_close(s);
  /* A restarted job gets the same port back (SO_REUSEADDR), with an empty store. */
  assert_int_equal(hccl__store_server_start("127.0.0.1", port, &srv, &port2), HCCL_SUCCESS);
  assert_int_equal(port2, port);
  s = connect_or_die(port);
  assert_int_equal(hccl__store_get(s, "k", &val, &len, 200), HCCL_E_TIMEOUT);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
}

struct blocked {
  struct hccl_store *s;
  HcclResult r;
  int64_t returned_at;
  char msg[1024];
};

static void *blocked_getter(void *arg) {
  struct blocked *b = arg;
  void *val;
  size_t len;
  b->r = hccl__store_get(b->s, "never", &val, &len, 30000);
  b->returned_at = now_ms();
  snprintf(b->msg, sizeof(b->msg), "%s", HcclGetLastErrorMessage());
  return NULL;
}

static void test_server_stop_wakes_blocked_get(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  struct blocked b = {.s = connect_or_die(port)};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, blocked_getter, &b), 0);
  sleep_ms(300);
  int64_t stopped_at = now_ms();
  hccl__store_server_stop(srv);
  pthread_join(th, NULL);
  assert_int_equal(b.r, HCCL_E_TCP_TRANSFER);
  assert_non_null(strstr(b.msg, "never"));
  assert_true(b.returned_at - stopped_at < 2000);
  hccl__store_close(b.s);
}

/* A raw connection to the server, to send what the client never would. */
static int raw_connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

static void raw_send(int fd, const void *buf, size_t len) {
  assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void raw_send_header(int fd, uint8_t op, uint32_t key_len, uint64_t arg) {
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
  struct hccl_store_header h = {.op = op, .key_len = key_len, .arg = arg};
  hccl__store_header_pack(&h, hdr);
  raw_send(fd, hdr, sizeof(hdr));
}

/* Reads until EOF (at most 5 s) and returns how many bytes came; the text lands in buf. */
static size_t raw_read_to_eof(int fd, char *buf, size_t cap) {
  size_t have = 0;
  int64_t deadline = now_ms() + 5000;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int left = (int)(deadline - now_ms());
    assert_true(left > 0); /* the server must close the connection */
    if (poll(&p, 1, left) <= 0) continue;
    ssize_t r = recv(fd, buf + have, cap - have - 1, 0);
    if (r <= 0) break;
    have += (size_t)r;
  }
  buf[have] = '\0';
  return have;
}

/* The server answers BAD_REQUEST with a message containing `needle`, then closes. */
static void expect_rejected(int fd, const char *needle) {
  char buf[2048];
  size_t n = raw_read_to_eof(fd, buf, sizeof(buf));
  struct hccl_store_header h;
  assert_true(n >= HCCL_STORE_HEADER_LEN);
  assert_int_equal(hccl__store_header_unpack((unsigned char *)buf, &h), 0);
  assert_int_equal(h.op, HCCL_STORE_STATUS_BAD_REQUEST);
  assert_int_equal(h.arg, n - HCCL_STORE_HEADER_LEN);
  if (!strstr(buf + HCCL_STORE_HEADER_LEN, needle))
    fail_msg("server said '%s', expected '%s'", buf + HCCL_STORE_HEADER_LEN, needle);
  close(fd);
}

static void test_server_rejects_bad_requests(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  int fd = raw_connect(port);
  raw_send_header(fd, HCCL_STORE_OP_GET, 1u << 20, 0); /* oversize key */
  expect_rejected(fd, "1024");
  fd = raw_connect(port);
  raw_send_header(fd, HCCL_STORE_OP_SET, 3, (uint64_t)HCCL_STORE_MAX_VALUE_LEN + 1);
  expect_rejected(fd, "limit");
  fd = raw_connect(port);
  raw_send(fd, "GET / HTTP/1.1\r\n\r\n", 18); /* someone else's protocol */
  expect_rejected(fd, "not the store protocol");
  fd = raw_connect(port);
  raw_send_header(fd, 9, 1, 0);
  expect_rejected(fd, "unknown operation");
  /* A second request while a GET is held is a protocol error: the server hangs up. */
  fd = raw_connect(port);
  raw_send_header(fd, HCCL_STORE_OP_GET, 4, 0);
  raw_send(fd, "held", 4);
  sleep_ms(100);
  raw_send_header(fd, HCCL_STORE_OP_GET, 4, 0);
  char buf[64];
  assert_int_equal(raw_read_to_eof(fd, buf, sizeof(buf)), 0);
  close(fd);
  /* Everyone else is still served. */
  struct hccl_store *s = connect_or_die(port);
  assert_int_equal(hccl__store_set(s, "fine", "yes", 3), HCCL_SUCCESS);
  assert_value(s, "fine", "yes", 3);
  hccl__store_close(s);
  hccl__store_server_stop(srv);
}

static void test_server_client_vanishes_mid_request(void **state) {
  uint16_t port;
  struct hccl_store_server *srv = start_server(&port);
  int fd = raw_connect(port); /* half a header */
  raw_send(fd, "HC", 2);
  close(fd);
  fd = raw_connect(port); /* a held GET */
  raw_send_header(fd, HCCL_STORE_OP_GET, 4, 0);
  raw_send(fd, "gone", 4);
  sleep_ms(100);
  close(fd);
  fd = raw_connect(port); /* half of a 1 MiB value */
  raw_send_header(fd, HCCL_STORE_OP_SET, 4, 1u << 20);
  raw_send(fd, "half", 4);
  static char chunk[1 << 19];
  raw_send(fd, chunk, sizeof(chunk));
  close(fd);
  for (int i = 0; i < 20; i++) { /* clients that connect and leave */
    fd = raw_connect(port);
    close(fd);
  }
  sleep_ms(200);
  /* The half-sent SET never happened; the abandoned key is free to be set. */
  struct hccl_store *s = connect_or_die(port);
  void *val;
  size_t len;
  assert_int_equal(hccl__store_get(s, "half", &val, &len, 200), HCCL_E_TIMEOUT);
  hccl__store_close(s);
  s = connect_or_die(port);
  assert_int_equal(hccl__store_set(s, "gone", "back", 4), HCCL_SUCCESS);
  assert_value(s, "gone", "back", 4);
  hccl__store_close(s);
  hccl__store_server_stop(srv); /* ASan/valgrind: nothing of them is left */
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, cap, uncap)
      T(test_mem_roundtrip),
      T(test_mem_get_waits_for_thread),
      T(test_mem_get_timeout),
      T(test_mem_limits),
      T(test_tcp_roundtrip),
      T(test_tcp_get_waits_for_thread),
      T(test_tcp_get_waits_for_process),
      T(test_tcp_get_timeout),
      T(test_tcp_limits),
      T(test_tcp_large_value),
      T(test_tcp_allgather_32_processes),
      T(test_tcp_add_16_processes),
      T(test_tcp_64_clients_held_at_once),
      T(test_tcp_connect_no_server_times_out),
      T(test_tcp_connect_unknown_host),
      T(test_server_port_in_use),
      T(test_server_rebind_after_stop),
      T(test_server_stop_wakes_blocked_get),
      T(test_server_rejects_bad_requests),
      T(test_server_client_vanishes_mid_request),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
