/*
 * test_dtypes.c - the precision contract of reductions (algo/reduce.h, docs/design.md
 * "Precision"), on every path a large allreduce and reduce-scatter can take inside a server,
 * with inputs whose sums are NOT exact in the type: random values in [-1, 1).
 *
 * For float16, bfloat16, float32 and float64 sums (and AVG), at 2, 4 and 8 ranks, on four
 * communicators (the ring, halving-doubling, the zero-copy path on HcclMemAlloc buffers, the
 * staged path on malloc buffers), every element must lie within the bound of its path of the
 * exact sum (computed in long double from every rank's input), with S = the sum and A = the
 * sum of the magnitudes, u the type's unit roundoff (2^-11, 2^-8, 2^-24, 2^-53):
 *   one reader (zero-copy, staged; float16/bfloat16 accumulated in float32, rounded once):
 *       |err| <= u |S| + (n - 1) 2^-24 A          (float32, float64: (n - 1) u A)
 *   hops (ring, halving-doubling; every hop rounds to the type):
 *       |err| <= (n - 1) u A
 * plus a term for subnormal spacing, and for AVG one more rounding. The one-reader bound for
 * the 16-bit types is the stricter one, and the test also checks that the zero-copy path's
 * largest error is below the ring's (it is about (n-1) times smaller at 8 ranks).
 * On every path every rank must end with bitwise the same result (the ranks compare hashes
 * of their outputs through an allgather), and calling again on the same inputs must give the
 * same bits.
 */
#include <math.h>
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

#define TIMEOUT_S 240
#define COUNT 100003u /* 200 KB of float16: above the zero-copy and staged thresholds */

enum path { RING, HD, ZCOPY, STAGED, NPATHS };
static const char *const PATH_NAME[NPATHS] = {"ring", "halving-doubling", "zero-copy", "staged"};

struct arg {
  char ports[NPATHS][16]; /* MASTER_PORT of each path's communicator */
};

static HcclResult init_comm(enum path p, const char *port, HcclComm *comm) {
  if (p == RING)
    setenv("HCCL_ALGO", "ring", 1);
  else if (p == HD)
    setenv("HCCL_ALGO", "tree", 1);
  else
    unsetenv("HCCL_ALGO");
  setenv("MASTER_PORT", port, 1);
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  unsetenv("DEVICE_ID");
  return HcclCommInitFromEnv(comm);
}

/* Input of rank r, element i: a value in [-1, 1) exact in every type (a multiple of 2^-8
 * with 8 significant bits, so it is exact in bfloat16), sums of which are not. */
static double input(int r, uint64_t i, uint32_t salt) {
  uint64_t h = cc_hash(salt, r, i);
  int e = (int)(h % 24);                                   /* magnitudes from 2^-24 to 1 */
  double m = (double)((int64_t)((h >> 8) & 0xff) - 128) / 128.0; /* [-1, 1) in 2^-7 steps */
  return ldexp(m, -e);
}

static void fill(void *p, HcclDataType dt, int r, uint64_t first, uint64_t n, uint32_t salt) {
  for (uint64_t j = 0; j < n; j++)
    cc_store(p, dt, j, input(r, first + j, salt), 0);
}

static double value(HcclDataType dt, const void *p, uint64_t i) {
  switch (dt) {
  case HCCL_DATA_TYPE_FP16:
    return cc_half_to_float(((const uint16_t *)p)[i]);
  case HCCL_DATA_TYPE_BFP16:
    return cc_bf16_to_float(((const uint16_t *)p)[i]);
  case HCCL_DATA_TYPE_FP32:
    return ((const float *)p)[i];
  default:
    return ((const double *)p)[i];
  }
}

/* unit roundoff, and the spacing of the smallest subnormals */
static double unit(HcclDataType dt) {
  return dt == HCCL_DATA_TYPE_FP16 ? 0x1p-11 : dt == HCCL_DATA_TYPE_BFP16 ? 0x1p-8
                                   : dt == HCCL_DATA_TYPE_FP32                ? 0x1p-24
                                                                              : 0x1p-53;
}
static double tiny(HcclDataType dt) {
  return dt == HCCL_DATA_TYPE_FP16 ? 0x1p-24 : dt == HCCL_DATA_TYPE_BFP16 ? 0x1p-133
                                   : dt == HCCL_DATA_TYPE_FP32                ? 0x1p-149
                                                                              : 0x1p-1074;
}

