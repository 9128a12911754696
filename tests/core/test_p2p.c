/*
 * test_p2p.c - multi-process tests of point-to-point (p2p.c): HcclSend, HcclRecv and
 * HcclRecvAny, blocking and non-blocking, through the public header only, with
 * HCCL_BUFFSIZE=1 so that messages of a few MiB are many times a FIFO's 8 slots.
 *
 * Matching and progress: ping-pong; a ring shift; both ranks isend several MiB to each other
 * before they irecv (must not deadlock); many small sends matched in order; p2p interleaved
 * with collectives in different orders on the two ranks; recv-any from several senders
 * reporting the right sources; zero-count messages. Failures: a count mismatch fails both
 * ranks naming the sizes; a peer killed while a rank waits in a receive gives HCCL_E_REMOTE
 * within seconds; a receive nobody sends to times out at HCCL_EXEC_TIMEOUT=2 naming the peer;
 * argument checks. Destroy with requests never waited for must not leak or hang.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"

#define RUN_TIMEOUT_S 60
#define I32 HCCL_DATA_TYPE_INT32

static HcclResult init_comm(const char *exec_timeout, HcclComm *comm) {
  unsetenv("HCCL_ALGO");
  setenv("HCCL_BUFFSIZE", "1", 1);
  setenv("HCCL_EXEC_TIMEOUT", exec_timeout, 1);
  setenv("HCCL_CONNECT_TIMEOUT", "60", 1);
  unsetenv("DEVICE_ID");
  return HcclCommInitFromEnv(comm);
}

static void run_and_check(int n, harness_rank_fn body, int victim, int kill_ms) {
  double t0 = cc_now();
  int failed = victim < 0 ? harness_run_ranks(n, RUN_TIMEOUT_S, body, NULL)
                          : harness_run_ranks_kill(n, RUN_TIMEOUT_S, body, NULL, victim, kill_ms);
  printf("  %d ranks: %d failed, %.2f s\n", n, failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

#define P2P_TEST(name, n, body)                                                                    \
  static void name(void **st) {                                                                    \
    (void)st;                                                                                      \
    run_and_check(n, body, -1, 0);                                                                 \
  }

#define INIT(comm, timeout)                                                                        \
  HcclComm comm = NULL;                                                                            \
  do {                                                                                             \
    HcclResult rc_ = init_comm(timeout, &comm);                                                    \
    RANK_CHECK(rc_ == HCCL_SUCCESS, "init: %d %s", rc_, HcclGetLastErrorMessage());                \
  } while (0)

#define OK(expr)                                                                                   \
  do {                                                                                             \
    HcclResult rc_ = (expr);                                                                       \
    RANK_CHECK(rc_ == HCCL_SUCCESS, "%s: %d %s", #expr, rc_, HcclGetLastErrorMessage());           \
  } while (0)

/* Message `tag` from rank `from`: element i is a hash of (tag, from, i). */
static void fill(int32_t *p, uint64_t n, uint32_t tag, int from) {
  cc_fill_input(p, I32, HCCL_REDUCE_SUM, tag, from, 0, n);
}
static int64_t mismatch(const int32_t *p, uint64_t n, uint32_t tag, int from) {
  int32_t *want = malloc(n * 4 + 4);
  fill(want, n, tag, from);
  int64_t i = cc_first_mismatch(p, want, I32, n);
  free(want);
  return i;
}

/* ---- ping-pong: blocking, sizes from 1 element to 3 slots' worth and a FIFO-sized one ---- */

