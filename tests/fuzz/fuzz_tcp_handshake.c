/*
 * fuzz_tcp_handshake.c - libFuzzer target: what a remote peer sends the TCP transport
 * (transport/tcp/tcp_wire.c), the input being one accepted connection's bytes: its first 40 bytes
 * the hello, the rest the frame stream of the link it would become.
 *
 * The hello is read the way the acceptor (tcp_sock.c) reads it, into the space
 * hccl__tcp_greet_space names, cut three ways (as much as it takes, one byte at a time,
 * pseudo-random pieces), and judged by hccl__tcp_hello_check as rank 5 of 8, whose lower ranks
 * 0, 1 and 3 are on other servers, with 64-byte slots. The rules are written out again here: a
 * hello is accepted exactly when its magic, version, token hash and communicator id are the
 * expected ones, its rank is below 8 and may connect, its channel is 0 or 1, and its slot size
 * is 64; a refusal has a non-empty reason naming the first rule broken (also with the
 * smallest buffer the contract allows); an input shorter than a hello is never judged.
 *
 * The frame stream is decoded whether or not the hello was accepted (so the search need not
 * keep a valid hello to reach the frames), by a decoder bound to a pretend link: 8 slots of 64
 * bytes in one allocation of exactly that size (AddressSanitizer catches a write past it), a
 * pretend algorithm that releases, after each message lands, as many of the unreleased ones
 * as its stamp's low 4 bits say, and a pretend sender that starts 4 messages ahead and writes
 * one more per message that lands. The counters start at 0 and again at 2^32 - 5, so they
 * wrap. The stream is cut three ways, the third also writing payloads through the direct path
 * the I/O thread uses for large ones, and each cut must decode alike.
 *
 * Checked at every frame, against the bytes sent: a frame is accepted exactly when the
 * protocol's rules (again written out here) allow it, and takes its header and the `size`
 * bytes that follow, no more; a DATA payload lands whole in slot arrived % 8 with its header,
 * and the direct path never names memory outside that slot; no message's slot changes before
 * it is released; an ACK sets the acked count, an ABORT its origin, code and a NUL-terminated
 * reason of fewer than HCCL_REASON_MAX bytes equal to the bytes sent; an error takes the
 * header and nothing after it, says "broke the protocol (...)" (the messages put it after the
 * peer's rank and address), and every later call takes nothing.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "tcp_wire.h"

#define HELLO_LEN sizeof(struct hccl_tcp_hello)
#define NRANKS 8
#define SLOT 64

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_quiet_logs();
  return 0;
}

static const struct hccl_tcp_hello g_expect = {.magic = HCCL_TCP_MAGIC,
                                               .version = HCCL_TCP_VERSION,
                                               .rank = 5,
                                               .slot_bytes = SLOT,
                                               .comm_id = 0x0123456789abcdefULL,
                                               .token_hash = 0xfedcba9876543210ULL};
static const bool g_may_connect[NRANKS] = {true, true, false, true};

static uint32_t next_rand(uint32_t *rng) {
  *rng = *rng * 1103515245u + 12345u;
  return *rng >> 16;
}

static void mix(uint64_t *d, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    *d = (*d ^ b[i]) * 1099511628211ull;
}

/* ---- the hello ---- */

/* The first rule h breaks, as an index into g_reason_words; -1 when it breaks none. */
static int hello_rule_broken(const struct hccl_tcp_hello *h) {
  if (h->magic != g_expect.magic) return 0;
  if (h->version != g_expect.version) return 1;
  if (h->token_hash != g_expect.token_hash) return 2;
  if (h->comm_id != g_expect.comm_id) return 3;
  /* A link comes from a lower rank, a callback (channel + 2) from a higher one. */
  if (h->rank >= NRANKS || h->channel > 3 || !g_may_connect[h->rank] ||
      (h->channel < 2 ? h->rank >= g_expect.rank : h->rank <= g_expect.rank))
    return 4;
  if (h->slot_bytes != g_expect.slot_bytes) return 5;
  return -1;
}

static const char *const g_reason_words[] = {
    "not a libhccl hello",  "protocol version",      "job token",
    "another communicator", "does not connect here", "slots are"};

