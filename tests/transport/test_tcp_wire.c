/*
 * test_tcp_wire.c - the TCP transport's pure steps on what a peer sends (transport/tcp/tcp_wire.c):
 * reading a hello in pieces and its check, and the frame decoder. No socket: test_tcp runs the
 * same code under real connections, and tests/fuzz/fuzz_tcp_handshake.c under arbitrary bytes.
 *
 * Hello: an expected one is accepted; each rule broken is refused with its reason (the texts
 * the acceptor's warning has always given); a hello read 1, 7 and 40 bytes at a time is the
 * same. Frames: a stream of DATA (empty, full-slot), ACK, ABORT and BYE decodes alike whole and
 * a byte at a time, with payloads in their slots and through the direct path; payloads of a
 * receive posted in place land there (only those it covers and that fit), and unposting it in
 * the middle of one sends the rest to the slot; each protocol
 * error (oversized DATA, a ninth unreleased message, an ACK beyond what was written or behind
 * the last one, an unknown type, an empty or oversized ABORT or one from a rank outside the
 * communicator, an ACK or BYE with a size) names
 * what was wrong, takes the header and nothing after it, and ends the stream. The reader's
 * wake-up mark (SO_RCVLOWAT) follows the decoder: 1 between frames, in a header and near a
 * payload's end; the payload's rest, capped, inside a large one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_wire.h"

#define SLOT 64

static const struct hccl_tcp_hello g_expect = {.magic = HCCL_TCP_MAGIC,
                                               .version = HCCL_TCP_VERSION,
                                               .rank = 5,
                                               .slot_bytes = SLOT,
                                               .comm_id = 0x0123456789abcdefULL,
                                               .token_hash = 0xfedcba9876543210ULL};
static const bool g_may[8] = {true, true, false, true};

static struct hccl_tcp_hello hello(uint32_t rank, uint32_t channel) {
  struct hccl_tcp_hello h = g_expect;
  h.rank = rank;
  h.channel = channel;
  return h;
}

static void refused(struct hccl_tcp_hello h, const char *want) {
  char why[160];
  memset(why, 'x', sizeof(why));
  assert_false(hccl__tcp_hello_check(&h, &g_expect, g_may, 8, why, sizeof(why)));
  assert_string_equal(why, want);
}

static void test_hello_check(void **st) {
  (void)st;
  char why[160] = "";
  for (uint32_t r = 0; r < 4; r++)
    for (uint32_t c = 0; c < 2; c++) {
      struct hccl_tcp_hello h = hello(r, c);
      assert_int_equal(hccl__tcp_hello_check(&h, &g_expect, g_may, 8, why, sizeof(why)), r != 2);
    }
  struct hccl_tcp_hello h = hello(0, 0);
  h.magic = 0x5448202f20544547ULL;
  refused(h, "not a libhccl hello (magic 0x5448202f20544547)");
  h = hello(0, 0);
  h.version = 2;
  refused(h, "libhccl TCP protocol version 2, this rank speaks 1");
  h = hello(0, 0);
  h.token_hash = 1;
  h.comm_id = 1; /* the token is checked first: another job, not another communicator */
  refused(h, "a different job token (HCCL_JOB_TOKEN): another job's process");
  h = hello(0, 0);
  h.comm_id = 1;
  refused(h, "it belongs to another communicator");
  refused(hello(2, 0), "it claims rank 2 channel 0, which does not connect here");
  refused(hello(5, 1), "it claims rank 5 channel 1, which does not connect here");
  refused(hello(8, 0), "it claims rank 8 channel 0, which does not connect here");
  refused(hello(0xffffffffu, 0),
          "it claims rank 4294967295 channel 0, which does not connect here");
  refused(hello(1, 2), "it claims rank 1 channel 2, which does not connect here");
  h = hello(1, 1);
  h.slot_bytes = 4096;
  refused(h, "its slots are 4096 bytes, this rank's 64 (HCCL_BUFFSIZE differs?)");
}

