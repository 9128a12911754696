/*
 * test_staged.c - the allreduces of ordinary buffers on one server through areas every member
 * maps, the staged one (algo/staged.c) and the one-shot one (algo/oneshot.c), on real processes
 * through the public calls. (The staged two-level form is tests/algo/test_hier.c's.)
 *
 *   sweep      4, 6 and 8 ranks, every dtype x op; counts of exactly the threshold (64 KiB), just
 *              under it (the ring must run) and odd ones of many rounds (HCCL_BUFFSIZE=1: 4 KiB
 *              slots) with blocks of unequal length; in place and out of place. Every element
 *              against a reference that never calls the library; guards and an out-of-place
 *              input untouched; staged ran exactly when it should (the communicator's record).
 *              The calls follow each other with different round counts, so each starts at the
 *              part of the staging area where the last one stopped.
 *   default    the default HCCL_BUFFSIZE (128 KiB slots, rounds of up to 1 MiB), 4 Mi + 3
 *              floats, several rounds.
 *   order      with inexact floats, the staged allreduce gives the ring's bits (the same
 *              calls on a communicator with HCCL_ALGO=ring, which never runs staged).
 *   two ranks  2 ranks never run staged (the ring's one hop each way is as cheap).
 *   shared     HcclMemAlloc buffers on every rank run zero-copy, not staged.
 *   dead peer  a rank that exits instead of calling makes the others fail, naming it, in time
 *              (after a staged call at 4 ranks, and after a one-shot one at 6).
 * One-shot:
 *   default    the sweep's 6 ranks run one-shot at 4 KiB and up to a round (16 KiB) and not
 *              one element above; 4 and 8 ranks (powers of two: recursive doubling) and 2
 *              never.
 *   forced     HCCL_ALGO=oneshot at 2, 4 and 8 ranks: every dtype x op the library reduces at
 *              0, 1, 7, one round's elements less one, one round, and three rounds with a
 *              tail; in place and out of place; then 300 calls in a row of alternating round
 *              counts, each checked (the slots' parity), and inexact floats whose results must
 *              have the same bits on every rank (a max and a min allreduce of them equal them).
 * Every rank must have released its staging area and its peers' after destroy (harness.c).
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
#include "comm.h"
#include "harness.h"
#include "hccl.h"

#define TIMEOUT_S 300

static const HcclDataType DT[] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_FP16,
                                  HCCL_DATA_TYPE_FP32};
static const HcclReduceOp OP[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                  HCCL_REDUCE_MIN};

static HcclResult init_comm(const char *algo, const char *buffsize, HcclComm *comm) {
  if (algo)
    setenv("HCCL_ALGO", algo, 1);
  else
    unsetenv("HCCL_ALGO");
  if (buffsize)
    setenv("HCCL_BUFFSIZE", buffsize, 1);
  else
    unsetenv("HCCL_BUFFSIZE");
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  unsetenv("DEVICE_ID");
  return HcclCommInitFromEnv(comm);
}

static int ran_staged(HcclComm comm) {
  return comm->staged_ran == comm->coll_seq + 1;
}

/* Which path the last call ran: RAN_STAGED, RAN_ONESHOT, or 0 (neither). */
#define RAN_STAGED 1
#define RAN_ONESHOT 2
static int ran_path(HcclComm comm) {
  return ran_staged(comm) ? RAN_STAGED : comm->oneshot_ran == comm->coll_seq + 1 ? RAN_ONESHOT : 0;
}
static const char *path_name(int path) {
  return path == RAN_STAGED ? "staged" : path == RAN_ONESHOT ? "one-shot" : "neither";
}

/* The one-shot round, in elements of es bytes (algo/algo.h). */
#define ROUND_BYTES (16u << 10)

/* One allreduce of count elements on malloc buffers, checked; want_staged: which path
 * (ran_path) must have run, or -1: unchecked (a call of count 0 runs none, and leaves the
 * record of the one before). */