/* Reads data[0..size) as a hello, cut by `cut` (0: as much as the space takes, 1: one byte,
 * else a seed for piece sizes). Returns a digest of the verdict and reason. */
static uint64_t hello_run(const uint8_t *data, size_t size, uint32_t cut) {
  struct hccl_tcp_greet g = {.fd = -1};
  size_t pos = 0;
  bool whole = false;
  uint32_t rng = cut;
  while (pos < size && !whole) {
    size_t len;
    char *to = hccl__tcp_greet_space(&g, &len);
    FUZZ_CHECK(to == (char *)&g.h + g.got && len == HELLO_LEN - g.got && len > 0,
               "space of %zu bytes at offset %td with %zu read", len, to - (char *)&g.h, g.got);
    size_t n = size - pos < len ? size - pos : len;
    if (cut == 1) {
      n = 1;
    } else if (cut > 1) {
      size_t c = 1 + next_rand(&rng) % 13;
      if (c < n) n = c;
    }
    memcpy(to, data + pos, n);
    pos += n;
    whole = hccl__tcp_greet_got(&g, n);
    FUZZ_CHECK(whole == (pos == HELLO_LEN), "whole %d after %zu bytes", whole, pos);
  }
  uint64_t d = 1469598103934665603ull;
  if (!whole) {
    FUZZ_CHECK(size < HELLO_LEN && g.got == size, "%zu of %zu bytes read", g.got, size);
    return d; /* the connection closed before its hello: nothing to judge */
  }
  FUZZ_CHECK(memcmp(&g.h, data, HELLO_LEN) == 0, "the hello differs from the bytes sent");
  char why[160], small[64];
  memset(why, 0x55, sizeof(why));
  bool ok = hccl__tcp_hello_check(&g.h, &g_expect, g_may_connect, NRANKS, why, sizeof(why));
  int broken = hello_rule_broken(&g.h);
  FUZZ_CHECK(ok == (broken < 0), "verdict %d; the rules say %d (rank %u channel %u)", ok,
             broken < 0, g.h.rank, g.h.channel);
  mix(&d, &ok, sizeof(ok));
  if (ok) {
    /* What the acceptor then indexes its tables with. */
    FUZZ_CHECK(g.h.rank < NRANKS && g.h.channel < 4 && g_may_connect[g.h.rank],
               "accepted rank %u channel %u", g.h.rank, g.h.channel);
    return d;
  }
  size_t len = strnlen(why, sizeof(why));
  FUZZ_CHECK(len > 0 && len < sizeof(why), "refusal reason of %zu bytes", len);
  FUZZ_CHECK(strstr(why, g_reason_words[broken]), "rule %d broken, but the reason is: %s", broken,
             why);
  FUZZ_CHECK(!hccl__tcp_hello_check(&g.h, &g_expect, g_may_connect, NRANKS, small, sizeof(small)),
             "accepted with a smaller reason buffer");
  size_t slen = strnlen(small, sizeof(small));
  FUZZ_CHECK(slen > 0 && slen < sizeof(small) && strncmp(small, why, slen) == 0,
             "reason in 64 bytes: '%.64s'", small);
  mix(&d, why, len);
  return d;
}

/* ---- the frame stream ---- */

/* The pretend link around the decoder. */
struct link {
  struct hccl_tcp_rx rx;
  char *slots;                 /* exactly TCP_NSLOTS x SLOT bytes */
  uint32_t released;           /* the pretend algorithm's */
  uint32_t written;            /* the pretend sender's */
  char sent[TCP_NSLOTS][SLOT]; /* what each unreleased message's slot must hold */
  uint32_t sent_len[TCP_NSLOTS];
};

static struct tcp_frame header_at(const uint8_t *p) {
  struct tcp_frame f;
  memcpy(&f, p, sizeof(f));
  return f;
}