/* The bound of one element (see the top): S the exact result, A the sum of magnitudes. */
static double bound(enum path p, HcclDataType dt, int n, int avg, double S, double A) {
  double u = unit(dt), b;
  int half = dt == HCCL_DATA_TYPE_FP16 || dt == HCCL_DATA_TYPE_BFP16;
  if ((p == ZCOPY || p == STAGED) && half)
    b = u * fabs(S) + (n - 1) * 0x1p-24 * A;
  else
    b = (n - 1) * u * A + (n == 2 ? 0 : u * fabs(S));
  if (avg) b = b / n + 2 * u * fabs(S); /* the division's rounding (float32, then the type) */
  return b + (n + 1) * tiny(dt);
}

static uint64_t hash_bytes(const void *p, size_t n) {
  const unsigned char *c = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t k = 0; k < n; k++)
    h = (h ^ c[k]) * 1099511628211ull;
  return h;
}

/* One call on path p: allreduce (rs = 0) or reduce-scatter (rs = 1) of dt, sum or avg.
 * Returns the number of failures; *worst gets the largest |err| / A seen. */
static int check(HcclComm comm, enum path p, int rank, int n, HcclDataType dt, int avg, int rs,
                 uint32_t salt, double *worst) {
  size_t es = cc_dtype_size(dt);
  uint64_t cnt = rs ? COUNT / (uint64_t)n : COUNT, total = rs ? cnt * (uint64_t)n : cnt;
  uint64_t first = rs ? (uint64_t)rank * cnt : 0;
  void *send, *recv;
  if (p == ZCOPY) {
    if (HcclMemAlloc(&send, total * es) != HCCL_SUCCESS || HcclMemAlloc(&recv, cnt * es) != HCCL_SUCCESS)
      return 1;
  } else {
    send = malloc(total * es);
    recv = malloc(cnt * es);
  }
  HcclReduceOp op = avg ? HCCL_REDUCE_AVG : HCCL_REDUCE_SUM;
  fill(send, dt, rank, 0, total, salt);
  int bad = 0;
  uint64_t h[2];
  for (int again = 0; again < 2; again++) {
    HcclResult r = rs ? HcclReduceScatter(send, recv, cnt, dt, op, comm, NULL)
                      : HcclAllReduce(send, recv, cnt, dt, op, comm, NULL);
    if (r != HCCL_SUCCESS) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, PATH_NAME[p], HcclGetLastErrorMessage());
      return 1;
    }
    h[again] = hash_bytes(recv, cnt * es);
  }
  int ran_z = comm->zcopy_ran == comm->coll_seq + 1, ran_s = comm->staged_ran == comm->coll_seq + 1;
  if ((p == ZCOPY) != ran_z || (p == STAGED && !rs) != ran_s) {
    fprintf(stderr, "rank %d: %s path expected, zero-copy ran %d, staged ran %d\n", rank,
            PATH_NAME[p], ran_z, ran_s);
    bad++;
  }
  if (h[0] != h[1]) {
    fprintf(stderr, "rank %d: %s %s: a second call gave other bits\n", rank, PATH_NAME[p],
            cc_dtype_name(dt));
    bad++;
  }
  /* every rank's result alike: an allreduce's whole output (a reduce-scatter's blocks are
   * each one rank's, so there the bound alone speaks) */
  if (!rs) {
    uint64_t *all = malloc((size_t)n * 8);
    if (HcclAllGather(&h[0], all, 1, HCCL_DATA_TYPE_UINT64, comm, NULL) != HCCL_SUCCESS) bad++;
    for (int k = 0; k < n; k++)
      if (all[k] != h[0]) {
        fprintf(stderr, "rank %d: %s %s: rank %d's result differs in its bits\n", rank,
                PATH_NAME[p], cc_dtype_name(dt), k);
        bad++;
        break;
      }
    free(all);
  }
  for (uint64_t j = 0; j < cnt; j++) {
    long double S = 0, A = 0;
    for (int k = 0; k < n; k++) {
      double x = input(k, first + j, salt);
      S += x;
      A += fabs(x);
    }
    if (avg) {
      S /= n;
      A /= n;
    }
    double got = value(dt, recv, j), err = fabs(got - (double)S);
    /* a reduce-scatter of malloc buffers runs the ring (staged is an allreduce's) */
    enum path eff = p == STAGED && rs ? RING : p;
    double b = bound(eff, dt, n, avg, (double)S, (double)A * (avg ? n : 1));
    /* the comparison of paths on normal magnitudes (subnormal spacing swamps tiny sums) */
    if (eff == p && A > 1e-3L && err / (double)A > *worst) *worst = err / (double)A;
    if (!(err <= b) && bad++ < 3)
      fprintf(stderr, "rank %d: %s %s %s n=%d element %llu: got %.9g, exact %.9Lg, error %.3g > "
                      "bound %.3g\n",
              rank, PATH_NAME[p], cc_dtype_name(dt), avg ? "avg" : "sum", n,
              (unsigned long long)(first + j), got, S, err, b);
  }
  if (p == ZCOPY) {
    HcclMemFree(send);
    HcclMemFree(recv);
  } else {
    free(send);
    free(recv);
  }
  return bad;
}