static int pingpong_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  INIT(comm, "30");
  static const uint64_t sizes[] = {1, 1000, 16384, 50000, 300001};
  int32_t *buf = malloc(300001 * 4);
  int peer = 1 - rank;
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    for (int it = 0; it < 5; it++) {
      uint32_t tag = (uint32_t)(s * 100 + it);
      if (rank == 0) {
        fill(buf, sizes[s], tag, 0);
        OK(HcclSend(buf, sizes[s], I32, 1, comm, NULL));
        OK(HcclRecv(buf, sizes[s], I32, 1, comm, NULL));
        int64_t i = mismatch(buf, sizes[s], tag, 1);
        RANK_CHECK(i < 0, "pong of %llu elements differs at %lld", (unsigned long long)sizes[s],
                   (long long)i);
      } else {
        OK(HcclRecv(buf, sizes[s], I32, (uint32_t)peer, comm, NULL));
        int64_t i = mismatch(buf, sizes[s], tag, 0);
        RANK_CHECK(i < 0, "ping of %llu elements differs at %lld", (unsigned long long)sizes[s],
                   (long long)i);
        fill(buf, sizes[s], tag, 1);
        OK(HcclSend(buf, sizes[s], I32, (uint32_t)peer, comm, NULL));
      }
    }
  }
  /* A non-blocking pair polled with HcclRequestTest, and one request never waited for: destroy
   * finishes it and frees it. */
  HcclRequest req = NULL;
  int32_t v = rank == 0 ? 42 : 0, w = 7;
  if (rank == 0)
    OK(HcclSend(&v, 1, I32, 1, comm, &req));
  else
    OK(HcclRecv(&v, 1, I32, 0, comm, &req));
  int done = 0;
  double t0 = cc_now();
  while (!done && cc_now() - t0 < 20) {
    OK(HcclRequestTest(req, &done));
    if (!done) usleep(100);
  }
  RANK_CHECK(done, "HcclRequestTest never said done");
  OK(HcclRequestWait(req));
  RANK_CHECK(v == 42, "polled recv got %d", v);
  HcclRequest unwaited = NULL;
  if (rank == 0)
    OK(HcclSend(&w, 1, I32, 1, comm, &unwaited));
  else
    OK(HcclRecv(&w, 1, I32, 0, comm, &unwaited));
  OK(HcclCommDestroy(comm));
  free(buf);
  return 0;
}
P2P_TEST(test_pingpong, 2, pingpong_body)

/* ---- ring shift: every rank sends to its right and receives from its left, non-blocking,
 * then the other way with a blocking send after a posted receive ---- */

static int ring_body(int rank, int n, void *arg) {
  (void)arg;
  INIT(comm, "30");
  enum { C = 70001 };
  int32_t *s = malloc(C * 4), *r = malloc(C * 4);
  uint32_t right = (uint32_t)((rank + 1) % n), left = (uint32_t)((rank + n - 1) % n);
  fill(s, C, 1, rank);
  HcclRequest rs, rr;
  OK(HcclSend(s, C, I32, right, comm, &rs));
  OK(HcclRecv(r, C, I32, left, comm, &rr));
  OK(HcclRequestWait(rr));
  OK(HcclRequestWait(rs));
  RANK_CHECK(mismatch(r, C, 1, (int)left) < 0, "shift right: wrong data from rank %u", left);
  fill(s, C, 2, rank);
  OK(HcclRecv(r, C, I32, right, comm, &rr));
  OK(HcclSend(s, C, I32, left, comm, NULL));
  OK(HcclRequestWait(rr));
  RANK_CHECK(mismatch(r, C, 2, (int)right) < 0, "shift left: wrong data from rank %u", right);
  OK(HcclCommDestroy(comm));
  free(s);
  free(r);
  return 0;
}
P2P_TEST(test_ring_shift, 4, ring_body)

/* ---- both ranks isend 6 MiB + 3 elements (12x a FIFO) before they irecv ---- */

