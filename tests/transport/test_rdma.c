/*
 * test_rdma.c - the RDMA transport (hccl/src/transport/rdma/) where no RDMA device is needed:
 * its settings (HCCL_NET's words, each HCCL_RDMA_* variable's range and default, refused by
 * name), the conn blob and the control messages (encoded, decoded, each broken rule refused with
 * its reason), the immediates and the slot and credit arithmetic (across the 2^30 and 2^32
 * wraps), the posted receives (where a message lands in the receiver's buffer, when an entry is
 * spent, the entries' window, the link's region), the MTU agreed, the GID chosen (RoCE v2 over
 * IPv4 first), the device chosen and the message naming what was found. Where the build has the
 * transport (HCCL_HAVE_RDMA): a missing libibverbs named, and on a host without an RDMA device
 * (this one) the error of a rank that asked for RDMA with HCCL_NET=rdma, while HCCL_NET=auto and
 * tcp quietly leave the links to TCP; the words naming a peer lost to this server's own port
 * going down. The data path itself runs only on a device: tests/rdma/ (a guest with soft-RoCE).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "credits.h"
#include "log.h"
#include "peer.h"
#include "rdma_wire.h"
#include "settings.h"
#ifdef HCCL_HAVE_RDMA
#include "rdma.h"
#endif

static const char *const rdma_vars[] = {"HCCL_NET",     "HCCL_RDMA_TIMEOUT", "HCCL_RDMA_RETRY_CNT",
                                        "HCCL_RDMA_TC", "HCCL_RDMA_SL",      "HCCL_RDMA_DEVICE",
                                        "HCCL_RDMA_GID_INDEX", NULL};

static int clean_env(void **state) {
  (void)state;
  for (int i = 0; rdma_vars[i]; i++)
    unsetenv(rdma_vars[i]);
  return 0;
}

static void test_settings(void **state) {
  (void)state;
  struct hccl_settings s;
  assert_int_equal(hccl__settings_load_given(&s, 0, 1), HCCL_SUCCESS);
  assert_int_equal(s.net, HCCL_NET_AUTO);
  assert_int_equal(s.rdma_timeout, 20);
  assert_int_equal(s.rdma_retry_cnt, 7);
  assert_int_equal(s.rdma_tc, 132);
  assert_int_equal(s.rdma_sl, 4);
  assert_int_equal(s.rdma_gid_index, -1);
  assert_string_equal(s.rdma_device, "");

  static const struct {
    const char *word;
    enum hccl_net net;
  } words[] = {{"auto", HCCL_NET_AUTO}, {"rdma", HCCL_NET_RDMA}, {"IB", HCCL_NET_RDMA},
               {"RoCE", HCCL_NET_RDMA}, {"TCP", HCCL_NET_TCP},   {"Socket", HCCL_NET_TCP}};
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
    setenv("HCCL_NET", words[i].word, 1);
    assert_int_equal(hccl__settings_load_given(&s, 0, 1), HCCL_SUCCESS);
    assert_int_equal(s.net, words[i].net);
  }
  setenv("HCCL_RDMA_TIMEOUT", "5", 1);
  setenv("HCCL_RDMA_RETRY_CNT", "1", 1);
  setenv("HCCL_RDMA_TC", "100", 1);
  setenv("HCCL_RDMA_SL", "0", 1);
  setenv("HCCL_RDMA_GID_INDEX", "3", 1);
  setenv("HCCL_RDMA_DEVICE", "mlx5_0:1", 1);
  assert_int_equal(hccl__settings_load_given(&s, 0, 1), HCCL_SUCCESS);
  assert_int_equal(s.rdma_timeout, 5);
  assert_int_equal(s.rdma_retry_cnt, 1);
  assert_int_equal(s.rdma_tc, 100);
  assert_int_equal(s.rdma_sl, 0);
  assert_int_equal(s.rdma_gid_index, 3);
  assert_string_equal(s.rdma_device, "mlx5_0:1");

  /* Each out of range (or not a number) is refused naming the variable, the value and the
   * range. */
  static const struct {
    const char *var, *value, *range;
  } bad[] = {{"HCCL_NET", "verbs", "auto"},
             {"HCCL_RDMA_TIMEOUT", "4", "from 5 to 20"},
             {"HCCL_RDMA_TIMEOUT", "21", "from 5 to 20"},
             {"HCCL_RDMA_RETRY_CNT", "0", "from 1 to 7"},
             {"HCCL_RDMA_RETRY_CNT", "8", "from 1 to 7"},
             {"HCCL_RDMA_TC", "256", "from 0 to 255"},
             {"HCCL_RDMA_TC", "-4", "from 0 to 255"},
             {"HCCL_RDMA_TC", "130", "multiple of 4"},
             {"HCCL_RDMA_SL", "8", "from 0 to 7"},
             {"HCCL_RDMA_SL", "x", "from 0 to 7"},
             {"HCCL_RDMA_GID_INDEX", "256", "from 0 to 255"},
             {"HCCL_RDMA_GID_INDEX", "-1", "from 0 to 255"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    clean_env(NULL);
    setenv(bad[i].var, bad[i].value, 1);
    assert_int_equal(hccl__settings_load_given(&s, 0, 1), HCCL_E_PARA);
    const char *m = HcclGetLastErrorMessage();
    if (!strstr(m, bad[i].var) || !strstr(m, bad[i].value) || !strstr(m, bad[i].range))
      fail_msg("%s=%s: the message does not name them and '%s': %s", bad[i].var, bad[i].value,
               bad[i].range, m);
  }
  clean_env(NULL);
  char longname[80];
  memset(longname, 'd', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  setenv("HCCL_RDMA_DEVICE", longname, 1);
  assert_int_equal(hccl__settings_load_given(&s, 0, 1), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "HCCL_RDMA_DEVICE"));
}