static int check_call(HcclComm comm, int rank, int n, HcclDataType dt, HcclReduceOp op,
                      uint64_t count, int inplace, uint32_t salt, int want_staged) {
  size_t es = cc_dtype_size(dt), bytes = count * es;
  void *want = malloc(bytes), *in = malloc(bytes);
  RANK_CHECK(want && in, "no memory");
  cc_reduce_expect(want, dt, op, salt, n, 0, count);
  cc_fill_input(in, dt, op, salt, rank, 0, count);
  cc_buf sb, rb = {0};
  cc_buf_alloc(&sb, bytes);
  memcpy(sb.p, in, bytes);
  if (!inplace) cc_buf_alloc(&rb, bytes);
  void *out = inplace ? sb.p : rb.p;
  HcclResult r = HcclAllReduce(sb.p, out, count, dt, op, comm, NULL);
  RANK_CHECK(r == HCCL_SUCCESS, "%s %s count %llu: %s", cc_dtype_name(dt), cc_op_name(op),
             (unsigned long long)count, HcclGetLastErrorMessage());
  RANK_CHECK(want_staged < 0 || ran_path(comm) == want_staged, "%d ranks, %s %s, count %llu: %s ran, want %s", n,
             cc_dtype_name(dt), cc_op_name(op), (unsigned long long)count,
             path_name(ran_path(comm)), path_name(want_staged));
  int64_t bad = cc_first_mismatch(out, want, dt, count);
  if (bad >= 0) {
    char x[64], y[64];
    fprintf(stderr, "rank %d: %d ranks, %s %s, count %llu, %s: element %lld is %s, want %s\n",
            rank, n, cc_dtype_name(dt), cc_op_name(op), (unsigned long long)count,
            inplace ? "in place" : "out of place", (long long)bad,
            cc_elem_str(dt, out, (uint64_t)bad, x, sizeof(x)),
            cc_elem_str(dt, want, (uint64_t)bad, y, sizeof(y)));
    return 1;
  }
  if (!inplace) RANK_CHECK(memcmp(sb.p, in, bytes) == 0, "the input changed");
  RANK_CHECK(cc_buf_guard_damage(&sb) == 0, "send guard damaged");
  if (!inplace) RANK_CHECK(cc_buf_guard_damage(&rb) == 0, "recv guard damaged");
  cc_buf_free(&sb);
  if (!inplace) cc_buf_free(&rb);
  free(want);
  free(in);
  return 0;
}

/* ---- the sweep ---- */

static int sweep_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, "1", &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  uint32_t salt = 0;
  int checks = 0;
  for (size_t di = 0; di < 4; di++)
    for (size_t oi = 0; oi < 4; oi++) {
      size_t es = cc_dtype_size(DT[di]);
      /* 64 KiB exactly; 1 element under; many 4 KiB rounds with an odd tail (blocks of
       * unequal length); one round and a bit; one-shot's 4 KiB, half a round and a round (its
       * limit where the group is not a power of two), one over each. */
      uint64_t counts[] = {65536 / es,
                           65536 / es - 1,
                           5 * 4096 / es * (uint64_t)n + n + 3,
                           (4096 + 64) / es * (uint64_t)n + 1,
                           4096 / es,
                           ROUND_BYTES / 2 / es,
                           ROUND_BYTES / 2 / es + 1,
                           ROUND_BYTES / es,
                           ROUND_BYTES / es + 1};
      size_t limit = (n & (n - 1)) != 0 ? ROUND_BYTES : 0; /* plan.c's one-shot rule */
      for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (int inplace = 0; inplace < 2; inplace++) {
          int want = counts[ci] * es >= 65536          ? RAN_STAGED
                     : counts[ci] * es <= limit       ? RAN_ONESHOT
                                                       : 0;
          if (check_call(comm, rank, n, DT[di], OP[oi], counts[ci], inplace, ++salt, want))
            return 1;
          checks++;
        }
    }
  printf("rank %d of %d: %d allreduces checked\n", rank, n, checks);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_sweep(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(4, TIMEOUT_S, sweep_rank, NULL), 0);
  assert_int_equal(harness_run_ranks(6, TIMEOUT_S, sweep_rank, NULL), 0);
  assert_int_equal(harness_run_ranks(8, TIMEOUT_S, sweep_rank, NULL), 0);
}