static int cross_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  INIT(comm, "30");
  const uint64_t C = (6u << 20) / 4 + 3;
  int32_t *s = malloc(C * 4), *r = malloc(C * 4);
  uint32_t peer = (uint32_t)(1 - rank);
  fill(s, C, 3, rank);
  HcclRequest rs, rr;
  double t0 = cc_now();
  OK(HcclSend(s, C, I32, peer, comm, &rs));
  usleep(50 * 1000); /* the sends fill both FIFOs before anyone receives */
  OK(HcclRecv(r, C, I32, peer, comm, &rr));
  OK(HcclRequestWait(rs));
  OK(HcclRequestWait(rr));
  double dt = cc_now() - t0;
  int64_t i = mismatch(r, C, 3, (int)peer);
  RANK_CHECK(i < 0, "crossed isend: wrong data at %lld", (long long)i);
  if (rank == 0) printf("  crossed 6 MiB isends: %.3f s\n", dt);
  OK(HcclCommDestroy(comm));
  free(s);
  free(r);
  return 0;
}
P2P_TEST(test_cross_isend, 2, cross_body)

/* ---- 300 small sends of varying sizes, posted at once, received one by one in order ---- */

#define MANY 300
static int many_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  INIT(comm, "30");
  int32_t *bufs[MANY];
  HcclRequest req[MANY];
  for (int k = 0; k < MANY; k++) {
    uint64_t c = (uint64_t)(k % 17);
    bufs[k] = malloc(c * 4 + 4);
    if (rank == 0) {
      fill(bufs[k], c, 1000 + k, 0);
      OK(HcclSend(c ? bufs[k] : NULL, c, I32, 1, comm, &req[k]));
    }
  }
  if (rank == 1)
    for (int k = 0; k < MANY; k++) {
      uint64_t c = (uint64_t)(k % 17);
      OK(HcclRecv(c ? bufs[k] : NULL, c, I32, 0, comm, NULL));
      RANK_CHECK(mismatch(bufs[k], c, 1000 + k, 0) < 0, "message %d arrived out of order", k);
    }
  else
    for (int k = MANY - 1; k >= 0; k--)
      OK(HcclRequestWait(req[k]));
  for (int k = 0; k < MANY; k++)
    free(bufs[k]);
  OK(HcclCommDestroy(comm));
  return 0;
}
P2P_TEST(test_many_in_order, 2, many_body)

/* ---- p2p interleaved with collectives, in different orders on the two ranks: rank 0 isends 4
 * MiB (8x a FIFO) then allreduces; rank 1 allreduces, then receives. And the reverse with a
 * queued collective: rank 1 queues an allreduce, then receives; rank 0 sends, then
 * allreduces blocking. ---- */

static int mixed_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  INIT(comm, "30");
  const uint64_t C = (4u << 20) / 4 + 1, A = 300001;
  int32_t *p = malloc(C * 4), *a = malloc(A * 4), *want = malloc(A * 4);
  for (int round = 0; round < 2; round++) {
    uint32_t tag = 40 + round;
    for (uint64_t i = 0; i < A; i++)
      a[i] = (int32_t)(i * (rank + 1) + round);
    HcclRequest rs = NULL, ra = NULL;
    if (rank == 0) {
      fill(p, C, tag, 0);
      if (round == 0) {
        OK(HcclSend(p, C, I32, 1, comm, &rs));
        OK(HcclAllReduce(a, a, A, I32, HCCL_REDUCE_SUM, comm, NULL));
        OK(HcclRequestWait(rs));
      } else {
        OK(HcclSend(p, C, I32, 1, comm, NULL));
        OK(HcclAllReduce(a, a, A, I32, HCCL_REDUCE_SUM, comm, NULL));
      }
    } else {
      if (round == 0) {
        OK(HcclAllReduce(a, a, A, I32, HCCL_REDUCE_SUM, comm, NULL));
        OK(HcclRecv(p, C, I32, 0, comm, NULL));
      } else {
        OK(HcclAllReduce(a, a, A, I32, HCCL_REDUCE_SUM, comm, &ra));
        OK(HcclRecv(p, C, I32, 0, comm, NULL));
        OK(HcclRequestWait(ra));
      }
      int64_t i = mismatch(p, C, tag, 0);
      RANK_CHECK(i < 0, "round %d: p2p data differs at %lld", round, (long long)i);
    }
    for (uint64_t i = 0; i < A; i++)
      want[i] = (int32_t)(i * 3 + 2 * round);
    RANK_CHECK(memcmp(a, want, A * 4) == 0, "round %d: allreduce result wrong", round);
  }
  OK(HcclCommDestroy(comm));
  free(p);
  free(a);
  free(want);
  return 0;
}
P2P_TEST(test_mixed_with_collectives, 2, mixed_body)

