/*
 * fuzz_store_wire.c - libFuzzer target: the store server's request decoding (bootstrap/wire.c,
 * the reader server_conn.c feeds from its sockets) on the input as one client's byte stream.
 *
 * The stream is fed the way server_conn.c feeds it: into the space the reader names, never past
 * the end of the current request, and each decoded request goes to a small model of the
 * server's dispatch (a key table, ADD through the same wire.h helpers as the server, a GET of
 * a missing key holds the connection, a refused HELLO or request ends it). It runs twice,
 * as a server without a job token and as one with the token "fuzz-token", and each time the
 * stream is cut three ways (as much as the reader takes, one byte at a time, and in chunks of
 * pseudo-random size), which must decode to the same requests and refusals.
 *
 * Beyond "no crash": every decoded request is within wire.h's limits (operation, key 1-1024
 * bytes and NUL-terminated, a token of at most HCCL_TOKEN_MAX bytes, a SET value of at most
 * HCCL_STORE_MAX_VALUE_LEN bytes equal to the bytes sent) and ends exactly where the format
 * says it ends; a refusal is BAD_REQUEST or DENIED (DENIED whenever a client without the token
 * asks a server with one) with a non-empty message; a value still arriving holds at most
 * 64 KiB or twice what has arrived; ADD agrees with 128-bit arithmetic.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "trust.h"
#include "wire.h"

#define TOKEN "fuzz-token"
#define MODEL_KEYS 32

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_quiet_logs();
  return 0;
}

/* The server's key table, small: keys beyond MODEL_KEYS are dropped (the model forgets them,
 * which only makes a later GET of them end the stream as a held GET would). */
struct model {
  bool token; /* the server has TOKEN */
  bool authed;
  int nkeys;
  char *key[MODEL_KEYS];
  uint32_t key_len[MODEL_KEYS];
  char *val[MODEL_KEYS];
  size_t val_len[MODEL_KEYS];
};

static int model_find(struct model *m, const char *key, uint32_t len) {
  for (int i = 0; i < m->nkeys; i++)
    if (m->key_len[i] == len && memcmp(m->key[i], key, len) == 0) return i;
  return -1;
}

static void model_set(struct model *m, const char *key, uint32_t len, const void *val, size_t n) {
  int i = model_find(m, key, len);
  if (i < 0) {
    if (m->nkeys == MODEL_KEYS) return;
    i = m->nkeys++;
    m->key[i] = malloc(len);
    memcpy(m->key[i], key, len);
    m->key_len[i] = len;
    m->val[i] = NULL;
  }
  free(m->val[i]);
  m->val[i] = malloc(n ? n : 1);
  if (n) memcpy(m->val[i], val, n);
  m->val_len[i] = n;
}

static void model_free(struct model *m) {
  for (int i = 0; i < m->nkeys; i++) {
    free(m->key[i]);
    free(m->val[i]);
  }
}

/* What the stream decoded to, for comparing the ways of cutting it. */
struct outcome {
  uint64_t digest;
  unsigned requests;
  size_t consumed;
  int end; /* 0: input ran out, 1: refused, 2: held GET, 3: HELLO refused by the model */
};

static void mix(struct outcome *o, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    o->digest = (o->digest ^ b[i]) * 1099511628211ull;
}

/* Checks one decoded request and applies it to m; returns false when the server would stop
 * reading the stream (a held GET, a refused HELLO). */
static bool dispatch(struct model *m, struct hccl_store_reader *r, const uint8_t *data,
                     size_t start, size_t end, struct outcome *o) {
  const struct hccl_store_header *h = &r->h;
  FUZZ_CHECK(h->op >= HCCL_STORE_OP_SET && h->op <= HCCL_STORE_OP_HELLO, "op %u", h->op);
  FUZZ_CHECK(h->key_len >= 1 && h->key_len <= HCCL_STORE_MAX_KEY_LEN, "key_len %u", h->key_len);
  FUZZ_CHECK(r->key[h->key_len] == '\0', "key not NUL-terminated");
  FUZZ_CHECK(memcmp(r->key, data + start + HCCL_STORE_HEADER_LEN, h->key_len) == 0,
             "key differs from the bytes sent");
  size_t want = HCCL_STORE_HEADER_LEN + h->key_len;
  if (h->op == HCCL_STORE_OP_SET) {
    FUZZ_CHECK(h->arg <= HCCL_STORE_MAX_VALUE_LEN, "value of %llu bytes",
               (unsigned long long)h->arg);
    FUZZ_CHECK(r->body && r->body->len == h->arg && r->body->cap == r->body->len,
               "SET body missing or of the wrong size");
    FUZZ_CHECK(memcmp(r->body->data, data + start + want, r->body->len) == 0,
               "value differs from the bytes sent");
    want += r->body->len;
  } else {
    FUZZ_CHECK(r->body == NULL, "a body on op %u", h->op);
  }
  FUZZ_CHECK(end - start == want, "request took %zu bytes; the format says %zu", end - start, want);
  FUZZ_CHECK(!m->token || m->authed || h->op == HCCL_STORE_OP_HELLO,
             "op %u decoded before the token was presented", h->op);
  o->requests++;
  mix(o, h, sizeof(*h));
  mix(o, r->key, h->key_len);

  int i;
  int64_t base, sum;
  switch (h->op) {
  case HCCL_STORE_OP_HELLO:
    FUZZ_CHECK(h->key_len <= HCCL_TOKEN_MAX, "token of %u bytes", h->key_len);
    if (!m->token || !hccl__token_equal(r->key, h->key_len, TOKEN, strlen(TOKEN))) return false;
    m->authed = true;
    return true;
  case HCCL_STORE_OP_SET:
    model_set(m, r->key, h->key_len, r->body->data, r->body->len);
    return true;
  case HCCL_STORE_OP_GET:
    return model_find(m, r->key, h->key_len) >= 0;
  default: /* ADD, as the server's do_add */
    i = model_find(m, r->key, h->key_len);
    if (hccl__store_parse_int(i >= 0 ? m->val[i] : NULL, i >= 0 ? m->val_len[i] : 0, &base) != 0)
      return true; /* NOT_INTEGER: the connection goes on */
    __int128 exact = (__int128)base + (int64_t)h->arg;
    bool fits = exact >= INT64_MIN && exact <= INT64_MAX;
    FUZZ_CHECK((hccl__store_add_checked(base, (int64_t)h->arg, &sum) == 0) == fits,
               "add_checked disagrees on overflow");
    if (fits) {
      FUZZ_CHECK(sum == (int64_t)exact, "add gave a wrong sum");
      char text[HCCL_STORE_INT_TEXT_LEN + 2];
      int n = snprintf(text, sizeof(text), "%lld", (long long)sum);
      int64_t back;
      FUZZ_CHECK(hccl__store_parse_int(text, (size_t)n, &back) == 0 && back == sum,
                 "the text ADD stores (%s) does not parse back", text);
      model_set(m, r->key, h->key_len, text, (size_t)n);
      mix(o, &sum, sizeof(sum));
    }
    return true;
  }
}

