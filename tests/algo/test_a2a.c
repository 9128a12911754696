/*
 * test_a2a.c - multi-process correctness of the collectives of algo/a2a.c (gather, scatter,
 * all-to-all, all-to-all-v), through the public header only.
 *
 * The sweep forks 1, 2, 4 and 8 ranks with HCCL_BUFFSIZE=1 and, in one communicator, runs
 * gather and scatter from rank 0 and from a middle rank, alltoall, and alltoallv with uneven
 * blocks (a quarter of them empty, displacements with gaps between blocks) over int8, int32,
 * fp16, fp32 and int64 x counts 0, 1, 7, 33333 and a large one (blocks past the 8 slots of a
 * device link's FIFO), blocking, and non-blocking (all six posted back to back, alltoallv's
 * count arrays overwritten right after the call, waited in reverse). Every received element is
 * compared with every sender's deterministic input (coll_check.h); guard bytes around every
 * buffer, gaps between alltoallv blocks and non-root receive buffers must stay untouched, and
 * send buffers unchanged.
 *
 * Then the failures: a size that differs between what rank i sends j and what j expects fails
 * on every rank, fast, with messages that name both ranks (one element off, and several chunks
 * sent where one is expected), for alltoallv and gather; and the argument checks.
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

#define RUN_TIMEOUT_S 120
#define MAX_REPORTS 8

static HcclResult init_comm(const char *exec_timeout, HcclComm *comm) {
  unsetenv("HCCL_ALGO");
  setenv("HCCL_BUFFSIZE", "1", 1);
  setenv("HCCL_EXEC_TIMEOUT", exec_timeout, 1);
  setenv("HCCL_CONNECT_TIMEOUT", "60", 1);
  unsetenv("DEVICE_ID");
  return HcclCommInitFromEnv(comm);
}

static void run_and_check(int n, harness_rank_fn body, void *arg) {
  double t0 = cc_now();
  int failed = harness_run_ranks(n, RUN_TIMEOUT_S, body, arg);
  printf("  %d ranks: %d failed, %.2f s\n", n, failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

/* ---- the sweep ---- */

typedef struct {
  HcclComm comm;
  int rank, n;
  int failures, checks;
} sweep_t;

static void report(sweep_t *s, const char *fmt, ...) {
  s->failures++;
  if (s->failures > MAX_REPORTS) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "rank %d/%d: %s\n", s->rank, s->n, msg);
}

/* Elements rank i sends rank j in alltoallv case (salt, count): uneven, a quarter empty. */
static uint64_t v_count(uint32_t salt, uint64_t count, int i, int j) {
  return count * (uint64_t)((i + 2 * j + (int)salt) % 4) / 3;
}

/* Displacements with a one-element gap before every block: block j at sum(len[<j]) + j + 1. */
static uint64_t v_layout(const uint64_t *len, int n, uint64_t *displs) {
  uint64_t at = 0;
  for (int j = 0; j < n; j++) {
    at += 1;
    displs[j] = at;
    at += len[j];
  }
  return at + 1;
}

enum { GATHER0, GATHER_MID, SCATTER0, SCATTER_MID, ALLTOALL, ALLTOALLV, NCOLL };
static const char *const coll_names[NCOLL] = {"gather root 0",  "gather middle root",
                                              "scatter root 0", "scatter middle root",
                                              "alltoall",       "alltoallv"};

/* One collective's buffers and what it must produce. */
typedef struct {
  int which, root;
  HcclDataType dt;
  uint64_t count;
  uint32_t salt;
  cc_buf send, recv;
  void *send_copy; /* the send buffer before the call */
  void *want;      /* expected recv payload (whole buffer, sentinels included) */
  uint64_t *v;     /* alltoallv: sc, sd, rc, rd (n each), the caller's copy */
  uint64_t *vcopy; /* a copy of v to pass to the library (overwritten later) */
} call_t;