/* ---- recv-any: ranks 1..3 each send rank 0 a message (rank 1 two); rank 0 takes them with
 * recv-any (blocking and queued) and must see each source once (rank 1 twice, in order), the
 * data matching the reported source. Then a recv-any posted after a specific recv waits for
 * it. ---- */

static int any_body(int rank, int n, void *arg) {
  (void)arg;
  INIT(comm, "30");
  enum { C = 20000 };
  int32_t *buf = malloc(C * 4 * 8);
  if (rank != 0) {
    fill(buf, C, 60, rank);
    OK(HcclSend(buf, C, I32, 0, comm, NULL));
    if (rank == 1) {
      fill(buf, C, 61, rank);
      OK(HcclSend(buf, C, I32, 0, comm, NULL));
    }
  } else {
    int seen[8] = {0};
    uint32_t src[8];
    HcclRequest req[8];
    int total = n; /* n-1 senders + rank 1's second message */
    for (int k = 0; k < total; k++) {
      req[k] = NULL;
      OK(HcclRecvAny(buf + (size_t)k * C, C, I32, &src[k], comm, k % 2 ? &req[k] : NULL));
    }
    for (int k = 0; k < total; k++)
      if (req[k]) OK(HcclRequestWait(req[k]));
    for (int k = 0; k < total; k++) {
      RANK_CHECK(src[k] >= 1 && src[k] < (uint32_t)n, "recv-any %d: source %u", k, src[k]);
      uint32_t tag = src[k] == 1 && seen[1]++ ? 61 : 60;
      if (src[k] != 1) seen[src[k]]++;
      RANK_CHECK(mismatch(buf + (size_t)k * C, C, tag, (int)src[k]) < 0,
                 "recv-any %d: data is not rank %u's message %u", k, src[k], tag);
    }
    for (int r = 1; r < n; r++)
      RANK_CHECK(seen[r] == (r == 1 ? 2 : 1), "rank %d matched %d times", r, seen[r]);
  }
  /* Rank 0: a recv from rank 2 then a recv-any; rank 1 sends first (its message must wait for
   * the recv-any), rank 2 sends after a pause. The barrier keeps these apart from the above. */
  OK(HcclBarrier(comm, NULL));
  if (rank == 0) {
    uint32_t s = 99;
    int32_t x = 0, y = 0;
    HcclRequest r1, r2;
    OK(HcclRecv(&x, 1, I32, 2, comm, &r1));
    OK(HcclRecvAny(&y, 1, I32, &s, comm, &r2));
    OK(HcclRequestWait(r2));
    OK(HcclRequestWait(r1));
    RANK_CHECK(x == 2 && y == 1 && s == 1, "ordered recv-any: x=%d y=%d src=%u", x, y, s);
  } else if (rank == 1 || rank == 2) {
    int32_t v = rank;
    if (rank == 2) usleep(100 * 1000);
    OK(HcclSend(&v, 1, I32, 0, comm, NULL));
  }
  OK(HcclCommDestroy(comm));
  free(buf);
  return 0;
}
P2P_TEST(test_recv_any, 4, any_body)

/* ---- zero-count messages stay in step with the ones around them ---- */