static struct rdma_blob sample_blob(void) {
  struct rdma_blob b = {.magic = RDMA_BLOB_MAGIC, .version = RDMA_VERSION, .active = 1,
                        .mtu = 3, .port = 1, .ud_qpn = 0x123456, .lid = 0};
  for (int i = 0; i < 16; i++)
    b.gid[i] = (uint8_t)(i * 7);
  return b;
}

static void test_blob(void **state) {
  (void)state;
  uint8_t conn[HCCL_CONN_BYTES];
  memset(conn, 0xee, sizeof(conn));
  struct rdma_blob b = sample_blob(), got;
  hccl__rdma_blob_encode(&b, conn);
  assert_true(hccl__rdma_blob_decode(conn, &got));
  assert_memory_equal(&b, &got, sizeof(b));
  for (size_t i = sizeof(b); i < sizeof(conn); i++)
    assert_int_equal(conn[i], 0); /* the rest zero */
  /* A zero blob (no RDMA state, or a split's parent round) and every broken field: not RDMA. */
  memset(conn, 0, sizeof(conn));
  assert_false(hccl__rdma_blob_decode(conn, &got));
  struct rdma_blob wrong[4] = {b, b, b, b};
  wrong[0].magic ^= 1;
  wrong[1].version = RDMA_VERSION + 1;
  wrong[2].active = 0;
  wrong[3].mtu = 6;
  for (int i = 0; i < 4; i++) {
    hccl__rdma_blob_encode(&wrong[i], conn);
    assert_false(hccl__rdma_blob_decode(conn, &got));
  }
}

#define COMM 0x1122334455667788ULL