static void fill_block(void *dst, HcclDataType dt, uint32_t salt, int rank, uint64_t first,
                       uint64_t count) {
  cc_fill_input(dst, dt, HCCL_REDUCE_SUM, salt, rank, first, count);
}

/* Sets up buffers and the expected result of one call on rank me of n. */
static void call_setup(call_t *c, int which, HcclDataType dt, uint64_t count, uint32_t salt, int me,
                       int n) {
  memset(c, 0, sizeof(*c));
  c->which = which;
  c->dt = dt;
  c->count = count;
  c->salt = salt;
  c->root = which == GATHER_MID || which == SCATTER_MID ? n / 2 : 0;
  size_t es = cc_dtype_size(dt), blk = count * es, sbytes = 0, rbytes = 0;
  int is_root = me == c->root;
  switch (which) {
  case GATHER0:
  case GATHER_MID:
    sbytes = blk;
    rbytes = is_root ? blk * n : 0;
    break;
  case SCATTER0:
  case SCATTER_MID:
    sbytes = is_root ? blk * n : 0;
    rbytes = blk;
    break;
  case ALLTOALL:
    sbytes = rbytes = blk * n;
    break;
  case ALLTOALLV: {
    c->v = malloc(4 * n * sizeof(uint64_t));
    uint64_t *sc = c->v, *sd = c->v + n, *rc = c->v + 2 * n, *rd = c->v + 3 * n;
    for (int j = 0; j < n; j++) {
      sc[j] = v_count(salt, count, me, j);
      rc[j] = v_count(salt, count, j, me);
    }
    sbytes = v_layout(sc, n, sd) * es;
    rbytes = v_layout(rc, n, rd) * es;
    c->vcopy = malloc(4 * n * sizeof(uint64_t));
    memcpy(c->vcopy, c->v, 4 * n * sizeof(uint64_t));
    break;
  }
  }
  cc_buf_alloc(&c->send, sbytes);
  cc_buf_alloc(&c->recv, rbytes);
  c->want = malloc(rbytes + 1);
  memset(c->want, CC_SENTINEL_BYTE, rbytes);
  unsigned char *sp = c->send.p, *wp = c->want;
  switch (which) {
  case GATHER0:
  case GATHER_MID:
    fill_block(sp, dt, salt, me, 0, count);
    if (is_root)
      for (int r = 0; r < n; r++)
        fill_block(wp + r * blk, dt, salt, r, 0, count);
    break;
  case SCATTER0:
  case SCATTER_MID:
    if (is_root) fill_block(sp, dt, salt, me, 0, count * n);
    fill_block(wp, dt, salt, c->root, count * me, count);
    break;
  case ALLTOALL:
    fill_block(sp, dt, salt, me, 0, count * n);
    for (int r = 0; r < n; r++)
      fill_block(wp + r * blk, dt, salt, r, count * me, count);
    break;
  case ALLTOALLV: {
    uint64_t *sc = c->v, *sd = c->v + n, *rc = c->v + 2 * n, *rd = c->v + 3 * n;
    for (int j = 0; j < n; j++)
      fill_block(sp + sd[j] * es, dt, salt, me, sd[j], sc[j]);
    /* Sender r put its block for me at its own displacement sd_r[me]. */
    uint64_t *tmp = malloc(2 * n * sizeof(uint64_t));
    for (int r = 0; r < n; r++) {
      for (int j = 0; j < n; j++)
        tmp[j] = v_count(salt, count, r, j);
      v_layout(tmp, n, tmp + n);
      fill_block(wp + rd[r] * es, dt, salt, r, tmp[n + me], rc[r]);
    }
    free(tmp);
    break;
  }
  }
  c->send_copy = malloc(sbytes + 1);
  memcpy(c->send_copy, sp, sbytes);
}