static void test_hello_pieces(void **st) {
  (void)st;
  struct hccl_tcp_hello want = hello(3, 1);
  static const size_t steps[] = {1, 7, sizeof(struct hccl_tcp_hello)};
  for (size_t s = 0; s < 3; s++) {
    struct hccl_tcp_greet g = {.fd = -1};
    size_t off = 0;
    bool whole = false;
    while (!whole) {
      size_t len;
      char *to = hccl__tcp_greet_space(&g, &len);
      assert_int_equal(len, sizeof(want) - off);
      size_t n = steps[s] < len ? steps[s] : len;
      memcpy(to, (const char *)&want + off, n);
      off += n;
      whole = hccl__tcp_greet_got(&g, n);
      assert_int_equal(whole, off == sizeof(want));
    }
    size_t len;
    hccl__tcp_greet_space(&g, &len);
    assert_int_equal(len, 0);
    assert_memory_equal(&g.h, &want, sizeof(want));
  }
}

/* ---- frames ---- */

struct stream {
  char b[4096];
  size_t n;
};

static void put(struct stream *s, uint32_t type, uint32_t size, uint32_t arg, int32_t code,
                const void *payload, size_t payload_len) {
  struct tcp_frame f = {.type = type, .size = size, .arg = arg, .code = code};
  f.stamp.w[0] = 0x5354414d50000000ULL + s->n;
  memcpy(s->b + s->n, &f, sizeof(f));
  s->n += sizeof(f);
  if (payload_len) memcpy(s->b + s->n, payload, payload_len);
  s->n += payload_len;
}

struct rx_fixture {
  char slots[TCP_NSLOTS * SLOT];
  struct hccl_tcp_rx rx;
};

static void fixture(struct rx_fixture *x, uint32_t written) {
  memset(x->slots, 0, sizeof(x->slots));
  hccl__tcp_rx_init(&x->rx, x->slots, SLOT, 8);
  x->rx.written = written;
}

/* Feeds s in pieces of `step` bytes (0: whole), releasing every message as it lands; writes the
 * events into ev (at most max) and returns how many. *taken = the bytes taken. */
static int feed(struct rx_fixture *x, const struct stream *s, size_t step, bool release,
                enum hccl_tcp_rx_event *ev, int max, size_t *taken) {
  size_t pos = 0;
  int k = 0;
  while (pos < s->n && k < max) {
    size_t n = step && step < s->n - pos ? step : s->n - pos, used;
    enum hccl_tcp_rx_event e = hccl__tcp_rx_feed(&x->rx, s->b + pos, n, &used);
    pos += used;
    if (e == HCCL_TCP_RX_MORE) {
      assert_int_equal(used, n);
      continue;
    }
    ev[k++] = e;
    if (e == HCCL_TCP_RX_DATA && release) x->rx.released = x->rx.arrived;
    if (e == HCCL_TCP_RX_ERROR) break;
  }
  *taken = pos;
  return k;
}