/* Feeds data through a reader, cut by `cut` (0: as much as it takes, 1: one byte, else a
 * seed for chunk sizes), as a server with or without the token. */
static struct outcome run(const uint8_t *data, size_t size, bool token, uint32_t cut) {
  struct outcome o = {.digest = 1469598103934665603ull};
  struct model m = {.token = token};
  struct hccl_store_reader r;
  hccl__store_reader_init(&r);
  size_t pos = 0, start = 0;
  uint32_t rng = cut;
  while (pos < size) {
    char *buf;
    size_t space;
    hccl__store_reader_space(&r, &buf, &space);
    FUZZ_CHECK(space > 0, "no space while a request is being read");
    size_t n = size - pos < space ? size - pos : space;
    if (cut == 1) {
      n = 1;
    } else if (cut > 1) {
      rng = rng * 1103515245u + 12345u;
      size_t c = 1 + (rng >> 16) % 97;
      if (c < n) n = c;
    }
    memcpy(buf, data + pos, n);
    pos += n;
    r.need_hello = m.token && !m.authed;
    enum hccl_store_read got = hccl__store_reader_got(&r, n);
    if (got == HCCL_STORE_READ_MORE) {
      FUZZ_CHECK(hccl__store_reader_started(&r), "bytes taken but no request started");
      if (r.body)
        FUZZ_CHECK(r.body->cap <= 65536 || r.body->cap <= 2 * (pos - start),
                   "%zu bytes held for a value after %zu bytes came", r.body->cap, pos - start);
      continue;
    }
    if (got == HCCL_STORE_READ_ERROR) {
      FUZZ_CHECK(r.status == HCCL_STORE_STATUS_BAD_REQUEST || r.status == HCCL_STORE_STATUS_DENIED,
                 "status %u", r.status);
      size_t len = strnlen(r.msg, sizeof(r.msg));
      FUZZ_CHECK(len > 0 && len < sizeof(r.msg), "refusal message of %zu bytes", len);
      FUZZ_CHECK(r.body == NULL, "a refused request keeps its value");
      if (m.token && !m.authed && pos - start >= HCCL_STORE_HEADER_LEN &&
          data[start] == (HCCL_STORE_MAGIC >> 8) && data[start + 1] == (HCCL_STORE_MAGIC & 0xff) &&
          data[start + 2] == HCCL_STORE_VERSION && data[start + 3] != HCCL_STORE_OP_HELLO &&
          data[start + 3] >= HCCL_STORE_OP_SET && data[start + 3] <= HCCL_STORE_OP_HELLO)
        FUZZ_CHECK(r.status == HCCL_STORE_STATUS_DENIED, "a stranger's request not denied: %s",
                   r.msg);
      mix(&o, &r.status, 1);
      mix(&o, r.msg, len);
      o.end = 1;
      break;
    }
    bool go_on = dispatch(&m, &r, data, start, pos, &o);
    hccl__store_reader_next(&r);
    start = pos;
    if (!go_on) {
      o.end = r.h.op == HCCL_STORE_OP_GET ? 2 : 3;
      break;
    }
  }
  if (o.end == 0 && pos == start) FUZZ_CHECK(!hccl__store_reader_started(&r), "started on nothing");
  o.consumed = pos;
  hccl__store_reader_free(&r);
  model_free(&m);
  return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int token = 0; token < 2; token++) {
    struct outcome whole = run(data, size, token, 0);
    struct outcome cuts[2] = {run(data, size, token, 1),
                              run(data, size, token, 2u + (uint32_t)size)};
    for (int i = 0; i < 2; i++)
      FUZZ_CHECK(cuts[i].digest == whole.digest && cuts[i].requests == whole.requests &&
                     cuts[i].consumed == whole.consumed && cuts[i].end == whole.end,
                 "cut %d decodes differently: %u requests, %zu bytes, end %d; whole: %u, %zu, %d",
                 i, cuts[i].requests, cuts[i].consumed, cuts[i].end, whole.requests, whole.consumed,
                 whole.end);
  }
  return 0;
}