static int zero_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  INIT(comm, "30");
  int32_t v = rank == 0 ? 5 : 0;
  uint32_t src = 99;
  if (rank == 0) {
    OK(HcclSend(NULL, 0, I32, 1, comm, NULL));
    OK(HcclSend(NULL, 0, HCCL_DATA_TYPE_FP16, 1, comm, NULL));
    OK(HcclSend(&v, 1, I32, 1, comm, NULL));
  } else {
    OK(HcclRecv(NULL, 0, I32, 0, comm, NULL));
    OK(HcclRecvAny(NULL, 0, I32, &src, comm, NULL));
    OK(HcclRecv(&v, 1, I32, 0, comm, NULL));
    RANK_CHECK(v == 5 && src == 0, "after zero-count messages: v=%d src=%u", v, src);
  }
  OK(HcclCommDestroy(comm));
  return 0;
}
P2P_TEST(test_zero_count, 2, zero_body)

/* ---- count mismatch: rank 0 sends 100 int32, rank 1 expects 101; then (new communicator)
 * 3 chunks' worth against 1 chunk's. Both fail fast, naming each other and the sizes. ---- */

static int mismatch_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  static const uint64_t cases[2][2] = {{100, 101}, {40000, 16384}};
  int32_t *buf = calloc(40000, 4);
  for (int k = 0; k < 2; k++) {
    INIT(comm, "60");
    double t0 = cc_now();
    HcclResult rc = rank == 0 ? HcclSend(buf, cases[k][0], I32, 1, comm, NULL)
                              : HcclRecv(buf, cases[k][1], I32, 0, comm, NULL);
    const char *msg = HcclGetLastErrorMessage();
    double dt = cc_now() - t0;
    RANK_CHECK(rc != HCCL_SUCCESS, "case %d: mismatched %s succeeded", k, rank ? "recv" : "send");
    RANK_CHECK(dt < 10, "case %d: the failure took %.2f s (HCCL_EXEC_TIMEOUT=60)", k, dt);
    RANK_CHECK(cc_msg_names_rank(msg, 0) && cc_msg_names_rank(msg, 1),
               "case %d: message does not name both ranks: %s", k, msg);
    char want[32];
    snprintf(want, sizeof(want), "%llu bytes", (unsigned long long)cases[k][1] * 4);
    RANK_CHECK(strstr(msg, want), "case %d: message does not name the receive's size (%s): %s", k,
               want, msg);
    if (k == 0)
      RANK_CHECK(strstr(msg, "400 bytes"), "message does not name the send's size: %s", msg);
    OK(HcclCommDestroy(comm));
  }
  free(buf);
  return 0;
}
P2P_TEST(test_count_mismatch, 2, mismatch_body)

/* ---- a peer killed while this rank waits in a receive: rank 0 sends one message, then hangs
 * and is killed 1.5 s after start; rank 1 takes the first and waits for a second ---- */

static int killed_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  INIT(comm, "60");
  int32_t v = 1;
  const uint64_t C = (8u << 20) / 4;
  if (rank == 0) {
    OK(HcclSend(&v, 1, I32, 1, comm, NULL));
    pause(); /* killed */
    return 1;
  }
  OK(HcclRecv(&v, 1, I32, 0, comm, NULL));
  int32_t *big = malloc(C * 4);
  double t0 = cc_now();
  HcclResult rc = HcclRecv(big, C, I32, 0, comm, NULL);
  double dt = cc_now() - t0;
  const char *msg = HcclGetLastErrorMessage();
  RANK_CHECK(rc == HCCL_E_REMOTE, "recv from a killed rank returned %d: %s", rc, msg);
  RANK_CHECK(dt < 6.0, "it took %.2f s to notice (kill at ~1.5 s, HCCL_EXEC_TIMEOUT=60)", dt);
  RANK_CHECK(cc_msg_names_rank(msg, 0), "message does not name rank 0: %s", msg);
  /* The communicator is broken now: the next call is refused at once. */
  rc = HcclSend(&v, 1, I32, 0, comm, NULL);
  RANK_CHECK(rc == HCCL_E_REMOTE, "send after the failure returned %d", rc);
  free(big);
  OK(HcclCommDestroy(comm));
  return 0;
}