static const HcclDataType DT[] = {HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_FP32,
                                  HCCL_DATA_TYPE_FP64};

static int bounds_rank(int rank, int n, void *argp) {
  const struct arg *a = argp;
  int bad = 0;
  double worst[NPATHS][4] = {{0}};
  for (int p = 0; p < NPATHS; p++) {
    if (p == STAGED && n < 4) continue; /* staged runs on 4+ ranks of a server */
    HcclComm comm;
    RANK_CHECK(init_comm((enum path)p, a->ports[p], &comm) == HCCL_SUCCESS, "init: %s",
               HcclGetLastErrorMessage());
    for (int d = 0; d < 4; d++)
      for (int avg = 0; avg < 2; avg++)
        for (int rs = 0; rs < 2; rs++)
          bad += check(comm, (enum path)p, rank, n, DT[d], avg, rs, 10u + (uint32_t)(d * 4 + avg * 2 + rs),
                       &worst[p][d]);
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  }
  if (rank == 0)
    for (int d = 0; d < 2; d++)
      printf("n=%d %s: largest |err|/A: ring %.3g, halving-doubling %.3g, zero-copy %.3g, "
             "staged %.3g\n",
             n, cc_dtype_name(DT[d]), worst[RING][d], worst[HD][d], worst[ZCOPY][d],
             worst[STAGED][d]);
  /* one reader rounds once: at 4 and 8 ranks its largest error is below the ring's */
  for (int d = 0; d < 2 && n >= 4; d++)
    RANK_CHECK(worst[ZCOPY][d] < worst[RING][d] && worst[STAGED][d] < worst[RING][d],
               "%s: the one-reader paths' error (%.3g, %.3g) is not below the ring's (%.3g)",
               cc_dtype_name(DT[d]), worst[ZCOPY][d], worst[STAGED][d], worst[RING][d]);
  RANK_CHECK(bad == 0, "%d elements or checks out of their bounds", bad);
  return 0;
}

static void run(int n) {
  struct arg a;
  for (int p = 0; p < NPATHS; p++)
    snprintf(a.ports[p], sizeof(a.ports[p]), "%u", (unsigned)harness_free_port());
  assert_int_equal(harness_run_ranks(n, TIMEOUT_S, bounds_rank, &a), 0);
}

static void test_bounds_2(void **state) {
  (void)state;
  run(2);
}
static void test_bounds_4(void **state) {
  (void)state;
  run(4);
}
static void test_bounds_8(void **state) {
  (void)state;
  run(8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bounds_2),
      cmocka_unit_test(test_bounds_4),
      cmocka_unit_test(test_bounds_8),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
