/*
 * test_coll.c - multi-process correctness of the collectives, through the public header only.
 *
 * The sweep forks 1, 2, 3, 4 and 8 ranks once per forced algorithm (HCCL_ALGO=ring, tree) with
 * HCCL_BUFFSIZE=1, and inside that one communicator runs every collective (allreduce,
 * reduce-scatter, allgather, broadcast and reduce from the first, the last and a middle rank,
 * barrier)
 * over dtypes x ops x counts (0, 1, 7, 33333, and for a subset 1 MiB and 3 MiB + 5 elements,
 * more than the staging buffer) x in-place / out-of-place: the four original types with sum,
 * prod, max and min at every count; in runs of their own, every other (type, op) pair (twelve
 * types, avg and the bitwise ops too) at 1, 7 and 33333 (3 ranks too, both algorithms). 5, 6
 * and 7 ranks (any count on a flat server) run the sweep at the small counts only, both
 * algorithms, and the other types at 5 (ring), 6 (tree) and 7 (ring): the full sweep at each
 * would add about a minute on two cores. Every element is compared with a reference computed
 * locally from every rank's deterministic input (coll_check.h); an
 * out-of-place call must leave its send buffer untouched, and nothing may be written in the
 * guard bytes around any buffer. A mismatch prints the collective, dtype, op, count, root,
 * placement, index, expected and got.
 *
 * Then: requests (queued back to back, waited in reverse, ordered with a later blocking call,
 * polled with HcclRequestTest), NaN/Inf through fp32 and fp16 sum and max, bit-identical
 * fp32 sums on every rank and from run to run for ring and tree, and the cost model's choice
 * with HCCL_ALGO unset. Every run is capped by the harness deadline, and every rank must have
 * released its device links when it returns (harness.c).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_check.h"
#include "harness.h"
#include "hccl.h"

#define RUN_TIMEOUT_S 120
/* In a sanitizer's build (SUITE_LEAN=1, from tests/CMakeLists.txt) ranks run 3-10x slower, and
 * on CI's machine the 8-rank tree sweep passed the 120 s deadline (2026-12-07): 300 s there. */
#define LEAN_TIMEOUT_S 300
#define MAX_REPORTS 8 /* mismatch lines printed per rank before going quiet */

/* Shared between the ranks of one run (MAP_SHARED before fork): barrier counters. */
static int *g_shared;
#define SHARED_INTS 1024

struct run_arg {
  const char *algo; /* HCCL_ALGO value, or NULL to leave it unset */
  int types;        /* sweep_body: the other types and ops (sweep_types), not sweep */
  int small;        /* sweep: the small counts only (no large or streamed messages) */
};

/* Sets the variables every run uses, then inits from the launcher's variables. */
static HcclResult init_comm(const char *algo, HcclComm *comm) {
  if (algo)
    setenv("HCCL_ALGO", algo, 1);
  else
    unsetenv("HCCL_ALGO");
  setenv("HCCL_BUFFSIZE", "1", 1);
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "60", 1);
  unsetenv("DEVICE_ID");
  return HcclCommInitFromEnv(comm);
}

/* ---- the sweep ---- */

typedef struct {
  HcclComm comm;
  int rank, n;
  int small; /* run_arg.small */
  int lean;  /* SUITE_LEAN: the large messages of one type only (see sweep) */
  uint32_t salt;
  int failures;
  int checks;
} sweep_t;

typedef struct {
  const char *coll;
  HcclDataType dt;
  HcclReduceOp op; /* -1 when the collective has none */
  uint64_t count;
  int inplace; /* -1 when it does not apply */
  int root;    /* -1 when it does not apply */
} case_t;

static const char *case_str(const case_t *c, char *buf, size_t len) {
  char root[16] = "-";
  if (c->root >= 0) snprintf(root, sizeof(root), "%d", c->root);
  snprintf(buf, len, "%s dtype=%s op=%s count=%llu %s root=%s", c->coll, cc_dtype_name(c->dt),
           (int)c->op < 0 ? "-" : cc_op_name(c->op), (unsigned long long)c->count,
           c->inplace < 0 ? "-"
           : c->inplace   ? "in-place"
                          : "out-of-place",
           root);
  return buf;
}

static void report(sweep_t *s, const case_t *c, const char *fmt, ...) {
  s->failures++;
  if (s->failures > MAX_REPORTS) return;
  char cs[200], msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "rank %d/%d: %s: %s\n", s->rank, s->n, case_str(c, cs, sizeof(cs)), msg);
}

/* Compares count elements of got with want; reports the first mismatch as `what`. */
static void expect_equal(sweep_t *s, const case_t *c, const char *what, const void *got,
                         const void *want, uint64_t count) {
  s->checks++;
  int64_t i = cc_first_mismatch(got, want, c->dt, count);
  if (i < 0) return;
  char e[64], g[64];
  report(s, c, "%s: first mismatch at index %lld: expected %s, got %s", what, (long long)i,
         cc_elem_str(c->dt, want, (uint64_t)i, e, sizeof(e)),
         cc_elem_str(c->dt, got, (uint64_t)i, g, sizeof(g)));
}

static void expect_guards(sweep_t *s, const case_t *c, const char *name, const cc_buf *b) {
  long d = cc_buf_guard_damage(b);
  if (d) report(s, c, "%s: guard byte overwritten at offset %ld", name, d - 1000000000L);
}

static void expect_sentinel(sweep_t *s, const case_t *c, const char *what, const void *p,
                            size_t bytes) {
  long k = cc_first_non_sentinel(p, bytes);
  if (k >= 0) report(s, c, "%s: byte %ld was written", what, k);
}