static void test_peer_killed(void **st) {
  (void)st;
  run_and_check(2, killed_body, 0, 1500);
}

/* ---- a receive nobody sends to times out at HCCL_EXEC_TIMEOUT=2, naming the peer ---- */

static int timeout_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  INIT(comm, "2");
  if (rank == 0) {
    usleep(3500 * 1000); /* never sends */
    HcclCommDestroy(comm);
    return 0;
  }
  int32_t v;
  double t0 = cc_now();
  HcclResult rc = HcclRecv(&v, 1, I32, 0, comm, NULL);
  double dt = cc_now() - t0;
  const char *msg = HcclGetLastErrorMessage();
  RANK_CHECK(rc == HCCL_E_TIMEOUT, "recv returned %d: %s", rc, msg);
  RANK_CHECK(dt >= 1.5 && dt <= 5.0, "HCCL_EXEC_TIMEOUT=2 but the recv gave up after %.2f s", dt);
  RANK_CHECK(cc_msg_names_rank(msg, 0) && strstr(msg, "HCCL_EXEC_TIMEOUT"),
             "message does not name rank 0 and the setting: %s", msg);
  OK(HcclCommDestroy(comm));
  return 0;
}
P2P_TEST(test_recv_timeout, 2, timeout_body)

/* ---- argument checks ---- */

static int expect_rc(HcclResult rc, HcclResult want, const char *what, const char *word) {
  const char *msg = HcclGetLastErrorMessage();
  RANK_CHECK(rc == want, "%s: got %d, want %d (%s)", what, rc, want, msg);
  RANK_CHECK(strstr(msg, word), "%s: message does not name '%s': %s", what, word, msg);
  return 0;
}

static int args_body(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  INIT(comm, "30");
  int32_t v = 0;
  uint32_t me = (uint32_t)rank, other = (uint32_t)(1 - rank);
  if (expect_rc(HcclSend(&v, 1, I32, me, comm, NULL), HCCL_E_PARA, "self send", "oneself"))
    return 1;
  if (expect_rc(HcclRecv(&v, 1, I32, me, comm, NULL), HCCL_E_PARA, "self recv", "oneself"))
    return 1;
  if (expect_rc(HcclSend(&v, 1, I32, 2, comm, NULL), HCCL_E_PARA, "dest range", "destRank 2"))
    return 1;
  if (expect_rc(HcclRecv(&v, 1, I32, 7, comm, NULL), HCCL_E_PARA, "src range", "srcRank 7"))
    return 1;
  if (expect_rc(HcclSend(NULL, 3, I32, other, comm, NULL), HCCL_E_PTR, "NULL send", "sendBuf"))
    return 1;
  if (expect_rc(HcclRecvAny(&v, 1, I32, NULL, comm, NULL), HCCL_E_PTR, "NULL srcRank", "srcRank"))
    return 1;
  if (expect_rc(HcclSend(&v, 1, (HcclDataType)77, other, comm, NULL), HCCL_E_PARA, "dtype", "77"))
    return 1;
  if (expect_rc(HcclSend(&v, UINT64_MAX / 2, I32, other, comm, NULL), HCCL_E_PARA, "overflow",
                "too large"))
    return 1;
  OK(HcclCommDestroy(comm));
  return 0;
}
P2P_TEST(test_args, 2, args_body)

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_args),           cmocka_unit_test(test_pingpong),
      cmocka_unit_test(test_ring_shift),     cmocka_unit_test(test_cross_isend),
      cmocka_unit_test(test_many_in_order),  cmocka_unit_test(test_mixed_with_collectives),
      cmocka_unit_test(test_recv_any),       cmocka_unit_test(test_zero_count),
      cmocka_unit_test(test_count_mismatch), cmocka_unit_test(test_peer_killed),
      cmocka_unit_test(test_recv_timeout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