/* Whether the protocol allows frame f now: the rules written out again. */
static bool frame_allowed(const struct link *l, const struct tcp_frame *f) {
  const struct hccl_tcp_rx *rx = &l->rx;
  switch (f->type) {
  case FRAME_DATA:
    return f->size <= SLOT && rx->arrived - l->released < TCP_NSLOTS;
  case FRAME_ACK:
    return f->size == 0 && f->arg - rx->acked <= l->written - rx->acked;
  case FRAME_ABORT:
    return f->size >= 1 && f->size <= HCCL_REASON_MAX && f->arg < NRANKS;
  case FRAME_BYE:
  case FRAME_PROGQ:
    return f->size == 0;
  case FRAME_PROGA:
    return f->size >= 1 && f->size <= HCCL_REASON_MAX && f->arg <= NRANKS;
  case FRAME_REACHQ:
  case FRAME_REACHA:
    return f->size == 0 && f->arg < NRANKS;
  default:
    return false;
  }
}

/* No unreleased message's slot has changed. */
static void check_slots(const struct link *l) {
  for (uint32_t m = l->released; m != l->rx.arrived; m++) {
    uint32_t s = m % TCP_NSLOTS;
    FUZZ_CHECK(memcmp(l->slots + (size_t)s * SLOT, l->sent[s], l->sent_len[s]) == 0,
               "message %u's slot changed before it was released", m - l->released);
  }
}

/* One event the decoder reported for the frame data[start..pos). */
static void check_event(struct link *l, const struct hccl_tcp_rx *before, enum hccl_tcp_rx_event ev,
                        const uint8_t *data, size_t start, size_t pos, uint64_t *d) {
  FUZZ_CHECK(pos - start >= sizeof(struct tcp_frame), "event %d after %zu bytes", ev, pos - start);
  struct tcp_frame f = header_at(data + start);
  const uint8_t *pay = data + start + sizeof(f);
  struct link was = *l;
  was.rx = *before;
  bool allowed = frame_allowed(&was, &f);
  FUZZ_CHECK(allowed == (ev != HCCL_TCP_RX_ERROR),
             "frame type %u size %u arg %u: event %d, the rules say %s", f.type, f.size, f.arg, ev,
             allowed ? "allowed" : "refused");
  mix(d, &ev, sizeof(ev));
  mix(d, &pos, sizeof(pos));
  if (ev == HCCL_TCP_RX_ERROR) {
    FUZZ_CHECK(pos - start == sizeof(f), "an error took %zu bytes", pos - start);
    size_t len = strnlen(l->rx.why, sizeof(l->rx.why));
    FUZZ_CHECK(len > 0 && len < sizeof(l->rx.why) &&
                   strncmp(l->rx.why, "broke the protocol (", 20) == 0 && l->rx.why[len - 1] == ')',
               "error reason '%.160s'", l->rx.why);
    mix(d, l->rx.why, len);
    return;
  }
  FUZZ_CHECK(pos - start == sizeof(f) + f.size, "frame type %u of %u bytes took %zu bytes", f.type,
             f.size, pos - start);
  static const uint32_t type_of[] = {[HCCL_TCP_RX_DATA] = FRAME_DATA,
                                     [HCCL_TCP_RX_ACK] = FRAME_ACK,
                                     [HCCL_TCP_RX_ABORT] = FRAME_ABORT,
                                     [HCCL_TCP_RX_BYE] = FRAME_BYE,
                                     [HCCL_TCP_RX_PROGQ] = FRAME_PROGQ,
                                     [HCCL_TCP_RX_PROGA] = FRAME_PROGA,
                                     [HCCL_TCP_RX_REACHQ] = FRAME_REACHQ,
                                     [HCCL_TCP_RX_REACHA] = FRAME_REACHA};
  FUZZ_CHECK(ev <= HCCL_TCP_RX_REACHA && type_of[ev] == f.type, "event %d for frame type %u", ev,
             f.type);
  switch (ev) {
  case HCCL_TCP_RX_DATA: {
    uint32_t m = before->arrived, s = m % TCP_NSLOTS;
    FUZZ_CHECK(l->rx.arrived == m + 1, "arrived went from %u to %u", m, l->rx.arrived);
    FUZZ_CHECK(memcmp(l->slots + (size_t)s * SLOT, pay, f.size) == 0,
               "message %u differs from the bytes sent", m);
    FUZZ_CHECK(memcmp(&l->rx.hdr[s], &f, sizeof(f)) == 0, "message %u's header differs", m);
    memcpy(l->sent[s], pay, f.size);
    l->sent_len[s] = f.size;
    l->written++;
    uint32_t release = (uint32_t)(f.stamp.w[0] & 15), pending = l->rx.arrived - l->released;
    check_slots(l);
    l->released += release < pending ? release : pending;
    mix(d, &f, sizeof(f));
    break;
  }
  case HCCL_TCP_RX_ACK:
    FUZZ_CHECK(l->rx.acked == f.arg, "acked %u after an ACK of %u", l->rx.acked, f.arg);
    mix(d, &f.arg, sizeof(f.arg));
    break;
  case HCCL_TCP_RX_ABORT: {
    size_t len = strnlen(l->rx.abort_text, sizeof(l->rx.abort_text));
    size_t sent = strnlen((const char *)pay, f.size - 1);
    FUZZ_CHECK(len < sizeof(l->rx.abort_text) && len == sent &&
                   memcmp(l->rx.abort_text, pay, len) == 0,
               "abort reason of %zu bytes, %zu sent", len, sent);
    FUZZ_CHECK(l->rx.abort_origin == f.arg && l->rx.abort_code == f.code, "abort origin %u code %d",
               l->rx.abort_origin, l->rx.abort_code);
    mix(d, l->rx.abort_text, len);
    break;
  }
  case HCCL_TCP_RX_BYE:
    FUZZ_CHECK(l->rx.bye, "BYE not recorded");
    break;
  case HCCL_TCP_RX_PROGQ:
    FUZZ_CHECK(l->rx.progq_seq == f.arg, "PROGQ seq %u after one of %u", l->rx.progq_seq, f.arg);
    break;
  case HCCL_TCP_RX_PROGA: {
    size_t len = strnlen(l->rx.report, sizeof(l->rx.report));
    size_t sent = strnlen((const char *)pay, f.size - 1);
    FUZZ_CHECK(len < sizeof(l->rx.report) && len == sent && memcmp(l->rx.report, pay, len) == 0 &&
                   l->rx.report_next == f.arg,
               "report of %zu bytes, %zu sent, next %u", len, sent, l->rx.report_next);
    mix(d, l->rx.report, len);
    break;
  }
  case HCCL_TCP_RX_REACHQ:
  case HCCL_TCP_RX_REACHA:
    FUZZ_CHECK(l->rx.reach_rank == f.arg && l->rx.reach_quiet_ms == f.code,
               "reach frame about rank %u (%d ms) recorded as rank %u (%d ms)", f.arg, f.code,
               l->rx.reach_rank, l->rx.reach_quiet_ms);
    mix(d, &f.arg, sizeof(f.arg));
    break;
  default:
    FUZZ_CHECK(0, "event %d", ev);
  }
  if (ev != HCCL_TCP_RX_DATA) check_slots(l);
}