static void test_frames(void **st) {
  (void)st;
  char full[SLOT], reason[] = "allreduce on rank 1 failed", report[] = "rank 3 is behind";
  for (int i = 0; i < SLOT; i++)
    full[i] = (char)(i * 7 + 1);
  struct stream s = {.n = 0};
  put(&s, FRAME_DATA, 3, 0, 0, "abc", 3);
  put(&s, FRAME_DATA, 0, 0, 0, NULL, 0);
  put(&s, FRAME_ACK, 0, 2, 0, NULL, 0);
  put(&s, FRAME_DATA, SLOT, 0, 0, full, SLOT);
  put(&s, FRAME_ACK, 0, 4, 0, NULL, 0);
  put(&s, FRAME_ABORT, sizeof(reason), 1, HCCL_E_TIMEOUT, reason, sizeof(reason));
  put(&s, FRAME_PROGQ, 0, 57, 0, NULL, 0);
  put(&s, FRAME_PROGA, sizeof(report), 3 + 1, 0, report, sizeof(report));
  put(&s, FRAME_REACHQ, 0, 1, 0, NULL, 0);
  put(&s, FRAME_REACHA, 0, 2, 6500, NULL, 0);
  put(&s, FRAME_BYE, 0, 0, 0, NULL, 0);
  static const enum hccl_tcp_rx_event want[] = {
      HCCL_TCP_RX_DATA,  HCCL_TCP_RX_DATA,  HCCL_TCP_RX_ACK,    HCCL_TCP_RX_DATA,
      HCCL_TCP_RX_ACK,   HCCL_TCP_RX_ABORT, HCCL_TCP_RX_PROGQ,  HCCL_TCP_RX_PROGA,
      HCCL_TCP_RX_REACHQ, HCCL_TCP_RX_REACHA, HCCL_TCP_RX_BYE};
  static const size_t steps[] = {0, 1, 5, 33};
  for (size_t i = 0; i < 4; i++) {
    struct rx_fixture x;
    fixture(&x, 4);
    enum hccl_tcp_rx_event ev[16];
    size_t taken;
    int k = feed(&x, &s, steps[i], false, ev, 16, &taken);
    assert_int_equal(k, 11);
    assert_memory_equal(ev, want, sizeof(want));
    assert_int_equal(taken, s.n);
    assert_int_equal(x.rx.arrived, 3);
    assert_int_equal(x.rx.acked, 4);
    assert_true(x.rx.bye);
    assert_memory_equal(x.slots, "abc", 3);
    assert_memory_equal(x.slots + 2 * SLOT, full, SLOT);
    assert_int_equal(x.rx.hdr[0].size, 3);
    assert_int_equal(x.rx.hdr[1].size, 0);
    assert_int_equal(x.rx.hdr[2].stamp.w[0] & 0xfff, 2 * 32 + 3 + 32);
    assert_int_equal(x.rx.abort_origin, 1);
    assert_int_equal(x.rx.abort_code, HCCL_E_TIMEOUT);
    assert_string_equal(x.rx.abort_text, reason);
    assert_int_equal(x.rx.progq_seq, 57);
    assert_int_equal(x.rx.report_next, 3 + 1);
    assert_string_equal(x.rx.report, report);
    assert_int_equal(x.rx.reach_rank, 2); /* the REACHA's, after the REACHQ's 1 */
    assert_int_equal(x.rx.reach_quiet_ms, 6500);
  }
}

static void test_direct(void **st) {
  (void)st;
  char full[SLOT];
  for (int i = 0; i < SLOT; i++)
    full[i] = (char)(255 - i);
  struct stream s = {.n = 0};
  put(&s, FRAME_DATA, SLOT, 0, 0, full, SLOT);
  struct rx_fixture x;
  fixture(&x, 0);
  x.rx.arrived = x.rx.released = 0xfffffffeu; /* the counters wrap: slot 6, then 7, then 0 */
  size_t len, used;
  assert_null(hccl__tcp_rx_direct(&x.rx, &len));
  assert_int_equal(len, 0);
  for (int m = 0; m < 3; m++) {
    assert_int_equal(hccl__tcp_rx_feed(&x.rx, s.b, sizeof(struct tcp_frame) + 10, &used),
                     HCCL_TCP_RX_MORE);
    char *to = hccl__tcp_rx_direct(&x.rx, &len);
    assert_ptr_equal(to, x.slots + (size_t)((6 + m) % TCP_NSLOTS) * SLOT + 10);
    assert_int_equal(len, SLOT - 10);
    memcpy(to, full + 10, 20);
    assert_int_equal(hccl__tcp_rx_direct_got(&x.rx, 20), HCCL_TCP_RX_MORE);
    to = hccl__tcp_rx_direct(&x.rx, &len);
    assert_int_equal(len, SLOT - 30);
    memcpy(to, full + 30, len);
    assert_int_equal(hccl__tcp_rx_direct_got(&x.rx, len), HCCL_TCP_RX_DATA);
    assert_memory_equal(x.slots + (size_t)((6 + m) % TCP_NSLOTS) * SLOT, full, SLOT);
    assert_null(hccl__tcp_rx_direct(&x.rx, &len));
  }
  assert_int_equal(x.rx.arrived, 1);
}

/* A receive posted in place: its messages land in it, each in its own chunk, and no slot is
 * written; a message before the post, after its last, or larger than its chunk there lands in its
 * slot; at[] says where each landed, and the post is dropped after its last. Unposting in the
 * middle of a payload sends the rest to the slot and leaves the post's memory as it was. */