static void test_messages(void **state) {
  (void)state;
  char buf[RDMA_CTL_MAX], why[160];
  struct rdma_msg m = {.type = RDMA_MSG_HELLO, .channel = 1, .have_yours = 1, .mtu = 3,
                       .comm_id = COMM, .from = 2, .qpn = 77, .psn = 0xabcdef, .rkey = 9,
                       .raddr = 0x7f0000001000ULL, .slot_bytes = 4096},
                 got;
  const char *text;
  size_t n = hccl__rdma_msg_encode(&m, "ignored", buf, sizeof(buf));
  assert_int_equal(n, sizeof(struct rdma_msg));
  assert_true(hccl__rdma_msg_decode(buf, n, COMM, 4, &got, &text, why, sizeof(why)));
  assert_int_equal(got.qpn, 77);
  assert_int_equal(got.psn, 0xabcdef);
  assert_int_equal(got.raddr, 0x7f0000001000ULL);
  assert_int_equal(got.have_yours, 1);
  assert_string_equal(text, "");

  /* An abort's reason rides whole when it fits, cut (still terminated) when it does not. */
  struct rdma_msg a = {.type = RDMA_MSG_ABORT, .comm_id = COMM, .from = 1, .origin = 3,
                       .code = HCCL_E_TIMEOUT};
  n = hccl__rdma_msg_encode(&a, "rank 3 timed out", buf, sizeof(buf));
  assert_true(hccl__rdma_msg_decode(buf, n, COMM, 4, &got, &text, why, sizeof(why)));
  assert_string_equal(text, "rank 3 timed out");
  assert_int_equal(got.code, HCCL_E_TIMEOUT);
  char longtext[2000];
  memset(longtext, 'r', sizeof(longtext) - 1);
  longtext[sizeof(longtext) - 1] = '\0';
  n = hccl__rdma_msg_encode(&a, longtext, buf, RDMA_CTL_MIN_MTU);
  assert_int_equal(n, RDMA_CTL_MIN_MTU);
  assert_true(hccl__rdma_msg_decode(buf, n, COMM, 4, &got, &text, why, sizeof(why)));
  assert_int_equal(strlen(text), RDMA_MSG_TEXT_MAX(RDMA_CTL_MIN_MTU) - 1);

  /* Each broken rule: refused, naming it. */
  struct {
    struct rdma_msg m;
    size_t cut; /* bytes dropped from the end */
    const char *why;
  } bad[] = {
      {m, sizeof(struct rdma_msg) - 4, "of 4 bytes"},
      {m, 0, "another communicator"},
      {m, 0, "from rank 4 of 4"},
      {m, 0, "unknown type 9"},
      {m, 0, "a hello for channel 2"},
      {m, 0, "MTU code 0"},
      {a, 0, "an abort from rank 7 of 4"},
      {a, 3, "does not end inside"},
  };
  bad[1].m.comm_id = COMM + 1;
  bad[2].m.from = 4;
  bad[3].m.type = 9;
  bad[4].m.channel = 2;
  bad[5].m.mtu = 0;
  bad[6].m.origin = 7;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    n = hccl__rdma_msg_encode(&bad[i].m, "why", buf, sizeof(buf));
    why[0] = '\0';
    assert_false(hccl__rdma_msg_decode(buf, n - bad[i].cut, COMM, 4, &got, &text, why,
                                       sizeof(why)));
    if (!strstr(why, bad[i].why)) fail_msg("case %zu: '%s' lacks '%s'", i, why, bad[i].why);
  }
  /* Another protocol's datagram. */
  memset(buf, 0x5a, sizeof(struct rdma_msg));
  assert_false(hccl__rdma_msg_decode(buf, sizeof(struct rdma_msg), COMM, 4, &got, &text, why,
                                     sizeof(why)));
  assert_non_null(strstr(why, "another protocol"));
}