/* ---- the default slots; two ranks ---- */

struct fixed_arg {
  uint64_t count; /* floats, summed in place and out of place, default HCCL_BUFFSIZE */
  int staged;     /* which path must run (ran_path) */
  uint64_t count2; /* then these, which must run neither path (0: none) */
};

static int fixed_rank(int rank, int n, void *arg) {
  const struct fixed_arg *a = arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  for (int inplace = 0; inplace < 2; inplace++)
    if (check_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, a->count, inplace,
                   7 + (uint32_t)inplace, a->staged) ||
        (a->count2 && check_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, a->count2,
                                 inplace, 9 + (uint32_t)inplace, 0)))
      return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_default_slots(void **state) {
  (void)state;
  struct fixed_arg a = {(4u << 20) + 3, RAN_STAGED, 0};
  assert_int_equal(harness_run_ranks(8, TIMEOUT_S, fixed_rank, &a), 0);
}

static void test_two_ranks(void **state) {
  (void)state;
  struct fixed_arg a = {1u << 20, 0, 1024}; /* and 4 KiB: not one-shot either */
  assert_int_equal(harness_run_ranks(2, TIMEOUT_S, fixed_rank, &a), 0);
}

/* ---- the ring's bits ---- */

/* Floats whose sums and products round differently in different orders. */
static void fill_inexact(void *p, HcclDataType dt, uint32_t salt, int rank, size_t count) {
  for (size_t i = 0; i < count; i++) {
    uint64_t h = cc_hash(salt, rank, i);
    float f = (float)((int64_t)(h % 2000001) - 1000000) * 1.337e-4f + (float)(h >> 40) * 1e-9f;
    if (dt == HCCL_DATA_TYPE_FP32)
      ((float *)p)[i] = f;
    else
      ((uint16_t *)p)[i] = cc_float_to_half(f * 1e-2f);
  }
}

struct order_arg {
  char port2[16]; /* MASTER_PORT of the HCCL_ALGO=ring communicator */
};

static int order_rank(int rank, int n, void *arg) {
  const struct order_arg *a = arg;
  HcclComm st_comm, ring_comm;
  RANK_CHECK(init_comm(NULL, "1", &st_comm) == HCCL_SUCCESS, "init: %s",
             HcclGetLastErrorMessage());
  setenv("MASTER_PORT", a->port2, 1);
  RANK_CHECK(init_comm("ring", "1", &ring_comm) == HCCL_SUCCESS, "init: %s",
             HcclGetLastErrorMessage());
  static const HcclDataType fdt[2] = {HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32};
  int failures = 0;
  for (int d = 0; d < 2; d++)
    for (int o = 0; o < 4; o++) {
      /* float16 sum and product over 3+ ranks are accumulated in float32 by the one reader of
       * each block and rounded once, where the ring rounds at every hop: not the ring's bits
       * (tests/core/test_dtypes.c holds both to their bounds against float64). */
      if (fdt[d] == HCCL_DATA_TYPE_FP16 && o < 2 && n > 2) continue;
      size_t cnt = 262147, es = cc_dtype_size(fdt[d]);
      unsigned char *send = malloc(cnt * es), *got = malloc(cnt * es), *ring = malloc(cnt * es);
      RANK_CHECK(send && got && ring, "no memory");
      fill_inexact(send, fdt[d], 40 + (uint32_t)o, rank, cnt);
      HcclComm cs[2] = {st_comm, ring_comm};
      unsigned char *outs[2] = {got, ring};
      for (int k = 0; k < 2; k++) {
        HcclResult r = HcclAllReduce(send, outs[k], cnt, fdt[d], OP[o], cs[k], NULL);
        RANK_CHECK(r == HCCL_SUCCESS, "allreduce: %s", HcclGetLastErrorMessage());
        RANK_CHECK(ran_staged(cs[k]) == !k, "%s %s: staged %s on the %s communicator",
                   cc_dtype_name(fdt[d]), cc_op_name(OP[o]), k ? "ran" : "did not run",
                   k ? "HCCL_ALGO=ring" : "default");
      }
      for (size_t e = 0; e < cnt; e++)
        if (memcmp(got + e * es, ring + e * es, es) != 0) {
          char x[64], y[64];
          fprintf(stderr, "rank %d: %s %s: element %zu is %s staged but %s in the ring\n", rank,
                  cc_dtype_name(fdt[d]), cc_op_name(OP[o]), e,
                  cc_elem_str(fdt[d], got, e, x, sizeof(x)),
                  cc_elem_str(fdt[d], ring, e, y, sizeof(y)));
          failures++;
          break;
        }
      free(send);
      free(got);
      free(ring);
    }
  RANK_CHECK(HcclCommDestroy(st_comm) == HCCL_SUCCESS, "destroy");
  RANK_CHECK(HcclCommDestroy(ring_comm) == HCCL_SUCCESS, "destroy");
  RANK_CHECK(failures == 0, "rank %d: %d results differ from the ring's", rank, failures);
  return 0;
}