static void test_posted(void **st) {
  (void)st;
  char a[SLOT], b[SLOT], c[6], dst[2 * SLOT + 5];
  memset(a, 'a', sizeof(a));
  memset(b, 'b', sizeof(b));
  memset(c, 'c', sizeof(c));
  struct stream s = {.n = 0};
  put(&s, FRAME_DATA, SLOT, 0, 0, a, SLOT); /* message 0xfffffffe: before the post */
  put(&s, FRAME_DATA, SLOT, 0, 0, b, SLOT); /* 0xffffffff: the post's chunk 0 */
  put(&s, FRAME_DATA, 5, 0, 0, c, 5);       /* 0: chunk 1, shorter than its room */
  put(&s, FRAME_DATA, 6, 0, 0, c, 6);       /* 1: chunk 2 has 5 bytes of room */
  put(&s, FRAME_DATA, 4, 0, 0, c, 4);       /* 2: after the post */
  struct rx_fixture x;
  fixture(&x, 0);
  memset(x.slots, 's', sizeof(x.slots));
  memset(dst, 'd', sizeof(dst));
  x.rx.arrived = x.rx.released = 0xfffffffeu;
  x.rx.post = (struct hccl_tcp_post){
      .dst = dst, .chunk = SLOT, .bytes = sizeof(dst), .first = 0xffffffffu, .n = 3};
  enum hccl_tcp_rx_event ev[8];
  size_t taken;
  assert_int_equal(feed(&x, &s, 7, true, ev, 8, &taken), 5);
  assert_int_equal(taken, s.n);
  char *slot[TCP_NSLOTS];
  for (int k = 0; k < TCP_NSLOTS; k++)
    slot[k] = x.slots + (size_t)k * SLOT;
  assert_ptr_equal(x.rx.at[6], slot[6]);
  assert_memory_equal(slot[6], a, SLOT);
  assert_ptr_equal(x.rx.at[7], dst);
  assert_memory_equal(dst, b, SLOT);
  assert_ptr_equal(x.rx.at[0], dst + SLOT);
  assert_memory_equal(dst + SLOT, c, 5);
  assert_ptr_equal(x.rx.at[1], slot[1]);
  assert_memory_equal(slot[1], c, 6);
  assert_ptr_equal(x.rx.at[2], slot[2]);
  assert_memory_equal(slot[2], c, 4);
  assert_null(x.rx.post.dst); /* dropped once its last message landed */
  for (size_t i = SLOT + 5; i < sizeof(dst); i++)
    assert_int_equal(dst[i], 'd');
  for (int i = 0; i < SLOT; i++)
    assert_int_equal(slot[7][i] + slot[0][i], 's' + 's'); /* the posted ones left no trace */

  /* Unposted mid-payload (an abort): the first 10 bytes went to the post, the rest to the slot. */
  struct stream t = {.n = 0};
  put(&t, FRAME_DATA, SLOT, 0, 0, b, SLOT);
  memset(dst, 'd', sizeof(dst));
  x.rx.post = (struct hccl_tcp_post){.dst = dst, .chunk = SLOT, .bytes = SLOT, .first = 3, .n = 1};
  size_t used, len;
  assert_int_equal(hccl__tcp_rx_feed(&x.rx, t.b, sizeof(struct tcp_frame) + 10, &used),
                   HCCL_TCP_RX_MORE);
  hccl__tcp_rx_unpost(&x.rx);
  assert_null(x.rx.post.dst);
  char *to = hccl__tcp_rx_direct(&x.rx, &len);
  assert_ptr_equal(to, slot[3] + 10);
  assert_int_equal(len, SLOT - 10);
  memcpy(to, b + 10, len);
  assert_int_equal(hccl__tcp_rx_direct_got(&x.rx, len), HCCL_TCP_RX_DATA);
  assert_ptr_equal(x.rx.at[3], slot[3]);
  assert_memory_equal(slot[3] + 10, b + 10, SLOT - 10);
  assert_memory_equal(dst, b, 10);
  for (size_t i = 10; i < sizeof(dst); i++)
    assert_int_equal(dst[i], 'd');
}

#define BIG (5 * TCP_DIRECT)

