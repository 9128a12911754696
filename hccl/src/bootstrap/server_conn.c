/*
 * server_conn.c - the store server's connections, on its loop thread (server_int.h): a client is
 * accepted, its requests are read and run on the key table (server_keys.c), its replies
 * written, and it is closed when it leaves, breaks the protocol, or is cut by the limits below.
 *
 * A GET of a key that does not exist is "held": the connection is put on the key's waiter list
 * and answered by the SET or ADD that creates the key. A held connection that closes (its
 * client gave up, or died) is taken off that list at once.
 *
 * Each connection reads straight into where its request decoder (wire.c) says the bytes
 * belong: the 16-byte header, then the key, then (SET) the value, allocated as it arrives
 * after the header's lengths passed the limits. A request over a limit or not in the protocol
 * gets a BAD_REQUEST reply and the connection is closed.
 *
 * Clients that are not ranks of the job (a port scanner, another program, a hostile peer)
 * must not hold the server's memory or descriptors, nor starve the ranks. Fixed limits:
 *
 *   - REQUEST_DEADLINE_MS (10 s): a connection's first request must be whole within 10 s of
 *     its accept, and every later one within 10 s of its first byte; else it gets a
 *     BAD_REQUEST saying so and is closed (checked once a second). Ranks send each request
 *     at once; a client that trickles bytes (slowloris) or connects and says nothing is cut.
 *     A connection between requests, or whose GET is held, has no deadline: ranks keep
 *     theirs open for the communicator's life.
 *   - MAX_UNPROVEN (128): connections that have not yet completed a request the server took
 *     (HELLO with the job token; on a server without one, any request). When a new connection
 *     makes more, the oldest of them that are at least EVICT_MIN_AGE_MS (1 s) old are closed
 *     until the count is back at the cap. A rank proves itself within one round trip of its
 *     connect, so only silent or stalled connections are old; a burst of ranks connecting at
 *     once is never cut.
 *   - MAX_QUEUED_REPLIES (8): a connection whose replies pile up unread stops being read
 *     until they drain, so a client that sends requests without reading the answers holds
 *     at most that many replies (and its kernel socket buffers).
 *
 * What one connection holds is its struct conn (about 2 KiB), its held key and its partial
 * value; everything a closed connection held is freed at once.
 */
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "log.h"
#include "server_int.h"
#include "trust.h"
#include "wire.h"

/* Limits against clients that are not ranks (see the opening paragraph). */
#define REQUEST_DEADLINE_MS 10000
#define SWEEP_MS 1000
#define MAX_UNPROVEN 128
#define EVICT_MIN_AGE_MS 1000
#define MAX_QUEUED_REPLIES 8

enum state {
  CONN_READING, /* reading a request (or waiting for the next) */
  CONN_HELD,    /* its GET waits for the key */
  CONN_CLOSING  /* takes no more requests: closed, or closing once its last reply is out */
};

struct conn {
  uv_tcp_t tcp; /* tcp.data points back here */
  struct hccl_store_server *srv;
  struct conn *prev, *next;   /* every open connection */
  struct conn *uprev, *unext; /* unproven connections, oldest first */
  struct conn *wprev, *wnext; /* waiters of `waiting` */
  struct entry *waiting;      /* the key a held GET waits for */
  enum state state;
  struct hccl_store_reader rd; /* the request being read */
  uint64_t accepted_ms;        /* loop time of the accept */
  uint64_t request_ms;         /* loop time the current request's first byte came */
  unsigned replies;            /* replies queued and not yet written */
  int reading;                 /* uv_read_start in effect */
  int proven;       /* completed a request the server took (HELLO with the token, or any request on
                       a server without one) */
  int authed;       /* presented the server's job token (or the server has none) */
  char scratch[64]; /* reads while a GET is held (any byte there is an error) */
  char peer[64];
};

struct wreq {
  uv_write_t req;
  struct conn *c;
  struct hccl_store_blob *val; /* GET value being sent (a reference), or NULL */
  int close_after;             /* BAD_REQUEST: close once the reply is out */
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
  char msg[HCCL_STORE_MAX_ERROR_LEN];
};