/* Input of `rank` for elements [first, first+count), in a fresh buffer (never NULL). */
static void *make_input(const case_t *c, uint32_t salt, int rank, uint64_t first, uint64_t count) {
  void *p = malloc(count * cc_dtype_size(c->dt) + 1);
  cc_fill_input(p, c->dt, c->op < 0 ? HCCL_REDUCE_SUM : c->op, salt, rank, first, count);
  return p;
}

#define CALL_OK(s, c, expr)                                                                        \
  do {                                                                                             \
    HcclResult rc_ = (expr);                                                                       \
    if (rc_ != HCCL_SUCCESS) {                                                                     \
      report(s, c, "%s returned %d (%s): %s", #expr, rc_, HcclGetErrorString(rc_),                 \
             HcclGetLastErrorMessage());                                                           \
      return -1;                                                                                   \
    }                                                                                              \
  } while (0)

static int run_allreduce(sweep_t *s, HcclDataType dt, HcclReduceOp op, uint64_t count) {
  size_t es = cc_dtype_size(dt), bytes = count * es;
  uint32_t salt = ++s->salt;
  case_t c = {"allreduce", dt, op, count, 0, -1};
  void *want = malloc(bytes + 1);
  cc_reduce_expect(want, dt, op, salt, s->n, 0, count);
  void *in = make_input(&c, salt, s->rank, 0, count);
  for (int inplace = 0; inplace < 2; inplace++) {
    c.inplace = inplace;
    cc_buf sb, rb = {0};
    cc_buf_alloc(&sb, bytes);
    memcpy(sb.p, in, bytes);
    if (!inplace) cc_buf_alloc(&rb, bytes);
    void *recv = inplace ? sb.p : rb.p;
    CALL_OK(s, &c, HcclAllReduce(sb.p, recv, count, dt, op, s->comm, NULL));
    expect_equal(s, &c, "result", recv, want, count);
    if (!inplace) expect_equal(s, &c, "send buffer changed", sb.p, in, count);
    expect_guards(s, &c, "send", &sb);
    if (!inplace) expect_guards(s, &c, "recv", &rb);
    cc_buf_free(&sb);
    if (!inplace) cc_buf_free(&rb);
  }
  free(in);
  free(want);
  return 0;
}

/* count = recvCount; rank r's result is the reduction of block r of every rank's send. */
static int run_reduce_scatter(sweep_t *s, HcclDataType dt, HcclReduceOp op, uint64_t count) {
  size_t es = cc_dtype_size(dt), bytes = count * es;
  uint32_t salt = ++s->salt;
  case_t c = {"reduce-scatter", dt, op, count, 0, -1};
  void *want = malloc(bytes + 1);
  cc_reduce_expect(want, dt, op, salt, s->n, (uint64_t)s->rank * count, count);
  uint64_t total = count * (uint64_t)s->n;
  void *in = make_input(&c, salt, s->rank, 0, total);
  for (int inplace = 0; inplace < 2; inplace++) {
    c.inplace = inplace;
    cc_buf sb, rb = {0};
    cc_buf_alloc(&sb, total * es);
    memcpy(sb.p, in, total * es);
    if (!inplace) cc_buf_alloc(&rb, bytes);
    void *recv = inplace ? sb.p + (size_t)s->rank * bytes : rb.p;
    CALL_OK(s, &c, HcclReduceScatter(sb.p, recv, count, dt, op, s->comm, NULL));
    expect_equal(s, &c, "result", recv, want, count);
    if (!inplace) expect_equal(s, &c, "send buffer changed", sb.p, in, total);
    expect_guards(s, &c, "send", &sb);
    if (!inplace) expect_guards(s, &c, "recv", &rb);
    cc_buf_free(&sb);
    if (!inplace) cc_buf_free(&rb);
  }
  free(in);
  free(want);
  return 0;
}

/* count = sendCount; block r of the result is rank r's input. */
static int run_allgather(sweep_t *s, HcclDataType dt, uint64_t count) {
  size_t es = cc_dtype_size(dt), bytes = count * es;
  uint32_t salt = ++s->salt;
  case_t c = {"allgather", dt, (HcclReduceOp)-1, count, 0, -1};
  uint64_t total = count * (uint64_t)s->n;
  unsigned char *want = malloc(total * es + 1);
  for (int r = 0; r < s->n; r++)
    cc_fill_input(want + (size_t)r * bytes, dt, HCCL_REDUCE_SUM, salt, r, 0, count);
  const void *in = want + (size_t)s->rank * bytes;
  for (int inplace = 0; inplace < 2; inplace++) {
    c.inplace = inplace;
    cc_buf sb = {0}, rb;
    cc_buf_alloc(&rb, total * es);
    void *send;
    if (inplace) {
      send = rb.p + (size_t)s->rank * bytes;
      memcpy(send, in, bytes);
    } else {
      cc_buf_alloc(&sb, bytes);
      memcpy(sb.p, in, bytes);
      send = sb.p;
    }
    CALL_OK(s, &c, HcclAllGather(send, rb.p, count, dt, s->comm, NULL));
    expect_equal(s, &c, "result", rb.p, want, total);
    if (!inplace) expect_equal(s, &c, "send buffer changed", sb.p, in, count);
    expect_guards(s, &c, "recv", &rb);
    if (!inplace) expect_guards(s, &c, "send", &sb);
    cc_buf_free(&rb);
    if (!inplace) cc_buf_free(&sb);
  }
  free(want);
  return 0;
}

