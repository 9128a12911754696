/*
 * wire.h - the wire format the TCP store client (client.c) and the store server
 * (server*.c) speak, the limits both enforce, and the few helpers they share.
 *
 * One request, one reply, in order, over one TCP connection. Every integer is big-endian.
 *
 *   request header (16 bytes)           reply header (16 bytes)
 *   +0  u16 magic 0x4843 ("HC")         +0  u16 magic 0x4843
 *   +2  u8  version (1)                 +2  u8  version (1)
 *   +3  u8  op                          +3  u8  status
 *   +4  u32 key_len                     +4  u32 reserved (0)
 *   +8  u64 arg                         +8  u64 arg
 *   then key[key_len] (no NUL)          then the body described below
 *   then value[arg] for SET only
 *
 *   op   | request arg              | reply on status OK
 *   -----+--------------------------+-------------------------------------------
 *   SET  | value length             | arg 0, no body
 *   GET  | 0                        | arg = value length, value[arg] follows
 *   ADD  | delta (int64, two's c.)  | arg = new value (int64), no body
 *   HELLO| 0 (key = job token)      | arg 0, no body
 *
 * A server with a job token (trust.h) answers anything but a matching HELLO as the first
 * request with STATUS_DENIED and closes; a server without one denies every HELLO.
 *
 * Any status other than OK carries arg = length of a text message (at most
 * HCCL_STORE_MAX_ERROR_LEN bytes, no NUL) naming what was wrong. After STATUS_BAD_REQUEST the
 * server closes the connection, because it cannot find the next request in the stream.
 *
 * GET on a key that does not exist yet is held by the server until some client sets (or adds
 * to) that key; the reply is sent then. The client owns the deadline: when it gives up it
 * closes the connection, and the server drops the held GET. A connection carries one request
 * at a time; bytes that arrive while a GET is held are a protocol error (connection closed).
 *
 * Values written by ADD are stored as decimal text ("42"), so GET on an ADD key returns the
 * text, and ADD on a key whose value is not such text fails with STATUS_NOT_INTEGER.
 */
#ifndef HCCL_STORE_PROTO_H
#define HCCL_STORE_PROTO_H

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hccl.h"

#define HCCL_STORE_MAGIC 0x4843u
#define HCCL_STORE_VERSION 1u
#define HCCL_STORE_HEADER_LEN 16u

/* Bootstrap records are small; the limits catch a corrupt length before it becomes a huge
 * allocation. */
#define HCCL_STORE_MAX_KEY_LEN 1024u
#define HCCL_STORE_MAX_VALUE_LEN (64u * 1024u * 1024u)
#define HCCL_STORE_MAX_ERROR_LEN 512u
/* Longest decimal int64 text ("-9223372036854775808"). */
#define HCCL_STORE_INT_TEXT_LEN 20

enum hccl_store_op {
  HCCL_STORE_OP_SET = 1,
  HCCL_STORE_OP_GET = 2,
  HCCL_STORE_OP_ADD = 3,
  HCCL_STORE_OP_HELLO = 4 /* key = the client's job token (trust.h) */
};

enum hccl_store_status {
  HCCL_STORE_STATUS_OK = 0,
  HCCL_STORE_STATUS_BAD_REQUEST = 1, /* malformed or over a limit; connection is closed */
  HCCL_STORE_STATUS_NOT_INTEGER = 2, /* ADD on a value that is not decimal int64 text */
  HCCL_STORE_STATUS_OVERFLOW = 3,    /* ADD would leave the int64 range */
  HCCL_STORE_STATUS_DENIED = 4,      /* job token or whitelist: another job; connection closed */
};

/* A header as numbers; hccl__store_header_pack/unpack convert to and from the 16 bytes. For a
 * reply, `op` holds the status and key_len is 0. */
struct hccl_store_header {
  uint8_t op;
  uint32_t key_len;
  uint64_t arg;
};

static inline void hccl__store_header_pack(const struct hccl_store_header *h,
                                           unsigned char out[HCCL_STORE_HEADER_LEN]) {
  out[0] = (unsigned char)(HCCL_STORE_MAGIC >> 8);
  out[1] = (unsigned char)(HCCL_STORE_MAGIC & 0xff);
  out[2] = HCCL_STORE_VERSION;
  out[3] = h->op;
  for (int i = 0; i < 4; i++)
    out[4 + i] = (unsigned char)(h->key_len >> (24 - 8 * i));
  for (int i = 0; i < 8; i++)
    out[8 + i] = (unsigned char)(h->arg >> (56 - 8 * i));
}

/* Returns 0, or -1 when magic or version is wrong (not our protocol on the other end). */
static inline int hccl__store_header_unpack(const unsigned char in[HCCL_STORE_HEADER_LEN],
                                            struct hccl_store_header *h) {
  if (((unsigned)in[0] << 8 | in[1]) != HCCL_STORE_MAGIC || in[2] != HCCL_STORE_VERSION) return -1;
  h->op = in[3];
  h->key_len = 0;
  for (int i = 0; i < 4; i++)
    h->key_len = h->key_len << 8 | in[4 + i];
  h->arg = 0;
  for (int i = 0; i < 8; i++)
    h->arg = h->arg << 8 | in[8 + i];
  return 0;
}