static void test_lowat(void **st) {
  (void)st;
  static char slots[TCP_NSLOTS * BIG];
  struct hccl_tcp_rx rx;
  hccl__tcp_rx_init(&rx, slots, BIG, 8);
  const size_t cap = 2 * TCP_DIRECT;
  assert_int_equal(hccl__tcp_rx_lowat(&rx, cap), 1); /* nothing yet: a header wakes it */
  struct tcp_frame f = {.type = FRAME_DATA, .size = BIG};
  size_t used, len;
  assert_int_equal(hccl__tcp_rx_feed(&rx, (const char *)&f, 10, &used), HCCL_TCP_RX_MORE);
  assert_int_equal(hccl__tcp_rx_lowat(&rx, cap), 1); /* half a header */
  assert_int_equal(hccl__tcp_rx_feed(&rx, (char *)&f + 10, sizeof(f) - 10, &used),
                   HCCL_TCP_RX_MORE);
  assert_int_equal(hccl__tcp_rx_lowat(&rx, cap), cap); /* 5 x TCP_DIRECT left: the cap */
  assert_int_equal(hccl__tcp_rx_lowat(&rx, 10 * TCP_DIRECT), BIG); /* under the cap: all */
  assert_non_null(hccl__tcp_rx_direct(&rx, &len));
  assert_int_equal(hccl__tcp_rx_direct_got(&rx, 7 * TCP_DIRECT / 2), HCCL_TCP_RX_MORE);
  assert_int_equal(hccl__tcp_rx_lowat(&rx, cap), 3 * TCP_DIRECT / 2); /* the rest */
  assert_int_equal(hccl__tcp_rx_direct_got(&rx, TCP_DIRECT), HCCL_TCP_RX_MORE);
  assert_int_equal(hccl__tcp_rx_lowat(&rx, cap), 1); /* under TCP_DIRECT left: staged */
  assert_int_equal(hccl__tcp_rx_direct_got(&rx, TCP_DIRECT / 2), HCCL_TCP_RX_DATA);
  assert_int_equal(hccl__tcp_rx_lowat(&rx, cap), 1); /* between frames */
}

/* The stream `pre` (accepted) then `bad`, then a BYE that must never be taken. */
static void broken(const struct stream *pre, int npre, uint32_t type, uint32_t size, uint32_t arg,
                   uint32_t written, const char *why) {
  struct stream s = *pre;
  size_t at = s.n;
  char payload[600] = {0};
  put(&s, type, size, arg, 0, payload, size < sizeof(payload) ? size : sizeof(payload));
  put(&s, FRAME_BYE, 0, 0, 0, NULL, 0);
  static const size_t steps[] = {0, 1, 7};
  for (size_t i = 0; i < 3; i++) {
    struct rx_fixture x;
    fixture(&x, written);
    enum hccl_tcp_rx_event ev[24];
    size_t taken;
    int k = feed(&x, &s, steps[i], false, ev, 24, &taken);
    assert_int_equal(k, npre + 1);
    assert_int_equal(ev[npre], HCCL_TCP_RX_ERROR);
    assert_string_equal(x.rx.why, why);
    assert_int_equal(taken, at + sizeof(struct tcp_frame));
    size_t used = 99, len = 99;
    assert_int_equal(hccl__tcp_rx_feed(&x.rx, s.b + taken, s.n - taken, &used), HCCL_TCP_RX_ERROR);
    assert_int_equal(used, 0);
    assert_null(hccl__tcp_rx_direct(&x.rx, &len));
    assert_false(x.rx.bye);
  }
}

