/*
 * test_staged.c - the staged allreduce (algo/staged.c) of ordinary buffers on one server, on
 * real processes through the public calls. (Its two-level form is tests/algo/test_hier.c's.)
 *
 *   sweep      4 and 8 ranks, every dtype x op; counts of exactly the threshold (64 KiB), just
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
 *   dead peer  a rank that exits instead of calling makes the others fail, naming it, in time.
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

/* One allreduce of count elements on malloc buffers, checked; want_staged: whether it must
 * have run staged. */
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
  RANK_CHECK(ran_staged(comm) == want_staged, "%d ranks, %s %s, count %llu: staged %s", n,
             cc_dtype_name(dt), cc_op_name(op), (unsigned long long)count,
             want_staged ? "did not run" : "ran");
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
       * unequal length); one round and a bit. */
      uint64_t counts[] = {65536 / es, 65536 / es - 1, 5 * 4096 / es * (uint64_t)n + n + 3,
                           (4096 + 64) / es * (uint64_t)n + 1};
      for (size_t ci = 0; ci < 4; ci++)
        for (int inplace = 0; inplace < 2; inplace++) {
          int want = counts[ci] * es >= 65536;
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
  assert_int_equal(harness_run_ranks(8, TIMEOUT_S, sweep_rank, NULL), 0);
}

/* ---- the default slots; two ranks ---- */

struct fixed_arg {
  uint64_t count; /* floats, summed in place and out of place, default HCCL_BUFFSIZE */
  int staged;     /* whether it must run staged */
};

static int fixed_rank(int rank, int n, void *arg) {
  const struct fixed_arg *a = arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  for (int inplace = 0; inplace < 2; inplace++)
    if (check_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, a->count, inplace,
                   7 + (uint32_t)inplace, a->staged))
      return 1;
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_default_slots(void **state) {
  (void)state;
  struct fixed_arg a = {(4u << 20) + 3, 1};
  assert_int_equal(harness_run_ranks(8, TIMEOUT_S, fixed_rank, &a), 0);
}

static void test_two_ranks(void **state) {
  (void)state;
  struct fixed_arg a = {1u << 20, 0};
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

static int dead_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  /* One good call first, so the peers have mapped rank 2's staging area. */
  RANK_CHECK(check_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1u << 20, 1, 5, 1) ==
                 0,
             "first call wrong");
  if (rank == 2) _exit(0);
  size_t count = 4u << 20;
  float *b = calloc(count, sizeof(float));
  RANK_CHECK(b, "no memory");
  RANK_CHECK(cc_allreduce_without(comm, b, count, rank, 2, 30) == 0, "rank 2 left");
  free(b);
  HcclCommDestroy(comm);
  return 0;
}

static void test_dead_peer(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(4, TIMEOUT_S, dead_rank, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sweep),       cmocka_unit_test(test_default_slots),
      cmocka_unit_test(test_ring_order),  cmocka_unit_test(test_two_ranks),
      cmocka_unit_test(test_shared_buffers), cmocka_unit_test(test_dead_peer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