static int run_broadcast(sweep_t *s, HcclDataType dt, uint64_t count, int root) {
  size_t bytes = count * cc_dtype_size(dt);
  uint32_t salt = ++s->salt;
  case_t c = {"broadcast", dt, (HcclReduceOp)-1, count, -1, root};
  void *want = make_input(&c, salt, root, 0, count);
  cc_buf b;
  cc_buf_alloc(&b, bytes);
  if (s->rank == root) memcpy(b.p, want, bytes);
  CALL_OK(s, &c, HcclBroadcast(b.p, count, dt, (uint32_t)root, s->comm, NULL));
  expect_equal(s, &c, "result", b.p, want, count);
  expect_guards(s, &c, "buf", &b);
  cc_buf_free(&b);
  free(want);
  return 0;
}

/* The root gets the reduction; elsewhere recvBuf is never written (out-of-place with count 7
 * passes NULL there, as the header allows), and in-place leaves the input as it was. */
static int run_reduce(sweep_t *s, HcclDataType dt, HcclReduceOp op, uint64_t count, int root) {
  size_t es = cc_dtype_size(dt), bytes = count * es;
  uint32_t salt = ++s->salt;
  case_t c = {"reduce", dt, op, count, 0, root};
  int is_root = s->rank == root;
  void *want = malloc(bytes + 1);
  if (is_root) cc_reduce_expect(want, dt, op, salt, s->n, 0, count);
  void *in = make_input(&c, salt, s->rank, 0, count);
  for (int inplace = 0; inplace < 2; inplace++) {
    c.inplace = inplace;
    cc_buf sb, rb = {0};
    cc_buf_alloc(&sb, bytes);
    memcpy(sb.p, in, bytes);
    int null_recv = !inplace && !is_root && count == 7;
    if (!inplace && !null_recv) cc_buf_alloc(&rb, bytes);
    void *recv = inplace ? sb.p : null_recv ? NULL : rb.p;
    CALL_OK(s, &c, HcclReduce(sb.p, recv, count, dt, op, (uint32_t)root, s->comm, NULL));
    if (is_root)
      expect_equal(s, &c, "result", recv, want, count);
    else if (inplace)
      expect_equal(s, &c, "non-root buffer changed", sb.p, in, count);
    else if (!null_recv)
      expect_sentinel(s, &c, "non-root recvBuf", rb.p, bytes);
    if (!inplace) expect_equal(s, &c, "send buffer changed", sb.p, in, count);
    expect_guards(s, &c, "send", &sb);
    if (rb.mem) expect_guards(s, &c, "recv", &rb);
    cc_buf_free(&sb);
    if (rb.mem) cc_buf_free(&rb);
  }
  free(in);
  free(want);
  return 0;
}

/* Round k: one rank is late, every rank bumps a shared counter, then the barrier: after it the
 * counter must show every rank. Blocking and queued forms. */
static int run_barrier(sweep_t *s, int rounds) {
  case_t c = {"barrier", HCCL_DATA_TYPE_INT8, (HcclReduceOp)-1, 0, -1, -1};
  for (int k = 0; k < rounds; k++) {
    int *ctr = &g_shared[s->salt % (SHARED_INTS / 2) + (unsigned)k];
    if (s->rank == k % s->n) usleep(20 * 1000);
    __atomic_add_fetch(ctr, 1, __ATOMIC_SEQ_CST);
    if (k % 2 == 0) {
      CALL_OK(s, &c, HcclBarrier(s->comm, NULL));
    } else {
      HcclRequest req = NULL;
      CALL_OK(s, &c, HcclBarrier(s->comm, &req));
      CALL_OK(s, &c, HcclRequestWait(req));
    }
    int seen = __atomic_load_n(ctr, __ATOMIC_SEQ_CST);
    s->checks++;
    if (seen < s->n)
      report(s, &c, "round %d: left the barrier when only %d of %d arrived", k, seen, s->n);
  }
  s->salt += (uint32_t)rounds;
  return 0;
}

static const HcclDataType RED_DT[] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT32,
                                      HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32};
static const HcclDataType MOVE_DT[] = {HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_INT32,
                                       HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_FP32,
                                       HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_FP64};
/* 0, 1, fewer than 8 (some ring blocks empty, vector kernels' tails), and 33333: more than one
 * slot-sized chunk on 4 and 8 ranks, blocks of unequal sizes starting at odd offsets. */
static const uint64_t SMALL[] = {0, 1, 7, 33333};
#define NSMALL (sizeof(SMALL) / sizeof(SMALL[0]))

/* Large counts: 1 MiB of bytes, and 3 MiB + 5 elements (more than HCCL_BUFFSIZE=1). For
 * reduce-scatter and allgather `per_rank` divides them by the group size, so the whole
 * message (not each block) has that size and an 8-rank run stays within the time budget. */
static uint64_t large_count(HcclDataType dt, int which, int per_rank_n) {
  uint64_t es = cc_dtype_size(dt);
  uint64_t c = which == 0 ? (1u << 20) / es : (3u << 20) / es;
  return c / (uint64_t)per_rank_n + (which == 0 ? 0 : 5);
}

static int large_subset(HcclDataType dt, HcclReduceOp op) {
  return (dt == HCCL_DATA_TYPE_FP32 && op == HCCL_REDUCE_SUM) ||
         (dt == HCCL_DATA_TYPE_INT8 && op == HCCL_REDUCE_MAX) ||
         (dt == HCCL_DATA_TYPE_FP16 && op == HCCL_REDUCE_MIN);
}

/* Out of place from 16 MiB of output the steps write it with streaming stores (prims.h,
 * HCCL_STREAM_MIN): 16 MiB + 5 elements, so blocks start at odd offsets and end in tails. */