static void test_ring_order(void **state) {
  (void)state;
  struct order_arg a;
  snprintf(a.port2, sizeof(a.port2), "%u", (unsigned)harness_free_port());
  assert_int_equal(harness_run_ranks(8, TIMEOUT_S, order_rank, &a), 0);
}

/* ---- where zero-copy runs instead ---- */

static int shared_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  size_t count = 1u << 18;
  float *b;
  RANK_CHECK(HcclMemAlloc((void **)&b, count * 4) == HCCL_SUCCESS, "alloc");
  for (size_t i = 0; i < count; i++)
    b[i] = (float)(rank + 1);
  RANK_CHECK(HcclAllReduce(b, b, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL) ==
                 HCCL_SUCCESS,
             "allreduce: %s", HcclGetLastErrorMessage());
  RANK_CHECK(!ran_staged(comm) && comm->zcopy_ran == comm->coll_seq + 1,
             "HcclMemAlloc buffers: staged %d, zero-copy %d", ran_staged(comm),
             comm->zcopy_ran == comm->coll_seq + 1);
  float want = (float)(n * (n + 1) / 2);
  for (size_t i = 0; i < count; i++)
    RANK_CHECK(b[i] == want, "element %zu is %g, want %g", i, (double)b[i], (double)want);
  HcclMemFree(b);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_shared_buffers(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(4, TIMEOUT_S, shared_rank, NULL), 0);
}

/* ---- a peer that leaves ---- */

/* arg: the path (ran_path) of the first call and of the one rank 2 leaves. */
static int dead_rank(int rank, int n, void *arg) {
  int path = *(const int *)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  /* One good call first, so the peers have mapped rank 2's area. */
  uint64_t first = path == RAN_STAGED ? 1u << 20 : 1024;
  RANK_CHECK(check_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, first, 1, 5, path) ==
                 0,
             "first call wrong");
  if (rank == 2) _exit(0);
  size_t count = path == RAN_STAGED ? 4u << 20 : 1024;
  float *b = calloc(count, sizeof(float));
  RANK_CHECK(b, "no memory");
  RANK_CHECK(cc_allreduce_without(comm, b, count, rank, 2, 30) == 0, "rank 2 left");
  free(b);
  HcclCommDestroy(comm);
  return 0;
}

static void test_dead_peer(void **state) {
  (void)state;
  int staged = RAN_STAGED, oneshot = RAN_ONESHOT;
  assert_int_equal(harness_run_ranks(4, TIMEOUT_S, dead_rank, &staged), 0);
  assert_int_equal(harness_run_ranks(6, TIMEOUT_S, dead_rank, &oneshot), 0);
}

/* ---- one-shot, forced ---- */

/* Every rank has the same bits in out (count floats of type dt, no NaN): the max and the min
 * over the ranks of them are them. */