/* Parses val[0..len) as the decimal text ADD stores. Absent values count as 0 (val NULL).
 * Returns 0 and sets *out, or -1 when the text is not a whole int64. */
static inline int hccl__store_parse_int(const void *val, size_t len, int64_t *out) {
  char text[HCCL_STORE_INT_TEXT_LEN + 2];
  if (val == NULL) {
    *out = 0;
    return 0;
  }
  if (len == 0 || len > HCCL_STORE_INT_TEXT_LEN) return -1;
  memcpy(text, val, len);
  text[len] = '\0';
  if (!(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *out = (int64_t)v;
  return 0;
}

/* Adds delta to base without leaving the int64 range. Returns 0, or -1 on overflow. */
static inline int hccl__store_add_checked(int64_t base, int64_t delta, int64_t *out) {
  return __builtin_add_overflow(base, delta, out) ? -1 : 0;
}

/* ---- the server's side of a request stream (wire.c) ----
 *
 * The decoding step of the store server, apart from its sockets, so it can be fed bytes by a
 * test or a fuzzer exactly as the server feeds it: the server asks hccl__store_reader_space
 * where the next bytes go, reads at most that many there, and hands the count to
 * hccl__store_reader_got. The space never reaches past the end of the current request, so
 * the bytes of the next one stay unread until the server is ready for them.
 *
 * Every check happens before anything is read or allocated for what it guards: magic and
 * version, the operation, the job token (need_hello), the key length, the value length. A
 * SET value is allocated as its bytes arrive (64 KiB first, then doubling up to its length),
 * so a client that announces a large value and sends little holds little. */

/* A value as the server keeps it: reference-counted, so a reply that is still being written
 * keeps it alive after a SET replaced it. */
struct hccl_store_blob {
  size_t refs;
  size_t len; /* the value's length */
  size_t cap; /* bytes of data allocated (below len while a SET value is arriving) */
  char data[];
};

/* A blob of len bytes (contents undefined), one reference; NULL when out of memory. */
struct hccl_store_blob *hccl__store_blob_new(size_t len);
/* Drops a reference (NULL accepted); the last one frees the blob. */
void hccl__store_blob_unref(struct hccl_store_blob *b);

enum hccl_store_read {
  HCCL_STORE_READ_MORE = 0, /* the request is not whole yet */
  HCCL_STORE_READ_DONE,     /* a whole request: h, key (NUL-terminated) and, for SET, body */
  HCCL_STORE_READ_ERROR     /* refused: status and msg say why; the stream cannot go on */
};

struct hccl_store_reader {
  /* Set by the caller before each hccl__store_reader_got: only HELLO may come (a server with
   * a job token, on a connection that has not presented it yet). */
  int need_hello;
  /* The request, once DONE. The caller may take body (and set it to NULL). */
  struct hccl_store_header h;
  char key[HCCL_STORE_MAX_KEY_LEN + 1];
  struct hccl_store_blob *body;
  /* Once ERROR: the reply's status (BAD_REQUEST or DENIED) and its text. */
  uint8_t status;
  char msg[HCCL_STORE_MAX_ERROR_LEN];
  /* The reader's own. */
  int stage;
  size_t have; /* bytes of the current stage read so far */
  unsigned char hdr[HCCL_STORE_HEADER_LEN];
};

/* Readies r for the first request of a stream. */
void hccl__store_reader_init(struct hccl_store_reader *r);
/* Where the next bytes go: *buf and *len (> 0) while a request is being read; *len is 0 once
 * it is DONE or ERROR (until hccl__store_reader_next). */
void hccl__store_reader_space(struct hccl_store_reader *r, char **buf, size_t *len);
/* Takes n bytes (1 to the *len last given) just written at the space's place. */
enum hccl_store_read hccl__store_reader_got(struct hccl_store_reader *r, size_t n);
/* Whether any byte of the current request has arrived. */
int hccl__store_reader_started(const struct hccl_store_reader *r);
/* After DONE: readies r for the next request (h and key stay as they were until bytes of it
 * arrive; a body not taken is freed). */
void hccl__store_reader_next(struct hccl_store_reader *r);
/* Frees what r holds (a partial or untaken value). */
void hccl__store_reader_free(struct hccl_store_reader *r);

/* Resolves host for a TCP store, IPv4 addresses first so that "localhost" never becomes ::1
 * when 127.0.0.1 exists (a known cause of bootstrap hangs). Numeric addresses are taken as
 * they are. Asks for AF_INET first and falls back to any family only when the name has no
 * IPv4 address. On success *out is a getaddrinfo list (free it with freeaddrinfo); passive
 * asks for AI_PASSIVE (bind).  On failure returns HCCL_E_NOT_FOUND, already logged via hccl__fail
 * with a message naming host and port; `role` ("store server", "store client") starts the message.
 */
struct addrinfo;
HcclResult hccl__store_resolve(const char *host, uint16_t port, int passive, const char *role,
                               struct addrinfo **out);

#endif
