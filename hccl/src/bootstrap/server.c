/*
 * server.c - the store server: a libuv loop on a thread of its own that answers the
 * requests of client.c clients (wire format in wire.h).
 *
 * Everything below runs on the loop thread, except start (which binds and listens on the
 * caller's thread, so that "address in use" comes back as a result) and stop (which only
 * signals the loop through a uv_async and joins). Nothing is shared between the two threads
 * while the loop runs, so there are no locks.
 *
 * Keys live in a chained hash table. Values are reference-counted blobs, so a GET reply that
 * is still being written keeps its value alive even if a SET replaces it meanwhile. A GET of
 * a key that does not exist is "held": the connection is put on the key's waiter list and
 * answered by the SET or ADD that creates the key. A held connection that closes (its client
 * gave up, or died) is taken off that list at once.
 *
 * Each connection reads straight into where the bytes belong: the 16-byte header, then the
 * key, then (SET) the value blob, sized from the header after checking the limits. A request
 * over a limit or not in the protocol gets a BAD_REQUEST reply and the connection is closed.
 *
 * The loop thread blocks every signal: signals stay with the application's threads, and a
 * write to a peer that is gone fails with EPIPE instead of raising SIGPIPE.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "log.h"
#include "store.h"
#include "trust.h"
#include "wire.h"

#define LISTEN_BACKLOG 1024
#define FIRST_BUCKETS 256

struct blob {
  size_t refs;
  size_t len;
  char data[];
};

struct conn;

struct entry {
  struct entry *next;   /* hash chain */
  struct blob *val;     /* NULL while the key only has waiters */
  struct conn *waiters; /* held GETs, linked through conn->wnext */
  uint32_t key_len;
  char key[];
};

enum stage { STAGE_HEADER, STAGE_KEY, STAGE_VALUE, STAGE_HELD, STAGE_CLOSING };

struct conn {
  uv_tcp_t tcp; /* tcp.data points back here */
  struct hccl_store_server *srv;
  struct conn *prev, *next;   /* every open connection */
  struct conn *wprev, *wnext; /* waiters of `waiting` */
  struct entry *waiting;      /* the key a held GET waits for */
  enum stage stage;
  size_t have; /* bytes of the current stage read so far */
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
  struct hccl_store_header h;
  char key[HCCL_STORE_MAX_KEY_LEN + 1];
  struct blob *body; /* SET value being read */
  char scratch[64];  /* reads while a GET is held (any byte there is an error) */
  char peer[64];
  int authed; /* presented the server's job token (or the server has none) */
};

struct wreq {
  uv_write_t req;
  struct conn *c;
  struct blob *val; /* GET value being sent (a reference), or NULL */
  int close_after;  /* BAD_REQUEST: close once the reply is out */
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
  char msg[HCCL_STORE_MAX_ERROR_LEN];
};

struct hccl_store_server {
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop_async;
  pthread_t thread;
  struct entry **buckets;
  size_t nbuckets, nentries;
  struct conn *conns;
  char where[300];
  struct hccl_store_trust trust;
};

/* ---- values and keys ---- */

static struct blob *blob_new(size_t len) {
  struct blob *b = malloc(sizeof(*b) + len);
  if (b) {
    b->refs = 1;
    b->len = len;
  }
  return b;
}

static void blob_unref(struct blob *b) {
  if (b && --b->refs == 0) free(b);
}

static uint64_t hash_key(const char *key, uint32_t len) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (uint32_t i = 0; i < len; i++)
    h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
  return h;
}

static struct entry **slot_of(struct hccl_store_server *s, const char *key, uint32_t len) {
  struct entry **p = &s->buckets[hash_key(key, len) & (s->nbuckets - 1)];
  while (*p && !((*p)->key_len == len && memcmp((*p)->key, key, len) == 0))
    p = &(*p)->next;
  return p;
}

