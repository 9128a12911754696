/*
 * wire.c - the store server's request decoder (see wire.h): bytes of one client's stream in,
 * whole requests or one refusal out. No sockets, no event loop, no logging: server_conn.c calls it
 * from its read callbacks, and tests/fuzz/fuzz_store_wire.c feeds it arbitrary streams.
 *
 * The checks and their messages are the server's protocol: clients and tests read them.
 */
#include <stdarg.h>
#include <stdio.h>

#include "trust.h"
#include "wire.h"

/* A SET value's first allocation; it doubles as bytes arrive, up to the value's length. */
#define FIRST_VALUE_CAP (64u * 1024u)

enum stage { STAGE_HEADER, STAGE_KEY, STAGE_VALUE, STAGE_DONE, STAGE_ERROR };

struct hccl_store_blob *hccl__store_blob_new(size_t len) {
  struct hccl_store_blob *b = malloc(sizeof(*b) + len);
  if (b) {
    b->refs = 1;
    b->len = len;
    b->cap = len;
  }
  return b;
}

void hccl__store_blob_unref(struct hccl_store_blob *b) {
  if (b && --b->refs == 0) free(b);
}

void hccl__store_reader_init(struct hccl_store_reader *r) {
  memset(r, 0, sizeof(*r));
  r->stage = STAGE_HEADER;
}

void hccl__store_reader_free(struct hccl_store_reader *r) {
  hccl__store_blob_unref(r->body);
  r->body = NULL;
}

void hccl__store_reader_next(struct hccl_store_reader *r) {
  hccl__store_reader_free(r);
  r->stage = STAGE_HEADER;
  r->have = 0;
}

int hccl__store_reader_started(const struct hccl_store_reader *r) {
  return r->stage != STAGE_HEADER || r->have > 0;
}

void hccl__store_reader_space(struct hccl_store_reader *r, char **buf, size_t *len) {
  switch (r->stage) {
  case STAGE_HEADER:
    *buf = (char *)r->hdr + r->have;
    *len = HCCL_STORE_HEADER_LEN - r->have;
    break;
  case STAGE_KEY:
    *buf = r->key + r->have;
    *len = r->h.key_len - r->have;
    break;
  case STAGE_VALUE:
    *buf = r->body->data + r->have;
    *len = r->body->cap - r->have;
    break;
  default:
    *buf = NULL;
    *len = 0;
  }
}

static enum hccl_store_read refuse(struct hccl_store_reader *r, uint8_t status, const char *fmt,
                                   ...) __attribute__((format(printf, 3, 4)));
static enum hccl_store_read refuse(struct hccl_store_reader *r, uint8_t status, const char *fmt,
                                   ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
  va_end(ap);
  r->status = status;
  r->stage = STAGE_ERROR;
  hccl__store_reader_free(r);
  return HCCL_STORE_READ_ERROR;
}

#define BAD(...) refuse(r, HCCL_STORE_STATUS_BAD_REQUEST, __VA_ARGS__)

/* A whole header is in r->hdr: checks it before anything is read or allocated for it. */
static enum hccl_store_read header_done(struct hccl_store_reader *r) {
  const struct hccl_store_header *h = &r->h;
  if (hccl__store_header_unpack(r->hdr, &r->h) != 0)
    return BAD("not the store protocol (magic/version %02x%02x/%u)", r->hdr[0], r->hdr[1],
               r->hdr[2]);
  if (h->op < HCCL_STORE_OP_SET || h->op > HCCL_STORE_OP_HELLO)
    return BAD("unknown operation %u", h->op);
  if (r->need_hello && h->op != HCCL_STORE_OP_HELLO)
    return refuse(r, HCCL_STORE_STATUS_DENIED,
                  "this store serves a job with a job token (HCCL_JOB_TOKEN) and the client "
                  "presented none: it belongs to another job");
  if (h->op == HCCL_STORE_OP_HELLO && h->key_len > HCCL_TOKEN_MAX)
    return BAD("job token of %u bytes; the limit is %u", h->key_len, HCCL_TOKEN_MAX);
  if (h->key_len == 0 || h->key_len > HCCL_STORE_MAX_KEY_LEN)
    return BAD("key of %u bytes; keys need 1 to %u bytes", h->key_len, HCCL_STORE_MAX_KEY_LEN);
  if (h->op == HCCL_STORE_OP_SET && h->arg > HCCL_STORE_MAX_VALUE_LEN)
    return BAD("value of %llu bytes; the limit is %u bytes", (unsigned long long)h->arg,
               HCCL_STORE_MAX_VALUE_LEN);
  r->stage = STAGE_KEY;
  r->have = 0;
  return HCCL_STORE_READ_MORE;
}

/* The key is whole: the request is, unless a SET value follows. */
static enum hccl_store_read key_done(struct hccl_store_reader *r) {
  r->key[r->h.key_len] = '\0';
  r->have = 0;
  if (r->h.op != HCCL_STORE_OP_SET) {
    r->stage = STAGE_DONE;
    return HCCL_STORE_READ_DONE;
  }
  size_t len = (size_t)r->h.arg, cap = len < FIRST_VALUE_CAP ? len : FIRST_VALUE_CAP;
  struct hccl_store_blob *b = malloc(sizeof(*b) + cap);
  if (!b) return BAD("server out of memory for a %zu-byte value", len);
  b->refs = 1;
  b->len = len;
  b->cap = cap;
  r->body = b;
  r->stage = len == 0 ? STAGE_DONE : STAGE_VALUE;
  return len == 0 ? HCCL_STORE_READ_DONE : HCCL_STORE_READ_MORE;
}

/* The value's allocation is full and more is to come: doubles it (up to the value's length). */
static enum hccl_store_read grow_value(struct hccl_store_reader *r) {
  struct hccl_store_blob *b = r->body;
  size_t cap = b->cap * 2 < b->len ? b->cap * 2 : b->len;
  struct hccl_store_blob *nb = realloc(b, sizeof(*b) + cap);
  if (!nb) return BAD("server out of memory for a %zu-byte value", b->len);
  nb->cap = cap;
  r->body = nb;
  return HCCL_STORE_READ_MORE;
}

enum hccl_store_read hccl__store_reader_got(struct hccl_store_reader *r, size_t n) {
  r->have += n;
  switch (r->stage) {
  case STAGE_HEADER:
    return r->have < HCCL_STORE_HEADER_LEN ? HCCL_STORE_READ_MORE : header_done(r);
  case STAGE_KEY:
    return r->have < r->h.key_len ? HCCL_STORE_READ_MORE : key_done(r);
  case STAGE_VALUE:
    if (r->have == r->body->len) {
      r->stage = STAGE_DONE;
      return HCCL_STORE_READ_DONE;
    }
    return r->have < r->body->cap ? HCCL_STORE_READ_MORE : grow_value(r);
  case STAGE_DONE:
    return HCCL_STORE_READ_DONE;
  default:
    return HCCL_STORE_READ_ERROR;
  }
}