static int same_everywhere(HcclComm comm, int rank, HcclDataType dt, void *out,
                           size_t count) {
  size_t bytes = count * cc_dtype_size(dt);
  void *hi = malloc(bytes), *lo = malloc(bytes);
  RANK_CHECK(hi && lo, "no memory");
  RANK_CHECK(HcclAllReduce(out, hi, count, dt, HCCL_REDUCE_MAX, comm, NULL) == HCCL_SUCCESS &&
                 HcclAllReduce(out, lo, count, dt, HCCL_REDUCE_MIN, comm, NULL) == HCCL_SUCCESS,
             "max/min: %s", HcclGetLastErrorMessage());
  RANK_CHECK(memcmp(hi, out, bytes) == 0 && memcmp(lo, out, bytes) == 0,
             "rank %d: %s sum differs between ranks", rank, cc_dtype_name(dt));
  free(hi);
  free(lo);
  return 0;
}

static int oneshot_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm("oneshot", NULL, &comm) == HCCL_SUCCESS, "init: %s",
             HcclGetLastErrorMessage());
  const char *a = HcclAllReduceAlgoName(comm, 64), *b = HcclAllReduceAlgoName(comm, 64u << 20);
  RANK_CHECK(strcmp(a, "oneshot") == 0 && strcmp(b, "oneshot") == 0,
             "HCCL_ALGO=oneshot but the names are %s and %s", a, b);
  uint32_t salt = 100;
  int checks = 0;
  for (int d = 0; d < (int)HCCL_DATA_TYPE_RESERVED; d++)
    for (int op = 0; op < (int)HCCL_REDUCE_RESERVED; op++) {
      HcclDataType dt = (HcclDataType)d;
      if (!cc_reduces(dt, (HcclReduceOp)op)) continue;
      size_t es = cc_dtype_size(dt);
      uint64_t counts[] = {0, 1, 7, ROUND_BYTES / es - 1, ROUND_BYTES / es,
                           3 * ROUND_BYTES / es - 5};
      for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (int inplace = 0; inplace < 2; inplace++, checks++)
          if (check_call(comm, rank, n, dt, (HcclReduceOp)op, counts[ci], inplace, ++salt,
                         counts[ci] ? RAN_ONESHOT : -1))
            return 1;
    }
  /* Many in a row: one, two and three rounds in turn, so a slot's parity moves every way. */
  for (int k = 0; k < 300; k++, checks++) {
    uint64_t count = (uint64_t)(k % 3 + 1) * ROUND_BYTES / 4 - (uint64_t)k % 7;
    if (check_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, count, k & 1, ++salt,
                   RAN_ONESHOT))
      return 1;
  }
  static const HcclDataType fdt[3] = {HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16,
                                      HCCL_DATA_TYPE_FP32};
  for (int d = 0; d < 3; d++) {
    size_t cnt = 3001, es = cc_dtype_size(fdt[d]);
    unsigned char *in = malloc(cnt * es), *out = malloc(cnt * es);
    RANK_CHECK(in && out, "no memory");
    if (fdt[d] == HCCL_DATA_TYPE_BFP16) {
      float *f = malloc(cnt * 4);
      RANK_CHECK(f, "no memory");
      fill_inexact(f, HCCL_DATA_TYPE_FP32, 60, rank, cnt);
      for (size_t i = 0; i < cnt; i++)
        ((uint16_t *)in)[i] = cc_float_to_bf16(f[i]);
      free(f);
    } else {
      fill_inexact(in, fdt[d], 60, rank, cnt);
    }
    RANK_CHECK(HcclAllReduce(in, out, cnt, fdt[d], HCCL_REDUCE_SUM, comm, NULL) == HCCL_SUCCESS,
               "allreduce: %s", HcclGetLastErrorMessage());
    if (same_everywhere(comm, rank, fdt[d], out, cnt)) return 1;
    free(in);
    free(out);
  }
  if (rank == 0) printf("%d ranks, HCCL_ALGO=oneshot: %d allreduces checked\n", n, checks);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_oneshot_forced(void **state) {
  (void)state;
  for (int n = 2; n <= 8; n *= 2)
    assert_int_equal(harness_run_ranks(n, TIMEOUT_S, oneshot_rank, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sweep),       cmocka_unit_test(test_default_slots),
      cmocka_unit_test(test_ring_order),  cmocka_unit_test(test_two_ranks),
      cmocka_unit_test(test_shared_buffers), cmocka_unit_test(test_dead_peer),
      cmocka_unit_test(test_oneshot_forced),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