static void grow(struct hccl_store_server *s) {
  size_t n = s->nbuckets * 2;
  struct entry **b = calloc(n, sizeof(*b));
  if (!b) return; /* longer chains, still correct */
  for (size_t i = 0; i < s->nbuckets; i++)
    for (struct entry *e = s->buckets[i], *next; e; e = next) {
      next = e->next;
      struct entry **head = &b[hash_key(e->key, e->key_len) & (n - 1)];
      e->next = *head;
      *head = e;
    }
  free(s->buckets);
  s->buckets = b;
  s->nbuckets = n;
}

/* The entry of key, created (without a value) when absent; NULL when out of memory. */
static struct entry *entry_get(struct hccl_store_server *s, const char *key, uint32_t len) {
  struct entry **p = slot_of(s, key, len);
  if (*p) return *p;
  struct entry *e = calloc(1, sizeof(*e) + len + 1);
  if (!e) return NULL;
  memcpy(e->key, key, len);
  e->key_len = len;
  *p = e;
  if (++s->nentries > 2 * s->nbuckets) grow(s);
  return e;
}

/* Drops an entry that has neither a value nor waiters (a held GET whose client left). */
static void entry_drop_if_empty(struct hccl_store_server *s, struct entry *e) {
  if (e->val || e->waiters) return;
  struct entry **p = slot_of(s, e->key, e->key_len);
  *p = e->next;
  s->nentries--;
  free(e);
}

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
  entry_drop_if_empty(c->srv, e);
}

/* Closes c: drops its held GET and partial request; the memory goes in on_conn_closed. */
static void conn_close(struct conn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  unhold(c);
  blob_unref(c->body);
  c->body = NULL;
  c->stage = STAGE_CLOSING;
  if (c->prev)
    c->prev->next = c->next;
  else
    c->srv->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_written(uv_write_t *req, int status) {
  struct wreq *w = (struct wreq *)req;
  blob_unref(w->val);
  if (status < 0 && status != UV_ECANCELED)
    HCCL_DEBUG("store server %s: reply to %s not delivered: %s", w->c->srv->where, w->c->peer,
               uv_strerror(status));
  if (status < 0 || w->close_after) conn_close(w->c);
  free(w);
}

/* Queues one reply: header with status and arg, then val (a new reference is taken) or msg. */
static void reply(struct conn *c, uint8_t status, uint64_t arg, struct blob *val, const char *msg) {
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
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, nbufs, on_written);
  if (rc < 0) {
    blob_unref(w->val);
    free(w);
    conn_close(c);
  }
}

/* Rejects a request the stream cannot continue after; the connection closes once the reply
 * is out. */
static void refuse(struct conn *c, uint8_t status, const char *msg) {
  HCCL_WARN("store server %s: request from %s %s: %s", c->srv->where, c->peer,
            status == HCCL_STORE_STATUS_DENIED ? "refused" : "rejected", msg);
  blob_unref(c->body);
  c->body = NULL;
  c->stage = STAGE_CLOSING; /* ignore anything more it sends */
  uv_read_stop((uv_stream_t *)&c->tcp);
  reply(c, status, 0, NULL, msg);
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
  if (!hccl__token_equal(c->key, c->h.key_len, mine, strlen(mine))) {
    refuse(c, HCCL_STORE_STATUS_DENIED,
           "the client's job token differs from this store's (HCCL_JOB_TOKEN): it belongs to "
           "another job");
    return;
  }
  c->authed = 1;
  reply(c, HCCL_STORE_STATUS_OK, 0, NULL, NULL);
}