static void test_frame_errors(void **st) {
  (void)st;
  struct stream none = {.n = 0}, eight = {.n = 0}, acked = {.n = 0};
  for (int i = 0; i < TCP_NSLOTS; i++)
    put(&eight, FRAME_DATA, 1, 0, 0, "m", 1);
  put(&acked, FRAME_ACK, 0, 3, 0, NULL, 0);
  broken(&none, 0, FRAME_DATA, SLOT + 1, 0, 0,
         "broke the protocol (a 65-byte message with 0 unreleased; slots hold 64)");
  broken(&none, 0, FRAME_DATA, 0xffffffffu, 0, 0,
         "broke the protocol (a 4294967295-byte message with 0 unreleased; slots hold 64)");
  broken(&eight, TCP_NSLOTS, FRAME_DATA, 0, 0, 0,
         "broke the protocol (a 0-byte message with 8 unreleased; slots hold 64)");
  broken(&none, 0, FRAME_ACK, 0, 5, 4, "broke the protocol (released 5 of 4 messages sent)");
  broken(&acked, 1, FRAME_ACK, 0, 2, 4, "broke the protocol (released 2 of 4 messages sent)");
  broken(&none, 0, 0, 0, 0, 0, "broke the protocol (frame type 0, 0 bytes)");
  broken(&none, 0, 77, 12, 0, 0, "broke the protocol (frame type 77, 12 bytes)");
  broken(&none, 0, FRAME_ABORT, 0, 0, 0, "broke the protocol (frame type 3, 0 bytes)");
  /* ACK and BYE carry nothing: a size would make the bytes after them a frame (fuzz). */
  broken(&none, 0, FRAME_ACK, 5, 0, 4, "broke the protocol (frame type 2, 5 bytes)");
  broken(&none, 0, FRAME_BYE, 32, 0, 0, "broke the protocol (frame type 4, 32 bytes)");
  broken(&none, 0, FRAME_ABORT, HCCL_REASON_MAX + 1, 0, 0,
         "broke the protocol (frame type 3, 513 bytes)");
  /* An origin outside the communicator; UINT32_MAX was kept as "no abort" (fuzz). */
  broken(&none, 0, FRAME_ABORT, 4, 8, 0, "broke the protocol (an ABORT from rank 8 of 8)");
  broken(&none, 0, FRAME_ABORT, 4, 0xffffffffu, 0,
         "broke the protocol (an ABORT from rank 4294967295 of 8)");
  /* A progress query carries nothing; a report names a rank of the communicator, or none. */
  broken(&none, 0, FRAME_PROGQ, 1, 0, 0, "broke the protocol (frame type 5, 1 bytes)");
  broken(&none, 0, FRAME_PROGA, 0, 0, 0, "broke the protocol (frame type 6, 0 bytes)");
  broken(&none, 0, FRAME_PROGA, HCCL_REASON_MAX + 1, 0, 0,
         "broke the protocol (frame type 6, 513 bytes)");
  broken(&none, 0, FRAME_PROGA, 4, 9, 0, "broke the protocol (a report naming rank 8 of 8)");
  /* A reach query and its answer carry nothing and name a rank of the communicator. */
  broken(&none, 0, FRAME_REACHQ, 4, 1, 0, "broke the protocol (frame type 7, 4 bytes)");
  broken(&none, 0, FRAME_REACHA, 1, 1, 0, "broke the protocol (frame type 8, 1 bytes)");
  broken(&none, 0, FRAME_REACHQ, 0, 8, 0, "broke the protocol (a reach query naming rank 8 of 8)");
  broken(&none, 0, FRAME_REACHA, 0, 0xffffffffu, 0,
         "broke the protocol (a reach query naming rank 4294967295 of 8)");

  /* Released messages free their slots: 8 land, each released, then 8 more. */
  struct stream s = eight;
  for (int i = 0; i < TCP_NSLOTS; i++)
    put(&s, FRAME_DATA, 1, 0, 0, "n", 1);
  struct rx_fixture x;
  fixture(&x, 0);
  enum hccl_tcp_rx_event ev[24];
  size_t taken;
  assert_int_equal(feed(&x, &s, 0, true, ev, 24, &taken), 2 * TCP_NSLOTS);
  assert_int_equal(taken, s.n);

  /* An ABORT of the longest reason, not NUL-terminated by the peer: cut to fit. */
  char text[HCCL_REASON_MAX];
  memset(text, 'r', sizeof(text));
  struct stream a = {.n = 0};
  put(&a, FRAME_ABORT, sizeof(text), 2, 0, text, sizeof(text));
  fixture(&x, 0);
  assert_int_equal(feed(&x, &a, 0, true, ev, 24, &taken), 1);
  assert_int_equal(ev[0], HCCL_TCP_RX_ABORT);
  assert_int_equal(strlen(x.rx.abort_text), HCCL_REASON_MAX - 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hello_check),  cmocka_unit_test(test_hello_pieces),
      cmocka_unit_test(test_frames),       cmocka_unit_test(test_direct),
      cmocka_unit_test(test_posted),       cmocka_unit_test(test_lowat),
      cmocka_unit_test(test_frame_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