static void test_arithmetic(void **state) {
  (void)state;
  /* Immediates: the kind in the top 2 bits, the count or sequence mod 2^30, widened back. */
  assert_int_equal(hccl__rdma_imm_data(5), 5);
  assert_int_equal(hccl__rdma_imm_data(0xc0000005u), 5);
  assert_int_equal(hccl__rdma_imm_data(0x40000005u) & RDMA_IMM_KIND, RDMA_IMM_DATA);
  assert_int_equal(hccl__rdma_imm_credit(5), RDMA_IMM_CREDIT | 5);
  assert_int_equal(hccl__rdma_imm_post(5), RDMA_IMM_POST | 5);
  assert_int_equal(hccl__rdma_imm_post(0x40000005u), RDMA_IMM_POST | 5);
  assert_int_equal(hccl__rdma_imm_credit(0xffffffffu) & RDMA_IMM_KIND, RDMA_IMM_CREDIT);
  uint32_t lasts[] = {0, 7, 0x3ffffffau, 0x7ffffffau, 0x80000000u, 0xfffffffau};
  for (size_t i = 0; i < sizeof(lasts) / sizeof(lasts[0]); i++)
    for (uint32_t step = 0; step <= 2 * RDMA_NSLOTS + RDMA_NPOSTS; step++) {
      uint32_t count = lasts[i] + step;
      assert_int_equal(hccl__rdma_widen(lasts[i], hccl__rdma_imm_credit(count) & RDMA_IMM_VALUE),
                       count);
      assert_int_equal(hccl__rdma_widen(lasts[i], hccl__rdma_imm_post(count) & RDMA_IMM_VALUE),
                       count);
    }
  /* The window (the link's credits, transport/credits.h, shared with TCP): at most RDMA_NSLOTS
   * unreleased, across the 2^32 wrap too. */
  assert_int_equal(RDMA_NSLOTS, HCCL_CREDITS);
  assert_true(hccl__credits_open(7, 0));
  assert_false(hccl__credits_open(8, 0));
  assert_true(hccl__credits_open(3, 0xfffffffcu));
  assert_false(hccl__credits_open(4, 0xfffffffcu));
  /* Slots: message m in slot m % 8, strides of 64-byte multiples holding the header. */
  assert_int_equal(hccl__rdma_stride(4096), 4096 + 64);
  assert_int_equal(hccl__rdma_stride(4000), 4032);
  assert_int_equal(hccl__rdma_slot_off(0, 4096), 0);
  assert_int_equal(hccl__rdma_slot_off(9, 4096), 4160);
  assert_int_equal(hccl__rdma_slot_off(0xffffffffu, 4096), 7 * 4160);
  /* Slot size: HCCL_BUFFSIZE over the remote ranks and channels, 4 KiB to 512 KiB. */
  assert_int_equal(hccl__rdma_slot_bytes((size_t)200 << 20, 1), 512u << 10);
  assert_int_equal(hccl__rdma_slot_bytes((size_t)200 << 20, 100), 131072);
  assert_int_equal(hccl__rdma_slot_bytes((size_t)1 << 20, 1000), 4096);
  assert_int_equal(hccl__rdma_slot_bytes((size_t)200 << 20, 0), 512u << 10);
  /* MTU: enum ibv_mtu in bytes; two ports agree on the smaller. */
  assert_int_equal(hccl__rdma_mtu_bytes(1), 256);
  assert_int_equal(hccl__rdma_mtu_bytes(3), 1024);
  assert_int_equal(hccl__rdma_mtu_bytes(5), 4096);
  assert_int_equal(hccl__rdma_mtu_bytes(0), 0);
  assert_int_equal(hccl__rdma_mtu_bytes(6), 0);
  assert_int_equal(hccl__rdma_mtu_agree(5, 3), 3);
  assert_int_equal(hccl__rdma_mtu_agree(3, 5), 3);
}

static void set_ipv4(struct rdma_gid_entry *g, int type, uint8_t last) {
  memset(g->raw, 0, 16);
  g->raw[10] = g->raw[11] = 0xff;
  g->raw[12] = 10, g->raw[15] = last;
  g->type = type;
}