/* Gives e the value val (taking over the caller's reference) and answers its held GETs. */
static void entry_set(struct entry *e, struct blob *val) {
  blob_unref(e->val);
  e->val = val;
  while (e->waiters) {
    struct conn *w = e->waiters;
    e->waiters = w->wnext;
    if (e->waiters) e->waiters->wprev = NULL;
    w->wnext = w->wprev = NULL;
    w->waiting = NULL;
    w->stage = STAGE_HEADER;
    w->have = 0;
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
  if (hccl__store_add_checked(base, (int64_t)c->h.arg, &sum) != 0) {
    snprintf(msg, sizeof(msg), "add of %lld to key '%.*s' (now %lld) overflows int64",
             (long long)(int64_t)c->h.arg, (int)e->key_len, e->key, (long long)base);
    reply(c, HCCL_STORE_STATUS_OVERFLOW, 0, NULL, msg);
    return;
  }
  char text[HCCL_STORE_INT_TEXT_LEN + 2];
  int n = snprintf(text, sizeof(text), "%lld", (long long)sum);
  struct blob *b = blob_new((size_t)n);
  if (!b) {
    reject(c, "server out of memory");
    return;
  }
  memcpy(b->data, text, (size_t)n);
  entry_set(e, b);
  reply(c, HCCL_STORE_STATUS_OK, (uint64_t)sum, NULL, NULL);
}

/* Runs the fully read request in c and readies c for the next one. */
static void dispatch(struct conn *c) {
  struct hccl_store_server *s = c->srv;
  if (c->h.op == HCCL_STORE_OP_HELLO) {
    c->stage = STAGE_HEADER;
    c->have = 0;
    hello(c);
    return;
  }
  struct entry *e = entry_get(s, c->key, c->h.key_len);
  c->stage = STAGE_HEADER;
  c->have = 0;
  if (!e) {
    reject(c, "server out of memory for key '%s'", c->key);
    return;
  }
  switch (c->h.op) {
  case HCCL_STORE_OP_SET:
    entry_set(e, c->body);
    c->body = NULL;
    reply(c, HCCL_STORE_STATUS_OK, 0, NULL, NULL);
    break;
  case HCCL_STORE_OP_GET:
    if (e->val) {
      reply(c, HCCL_STORE_STATUS_OK, 0, e->val, NULL);
      break;
    }
    c->stage = STAGE_HELD;
    c->waiting = e;
    c->wnext = e->waiters;
    if (e->waiters) e->waiters->wprev = c;
    e->waiters = c;
    break;
  default:
    do_add(c, e);
  }
}

/* Moves c through the stages its bytes complete. */
static void advance(struct conn *c) {
  for (;;) {
    switch (c->stage) {
    case STAGE_HEADER:
      if (c->have < HCCL_STORE_HEADER_LEN) return;
      if (hccl__store_header_unpack(c->hdr, &c->h) != 0) {
        reject(c, "not the store protocol (magic/version %02x%02x/%u)", c->hdr[0], c->hdr[1],
               c->hdr[2]);
        return;
      }
      if (c->h.op < HCCL_STORE_OP_SET || c->h.op > HCCL_STORE_OP_HELLO) {
        reject(c, "unknown operation %u", c->h.op);
        return;
      }
      /* Before anything is read or allocated for it. */
      if (c->srv->trust.token[0] && !c->authed && c->h.op != HCCL_STORE_OP_HELLO) {
        refuse(c, HCCL_STORE_STATUS_DENIED,
               "this store serves a job with a job token (HCCL_JOB_TOKEN) and the client "
               "presented none: it belongs to another job");
        return;
      }
      if (c->h.op == HCCL_STORE_OP_HELLO && c->h.key_len > HCCL_TOKEN_MAX) {
        reject(c, "job token of %u bytes; the limit is %u", c->h.key_len, HCCL_TOKEN_MAX);
        return;
      }
      if (c->h.key_len == 0 || c->h.key_len > HCCL_STORE_MAX_KEY_LEN) {
        reject(c, "key of %u bytes; keys need 1 to %u bytes", c->h.key_len, HCCL_STORE_MAX_KEY_LEN);
        return;
      }
      if (c->h.op == HCCL_STORE_OP_SET && c->h.arg > HCCL_STORE_MAX_VALUE_LEN) {
        reject(c, "value of %llu bytes; the limit is %u bytes", (unsigned long long)c->h.arg,
               HCCL_STORE_MAX_VALUE_LEN);
        return;
      }
      c->stage = STAGE_KEY;
      c->have = 0;
      break;
    case STAGE_KEY:
      if (c->have < c->h.key_len) return;
      c->key[c->h.key_len] = '\0';
      c->have = 0;
      if (c->h.op != HCCL_STORE_OP_SET) {
        dispatch(c);
        break;
      }
      c->body = blob_new((size_t)c->h.arg);
      if (!c->body) {
        reject(c, "server out of memory for a %llu-byte value", (unsigned long long)c->h.arg);
        return;
      }
      c->stage = STAGE_VALUE;
      break;
    case STAGE_VALUE:
      if (c->have < c->body->len) return;
      dispatch(c);
      break;
    default:
      return;
    }
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct conn *c = h->data;
  switch (c->stage) {
  case STAGE_HEADER:
    *buf = uv_buf_init((char *)c->hdr + c->have, (unsigned)(HCCL_STORE_HEADER_LEN - c->have));
    break;
  case STAGE_KEY:
    *buf = uv_buf_init(c->key + c->have, (unsigned)(c->h.key_len - c->have));
    break;
  case STAGE_VALUE: {
    size_t left = c->body->len - c->have;
    *buf = uv_buf_init(c->body->data + c->have, left > (1u << 30) ? 1u << 30 : (unsigned)left);
    break;
  }
  default:
    *buf = uv_buf_init(c->scratch, sizeof(c->scratch));
  }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  struct conn *c = stream->data;
  if (nread == 0) return;
  if (nread < 0) {
    /* EOF or reset: the client is gone, maybe mid-request or while held. */
    if (nread != UV_EOF || c->stage != STAGE_HEADER || c->have != 0)
      HCCL_DEBUG("store server %s: %s left mid-request: %s", c->srv->where, c->peer,
                 uv_strerror((int)nread));
    conn_close(c);
    return;
  }
  if (c->stage == STAGE_CLOSING) return;
  if (c->stage == STAGE_HELD) {
    HCCL_WARN("store server %s: %s sent a request while its GET was held; one request at a "
              "time per connection; closing it",
              c->srv->where, c->peer);
    conn_close(c);
    return;
  }
  c->have += (size_t)nread;
  advance(c);
}

static void on_connection(uv_stream_t *listener, int status) {
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
  int rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
  if (rc == 0) rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
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
}

/* ---- the loop thread, start and stop ---- */

static void on_stop(uv_async_t *a) {
  struct hccl_store_server *s = a->data;
  uv_close((uv_handle_t *)&s->listener, NULL);
  uv_close((uv_handle_t *)&s->stop_async, NULL);
  while (s->conns)
    conn_close(s->conns);
}

static void *loop_main(void *arg) {
  struct hccl_store_server *s = arg;
  uv_run(&s->loop, UV_RUN_DEFAULT);
  return NULL;
}

static void free_all(struct hccl_store_server *s) {
  for (size_t i = 0; i < s->nbuckets; i++)
    for (struct entry *e = s->buckets[i], *next; e; e = next) {
      next = e->next;
      blob_unref(e->val);
      free(e);
    }
  free(s->buckets);
  hccl__whitelist_free(s->trust.whitelist);
  free(s);
}

/* Closes the listener of a server whose start failed and frees it. */
static void abandon(struct hccl_store_server *s) {
  uv_close((uv_handle_t *)&s->listener, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  free_all(s);
}

static HcclResult listen_error(struct hccl_store_server *s, int rc) {
  HcclResult r;
  if (rc == UV_EADDRINUSE)
    r = hccl__fail(HCCL_E_UNAVAIL,
                   "store server cannot listen on %s: address already in use; another job or "
                   "process holds this port (choose another MASTER_PORT or stop that process)",
                   s->where);
  else if (rc == UV_EADDRNOTAVAIL)
    r = hccl__fail(HCCL_E_UNAVAIL,
                   "store server cannot listen on %s: the address is not one of this host's; "
                   "check HCCL_IF_IP / MASTER_ADDR",
                   s->where);
  else if (rc == UV_EACCES)
    r = hccl__fail(HCCL_E_UNAVAIL,
                   "store server cannot listen on %s: permission denied (ports below 1024 need "
                   "privileges)",
                   s->where);
  else
    r = hccl__fail(HCCL_E_SYSCALL, "store server cannot listen on %s: %s", s->where,
                   uv_strerror(rc));
  abandon(s);
  return r;
}

/* See store.h. bind_addr is a numeric address or a host name (IPv4 first); NULL means every
 * IPv4 interface. On success *out and *bound_port are set and the loop thread runs; stop it
 * with hccl__store_server_stop. Errors: HCCL_E_NOT_FOUND (name does not resolve),
 * HCCL_E_UNAVAIL (address in use, not local, or privileged), HCCL_E_SYSCALL/MEMORY. */
HcclResult hccl__store_server_start(const char *bind_addr, uint16_t port,
                                    struct hccl_store_server **out, uint16_t *bound_port) {
  return hccl__store_server_start_trusted(bind_addr, port, NULL, out, bound_port);
}

HcclResult hccl__store_server_start_trusted(const char *bind_addr, uint16_t port,
                                            const struct hccl_store_trust *trust,
                                            struct hccl_store_server **out, uint16_t *bound_port) {
  struct hccl_whitelist *wl = trust ? trust->whitelist : NULL;
  if (!out || !bound_port) {
    hccl__whitelist_free(wl);
    return hccl__fail(HCCL_E_PTR, "hccl__store_server_start: out or bound_port is NULL");
  }
  if (!bind_addr) bind_addr = "0.0.0.0";
  struct addrinfo *ai;
  HcclResult r = hccl__store_resolve(bind_addr, port, 1, "store server", &ai);
  if (r != HCCL_SUCCESS) {
    hccl__whitelist_free(wl);
    return r;
  }
  struct hccl_store_server *s = calloc(1, sizeof(*s));
  struct entry **buckets = calloc(FIRST_BUCKETS, sizeof(*buckets));
  if (!s || !buckets) {
    freeaddrinfo(ai);
    free(s);
    free(buckets);
    hccl__whitelist_free(wl);
    return hccl__fail(HCCL_E_MEMORY, "no memory for the store server");
  }
  s->buckets = buckets;
  s->nbuckets = FIRST_BUCKETS;
  if (trust) s->trust = *trust; /* the whitelist stays the caller's */
  snprintf(s->where, sizeof(s->where), ai->ai_family == AF_INET6 ? "[%s]:%u" : "%s:%u", bind_addr,
           port);
  int rc = uv_loop_init(&s->loop);
  if (rc < 0) {
    freeaddrinfo(ai);
    free_all(s);
    return hccl__fail(HCCL_E_SYSCALL, "store server: cannot create its event loop: %s",
                      uv_strerror(rc));
  }
  uv_tcp_init(&s->loop, &s->listener);
  s->listener.data = s;
  /* libuv sets SO_REUSEADDR, so a restarted job can rebind over TIME_WAIT connections; a
   * live listener still holds the port. EADDRINUSE may come from bind or from listen. */
  rc = uv_tcp_bind(&s->listener, ai->ai_addr, 0);
  freeaddrinfo(ai);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&s->listener, LISTEN_BACKLOG, on_connection);
  if (rc < 0) return listen_error(s, rc);
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
  if (rc < 0) return listen_error(s, rc);
  uint16_t got = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
  snprintf(s->where, sizeof(s->where), ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", bind_addr,
           got);
  uv_async_init(&s->loop, &s->stop_async, on_stop);
  s->stop_async.data = s;

  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = pthread_create(&s->thread, NULL, loop_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    uv_close((uv_handle_t *)&s->stop_async, NULL);
    abandon(s);
    return hccl__fail(HCCL_E_SYSCALL, "store server: cannot start its thread: %s", strerror(rc));
  }
  HCCL_INFO("store server listening on %s", s->where);
  *bound_port = got;
  *out = s;
  return HCCL_SUCCESS;
}

/* See store.h. Blocks until the loop thread has closed every connection (clients blocked in
 * GET see the connection close at once) and exited. Not to be called from the loop thread. */
void hccl__store_server_stop(struct hccl_store_server *server) {
  if (!server) return;
  uv_async_send(&server->stop_async);
  pthread_join(server->thread, NULL);
  int rc = uv_loop_close(&server->loop);
  if (rc != 0)
    HCCL_WARN("store server %s: event loop still had handles at stop: %s", server->where,
              uv_strerror(rc));
  free_all(server);
}