static HcclResult call_post(call_t *c, HcclComm comm, HcclRequest *req) {
  void *sp = c->send.bytes ? c->send.p : NULL, *rp = c->recv.bytes ? c->recv.p : NULL;
  switch (c->which) {
  case GATHER0:
  case GATHER_MID:
    return HcclGather(sp, rp, c->count, c->dt, (uint32_t)c->root, comm, req);
  case SCATTER0:
  case SCATTER_MID:
    return HcclScatter(sp, rp, c->count, c->dt, (uint32_t)c->root, comm, req);
  case ALLTOALL:
    return HcclAlltoAll(sp, c->count, c->dt, rp, c->count, c->dt, comm, req);
  default: {
    uint32_t n;
    HcclGetRankSize(comm, &n);
    uint64_t *v = c->vcopy;
    return HcclAlltoAllV(sp, v, v + n, c->dt, rp, v + 2 * n, v + 3 * n, c->dt, comm, req);
  }
  }
}

static void call_check(sweep_t *s, call_t *c, const char *mode) {
  char what[160];
  snprintf(what, sizeof(what), "%s %s dtype=%s count=%llu", mode, coll_names[c->which],
           cc_dtype_name(c->dt), (unsigned long long)c->count);
  s->checks++;
  size_t es = cc_dtype_size(c->dt);
  if (memcmp(c->recv.p, c->want, c->recv.bytes) != 0) {
    size_t k = 0;
    while (((unsigned char *)c->recv.p)[k] == ((unsigned char *)c->want)[k])
      k++;
    char e[64], g[64];
    report(s, "%s: recv differs at byte %zu (element %zu): expected %s, got %s", what, k, k / es,
           cc_elem_str(c->dt, c->want, k / es, e, sizeof(e)),
           cc_elem_str(c->dt, c->recv.p, k / es, g, sizeof(g)));
  }
  if (memcmp(c->send.p, c->send_copy, c->send.bytes) != 0)
    report(s, "%s: the send buffer changed", what);
  long d = cc_buf_guard_damage(&c->recv);
  if (d) report(s, "%s: recv guard byte overwritten at offset %ld", what, d - 1000000000L);
  d = cc_buf_guard_damage(&c->send);
  if (d) report(s, "%s: send guard byte overwritten at offset %ld", what, d - 1000000000L);
}

static void call_free(call_t *c) {
  cc_buf_free(&c->send);
  cc_buf_free(&c->recv);
  free(c->send_copy);
  free(c->want);
  free(c->v);
  free(c->vcopy);
}

static const HcclDataType DTYPES[] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT32,
                                      HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32,
                                      HCCL_DATA_TYPE_INT64};
#define NDT (sizeof(DTYPES) / sizeof(DTYPES[0]))

/* Elements per block: 0, 1, 7 (tails), 33333 (several chunks on 4 and 8 ranks), and a large
 * count whose blocks together make 1 MiB + 5 elements per rank and each block exceeds the
 * 8 slots of a FIFO at HCCL_BUFFSIZE=1 (4 KiB..64 KiB slots). Large runs for int8, fp32, int64. */
#define NCOUNTS 5
static uint64_t count_of(int k, HcclDataType dt, int n) {
  static const uint64_t small[4] = {0, 1, 7, 33333};
  if (k < 4) return small[k];
  return (1u << 20) / cc_dtype_size(dt) / (uint64_t)n + 5;
}