static void test_posts(void **state) {
  (void)state;
  /* 10000 bytes posted in chunks of 4096 from message 5: messages 5, 6, 7 land at +0, +4096,
   * +8192, the last in at most 1808 bytes. */
  struct rdma_post p = hccl__rdma_post_make(0x10000, 77, 4096, 10000, 5, 1, 3);
  assert_int_equal(p.n, 3);
  assert_int_equal(p.rkey, 77);
  assert_int_equal(p.id, 3);
  uint64_t addr = 0;
  assert_true(hccl__rdma_post_place(&p, 5, 4096, &addr));
  assert_int_equal(addr, 0x10000);
  assert_true(hccl__rdma_post_place(&p, 6, 4096, &addr));
  assert_int_equal(addr, 0x11000);
  assert_true(hccl__rdma_post_place(&p, 7, 1808, &addr));
  assert_int_equal(addr, 0x12000);
  assert_true(hccl__rdma_post_place(&p, 7, 1000, &addr)); /* shorter: its size is checked later */
  addr = 1;
  assert_false(hccl__rdma_post_place(&p, 7, 1809, &addr)); /* past the posted bytes */
  assert_false(hccl__rdma_post_place(&p, 6, 4097, &addr)); /* larger than a chunk */
  assert_false(hccl__rdma_post_place(&p, 6, 0, &addr));    /* an empty message: its slot */
  assert_false(hccl__rdma_post_place(&p, 4, 100, &addr));  /* sent before the post */
  assert_false(hccl__rdma_post_place(&p, 8, 100, &addr));  /* after it */
  assert_int_equal(addr, 1);                               /* untouched when false */
  /* Covers messages 5, 6, 7 only (fitting or not). */
  assert_false(hccl__rdma_post_covers(&p, 4));
  assert_true(hccl__rdma_post_covers(&p, 5));
  assert_true(hccl__rdma_post_covers(&p, 7));
  assert_false(hccl__rdma_post_covers(&p, 8));
  /* Spent once every message it covers was sent; not before its first. */
  assert_false(hccl__rdma_post_spent(&p, 4));
  assert_false(hccl__rdma_post_spent(&p, 5));
  assert_false(hccl__rdma_post_spent(&p, 7));
  assert_true(hccl__rdma_post_spent(&p, 8));
  assert_true(hccl__rdma_post_spent(&p, 1000));
  /* Across the 2^32 wrap of message numbers. */
  struct rdma_post w = hccl__rdma_post_make(0x20000, 1, 100, 300, 0xfffffffeu, 1, 0);
  assert_int_equal(w.n, 3);
  assert_true(hccl__rdma_post_place(&w, 0xffffffffu, 100, &addr));
  assert_int_equal(addr, 0x20000 + 100);
  assert_true(hccl__rdma_post_place(&w, 0, 100, &addr));
  assert_int_equal(addr, 0x20000 + 200);
  assert_false(hccl__rdma_post_place(&w, 1, 100, &addr));
  assert_false(hccl__rdma_post_spent(&w, 0));
  assert_true(hccl__rdma_post_spent(&w, 1));
  assert_false(hccl__rdma_post_spent(&w, 0xfffffffdu));
  /* One chunk covering a whole buffer; bytes a multiple of the chunk. */
  assert_int_equal(hccl__rdma_post_make(0, 0, 4096, 4096, 0, 1, 0).n, 1);
  assert_int_equal(hccl__rdma_post_make(0, 0, 4096, 8192, 0, 1, 0).n, 2);
  assert_int_equal(hccl__rdma_post_make(0, 0, 4096, 1, 0, 1, 0).n, 1);
  /* An empty entry (none made in its place yet) is spent, whatever the message count. */
  struct rdma_post none = {0};
  assert_true(hccl__rdma_post_spent(&none, 0));
  assert_true(hccl__rdma_post_spent(&none, 0x80000000u));
  assert_false(hccl__rdma_post_covers(&none, 0));
  /* A step: a ring of 4 whose rounds bring 6 messages from the left (3 of the reduce-scatter,
   * then one chunk of each of 3 blocks); the second block's chunks are message 4 of each
   * round, from message 10 on: 14, 20 and 26 (9000 bytes in chunks of 4096: the last 808). */
  struct rdma_post s6 = hccl__rdma_post_make(0x40000, 5, 4096, 9000, 10 + 4, 6, 9);
  assert_int_equal(s6.n, 3);
  assert_int_equal(s6.step, 6);
  assert_true(hccl__rdma_post_place(&s6, 14, 4096, &addr));
  assert_int_equal(addr, 0x40000);
  assert_true(hccl__rdma_post_place(&s6, 20, 4096, &addr));
  assert_int_equal(addr, 0x41000);
  assert_true(hccl__rdma_post_place(&s6, 26, 808, &addr));
  assert_int_equal(addr, 0x42000);
  assert_false(hccl__rdma_post_place(&s6, 26, 809, &addr)); /* past the posted bytes */
  for (uint32_t m = 10; m < 40; m++) /* the others of those rounds: their slots */
    if (m != 14 && m != 20 && m != 26) {
      assert_false(hccl__rdma_post_place(&s6, m, 100, &addr));
      assert_false(hccl__rdma_post_covers(&s6, m));
    }
  /* Live from before its first until its last message was sent. */
  assert_false(hccl__rdma_post_spent(&s6, 10));
  assert_false(hccl__rdma_post_spent(&s6, 21));
  assert_false(hccl__rdma_post_spent(&s6, 26));
  assert_true(hccl__rdma_post_spent(&s6, 27));
  assert_true(hccl__rdma_post_spent(&s6, 0x7fffffffu));
  /* Across the wrap, with a step. */
  struct rdma_post s2 = hccl__rdma_post_make(0x50000, 5, 100, 300, 0xfffffffdu, 2, 1);
  assert_true(hccl__rdma_post_place(&s2, 0xffffffffu, 100, &addr));
  assert_int_equal(addr, 0x50000 + 100);
  assert_true(hccl__rdma_post_place(&s2, 1, 100, &addr));
  assert_int_equal(addr, 0x50000 + 200);
  assert_false(hccl__rdma_post_place(&s2, 0, 100, &addr));
  assert_false(hccl__rdma_post_spent(&s2, 1));
  assert_true(hccl__rdma_post_spent(&s2, 2));
  /* The span (n - 1) x step stays below 2^31, so before and after stay apart. */
  struct rdma_post big = hccl__rdma_post_make(0, 0, 1, (size_t)1 << 40, 0, 1024, 0);
  assert_true((uint64_t)(big.n - 1) * big.step < 0x80000000u);
  /* The entries' window: at most RDMA_NPOSTS written and not read, across the wrap. */
  assert_true(hccl__rdma_post_window_open(0, 0));
  assert_true(hccl__rdma_post_window_open(RDMA_NPOSTS - 1, 0));
  assert_false(hccl__rdma_post_window_open(RDMA_NPOSTS, 0));
  assert_true(hccl__rdma_post_window_open(RDMA_NPOSTS - 3, 0xfffffffeu));
  assert_false(hccl__rdma_post_window_open(RDMA_NPOSTS - 2, 0xfffffffeu));
  /* The wait for an entry: 8 x the recent waits within [min, max]; `first` before any. */
  assert_int_equal(hccl__rdma_post_limit(0, 1000, 10000, 100000), 10000);
  assert_int_equal(hccl__rdma_post_limit(10, 1000, 10000, 100000), 1000);
  assert_int_equal(hccl__rdma_post_limit(500, 1000, 10000, 100000), 4000);
  assert_int_equal(hccl__rdma_post_limit(50000, 1000, 10000, 100000), 100000);
  assert_int_equal(hccl__rdma_post_limit(INT64_MAX / 2, 1000, 10000, 100000), 100000);
  /* The link's region: the slots both ways, then the peer's entries and this side's. */
  assert_int_equal(hccl__rdma_region_bytes(4096), 2 * 8 * 4160 + 2 * 16 * 64);
  assert_true(sizeof(struct rdma_post) <= RDMA_POST_STRIDE);
  /* The header says where the payload went and how far the sender read. */
  struct rdma_slot_hdr h = {.size = 1, .seq = 2, .post = 3, .posts_seen = 4};
  assert_int_equal(sizeof(h), RDMA_HDR);
  assert_int_equal(offsetof(struct rdma_slot_hdr, stamp), 16);
}

