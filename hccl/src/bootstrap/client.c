/*
 * client.c - the TCP store client: a struct hccl_store that talks to server.c over
 * one blocking-style TCP connection (wire format in wire.h).
 *
 * No event loop: the socket is non-blocking and every wait is a poll() bounded by a deadline
 * on CLOCK_MONOTONIC, so no call can hang on a dead or silent server. EINTR and short reads
 * and writes are retried. Connect retries refused or unreachable addresses with a backoff of
 * 10 ms doubling to 500 ms until its timeout, because the server rank often starts after its
 * clients. set and add wait for their reply at most max(connect timeout, 30 s).
 *
 * A client is used by one thread at a time (it carries one request at a time). After any
 * failure in the middle of a request (timeout, server gone, bad reply) the stream position
 * is unknown, so the connection is closed and the client is marked broken: every later call
 * fails at once with HCCL_E_TCP_TRANSFER. Argument errors (key too long, ...) are caught
 * before anything is sent and leave the client usable.
 *
 * Beyond store.h: a timeout_ms below 0 is refused (HCCL_E_PARA; every wait has a deadline),
 * values returned by get have a NUL after their last byte (not counted in *len), and a
 * value written by add reads back as decimal text. The same holds for store_mem.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "store.h"
#include "wire.h"

#define MIN_IO_TIMEOUT_MS 30000
#define BACKOFF_FIRST_MS 10
#define BACKOFF_MAX_MS 500

struct tcp_store {
  struct hccl_store base; /* first, so a struct hccl_store * is a struct tcp_store * */
  int fd;                 /* -1 once broken */
  int64_t io_timeout_ms;
  char where[300];  /* "host:port", for messages */
  char broken[600]; /* why the connection was given up, for later calls */
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before deadline, for poll(); 0 when passed. */
static int left_ms(int64_t deadline) {
  int64_t left = deadline - now_ms();
  if (left < 0) return 0;
  return left > INT32_MAX ? INT32_MAX : (int)left;
}