/* ---- connections ---- */

static void on_conn_closed(uv_handle_t *h) {
  free(h->data);
}

static void unhold(struct conn *c) {
  struct entry *e = c->waiting;
  if (!e) return;
  if (c->wprev)
    c->wprev->wnext = c->wnext;
  else
    e->waiters = c->wnext;
  if (c->wnext) c->wnext->wprev = c->wprev;
  c->wprev = c->wnext = NULL;
  c->waiting = NULL;
  hccl__store_entry_drop_if_empty(&c->srv->keys, e);
}

static void unlist_unproven(struct conn *c) {
  struct hccl_store_server *s = c->srv;
  if (c->uprev)
    c->uprev->unext = c->unext;
  else
    s->unproven = c->unext;
  if (c->unext)
    c->unext->uprev = c->uprev;
  else
    s->unproven_tail = c->uprev;
  c->uprev = c->unext = NULL;
  s->nunproven--;
}

/* c completed a request the server took: it is a client of this job, not a stranger. */
static void prove(struct conn *c) {
  if (c->proven) return;
  c->proven = 1;
  unlist_unproven(c);
}

/* c takes no more requests: drops its held GET, its partial request and its place among the
 * unproven. */
static void stop_serving(struct conn *c) {
  if (c->state == CONN_CLOSING) return;
  if (!c->proven) unlist_unproven(c);
  c->state = CONN_CLOSING;
  unhold(c);
  hccl__store_reader_free(&c->rd);
}

/* Closes c; the memory goes in on_conn_closed. */
static void conn_close(struct conn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  stop_serving(c);
  if (c->prev)
    c->prev->next = c->next;
  else
    c->srv->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/* Reads c while it is served and its replies do not pile up (MAX_QUEUED_REPLIES). */
static void pace_reading(struct conn *c) {
  int want = c->state != CONN_CLOSING && c->replies < MAX_QUEUED_REPLIES;
  if (want == c->reading || uv_is_closing((uv_handle_t *)&c->tcp)) return;
  int rc = want ? uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read)
                : uv_read_stop((uv_stream_t *)&c->tcp);
  if (rc < 0) {
    conn_close(c);
    return;
  }
  c->reading = want;
}

static void on_written(uv_write_t *req, int status) {
  struct wreq *w = (struct wreq *)req;
  struct conn *c = w->c;
  hccl__store_blob_unref(w->val);
  c->replies--;
  if (status < 0 && status != UV_ECANCELED)
    HCCL_DEBUG("store server %s: reply to %s not delivered: %s", c->srv->where, c->peer,
               uv_strerror(status));
  if (status < 0 || w->close_after)
    conn_close(c);
  else
    pace_reading(c);
  free(w);
}

/* Queues one reply: header with status and arg, then val (a new reference is taken) or msg. */
static void reply(struct conn *c, uint8_t status, uint64_t arg, struct hccl_store_blob *val,
                  const char *msg) {
  struct wreq *w = calloc(1, sizeof(*w));
  if (!w) {
    HCCL_WARN("store server %s: no memory for a reply to %s; closing it", c->srv->where, c->peer);
    conn_close(c);
    return;
  }
  uv_buf_t bufs[2];
  unsigned nbufs = 1;
  w->c = c;
  if (val) {
    w->val = val;
    val->refs++;
    arg = val->len;
    bufs[nbufs++] = uv_buf_init(val->data, (unsigned)val->len);
  } else if (msg) {
    size_t n = strlen(msg);
    if (n > sizeof(w->msg)) n = sizeof(w->msg);
    memcpy(w->msg, msg, n);
    arg = n;
    bufs[nbufs++] = uv_buf_init(w->msg, (unsigned)n);
    w->close_after = status == HCCL_STORE_STATUS_BAD_REQUEST || status == HCCL_STORE_STATUS_DENIED;
  }
  struct hccl_store_header h = {.op = status, .key_len = 0, .arg = arg};
  hccl__store_header_pack(&h, w->hdr);
  bufs[0] = uv_buf_init((char *)w->hdr, sizeof(w->hdr));
  c->srv->replies++;
  for (unsigned i = 0; i < nbufs; i++)
    c->srv->served_bytes += bufs[i].len;
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, nbufs, on_written);
  if (rc < 0) {
    hccl__store_blob_unref(w->val);
    free(w);
    conn_close(c);
    return;
  }
  c->replies++;
  pace_reading(c);
}