static void test_gid_pick(void **state) {
  (void)state;
  char why[200];
  struct rdma_gid_entry g[6];
  memset(g, 0, sizeof(g));
  /* rxe's table on an interface with an IPv4 address: fe80:: (v1, v2), then ::ffff:a.b.c.d
   * (v1, v2); an empty slot between. */
  g[0].raw[0] = 0xfe, g[0].raw[1] = 0x80, g[0].raw[15] = 1, g[0].type = RDMA_GID_ROCE_V1;
  g[1] = g[0], g[1].type = RDMA_GID_ROCE_V2;
  set_ipv4(&g[3], RDMA_GID_ROCE_V1, 2);
  set_ipv4(&g[4], RDMA_GID_ROCE_V2, 2);
  assert_int_equal(hccl__rdma_gid_pick(g, 6, -1, why, sizeof(why)), 4);
  assert_true(hccl__rdma_gid_ipv4(g[4].raw));
  assert_false(hccl__rdma_gid_ipv4(g[1].raw));
  assert_int_equal(hccl__rdma_gid_pick(g, 3, -1, why, sizeof(why)), 1); /* v2, no IPv4 */
  assert_int_equal(hccl__rdma_gid_pick(g, 1, -1, why, sizeof(why)), 0); /* IB / v1 only */
  assert_int_equal(hccl__rdma_gid_pick(g, 6, 3, why, sizeof(why)), 3);  /* as asked */
  assert_int_equal(hccl__rdma_gid_pick(g, 6, 2, why, sizeof(why)), -1); /* an empty one */
  assert_non_null(strstr(why, "HCCL_RDMA_GID_INDEX=2"));
  assert_int_equal(hccl__rdma_gid_pick(g, 6, 9, why, sizeof(why)), -1);
  assert_non_null(strstr(why, "6 entries"));
  memset(g, 0, sizeof(g));
  assert_int_equal(hccl__rdma_gid_pick(g, 6, -1, why, sizeof(why)), -1);
  assert_non_null(strstr(why, "no address"));
  /* sysfs's words. */
  assert_int_equal(hccl__rdma_gid_type("RoCE v2\n", true), RDMA_GID_ROCE_V2);
  assert_int_equal(hccl__rdma_gid_type("IB/RoCE v1\n", true), RDMA_GID_ROCE_V1);
  assert_int_equal(hccl__rdma_gid_type("IB/RoCE v1\n", false), RDMA_GID_IB);
  assert_int_equal(hccl__rdma_gid_type("", true), RDMA_GID_NONE);
}