struct outcome {
  uint64_t digest;
  size_t consumed;
  unsigned events;
  bool error;
};

/* Decodes data[0..size) with the counters starting at base, cut by `cut` (0: all that is
 * left, 1: one byte, else a seed for piece sizes and for writing through the direct path). */
static struct outcome frames_run(const uint8_t *data, size_t size, uint32_t base, uint32_t cut) {
  struct outcome o = {.digest = 1469598103934665603ull};
  struct link *l = calloc(1, sizeof(*l));
  if (!l) abort();
  l->slots = malloc(TCP_NSLOTS * SLOT);
  if (!l->slots) abort();
  memset(l->slots, 0xa5, TCP_NSLOTS * SLOT);
  hccl__tcp_rx_init(&l->rx, l->slots, SLOT, NRANKS);
  l->rx.arrived = l->rx.acked = l->released = base;
  l->written = base + 4;
  size_t pos = 0, start = 0;
  uint32_t rng = cut;
  while (pos < size) {
    l->rx.released = l->released;
    l->rx.written = l->written;
    struct hccl_tcp_rx before = l->rx;
    enum hccl_tcp_rx_event ev;
    size_t dlen, n = size - pos;
    char *direct = hccl__tcp_rx_direct(&l->rx, &dlen);
    if (cut == 1) {
      n = 1;
    } else if (cut > 1) {
      size_t c = 1 + next_rand(&rng) % 97;
      if (c < n) n = c;
    }
    if (direct) {
      /* Only inside a payload, exactly to its end: the current slot, the abort text, the report. */
      struct tcp_frame f = l->rx.cur;
      char *dst = f.type == FRAME_DATA    ? l->slots + (size_t)(l->rx.arrived % TCP_NSLOTS) * SLOT
                  : f.type == FRAME_PROGA ? l->rx.report
                                          : l->rx.abort_text;
      FUZZ_CHECK((f.type == FRAME_DATA || f.type == FRAME_ABORT || f.type == FRAME_PROGA) &&
                     dlen > 0 &&
                     direct + dlen == dst + f.size,
                 "direct space of %zu bytes for frame type %u size %u", dlen, f.type, f.size);
    } else {
      FUZZ_CHECK(dlen == 0, "no direct space, yet %zu bytes", dlen);
    }
    if (direct && cut > 1 && next_rand(&rng) % 2) {
      if (n > dlen) n = dlen;
      memcpy(direct, data + pos, n);
      ev = hccl__tcp_rx_direct_got(&l->rx, n);
      pos += n;
    } else {
      size_t used = 0;
      ev = hccl__tcp_rx_feed(&l->rx, (const char *)data + pos, n, &used);
      FUZZ_CHECK(used <= n, "took %zu of %zu bytes", used, n);
      FUZZ_CHECK(ev != HCCL_TCP_RX_MORE || used == n, "MORE after taking %zu of %zu bytes", used,
                 n);
      FUZZ_CHECK(ev == HCCL_TCP_RX_MORE || ev == HCCL_TCP_RX_ERROR || used > 0,
                 "event %d from no bytes", ev);
      pos += used;
    }
    if (ev == HCCL_TCP_RX_MORE) continue;
    check_event(l, &before, ev, data, start, pos, &o.digest);
    o.events++;
    start = pos;
    if (ev == HCCL_TCP_RX_ERROR) {
      size_t used = 1;
      FUZZ_CHECK(hccl__tcp_rx_feed(&l->rx, (const char *)data + pos, size - pos, &used) ==
                         HCCL_TCP_RX_ERROR &&
                     used == 0,
                 "the stream went on after an error (took %zu bytes)", used);
      FUZZ_CHECK(hccl__tcp_rx_direct(&l->rx, &dlen) == NULL && dlen == 0,
                 "direct space after an error");
      o.error = true;
      break;
    }
  }
  if (!o.error && pos - start >= sizeof(struct tcp_frame)) {
    /* The stream ended inside a frame: its header was allowed, its payload is not whole. */
    struct tcp_frame f = header_at(data + start);
    FUZZ_CHECK((f.type == FRAME_DATA || f.type == FRAME_ABORT || f.type == FRAME_PROGA) &&
                   pos - start < sizeof(f) + f.size,
               "%zu bytes of a frame type %u size %u never completed", pos - start, f.type, f.size);
  }
  o.consumed = pos;
  free(l->slots);
  free(l);
  return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t hsize = size < HELLO_LEN ? size : HELLO_LEN;
  uint64_t hello = hello_run(data, hsize, 0);
  FUZZ_CHECK(hello_run(data, hsize, 1) == hello &&
                 hello_run(data, hsize, 2u + (uint32_t)size) == hello,
             "the hello is judged differently when it arrives in pieces");
  if (size <= HELLO_LEN) return 0;
  static const uint32_t bases[2] = {0, 0xfffffffbu};
  for (int b = 0; b < 2; b++) {
    struct outcome whole = frames_run(data + HELLO_LEN, size - HELLO_LEN, bases[b], 0);
    struct outcome cuts[2] = {
        frames_run(data + HELLO_LEN, size - HELLO_LEN, bases[b], 1),
        frames_run(data + HELLO_LEN, size - HELLO_LEN, bases[b], 2u + (uint32_t)size)};
    for (int i = 0; i < 2; i++)
      FUZZ_CHECK(cuts[i].digest == whole.digest && cuts[i].consumed == whole.consumed &&
                     cuts[i].events == whole.events && cuts[i].error == whole.error,
                 "cut %d decodes differently: %u events, %zu bytes, error %d; whole: %u, %zu, %d",
                 i, cuts[i].events, cuts[i].consumed, cuts[i].error, whole.events, whole.consumed,
                 whole.error);
  }
  return 0;
}