static int run_streamed(sweep_t *s) {
  const uint64_t big = 16u << 20;
  if (run_allreduce(s, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, big / 4 + 5)) return -1;
  if (!s->lean && run_allreduce(s, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_MAX, big + 5)) return -1;
  return run_allgather(s, HCCL_DATA_TYPE_FP32, big / 4 / (uint64_t)s->n + 5);
}

static int sweep(sweep_t *s) {
  /* First and last rank for every count; a middle one (the binomial tree's root position
   * wraps around the ring) for the small counts on 4 and 8 ranks. Lean (a sanitizer's build),
   * the large and streamed messages are fp32's only: the same steps, chunking and streaming
   * stores as the other types', whose kernels the small counts (33333: vector loops and tails)
   * still run; int8 and fp16 at large counts stay with the build without a sanitizer. Under
   * ASan they were most of this test's 480 s (2026-12-06). */
  int roots[3] = {0, s->n - 1, s->n / 2 - 1};
  int nroots = s->n > 1 ? 2 : 1, nroots_small = s->n >= 4 ? 3 : nroots;
  for (size_t d = 0; d < sizeof(RED_DT) / sizeof(RED_DT[0]); d++) {
    for (int op = 0; op < 4; op++) {
      HcclDataType dt = RED_DT[d];
      int big = large_subset(dt, (HcclReduceOp)op) && !s->small &&
                (!s->lean || dt == HCCL_DATA_TYPE_FP32);
      for (int w = 0; big && w < 2; w++) {
        uint64_t cnt[2] = {large_count(dt, w, 1), large_count(dt, w, s->n)};
        if (run_allreduce(s, dt, op, cnt[0])) return -1;
        if (run_reduce_scatter(s, dt, op, cnt[1])) return -1;
        for (int r = 0; r < nroots; r++)
          if (run_reduce(s, dt, op, cnt[0], roots[r])) return -1;
      }
      for (size_t k = 0; k < NSMALL; k++) {
        if (run_allreduce(s, dt, op, SMALL[k])) return -1;
        if (run_reduce_scatter(s, dt, op, SMALL[k])) return -1;
        for (int r = 0; r < nroots_small; r++)
          if (run_reduce(s, dt, op, SMALL[k], roots[r])) return -1;
      }
    }
  }
  for (size_t d = 0; d < sizeof(MOVE_DT) / sizeof(MOVE_DT[0]); d++) {
    HcclDataType dt = MOVE_DT[d];
    int big = (dt == HCCL_DATA_TYPE_FP32 || (dt == HCCL_DATA_TYPE_INT8 && !s->lean)) && !s->small;
    for (int k = 0; k < (int)NSMALL + 2 * big; k++) {
      int l = k - (int)NSMALL;
      uint64_t cb = l < 0 ? SMALL[k] : large_count(dt, l, 1);
      uint64_t cg = l < 0 ? SMALL[k] : large_count(dt, l, s->n);
      if (run_allgather(s, dt, cg)) return -1;
      for (int r = 0; r < (l < 0 ? nroots_small : nroots); r++)
        if (run_broadcast(s, dt, cb, roots[r])) return -1;
    }
  }
  if (s->n > 1 && !s->small && run_streamed(s)) return -1;
  return run_barrier(s, 4);
}

/* Every other (type, op) the library reduces: the other eight types with sum, prod, max and
 * min, and every type with avg and (integers) the bitwise ops, at the small counts but 0:
 * allreduce, reduce-scatter, and reduce from the last rank. A run of its own, so each keeps
 * within the deadline in a sanitizer build too. */
static int sweep_types(sweep_t *s) {
  int root = s->n - 1;
  for (int d = 0; d < (int)HCCL_DATA_TYPE_RESERVED; d++)
    for (int op = 0; op < (int)HCCL_REDUCE_RESERVED; op++) {
      HcclDataType dt = (HcclDataType)d;
      int core = (dt == HCCL_DATA_TYPE_INT8 || dt == HCCL_DATA_TYPE_INT32 ||
                  dt == HCCL_DATA_TYPE_FP16 || dt == HCCL_DATA_TYPE_FP32) &&
                 op < (int)HCCL_REDUCE_AVG;
      if (core || !cc_reduces(dt, (HcclReduceOp)op)) continue;
      for (size_t k = 1; k < NSMALL; k++) {
        if (run_allreduce(s, dt, (HcclReduceOp)op, SMALL[k])) return -1;
        if (run_reduce_scatter(s, dt, (HcclReduceOp)op, SMALL[k])) return -1;
        if (run_reduce(s, dt, (HcclReduceOp)op, SMALL[k], root)) return -1;
      }
    }
  return 0;
}