static void test_device_pick(void **state) {
  (void)state;
  char why[300], name[64];
  int port = -1;
  assert_int_equal(hccl__rdma_device_pick(NULL, 0, "", &port, why, sizeof(why)), -1);
  assert_string_equal(why, "no RDMA device: ibv_get_device_list found none");
  struct rdma_dev_desc d[2] = {{.name = "mlx5_0", .nports = 2, .active = {false, true}},
                               {.name = "rxe0", .nports = 1, .active = {true}}};
  assert_int_equal(hccl__rdma_device_pick(d, 2, "", &port, why, sizeof(why)), 0);
  assert_int_equal(port, 2);
  assert_int_equal(hccl__rdma_device_pick(d, 2, "rxe0", &port, why, sizeof(why)), 1);
  assert_int_equal(port, 1);
  assert_int_equal(hccl__rdma_device_pick(d, 2, "mlx5_0:2", &port, why, sizeof(why)), 0);
  assert_int_equal(hccl__rdma_device_pick(d, 2, "mlx5_0:1", &port, why, sizeof(why)), -1);
  assert_non_null(strstr(why, "not active"));
  assert_non_null(strstr(why, "mlx5_0 (port 1 down, port 2 active), rxe0 (port 1 active)"));
  assert_int_equal(hccl__rdma_device_pick(d, 2, "mlx4_0", &port, why, sizeof(why)), -1);
  assert_non_null(strstr(why, "names no device"));
  assert_non_null(strstr(why, "rxe0"));
  assert_int_equal(hccl__rdma_device_pick(d, 2, "rxe0:x", &port, why, sizeof(why)), -1);
  assert_non_null(strstr(why, "is not valid"));
  d[0].active[1] = d[1].active[0] = false;
  assert_int_equal(hccl__rdma_device_pick(d, 2, "", &port, why, sizeof(why)), -1);
  assert_string_equal(why, "no RDMA port is active; RDMA devices found: mlx5_0 (port 1 down, "
                           "port 2 down), rxe0 (port 1 down)");
  assert_true(hccl__rdma_device_spec("rxe0:1", name, sizeof(name), &port));
  assert_string_equal(name, "rxe0");
  assert_int_equal(port, 1);
  assert_false(hccl__rdma_device_spec("rxe0:5", name, sizeof(name), &port));
}

#ifdef HCCL_HAVE_RDMA
/* Whether this host has an RDMA device (sysfs lists one): the "none" checks need none. */
static bool host_has_device(void) {
  DIR *d = opendir("/sys/class/infiniband");
  bool any = false;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    any |= e->d_name[0] != '.';
  if (d) closedir(d);
  return any;
}

static void test_no_library(void **state) {
  (void)state;
  struct hccl_settings cfg;
  assert_int_equal(hccl__settings_load_given(&cfg, 0, 1), HCCL_SUCCESS);
  struct rdma_state st;
  memset(&st, 0, sizeof(st));
  char why[400] = "";
  assert_int_equal(hccl__rdma_dev_open(&st, &cfg, "libibverbs-not-here.so.1", why, sizeof(why)),
                   HCCL_E_NOT_FOUND);
  assert_non_null(strstr(why, "libibverbs-not-here.so.1 not found"));
}

/* Two ranks on two servers, as the core fills a context before setup. */
struct two {
  struct hccl_peer_info peers[2];
  uint32_t local_index[2];
  struct hccl_settings cfg;
  struct hccl_tctx tx;
};