/* See wire.h. */
HcclResult hccl__store_resolve(const char *host, uint16_t port, int passive, const char *role,
                               struct addrinfo **out) {
  char service[8];
  snprintf(service, sizeof(service), "%u", port);
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
  if (passive) hints.ai_flags |= AI_PASSIVE;
  int rc = getaddrinfo(host, service, &hints, out);
  if (rc != 0 && rc != EAI_SYSTEM && rc != EAI_AGAIN && rc != EAI_MEMORY) {
    /* No IPv4 address under this name: take whatever family it has. */
    hints.ai_family = AF_UNSPEC;
    rc = getaddrinfo(host, service, &hints, out);
  }
  if (rc == 0) return HCCL_SUCCESS;
  return hccl__fail(HCCL_E_NOT_FOUND,
                    "%s: cannot resolve host '%s' (port %u): %s; check MASTER_ADDR or the "
                    "root info's address",
                    role, host, port, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
}

/* Marks the client broken (closing its socket) and fails with code and the formatted text. */
static HcclResult give_up(struct tcp_store *t, HcclResult code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static HcclResult give_up(struct tcp_store *t, HcclResult code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->broken, sizeof(t->broken), fmt, ap);
  va_end(ap);
  if (t->fd >= 0) close(t->fd);
  t->fd = -1;
  return hccl__fail(code, "%s", t->broken);
}

static HcclResult check_usable(struct tcp_store *t) {
  if (t->fd >= 0) return HCCL_SUCCESS;
  return hccl__fail(HCCL_E_TCP_TRANSFER,
                    "store connection to %s is unusable after an earlier failure (%s); "
                    "connect again",
                    t->where, t->broken);
}

/* Sends all of iov[0..n) before deadline. iov is consumed. */
static HcclResult send_all(struct tcp_store *t, struct iovec *iov, int n, int64_t deadline,
                           const char *what, const char *key) {
  while (n > 0) {
    if (iov->iov_len == 0) {
      iov++;
      n--;
      continue;
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(t->fd, &msg, MSG_NOSIGNAL);
    if (w >= 0) {
      size_t done = (size_t)w;
      while (n > 0 && done >= iov->iov_len) {
        done -= iov->iov_len;
        iov++;
        n--;
      }
      if (n > 0) {
        iov->iov_base = (char *)iov->iov_base + done;
        iov->iov_len -= done;
      }
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return give_up(t, HCCL_E_TCP_TRANSFER,
                     "store server %s went away while sending %s of key '%s': %s", t->where, what,
                     key, strerror(errno));
    struct pollfd p = {.fd = t->fd, .events = POLLOUT};
    int rc = poll(&p, 1, left_ms(deadline));
    if (rc < 0 && errno != EINTR)
      return give_up(t, HCCL_E_SYSCALL, "poll on store connection to %s: %s", t->where,
                     strerror(errno));
    if (rc == 0)
      return give_up(t, HCCL_E_TIMEOUT,
                     "store server %s did not take %s of key '%s' within %lld ms", t->where, what,
                     key, (long long)t->io_timeout_ms);
  }
  return HCCL_SUCCESS;
}

/* Receives exactly len bytes before deadline. what names the awaited data for messages;
 * a GET's wait for its value (what == "the value") times out as "key was not set". */
static HcclResult recv_all(struct tcp_store *t, void *buf, size_t len, int64_t deadline,
                           const char *what, const char *key, int64_t timeout_ms) {
  char *p = buf;
  while (len > 0) {
    ssize_t r = recv(t->fd, p, len, 0);
    if (r > 0) {
      p += r;
      len -= (size_t)r;
      continue;
    }
    if (r == 0)
      return give_up(t, HCCL_E_TCP_TRANSFER,
                     "store server %s closed the connection while this process waited for %s "
                     "of key '%s'; the server rank may have exited or failed",
                     t->where, what, key);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return give_up(t, HCCL_E_TCP_TRANSFER,
                     "store connection to %s failed while waiting for %s of key '%s': %s; the "
                     "server rank may have exited or failed",
                     t->where, what, key, strerror(errno));
    struct pollfd pf = {.fd = t->fd, .events = POLLIN};
    int rc = poll(&pf, 1, left_ms(deadline));
    if (rc < 0 && errno != EINTR)
      return give_up(t, HCCL_E_SYSCALL, "poll on store connection to %s: %s", t->where,
                     strerror(errno));
    if (rc == 0 && strcmp(what, "the value") == 0)
      return give_up(t, HCCL_E_TIMEOUT,
                     "store key '%s' was not set within %lld ms (store server %s); the rank "
                     "that should set it may be slow, stuck or dead",
                     key, (long long)timeout_ms, t->where);
    if (rc == 0)
      return give_up(t, HCCL_E_TIMEOUT,
                     "store server %s did not send %s of key '%s' within %lld ms", t->where, what,
                     key, (long long)timeout_ms);
  }
  return HCCL_SUCCESS;
}

static HcclResult check_key(struct tcp_store *t, const char *key) {
  if (key == NULL) return hccl__fail(HCCL_E_PTR, "store key is NULL (store %s)", t->where);
  size_t n = strnlen(key, HCCL_STORE_MAX_KEY_LEN + 1);
  if (n == 0)
    return hccl__fail(HCCL_E_PARA, "store key is empty; keys need 1 to %u bytes (store %s)",
                      HCCL_STORE_MAX_KEY_LEN, t->where);
  if (n > HCCL_STORE_MAX_KEY_LEN)
    return hccl__fail(HCCL_E_PARA, "store key '%.40s...' is longer than the %u-byte limit", key,
                      HCCL_STORE_MAX_KEY_LEN);
  return HCCL_SUCCESS;
}

/* Sends one request and reads the reply header. On a non-OK status reads the server's message
 * and fails with it. On success *reply holds the header; a body of reply->arg bytes (GET)
 * is left for the caller to read. */
static HcclResult call(struct tcp_store *t, uint8_t op, const char *key, uint64_t arg,
                       const void *val, size_t len, int64_t timeout_ms,
                       struct hccl_store_header *reply) {
  static const char *const names[] = {"", "the reply to SET", "the value", "the reply to ADD",
                                      "the reply to HELLO"};
  HCCL_TRY(check_usable(t));
  int64_t deadline = now_ms() + timeout_ms;
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
  struct hccl_store_header h = {.op = op, .key_len = (uint32_t)strlen(key), .arg = arg};
  hccl__store_header_pack(&h, hdr);
  struct iovec iov[3] = {{hdr, sizeof(hdr)}, {(void *)key, h.key_len}, {(void *)val, len}};
  /* Sending has the client's I/O deadline even for GET: the server reads eagerly. */
  HCCL_TRY(send_all(t, iov, 3, now_ms() + t->io_timeout_ms, "the request", key));
  HCCL_TRY(recv_all(t, hdr, sizeof(hdr), deadline, names[op], key, timeout_ms));
  if (hccl__store_header_unpack(hdr, reply) != 0)
    return give_up(t, HCCL_E_TCP_TRANSFER,
                   "%s sent a reply that is not the store protocol (magic %02x%02x); is "
                   "MASTER_PORT the port of some other service?",
                   t->where, hdr[0], hdr[1]);
  if (reply->op == HCCL_STORE_STATUS_OK) return HCCL_SUCCESS;
  char text[HCCL_STORE_MAX_ERROR_LEN + 1];
  size_t n = reply->arg > HCCL_STORE_MAX_ERROR_LEN ? HCCL_STORE_MAX_ERROR_LEN : reply->arg;
  if (reply->arg != n)
    return give_up(t, HCCL_E_TCP_TRANSFER, "store server %s sent a %llu-byte error message",
                   t->where, (unsigned long long)reply->arg);
  HCCL_TRY(recv_all(t, text, n, deadline, "an error message", key, timeout_ms));
  text[n] = '\0';
  if (reply->op == HCCL_STORE_STATUS_BAD_REQUEST)
    return give_up(t, HCCL_E_TCP_TRANSFER, "store server %s rejected a request: %s", t->where,
                   text);
  if (reply->op == HCCL_STORE_STATUS_DENIED)
    return give_up(t, HCCL_E_PARA, "store server %s refused this process: %s", t->where, text);
  return hccl__fail(HCCL_E_PARA, "store server %s: %s", t->where, text);
}

static HcclResult tcp_set(struct hccl_store *s, const char *key, const void *val, size_t len) {
  struct tcp_store *t = (struct tcp_store *)s;
  struct hccl_store_header reply;
  HCCL_TRY(check_key(t, key));
  if (len > HCCL_STORE_MAX_VALUE_LEN)
    return hccl__fail(HCCL_E_PARA, "value of store key '%s' is %zu bytes; the limit is %u", key,
                      len, HCCL_STORE_MAX_VALUE_LEN);
  if (len && !val) return hccl__fail(HCCL_E_PTR, "value of store key '%s' is NULL", key);
  return call(t, HCCL_STORE_OP_SET, key, len, val, len, t->io_timeout_ms, &reply);
}

static HcclResult tcp_get(struct hccl_store *s, const char *key, void **val, size_t *len,
                          int64_t timeout_ms) {
  struct tcp_store *t = (struct tcp_store *)s;
  struct hccl_store_header reply;
  HCCL_TRY(check_key(t, key));
  if (!val || !len) return hccl__fail(HCCL_E_PTR, "get of store key '%s': output is NULL", key);
  if (timeout_ms < 0)
    return hccl__fail(HCCL_E_PARA,
                      "get of store key '%s': timeout %lld ms is negative; every "
                      "wait needs a deadline",
                      key, (long long)timeout_ms);
  int64_t deadline = now_ms() + timeout_ms;
  HCCL_TRY(call(t, HCCL_STORE_OP_GET, key, 0, NULL, 0, timeout_ms, &reply));
  if (reply.arg > HCCL_STORE_MAX_VALUE_LEN)
    return give_up(t, HCCL_E_TCP_TRANSFER,
                   "store server %s announced a %llu-byte value for key '%s'; the limit is %u",
                   t->where, (unsigned long long)reply.arg, key, HCCL_STORE_MAX_VALUE_LEN);
  size_t n = (size_t)reply.arg;
  char *buf = malloc(n + 1);
  if (!buf)
    return give_up(t, HCCL_E_MEMORY, "no memory for the %zu-byte value of store key '%s'", n, key);
  /* The value is already on its way; give it the I/O deadline if that is later. */
  int64_t io_deadline = now_ms() + t->io_timeout_ms;
  HcclResult r = recv_all(t, buf, n, deadline > io_deadline ? deadline : io_deadline, "the value",
                          key, timeout_ms);
  if (r != HCCL_SUCCESS) {
    free(buf);
    return r;
  }
  buf[n] = '\0';
  *val = buf;
  *len = n;
  return HCCL_SUCCESS;
}

static HcclResult tcp_add(struct hccl_store *s, const char *key, int64_t delta, int64_t *result) {
  struct tcp_store *t = (struct tcp_store *)s;
  struct hccl_store_header reply;
  HCCL_TRY(check_key(t, key));
  if (!result) return hccl__fail(HCCL_E_PTR, "add to store key '%s': result is NULL", key);
  HCCL_TRY(call(t, HCCL_STORE_OP_ADD, key, (uint64_t)delta, NULL, 0, t->io_timeout_ms, &reply));
  *result = (int64_t)reply.arg;
  return HCCL_SUCCESS;
}

HcclResult hccl__store_tcp_hello(struct hccl_store *s, const char *token) {
  if (!s || !token || !*token) return HCCL_SUCCESS;
  struct tcp_store *t = (struct tcp_store *)s;
  struct hccl_store_header reply;
  return call(t, HCCL_STORE_OP_HELLO, token, 0, NULL, 0, t->io_timeout_ms, &reply);
}

static void tcp_close(struct hccl_store *s) {
  struct tcp_store *t = (struct tcp_store *)s;
  if (t->fd >= 0) close(t->fd);
  free(t);
}

static const struct hccl_store_ops tcp_ops = {
    .name = "tcp",
    .set = tcp_set,
    .get = tcp_get,
    .add = tcp_add,
    .close = tcp_close,
};

/* One non-blocking connect attempt to ai, waiting until deadline. Returns the connected fd,
 * or -1 with errno set (ETIMEDOUT when the deadline passed). */
static int try_connect(const struct addrinfo *ai, int64_t deadline) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return -1;
  int rc;
  do
    rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
  while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EINPROGRESS) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    do
      rc = poll(&p, 1, left_ms(deadline));
    while (rc < 0 && errno == EINTR);
    int err = 0;
    socklen_t elen = sizeof(err);
    if (rc == 0)
      err = ETIMEDOUT;
    else if (rc < 0)
      err = errno;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
      err = errno;
    rc = err ? -1 : 0;
    errno = err;
  }
  if (rc != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* See store.h. Retries every address of host (IPv4 first) with a growing backoff until
 * timeout_ms; *out is set only on success. Blocks the calling thread. */
HcclResult hccl__store_tcp_connect(const char *host, uint16_t port, int64_t timeout_ms,
                                   struct hccl_store **out) {
  if (!host || !out) return hccl__fail(HCCL_E_PTR, "hccl__store_tcp_connect: host or out is NULL");
  if (port == 0)
    return hccl__fail(HCCL_E_PARA,
                      "store server %s: port 0 is not a port to connect to; check MASTER_PORT",
                      host);
  if (timeout_ms < 0)
    return hccl__fail(HCCL_E_PARA, "connect to store %s:%u: timeout %lld ms is negative", host,
                      port, (long long)timeout_ms);
  struct addrinfo *ais;
  HCCL_TRY(hccl__store_resolve(host, port, 0, "store client", &ais));
  int64_t start = now_ms(), deadline = start + timeout_ms, backoff = BACKOFF_FIRST_MS;
  int fd = -1, last_err = ETIMEDOUT, attempts = 0;
  for (;;) {
    for (struct addrinfo *ai = ais; ai && fd < 0; ai = ai->ai_next) {
      attempts++;
      fd = try_connect(ai, deadline);
      if (fd < 0 && errno != ETIMEDOUT) last_err = errno;
    }
    if (fd >= 0 || now_ms() >= deadline) break;
    int64_t nap = backoff < deadline - now_ms() ? backoff : deadline - now_ms();
    struct timespec ts = {.tv_sec = nap / 1000, .tv_nsec = (nap % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
  }
  freeaddrinfo(ais);
  if (fd < 0)
    return hccl__fail(HCCL_E_TIMEOUT,
                      "cannot connect to store server %s:%u after %lld ms (%d attempts): %s; "
                      "check that rank 0 is running and MASTER_ADDR/MASTER_PORT point at it",
                      host, port, (long long)(now_ms() - start), attempts, strerror(last_err));
  struct tcp_store *t = calloc(1, sizeof(*t));
  if (!t) {
    close(fd);
    return hccl__fail(HCCL_E_MEMORY, "no memory for a store client");
  }
  t->base.ops = &tcp_ops;
  t->fd = fd;
  t->io_timeout_ms = timeout_ms > MIN_IO_TIMEOUT_MS ? timeout_ms : MIN_IO_TIMEOUT_MS;
  snprintf(t->where, sizeof(t->where), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
  *out = &t->base;
  return HCCL_SUCCESS;
}