static int sweep_body(int rank, int nranks, void *argp) {
  const struct run_arg *arg = argp;
  HcclComm comm = NULL;
  HcclResult rc = init_comm(arg->algo, &comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  uint32_t v = 0;
  RANK_CHECK(HcclGetRankSize(comm, &v) == HCCL_SUCCESS && v == (uint32_t)nranks, "size %u", v);
  RANK_CHECK(HcclGetRankId(comm, &v) == HCCL_SUCCESS && v == (uint32_t)rank, "rank %u", v);
  if (nranks >= 2) {
    const char *want = strcmp(arg->algo, "ring") == 0 ? "ring" : "hd";
    const char *a = HcclAllReduceAlgoName(comm, 64), *b = HcclAllReduceAlgoName(comm, 64u << 20);
    RANK_CHECK(a && b && strcmp(a, want) == 0 && strcmp(b, want) == 0,
               "HCCL_ALGO=%s but the algorithm names are %s (64 B) and %s (64 MiB)", arg->algo,
               a ? a : "(null)", b ? b : "(null)");
  }
  sweep_t s = {.comm = comm,
               .rank = rank,
               .n = nranks,
               .small = arg->small,
               .lean = getenv("SUITE_LEAN") != NULL,
               .salt = 1000};
  double t0 = cc_now();
  int fatal = arg->types ? sweep_types(&s) : sweep(&s);
  double dt = cc_now() - t0;
  rc = HcclCommDestroy(comm);
  if (rank == 0)
    printf("%s n=%d algo=%s: %d checks, %d failures, %.2f s\n",
           arg->types ? "types" : arg->small ? "small sweep" : "sweep", nranks, arg->algo, s.checks,
           s.failures, dt);
  RANK_CHECK(fatal == 0 && s.failures == 0, "%d failures (fatal=%d)", s.failures, fatal);
  RANK_CHECK(rc == HCCL_SUCCESS, "destroy: %d", rc);
  return 0;
}

/* Forks n ranks running body and asserts every rank succeeded and no shm entry was left. */
static void run_and_check(int n, harness_rank_fn body, void *arg) {
  memset(g_shared, 0, SHARED_INTS * sizeof(int));
  double t0 = cc_now();
  int deadline = getenv("SUITE_LEAN") ? LEAN_TIMEOUT_S : RUN_TIMEOUT_S;
  int failed = harness_run_ranks(n, deadline, body, arg);
  printf("  %d ranks: %d failed, %.2f s\n", n, failed, cc_now() - t0);
  assert_int_equal(failed, 0);
}

/* One cmocka test per (name, group size, algorithm): forks n ranks running body. */
#define ALGO_TEST(name, n, body, which)                                                            \
  static void name(void **st) {                                                                    \
    (void)st;                                                                                      \
    struct run_arg a = {.algo = #which};                                                           \
    run_and_check(n, body, &a);                                                                    \
  }
ALGO_TEST(test_sweep_1_ring, 1, sweep_body, ring)
ALGO_TEST(test_sweep_1_tree, 1, sweep_body, tree)
ALGO_TEST(test_sweep_2_ring, 2, sweep_body, ring)
ALGO_TEST(test_sweep_2_tree, 2, sweep_body, tree)
ALGO_TEST(test_sweep_4_ring, 4, sweep_body, ring)
ALGO_TEST(test_sweep_4_tree, 4, sweep_body, tree)
ALGO_TEST(test_sweep_8_ring, 8, sweep_body, ring)
ALGO_TEST(test_sweep_8_tree, 8, sweep_body, tree)
/* Any count on a flat server: the whole sweep at 3 ranks (the smallest ring whose blocks,
 * halving-doubling fold and binomial tree are not a power of two's). */
ALGO_TEST(test_sweep_3_ring, 3, sweep_body, ring)
ALGO_TEST(test_sweep_3_tree, 3, sweep_body, tree)

/* 5, 6 and 7 ranks: every collective, the four reduction types x sum, prod, max, min and the
 * moved types at the small counts (0, 1, 7, 33333: empty and unequal blocks), in place and
 * not, every root; no large or streamed messages, which the power-of-two runs and 3 ranks
 * cover, to keep the suite's time. */
/* In a sanitizer's build (SUITE_LEAN=1, from tests/CMakeLists.txt) 6 and 7 ranks are left
 * to the build without one: 3 and 5 ranks keep the odd counts there, and under ASan this test
 * took 505 s with them (2026-12-06). */
static int lean_skip(int n) { return (n == 6 || n == 7) && getenv("SUITE_LEAN") != NULL; }

#define SMALL_TEST(name, n, which)                                                                 \
  static void name(void **st) {                                                                    \
    (void)st;                                                                                      \
    if (lean_skip(n)) skip();                                                                      \
    struct run_arg a = {.algo = #which, .small = 1};                                               \
    run_and_check(n, sweep_body, &a);                                                              \
  }
SMALL_TEST(test_small_5_ring, 5, ring)
SMALL_TEST(test_small_5_tree, 5, tree)
SMALL_TEST(test_small_6_ring, 6, ring)
SMALL_TEST(test_small_6_tree, 6, tree)
SMALL_TEST(test_small_7_ring, 7, ring)
SMALL_TEST(test_small_7_tree, 7, tree)

#define TYPES_TEST(name, n, which)                                                                 \
  static void name(void **st) {                                                                    \
    (void)st;                                                                                      \
    if (lean_skip(n)) skip();                                                                      \
    struct run_arg a = {.algo = #which, .types = 1};                                               \
    run_and_check(n, sweep_body, &a);                                                              \
  }
TYPES_TEST(test_types_1_ring, 1, ring)
TYPES_TEST(test_types_2_ring, 2, ring)
TYPES_TEST(test_types_2_tree, 2, tree)
TYPES_TEST(test_types_4_ring, 4, ring)
TYPES_TEST(test_types_4_tree, 4, tree)
TYPES_TEST(test_types_8_ring, 8, ring)
TYPES_TEST(test_types_8_tree, 8, tree)
TYPES_TEST(test_types_3_ring, 3, ring)
TYPES_TEST(test_types_3_tree, 3, tree)
TYPES_TEST(test_types_5_ring, 5, ring)
TYPES_TEST(test_types_6_tree, 6, tree)
TYPES_TEST(test_types_7_ring, 7, ring)

/* ---- requests ---- */

#define NB_COUNT 65539 /* fp32 elements per queued allreduce: 256 KiB + 3 elements */

static int requests_body(int rank, int nranks, void *argp) {
  (void)argp;
  HcclComm comm = NULL;
  HcclResult rc = init_comm(NULL, &comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());

  /* 4 allreduces (three in-place, one out-of-place) and a broadcast, waited in reverse. */
  float *bufs[4], *out3 = malloc(NB_COUNT * sizeof(float)), *want = malloc(NB_COUNT * 4);
  int32_t bc[1001];
  HcclRequest req[5] = {0};
  for (int k = 0; k < 4; k++) {
    bufs[k] = malloc(NB_COUNT * sizeof(float));
    cc_fill_input(bufs[k], HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 50 + k, rank, 0, NB_COUNT);
    void *recv = k == 3 ? (void *)out3 : (void *)bufs[k];
    rc =
        HcclAllReduce(bufs[k], recv, NB_COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, &req[k]);
    RANK_CHECK(rc == HCCL_SUCCESS && req[k], "queue allreduce %d: %d %s", k, rc,
               HcclGetLastErrorMessage());
  }
  int root = nranks - 1;
  if (rank == root)
    cc_fill_input(bc, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 60, root, 0, 1001);
  else
    memset(bc, 0, sizeof(bc));
  rc = HcclBroadcast(bc, 1001, HCCL_DATA_TYPE_INT32, (uint32_t)root, comm, &req[4]);
  RANK_CHECK(rc == HCCL_SUCCESS && req[4], "queue broadcast: %d", rc);
  for (int k = 4; k >= 0; k--) {
    rc = HcclRequestWait(req[k]);
    RANK_CHECK(rc == HCCL_SUCCESS, "wait request %d: %d %s", k, rc, HcclGetLastErrorMessage());
  }
  for (int k = 0; k < 4; k++) {
    cc_reduce_expect(want, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 50 + k, nranks, 0, NB_COUNT);
    const float *got = k == 3 ? out3 : bufs[k];
    int64_t i = cc_first_mismatch(got, want, HCCL_DATA_TYPE_FP32, NB_COUNT);
    RANK_CHECK(i < 0, "queued allreduce %d: index %lld expected %g got %g", k, (long long)i,
               want[i < 0 ? 0 : i], got[i < 0 ? 0 : i]);
  }
  int32_t bwant[1001];
  cc_fill_input(bwant, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 60, root, 0, 1001);
  RANK_CHECK(memcmp(bc, bwant, sizeof(bc)) == 0, "queued broadcast: wrong data");

  /* Order: a queued in-place sum on A, then a blocking allgather of A must see the sum. */
  enum { OC = 1025 };
  int32_t a[OC], *g = malloc(sizeof(int32_t) * OC * nranks);
  for (int i = 0; i < OC; i++)
    a[i] = (rank + 1) * (i + 1);
  HcclRequest ra = NULL;
  rc = HcclAllReduce(a, a, OC, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, &ra);
  RANK_CHECK(rc == HCCL_SUCCESS, "queue ordered allreduce: %d", rc);
  rc = HcclAllGather(a, g, OC, HCCL_DATA_TYPE_INT32, comm, NULL);
  RANK_CHECK(rc == HCCL_SUCCESS, "blocking allgather: %d %s", rc, HcclGetLastErrorMessage());
  int done = 0;
  rc = HcclRequestTest(ra, &done);
  RANK_CHECK(rc == HCCL_SUCCESS && done == 1,
             "a blocking call returned before the request queued ahead of it was done "
             "(test rc %d done %d)",
             rc, done);
  RANK_CHECK(HcclRequestWait(ra) == HCCL_SUCCESS, "wait ordered allreduce");
  int32_t tri = nranks * (nranks + 1) / 2;
  for (int r = 0; r < nranks; r++)
    for (int i = 0; i < OC; i++)
      RANK_CHECK(g[r * OC + i] == tri * (i + 1),
                 "allgather after a queued allreduce: block %d index %d expected %d got %d "
                 "(the blocking call overtook the queued one?)",
                 r, i, tri * (i + 1), g[r * OC + i]);

  /* HcclRequestTest eventually reports done; then Wait returns at once with the result. */
  float *p = bufs[0];
  cc_fill_input(p, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, 70, rank, 0, NB_COUNT);
  HcclRequest rt = NULL;
  rc = HcclAllReduce(p, p, NB_COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, comm, &rt);
  RANK_CHECK(rc == HCCL_SUCCESS, "queue polled allreduce: %d", rc);
  double t0 = cc_now();
  int polls = 0;
  done = 0;
  while (!done && cc_now() - t0 < 60) {
    rc = HcclRequestTest(rt, &done);
    RANK_CHECK(rc == HCCL_SUCCESS, "HcclRequestTest: %d %s", rc, HcclGetLastErrorMessage());
    polls++;
    if (!done) usleep(200);
  }
  RANK_CHECK(done, "HcclRequestTest never reported done (%d polls in %.1f s)", polls,
             cc_now() - t0);
  double tw = cc_now();
  RANK_CHECK(HcclRequestWait(rt) == HCCL_SUCCESS, "wait polled allreduce");
  RANK_CHECK(cc_now() - tw < 0.5, "Wait after Test said done took %.3f s", cc_now() - tw);
  cc_reduce_expect(want, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, 70, nranks, 0, NB_COUNT);
  RANK_CHECK(cc_first_mismatch(p, want, HCCL_DATA_TYPE_FP32, NB_COUNT) < 0,
             "polled allreduce: wrong result");

  /* A queued call of count 0 completes at once: Test says done, Wait returns success. */
  HcclRequest rz = NULL;
  rc = HcclAllReduce(p, p, 0, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, &rz);
  RANK_CHECK(rc == HCCL_SUCCESS && rz, "queue count 0: %d", rc);
  done = 0;
  RANK_CHECK(HcclRequestTest(rz, &done) == HCCL_SUCCESS && done == 1, "count 0 not done");
  RANK_CHECK(HcclRequestWait(rz) == HCCL_SUCCESS, "wait count 0");

  for (int k = 0; k < 4; k++)
    free(bufs[k]);
  free(out3);
  free(want);
  free(g);
  rc = HcclCommDestroy(comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "destroy: %d", rc);
  return 0;
}

static void test_requests(void **st) {
  (void)st;
  run_and_check(4, requests_body, NULL);
}

/* ---- NaN and Inf ----
 * Element e of rank r is VAL[e][r], with N = NaN, I = +Inf, M = -Inf. */

#define N_ NAN
#define I_ INFINITY
#define M_ (-INFINITY)
static const float SPECIAL[][4] = {
    {1, N_, 1, 1},    /* NaN on rank 1: sum NaN, max NaN */
    {N_, 5, 7, 1},    /* NaN on rank 0 */
    {1, 2, 3, N_},    /* NaN on the last rank */
    {1, 1, I_, 1},    /* +Inf: sum +Inf, max +Inf */
    {I_, 1, 1, M_},   /* +Inf + -Inf: sum NaN, max +Inf */
    {1, 2, 3, M_},    /* -Inf: sum -Inf, max 3 */
    {M_, M_, M_, M_}, /* all -Inf: sum -Inf, max -Inf */
    {N_, N_, N_, N_}, /* all NaN */
    {I_, 2, N_, 4},   /* NaN beats +Inf in max */
    {0, 1, 2, 3},     /* plain: sum 6, max 3 */
};
#define NSPECIAL (sizeof(SPECIAL) / sizeof(SPECIAL[0]))

static int nan_body(int rank, int nranks, void *argp) {
  const struct run_arg *arg = argp;
  RANK_CHECK(nranks == 4, "the table is for 4 ranks");
  HcclComm comm = NULL;
  HcclResult rc = init_comm(arg->algo, &comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  for (int half = 0; half < 2; half++) {
    HcclDataType dt = half ? HCCL_DATA_TYPE_FP16 : HCCL_DATA_TYPE_FP32;
    for (int op = HCCL_REDUCE_SUM; op <= HCCL_REDUCE_MAX; op += HCCL_REDUCE_MAX) {
      float in[NSPECIAL], out[NSPECIAL], want[NSPECIAL];
      uint16_t hin[NSPECIAL], hout[NSPECIAL];
      for (size_t e = 0; e < NSPECIAL; e++) {
        in[e] = SPECIAL[e][rank];
        hin[e] = cc_float_to_half(in[e]);
        float acc = SPECIAL[e][0];
        for (int r = 1; r < 4; r++) {
          float v = SPECIAL[e][r];
          if (op == HCCL_REDUCE_SUM)
            acc += v;
          else
            acc = (isnan(acc) || isnan(v)) ? NAN : (v > acc ? v : acc);
        }
        want[e] = acc;
      }
      void *send = half ? (void *)hin : (void *)in, *recv = half ? (void *)hout : (void *)out;
      rc = HcclAllReduce(send, recv, NSPECIAL, dt, (HcclReduceOp)op, comm, NULL);
      RANK_CHECK(rc == HCCL_SUCCESS, "allreduce: %d %s", rc, HcclGetLastErrorMessage());
      for (size_t e = 0; e < NSPECIAL; e++) {
        float got = half ? cc_half_to_float(hout[e]) : out[e];
        int ok = isnan(want[e]) ? isnan(got) : got == want[e];
        RANK_CHECK(ok, "algo %s %s %s element %zu: expected %g got %g", arg->algo,
                   cc_dtype_name(dt), cc_op_name((HcclReduceOp)op), e, want[e], got);
      }
    }
  }
  rc = HcclCommDestroy(comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "destroy: %d", rc);
  return 0;
}

ALGO_TEST(test_nan_inf_ring, 4, nan_body, ring)
ALGO_TEST(test_nan_inf_tree, 4, nan_body, tree)

/* ---- determinism ----
 * fp32 sums of values whose sums round: every rank must hold the same bits, and a second run
 * of the same call must give the same bits again. */

#define DET_COUNT 100003

static float det_value(int rank, uint64_t i) {
  uint64_t h = cc_hash(77, rank, i);
  return ldexpf((float)((double)(h >> 40) / (double)(1u << 24) * 2.0 - 1.0), (int)(h % 24) - 12);
}

static int det_body(int rank, int nranks, void *argp) {
  const struct run_arg *arg = argp;
  HcclComm comm = NULL;
  HcclResult rc = init_comm(arg->algo, &comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  const uint64_t counts[2] = {3, DET_COUNT};
  float *in = malloc(DET_COUNT * 4), *r1 = malloc(DET_COUNT * 4), *r2 = malloc(DET_COUNT * 4);
  float *all = malloc((size_t)DET_COUNT * 4 * nranks);
  for (int c = 0; c < 2; c++) {
    uint64_t n = counts[c];
    for (uint64_t i = 0; i < n; i++)
      in[i] = det_value(rank, i);
    rc = HcclAllReduce(in, r1, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    RANK_CHECK(rc == HCCL_SUCCESS, "allreduce: %d %s", rc, HcclGetLastErrorMessage());
    rc = HcclAllReduce(in, r2, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    RANK_CHECK(rc == HCCL_SUCCESS, "allreduce: %d %s", rc, HcclGetLastErrorMessage());
    int64_t bad = cc_first_mismatch(r2, r1, HCCL_DATA_TYPE_FP32, n);
    RANK_CHECK(bad < 0, "algo %s count %llu: two runs differ at %lld: %a vs %a", arg->algo,
               (unsigned long long)n, (long long)bad, r1[bad], r2[bad]);
    /* The sums must also be right (to float accuracy), so agreeing garbage fails. */
    for (uint64_t i = 0; i < n; i++) {
      double exact = 0, mag = 0;
      for (int r = 0; r < nranks; r++) {
        exact += det_value(r, i);
        mag += fabs(det_value(r, i));
      }
      RANK_CHECK(fabs(r1[i] - exact) <= 1e-6 * mag + 1e-30,
                 "algo %s index %llu: sum %.9g, exact %.17g", arg->algo, (unsigned long long)i,
                 r1[i], exact);
    }
    rc = HcclAllGather(r1, all, n, HCCL_DATA_TYPE_FP32, comm, NULL);
    RANK_CHECK(rc == HCCL_SUCCESS, "allgather: %d %s", rc, HcclGetLastErrorMessage());
    for (int r = 0; r < nranks; r++) {
      bad = cc_first_mismatch(all + (size_t)r * n, r1, HCCL_DATA_TYPE_FP32, n);
      RANK_CHECK(bad < 0, "algo %s count %llu: rank %d has %a at %lld, rank %d has %a", arg->algo,
                 (unsigned long long)n, r, all[(size_t)r * n + bad], (long long)bad, rank, r1[bad]);
    }
  }
  free(in);
  free(r1);
  free(r2);
  free(all);
  rc = HcclCommDestroy(comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "destroy: %d", rc);
  return 0;
}

ALGO_TEST(test_determinism_ring, 8, det_body, ring)
ALGO_TEST(test_determinism_tree, 8, det_body, tree)

/* ---- the cost model ---- */

/* argp: the word HcclAllReduceAlgoName should give at 64 B. */
static int auto_body(int rank, int nranks, void *argp) {
  (void)rank;
  const char *word = argp;
  HcclComm comm = NULL;
  HcclResult rc = init_comm(NULL, &comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %d %s", rc, HcclGetLastErrorMessage());
  const char *small = HcclAllReduceAlgoName(comm, 64);
  const char *large = HcclAllReduceAlgoName(comm, 64u << 20);
  RANK_CHECK(small && strcmp(small, word) == 0, "%d ranks, 64 B: picked %s, want %s", nranks,
             small ? small : "(null)", word);
  RANK_CHECK(large && strcmp(large, "ring") == 0, "%d ranks, 64 MiB: picked %s, want ring", nranks,
             large ? large : "(null)");
  /* Both picks must also run: a small and a 4 MiB allreduce, checked. */
  const uint64_t counts[2] = {16, 1u << 20};
  float *buf = malloc(counts[1] * 4), *want = malloc(counts[1] * 4);
  for (int c = 0; c < 2; c++) {
    cc_fill_input(buf, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 90 + c, rank, 0, counts[c]);
    rc = HcclAllReduce(buf, buf, counts[c], HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    RANK_CHECK(rc == HCCL_SUCCESS, "allreduce: %d %s", rc, HcclGetLastErrorMessage());
    cc_reduce_expect(want, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 90 + c, nranks, 0, counts[c]);
    RANK_CHECK(cc_first_mismatch(buf, want, HCCL_DATA_TYPE_FP32, counts[c]) < 0,
               "auto allreduce of %llu floats: wrong result", (unsigned long long)counts[c]);
  }
  free(buf);
  free(want);
  rc = HcclCommDestroy(comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "destroy: %d", rc);
  return 0;
}

/* One-shot where the group is not a power of two, recursive doubling where it is (plan.c). */
static void test_auto_algo(void **st) {
  (void)st;
  run_and_check(8, auto_body, "hd");
  run_and_check(6, auto_body, "oneshot");
}

int main(void) {
  g_shared = mmap(NULL, SHARED_INTS * sizeof(int), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_shared == MAP_FAILED) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sweep_1_ring),     cmocka_unit_test(test_sweep_1_tree),
      cmocka_unit_test(test_sweep_2_ring),     cmocka_unit_test(test_sweep_2_tree),
      cmocka_unit_test(test_sweep_4_ring),     cmocka_unit_test(test_sweep_4_tree),
      cmocka_unit_test(test_sweep_8_ring),     cmocka_unit_test(test_sweep_8_tree),
      cmocka_unit_test(test_types_1_ring),     cmocka_unit_test(test_types_2_ring),
      cmocka_unit_test(test_types_2_tree),     cmocka_unit_test(test_types_4_ring),
      cmocka_unit_test(test_types_4_tree),     cmocka_unit_test(test_types_8_ring),
      cmocka_unit_test(test_types_8_tree),
      cmocka_unit_test(test_sweep_3_ring),     cmocka_unit_test(test_sweep_3_tree),
      cmocka_unit_test(test_types_3_ring),     cmocka_unit_test(test_types_3_tree),
      cmocka_unit_test(test_small_5_ring),     cmocka_unit_test(test_small_5_tree),
      cmocka_unit_test(test_small_6_ring),     cmocka_unit_test(test_small_6_tree),
      cmocka_unit_test(test_small_7_ring),     cmocka_unit_test(test_small_7_tree),
      cmocka_unit_test(test_types_5_ring),     cmocka_unit_test(test_types_6_tree),
      cmocka_unit_test(test_types_7_ring),
      cmocka_unit_test(test_requests),         cmocka_unit_test(test_nan_inf_ring),
      cmocka_unit_test(test_nan_inf_tree),     cmocka_unit_test(test_determinism_ring),
      cmocka_unit_test(test_determinism_tree), cmocka_unit_test(test_auto_algo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