static int sweep(sweep_t *s) {
  uint32_t salt = 500;
  for (size_t d = 0; d < NDT; d++) {
    HcclDataType dt = DTYPES[d];
    for (int k = 0; k < NCOUNTS; k++) {
      if (k == 4 && (dt == HCCL_DATA_TYPE_INT32 || dt == HCCL_DATA_TYPE_FP16)) continue;
      uint64_t count = count_of(k, dt, s->n);
      for (int nb = 0; nb < 2; nb++) {
        call_t calls[NCOLL];
        HcclRequest req[NCOLL] = {0};
        for (int w = 0; w < NCOLL; w++)
          call_setup(&calls[w], w, dt, count, ++salt, s->rank, s->n);
        for (int w = 0; w < NCOLL; w++) {
          HcclResult rc = call_post(&calls[w], s->comm, nb ? &req[w] : NULL);
          if (rc != HCCL_SUCCESS) {
            report(s, "%s %s dtype=%s count=%llu returned %d: %s", nb ? "queued" : "blocking",
                   coll_names[w], cc_dtype_name(dt), (unsigned long long)count, rc,
                   HcclGetLastErrorMessage());
            return -1;
          }
          /* The library copied the counts: the caller may reuse its arrays at once. */
          if (calls[w].vcopy) memset(calls[w].vcopy, 0xFF, 4 * s->n * sizeof(uint64_t));
        }
        for (int w = NCOLL - 1; nb && w >= 0; w--) {
          HcclResult rc = HcclRequestWait(req[w]);
          if (rc != HCCL_SUCCESS) {
            report(s, "queued %s dtype=%s count=%llu failed %d: %s", coll_names[w],
                   cc_dtype_name(dt), (unsigned long long)count, rc, HcclGetLastErrorMessage());
            return -1;
          }
        }
        for (int w = 0; w < NCOLL; w++) {
          call_check(s, &calls[w], nb ? "queued" : "blocking");
          call_free(&calls[w]);
        }
      }
    }
  }
  /* Different element types on the two sides: int32 blocks received as int8 (4x the count). */
  enum { C = 1001 };
  int n = s->n;
  int32_t *in = malloc(sizeof(int32_t) * C * n);
  int8_t *out = malloc(4 * C * n);
  cc_fill_input(in, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 9, s->rank, 0, (uint64_t)C * n);
  HcclResult rc =
      HcclAlltoAll(in, C, HCCL_DATA_TYPE_INT32, out, 4 * C, HCCL_DATA_TYPE_INT8, s->comm, NULL);
  s->checks++;
  if (rc != HCCL_SUCCESS) report(s, "alltoall int32 -> int8: %d %s", rc, HcclGetLastErrorMessage());
  for (int r = 0; r < n && rc == HCCL_SUCCESS; r++) {
    int32_t want[C];
    cc_fill_input(want, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 9, r, (uint64_t)C * s->rank, C);
    if (memcmp(out + (size_t)r * 4 * C, want, sizeof(want)) != 0)
      report(s, "alltoall int32 -> int8: block from rank %d differs", r);
  }
  free(in);
  free(out);
  return 0;
}