static void two_servers(struct two *t, enum hccl_net net) {
  memset(t, 0, sizeof(*t));
  assert_int_equal(hccl__settings_load_given(&t->cfg, 0, 2), HCCL_SUCCESS);
  t->cfg.net = net;
  for (int r = 0; r < 2; r++) {
    t->peers[r].rank = (uint32_t)r;
    t->peers[r].host_hash = 100 + (uint64_t)r;
    snprintf(t->peers[r].host, sizeof(t->peers[r].host), "server%d", r);
  }
  t->tx = (struct hccl_tctx){.rank = 0, .nranks = 2, .local_nranks = 1,
                             .local_index = t->local_index, .peers = t->peers, .cfg = &t->cfg,
                             .key = "test_rdma", .listen_fd = -1};
}

static void test_asked_for_rdma(void **state) {
  (void)state;
  if (host_has_device()) {
    print_message("this host has an RDMA device: the checks of none are skipped\n");
    skip();
  }
  struct hccl_settings cfg;
  assert_int_equal(hccl__settings_load_given(&cfg, 0, 1), HCCL_SUCCESS);
  struct rdma_state st;
  memset(&st, 0, sizeof(st));
  char why[400] = "";
  assert_int_equal(hccl__rdma_dev_open(&st, &cfg, RDMA_SONAME, why, sizeof(why)),
                   HCCL_E_NOT_FOUND);
  assert_string_equal(why, "no RDMA device: ibv_get_device_list found none");

  /* HCCL_NET=rdma: setup fails, naming the server, the setting and what was found. */
  struct two t;
  two_servers(&t, HCCL_NET_RDMA);
  const struct hccl_transport_ops *o = &hccl__transport_rdma;
  assert_int_equal(o->setup(&t.tx, &t.peers[0]), HCCL_E_NOT_FOUND);
  const char *m = HcclGetLastErrorMessage();
  if (!strstr(m, "server0") || !strstr(m, "HCCL_NET=rdma") ||
      !strstr(m, "no RDMA device: ibv_get_device_list found none"))
    fail_msg("the message does not say why: %s", m);
  assert_null(t.tx.state[HCCL_TRANSPORT_RDMA]);

  /* auto and tcp: no state, a zero blob, no link: TCP carries the pair. */
  enum hccl_net quiet[] = {HCCL_NET_AUTO, HCCL_NET_TCP};
  for (int i = 0; i < 2; i++) {
    two_servers(&t, quiet[i]);
    memset(t.peers[0].conn[HCCL_TRANSPORT_RDMA], 0x55, HCCL_CONN_BYTES);
    assert_int_equal(o->setup(&t.tx, &t.peers[0]), HCCL_SUCCESS);
    assert_null(t.tx.state[HCCL_TRANSPORT_RDMA]);
    for (int k = 0; k < HCCL_CONN_BYTES; k++)
      assert_int_equal(t.peers[0].conn[HCCL_TRANSPORT_RDMA][k], 0);
    assert_false(o->can_connect(&t.tx, 1));
    o->teardown(&t.tx);
  }
}

/* A peer lost because this server's own port went down is named as a network fault between
 * the two servers that says whose port it was (rdma_fail.c; the async event's words and a
 * failed work request's while the port is down; tests/rdma/rdma_port_down.sh on a device). */
static void test_port_why(void **state) {
  (void)state;
  struct two t;
  two_servers(&t, HCCL_NET_RDMA);
  struct rdma_state st;
  memset(&st, 0, sizeof(st));
  st.tx = &t.tx;
  st.port = 1;
  snprintf(st.dev_name, sizeof(st.dev_name), "rxe0");
  char why[400];
  hccl__rdma_port_why(&st, 1, "went down", why, sizeof(why));
  assert_string_equal(why, "network fault between server server0 and server server1 (rank 1): "
                           "rxe0 port 1 of server server0 went down");
  char small[40];
  hccl__rdma_port_why(&st, 1, "went down", small, sizeof(small));
  assert_int_equal(strlen(small), sizeof(small) - 1);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_settings, clean_env),
      cmocka_unit_test(test_blob),
      cmocka_unit_test(test_messages),
      cmocka_unit_test(test_arithmetic),
      cmocka_unit_test(test_posts),
      cmocka_unit_test(test_gid_pick),
      cmocka_unit_test(test_device_pick),
#ifdef HCCL_HAVE_RDMA
      cmocka_unit_test_setup(test_no_library, clean_env),
      cmocka_unit_test_setup(test_asked_for_rdma, clean_env),
      cmocka_unit_test(test_port_why),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