/* Answers status and msg, then closes c once the reply is out; nothing more is read. */
static void hang_up(struct conn *c, uint8_t status, const char *msg) {
  stop_serving(c);
  pace_reading(c);
  reply(c, status, 0, NULL, msg);
}

/* Rejects a request the stream cannot continue after, saying so in the log. */
static void refuse(struct conn *c, uint8_t status, const char *msg) {
  HCCL_WARN("store server %s: request from %s %s: %s", c->srv->where, c->peer,
            status == HCCL_STORE_STATUS_DENIED ? "refused" : "rejected", msg);
  hang_up(c, status, msg);
}

static void reject(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reject(struct conn *c, const char *fmt, ...) {
  char msg[HCCL_STORE_MAX_ERROR_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  refuse(c, HCCL_STORE_STATUS_BAD_REQUEST, msg);
}

/* The job token check (trust.h): HELLO carries the client's token as its key. A server with a
 * token accepts nothing else first; one without refuses a client that has one. */
static void hello(struct conn *c) {
  const char *mine = c->srv->trust.token;
  if (!mine[0]) {
    refuse(c, HCCL_STORE_STATUS_DENIED,
           "this store serves a job without a job token, and the client has one "
           "(HCCL_JOB_TOKEN): it belongs to another job");
    return;
  }
  if (!hccl__token_equal(c->rd.key, c->rd.h.key_len, mine, strlen(mine))) {
    refuse(c, HCCL_STORE_STATUS_DENIED,
           "the client's job token differs from this store's (HCCL_JOB_TOKEN): it belongs to "
           "another job");
    return;
  }
  c->authed = 1;
  prove(c);
  reply(c, HCCL_STORE_STATUS_OK, 0, NULL, NULL);
}

/* Gives e the value val (taking over the caller's reference) and answers its held GETs. */
static void entry_set(struct entry *e, struct hccl_store_blob *val) {
  hccl__store_blob_unref(e->val);
  e->val = val;
  while (e->waiters) {
    struct conn *w = e->waiters;
    e->waiters = w->wnext;
    if (e->waiters) e->waiters->wprev = NULL;
    w->wnext = w->wprev = NULL;
    w->waiting = NULL;
    w->state = CONN_READING;
    reply(w, HCCL_STORE_STATUS_OK, 0, val, NULL);
  }
}

static void do_add(struct conn *c, struct entry *e) {
  int64_t base, sum;
  char msg[HCCL_STORE_MAX_ERROR_LEN];
  if (hccl__store_parse_int(e->val ? e->val->data : NULL, e->val ? e->val->len : 0, &base) != 0) {
    snprintf(msg, sizeof(msg), "add to key '%.*s': its value (%zu bytes) is not a decimal integer",
             (int)e->key_len, e->key, e->val->len);
    reply(c, HCCL_STORE_STATUS_NOT_INTEGER, 0, NULL, msg);
    return;
  }
  if (hccl__store_add_checked(base, (int64_t)c->rd.h.arg, &sum) != 0) {
    snprintf(msg, sizeof(msg), "add of %lld to key '%.*s' (now %lld) overflows int64",
             (long long)(int64_t)c->rd.h.arg, (int)e->key_len, e->key, (long long)base);
    reply(c, HCCL_STORE_STATUS_OVERFLOW, 0, NULL, msg);
    return;
  }
  char text[HCCL_STORE_INT_TEXT_LEN + 2];
  int n = snprintf(text, sizeof(text), "%lld", (long long)sum);
  struct hccl_store_blob *b = hccl__store_blob_new((size_t)n);
  if (!b) {
    reject(c, "server out of memory");
    return;
  }
  memcpy(b->data, text, (size_t)n);
  entry_set(e, b);
  reply(c, HCCL_STORE_STATUS_OK, (uint64_t)sum, NULL, NULL);
}

/* Runs the request c->rd decoded and readies c for the next one. */
static void dispatch(struct conn *c) {
  struct hccl_store_server *s = c->srv;
  struct hccl_store_reader *rd = &c->rd;
  struct hccl_store_blob *body = rd->body;
  rd->body = NULL;
  hccl__store_reader_next(rd); /* rd->h and rd->key stay until c reads again */
  if (rd->h.op == HCCL_STORE_OP_HELLO) {
    hello(c);
    return;
  }
  prove(c);
  struct entry *e = hccl__store_entry_get(&s->keys, rd->key, rd->h.key_len);
  if (!e) {
    hccl__store_blob_unref(body);
    reject(c, "server out of memory for key '%s'", rd->key);
    return;
  }
  switch (rd->h.op) {
  case HCCL_STORE_OP_SET:
    entry_set(e, body);
    reply(c, HCCL_STORE_STATUS_OK, 0, NULL, NULL);
    break;
  case HCCL_STORE_OP_GET:
    if (e->val) {
      reply(c, HCCL_STORE_STATUS_OK, 0, e->val, NULL);
      break;
    }
    c->state = CONN_HELD;
    c->waiting = e;
    c->wnext = e->waiters;
    if (e->waiters) e->waiters->wprev = c;
    e->waiters = c;
    break;
  default:
    do_add(c, e);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct conn *c = h->data;
  char *p = NULL;
  size_t n = 0;
  if (c->state == CONN_READING) hccl__store_reader_space(&c->rd, &p, &n);
  if (n == 0)
    *buf = uv_buf_init(c->scratch, sizeof(c->scratch));
  else
    *buf = uv_buf_init(p, n > (1u << 30) ? 1u << 30 : (unsigned)n);
}

/* The sweep runs while some connection has a deadline. */
static void on_sweep(uv_timer_t *t);
static void arm_sweep(struct hccl_store_server *s) {
  if (!uv_is_active((uv_handle_t *)&s->sweep))
    uv_timer_start(&s->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  struct conn *c = stream->data;
  if (nread == 0) return;
  if (nread < 0) {
    /* EOF or reset: the client is gone, maybe mid-request or while held. */
    if (nread != UV_EOF || (c->state == CONN_READING && hccl__store_reader_started(&c->rd)))
      HCCL_DEBUG("store server %s: %s left mid-request: %s", c->srv->where, c->peer,
                 uv_strerror((int)nread));
    conn_close(c);
    return;
  }
  if (c->state == CONN_CLOSING) return;
  if (c->state == CONN_HELD || buf->base == c->scratch) {
    HCCL_WARN("store server %s: %s sent a request while its GET was held; one request at a "
              "time per connection; closing it",
              c->srv->where, c->peer);
    conn_close(c);
    return;
  }
  if (!hccl__store_reader_started(&c->rd)) {
    c->request_ms = uv_now(&c->srv->loop);
    arm_sweep(c->srv);
  }
  c->rd.need_hello = c->srv->trust.token[0] && !c->authed;
  switch (hccl__store_reader_got(&c->rd, (size_t)nread)) {
  case HCCL_STORE_READ_MORE:
    break;
  case HCCL_STORE_READ_DONE:
    dispatch(c);
    break;
  default:
    refuse(c, c->rd.status, c->rd.msg);
  }
}

/* Closes connections whose request is overdue (REQUEST_DEADLINE_MS), one log line a sweep. */
static void on_sweep(uv_timer_t *t) {
  struct hccl_store_server *s = t->data;
  uint64_t now = uv_now(&s->loop);
  unsigned closed = 0, pending = 0;
  char last[64] = "";
  for (struct conn *c = s->conns, *next; c; c = next) {
    next = c->next;
    if (c->state != CONN_READING) continue;
    int started = hccl__store_reader_started(&c->rd);
    if (c->proven && !started) continue;
    uint64_t since = c->proven ? c->request_ms : c->accepted_ms;
    if (now - since < REQUEST_DEADLINE_MS) {
      pending++;
      continue;
    }
    char msg[160];
    snprintf(msg, sizeof(msg),
             c->proven ? "request not whole %d s after it began; a request is sent at once"
             : started ? "first request not whole %d s after connecting"
                       : "no request within %d s of connecting",
             REQUEST_DEADLINE_MS / 1000);
    snprintf(last, sizeof(last), "%s", c->peer);
    hang_up(c, HCCL_STORE_STATUS_BAD_REQUEST, msg);
    closed++;
  }
  if (closed)
    HCCL_WARN("store server %s: closed %u connection(s) whose request was not whole within %d s "
              "(the last from %s): not ranks of this job, or stalled",
              s->where, closed, REQUEST_DEADLINE_MS / 1000, last);
  if (!pending) uv_timer_stop(t);
}

/* Over MAX_UNPROVEN: closes the oldest unproven connections that are old enough. */
static void evict(struct hccl_store_server *s) {
  uint64_t now = uv_now(&s->loop);
  unsigned closed = 0;
  while (s->nunproven > MAX_UNPROVEN && s->unproven &&
         now - s->unproven->accepted_ms >= EVICT_MIN_AGE_MS) {
    char msg[200];
    snprintf(msg, sizeof(msg),
             "closed: %u connections have made no request; this one, the oldest, for %.1f s",
             s->nunproven, (double)(now - s->unproven->accepted_ms) / 1000);
    HCCL_DEBUG("store server %s: %s: %s", s->where, s->unproven->peer, msg);
    hang_up(s->unproven, HCCL_STORE_STATUS_BAD_REQUEST, msg);
    closed++;
  }
  if (closed && s->evicted == 0)
    HCCL_WARN("store server %s: more than %d connections made no request; closing the oldest "
              "(said once per server)",
              s->where, MAX_UNPROVEN);
  s->evicted += closed;
}

/* See server_int.h. */
void hccl__store_on_connection(uv_stream_t *listener, int status) {
  struct hccl_store_server *s = listener->data;
  if (status < 0) {
    HCCL_WARN("store server %s: accept failed: %s", s->where, uv_strerror(status));
    return;
  }
  struct conn *c = calloc(1, sizeof(*c));
  if (!c) {
    HCCL_WARN("store server %s: no memory for a new connection", s->where);
    return; /* it stays in the backlog; the client's deadline ends it */
  }
  uv_tcp_init(&s->loop, &c->tcp);
  c->tcp.data = c;
  c->srv = s;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  c->uprev = s->unproven_tail;
  if (s->unproven_tail)
    s->unproven_tail->unext = c;
  else
    s->unproven = c;
  s->unproven_tail = c;
  s->nunproven++;
  c->accepted_ms = uv_now(&s->loop);
  hccl__store_reader_init(&c->rd);
  int rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
  if (rc == 0) {
    rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    c->reading = rc == 0;
  }
  if (rc < 0) {
    HCCL_WARN("store server %s: cannot accept a connection: %s", s->where, uv_strerror(rc));
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  char ip[INET6_ADDRSTRLEN] = "?";
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
      snprintf(c->peer, sizeof(c->peer), "[%s]:%u", ip,
               ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
      snprintf(c->peer, sizeof(c->peer), "%s:%u", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
    if (!hccl__whitelist_allows(s->trust.whitelist, (struct sockaddr *)&ss)) {
      char msg[700];
      snprintf(msg, sizeof(msg),
               "the address %s is not in this job's whitelist %s (HCCL_WHITELIST_FILE)", ip,
               hccl__whitelist_file(s->trust.whitelist));
      refuse(c, HCCL_STORE_STATUS_DENIED, msg); /* says why, then closes */
      return;
    }
  } else if (s->trust.whitelist) {
    conn_close(c); /* no address to check */
    return;
  }
  arm_sweep(s);
  evict(s);
}

/* See server_int.h. */
void hccl__store_conns_close(struct hccl_store_server *s) {
  while (s->conns)
    conn_close(s->conns);
}