static int sweep_body(int rank, int nranks, void *arg) {
  (void)arg;
  HcclComm comm = NULL;
  HcclResult rc = init_comm("60", &comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  sweep_t s = {.comm = comm, .rank = rank, .n = nranks};
  double t0 = cc_now();
  int fatal = sweep(&s);
  double dt = cc_now() - t0;
  rc = HcclCommDestroy(comm);
  if (rank == 0)
    printf("a2a sweep n=%d: %d checks, %d failures, %.2f s\n", nranks, s.checks, s.failures, dt);
  RANK_CHECK(fatal == 0 && s.failures == 0, "%d failures (fatal=%d)", s.failures, fatal);
  RANK_CHECK(rc == HCCL_SUCCESS, "destroy: %d", rc);
  return 0;
}

#define SWEEP_TEST(name, n)                                                                        \
  static void name(void **st) {                                                                    \
    (void)st;                                                                                      \
    run_and_check(n, sweep_body, NULL);                                                            \
  }
SWEEP_TEST(test_sweep_1, 1)
SWEEP_TEST(test_sweep_2, 2)
SWEEP_TEST(test_sweep_4, 4)
SWEEP_TEST(test_sweep_8, 8)

/* ---- mismatched sizes ----
 * Rank 0 sends rank 1 a block of a different size than rank 1 expects (only that direction is
 * wrong). Every rank must fail well before HCCL_EXEC_TIMEOUT (60 s); ranks 0 and 1 must name
 * each other. `extra` elements: 1 (one chunk of the wrong size) or many chunks where rank 1
 * expects one full chunk (a size that agrees on the first chunk). */

static int expect_failure(int rank, HcclResult rc, double t0, const char *what, int a, int b) {
  const char *msg = HcclGetLastErrorMessage();
  double dt = cc_now() - t0;
  RANK_CHECK(rc != HCCL_SUCCESS, "%s succeeded on rank %d", what, rank);
  RANK_CHECK(dt < 10.0, "%s: the failure took %.2f s (HCCL_EXEC_TIMEOUT=60)", what, dt);
  if (rank == a || rank == b)
    RANK_CHECK(cc_msg_names_rank(msg, a) && cc_msg_names_rank(msg, b),
               "%s on rank %d: message does not name ranks %d and %d: %s", what, rank, a, b, msg);
  return 0;
}

static int mismatch_body(int rank, int n, void *arg) {
  (void)arg;
  /* Sizes rank 0 sends rank 1 / rank 1 expects, in int32 elements: one element off, and 40000
   * (several 64 KiB chunks at HCCL_BUFFSIZE=1 on 2..4 ranks) against exactly one chunk. */
  static const uint64_t cases[2][2] = {{100, 101}, {40000, 16384}};
  for (int k = 0; k < 2; k++) {
    HcclComm comm = NULL;
    HcclResult rc = init_comm("60", &comm);
    RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
    uint64_t sc[8], sd[8], rc_[8], rd[8];
    for (int j = 0; j < n; j++)
      sc[j] = rc_[j] = 8;
    if (rank == 0) sc[1] = cases[k][0];
    if (rank == 1) rc_[0] = cases[k][1];
    uint64_t stot = v_layout(sc, n, sd), rtot = v_layout(rc_, n, rd);
    int32_t *sb = calloc(stot, 4), *rb = calloc(rtot, 4);
    double t0 = cc_now();
    rc = HcclAlltoAllV(sb, sc, sd, HCCL_DATA_TYPE_INT32, rb, rc_, rd, HCCL_DATA_TYPE_INT32, comm,
                       NULL);
    if (expect_failure(rank, rc, t0, "alltoallv with mismatched counts", 0, 1)) return 1;
    free(sb);
    free(rb);
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  }
  /* Gather: rank 1 sends 7 elements where the root (rank 0) expects 6, queued. */
  HcclComm comm = NULL;
  HcclResult rc = init_comm("60", &comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  int32_t in[7] = {0}, out[8 * 7];
  HcclRequest req = NULL;
  double t0 = cc_now();
  rc = HcclGather(in, out, rank == 1 ? 7 : 6, HCCL_DATA_TYPE_INT32, 0, comm, &req);
  RANK_CHECK(rc == HCCL_SUCCESS && req, "queue gather: %d", rc);
  rc = HcclRequestWait(req);
  if (expect_failure(rank, rc, t0, "gather with mismatched counts", 0, 1)) return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_mismatch_2(void **st) {
  (void)st;
  run_and_check(2, mismatch_body, NULL);
}

static void test_mismatch_4(void **st) {
  (void)st;
  run_and_check(4, mismatch_body, NULL);
}

/* ---- argument checks (one rank: nothing is sent) ---- */

static int expect_para(HcclResult rc, HcclResult want, const char *what, const char *word1,
                       const char *word2) {
  const char *msg = HcclGetLastErrorMessage();
  RANK_CHECK(rc == want, "%s: got %d, want %d (%s)", what, rc, want, msg);
  RANK_CHECK(strstr(msg, word1) && (!word2 || strstr(msg, word2)),
             "%s: message does not name '%s'%s%s: %s", what, word1, word2 ? " and " : "",
             word2 ? word2 : "", msg);
  return 0;
}

static int args_body(int rank, int n, void *arg) {
  (void)rank;
  (void)n;
  (void)arg;
  HcclComm comm = NULL;
  HcclResult rc = init_comm("60", &comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  int32_t a[16] = {0}, b[16] = {0};
  uint64_t one[1] = {4}, zero[1] = {0};
  HcclDataType I32 = HCCL_DATA_TYPE_INT32;
  if (expect_para(HcclGather(NULL, b, 4, I32, 0, comm, NULL), HCCL_E_PTR, "gather NULL send",
                  "sendBuf", NULL))
    return 1;
  if (expect_para(HcclGather(a, NULL, 4, I32, 0, comm, NULL), HCCL_E_PTR, "gather NULL recv",
                  "recvBuf", NULL))
    return 1;
  if (expect_para(HcclGather(a, b, 4, I32, 1, comm, NULL), HCCL_E_PARA, "gather root", "root 1",
                  NULL))
    return 1;
  if (expect_para(HcclScatter(a, b, 4, I32, 3, comm, NULL), HCCL_E_PARA, "scatter root", "root 3",
                  NULL))
    return 1;
  if (expect_para(HcclScatter(a, b, 4, (HcclDataType)99, 0, comm, NULL), HCCL_E_PARA,
                  "scatter dtype", "99", NULL))
    return 1;
  if (expect_para(HcclAlltoAll(a, 4, I32, b, 3, I32, comm, NULL), HCCL_E_PARA, "alltoall sizes",
                  "sendCount 4", "recvCount 3"))
    return 1;
  if (expect_para(HcclAlltoAll(a, UINT64_MAX / 2, I32, b, UINT64_MAX / 2, I32, comm, NULL),
                  HCCL_E_PARA, "alltoall overflow", "too large", NULL))
    return 1;
  if (expect_para(HcclAlltoAll(a, 4, I32, NULL, 4, I32, comm, NULL), HCCL_E_PTR,
                  "alltoall NULL recv", "recvBuf", NULL))
    return 1;
  if (expect_para(HcclAlltoAllV(a, NULL, zero, I32, b, one, zero, I32, comm, NULL), HCCL_E_PTR,
                  "alltoallv NULL counts", "sendCounts", NULL))
    return 1;
  if (expect_para(HcclAlltoAllV(NULL, one, zero, I32, b, one, zero, I32, comm, NULL), HCCL_E_PTR,
                  "alltoallv NULL send", "sendBuf", "sendCounts[0]"))
    return 1;
  if (expect_para(HcclAlltoAllV(a, one, zero, I32, b, zero, zero, I32, comm, NULL), HCCL_E_PARA,
                  "alltoallv own block", "sendCounts[0]", "recvCounts[0]"))
    return 1;
  uint64_t huge[1] = {UINT64_MAX / 2};
  if (expect_para(HcclAlltoAllV(a, one, huge, I32, b, one, zero, I32, comm, NULL), HCCL_E_PARA,
                  "alltoallv displacement overflow", "sdispls[0]", NULL))
    return 1;
  /* Count 0 with NULL buffers is fine, blocking and queued; a one-rank call is a copy. */
  RANK_CHECK(HcclGather(NULL, NULL, 0, I32, 0, comm, NULL) == HCCL_SUCCESS, "gather count 0");
  HcclRequest req = NULL;
  RANK_CHECK(HcclAlltoAll(NULL, 0, I32, NULL, 0, I32, comm, &req) == HCCL_SUCCESS && req,
             "queued alltoall count 0");
  RANK_CHECK(HcclRequestWait(req) == HCCL_SUCCESS, "wait count 0");
  RANK_CHECK(HcclAlltoAllV(NULL, zero, zero, I32, NULL, zero, zero, I32, comm, NULL) ==
                 HCCL_SUCCESS,
             "alltoallv all zero: %s", HcclGetLastErrorMessage());
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_args(void **st) {
  (void)st;
  run_and_check(1, args_body, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_args),       cmocka_unit_test(test_sweep_1),
      cmocka_unit_test(test_sweep_2),    cmocka_unit_test(test_sweep_4),
      cmocka_unit_test(test_sweep_8),    cmocka_unit_test(test_mismatch_2),
      cmocka_unit_test(test_mismatch_4),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
