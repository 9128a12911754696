/*
 * test_perf_data.c - tests for the benchmarks' checking data (perf/perf_data.c): that the
 * expected result of every (type, op) is what a reduction gives in any order, computed step by
 * step in the type itself, and that the data make the check meaningful.
 *
 * For p ranks (1 to 32, odd counts included), every rank's tables are built as the benchmark
 * builds them, and the inputs of all ranks are reduced in several orders: left to right, right
 * to left, a ring from every start (from 4 of them above 8 ranks), pairs of neighbours then
 * pairs of pairs, the recursive halving's strided pairs, and random trees over random
 * permutations (subsets that are not arithmetic progressions, which the data's bounds must
 * survive too). Each step rounds to the
 * type as a reduction kernel does: integers wrap, float16 and bfloat16 are computed in float32
 * and rounded once, float in float, double in double; avg is the sum in that order, then the
 * division (integers: C's truncating one in the type; floating types: the quotient of the
 * type's sum and p in float32 for the 16-bit types, rounded once, which is the correctly
 * rounded quotient: an independent route from the tables' double one). Every order must give
 * the tables' expected bits on every element, and every rank must expect the same. Where the
 * library has a kernel for (type, op) (hccl__reduce_kernel), the same orders run through it too.
 *
 * Meaningful: no value ever has the sentinel's bytes; max and min inputs differ between
 * ranks; avg rounds: a signed type has elements where the sum is negative and not a multiple
 * of p (floor would differ), a floating type elements whose average is not an integer; an
 * unsigned product is never 0. The float16/bfloat16 conversions are checked on a table of bits.
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

#include "hccl.h"
#include "hccl_types.h"
#include "perf_common.h"
#include "perf_data.h"
#include "reduce.h"

static const int k_ranks[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32};


static int is_signed(perf_type t) {
  return t == PERF_INT8 || t == PERF_INT16 || t == PERF_INT32 || t == PERF_INT64;
}
static int is_unsigned(perf_type t) {
  return t == PERF_UINT8 || t == PERF_UINT16 || t == PERF_UINT32 || t == PERF_UINT64;
}

/* xorshift64*: fixed seeds, so every run checks the same orders. */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1DULL;
}

/* ---- one element in its type ---- */

static uint64_t get_int(perf_type t, const unsigned char *p) {
  size_t es = perf_type_size(t);
  uint64_t x = 0;
  memcpy(&x, p, es); /* little-endian hosts only, as the library */
  if (is_signed(t) && es < 8 && (x >> (8 * es - 1)) & 1) x |= ~0ull << (8 * es);
  return x;
}

static void put_int(perf_type t, unsigned char *p, uint64_t x) {
  memcpy(p, &x, perf_type_size(t));
}

static double get_float(perf_type t, const unsigned char *p) {
  uint16_t h;
  float f;
  double d;
  if (t == PERF_HALF || t == PERF_BF16) {
    memcpy(&h, p, 2);
    return t == PERF_HALF ? perf_half_to_float(h) : perf_bf16_to_float(h);
  }
  if (t == PERF_FLOAT) {
    memcpy(&f, p, 4);
    return f;
  }
  memcpy(&d, p, 8);
  return d;
}

/* Rounds a float32 result to the 16-bit types once, as the kernels do. */
static void put_float32(perf_type t, unsigned char *p, float f) {
  uint16_t h = t == PERF_HALF ? perf_half_from_float(f) : perf_bf16_from_float(f);
  if (t == PERF_HALF || t == PERF_BF16)
    memcpy(p, &h, 2);
  else
    memcpy(p, &f, 4);
}

/* out = a op b in the type (avg's steps are sums). */
static void step(perf_type t, perf_op op, unsigned char *out, const unsigned char *a,
                 const unsigned char *b) {
  if (op == PERF_AVG) op = PERF_SUM;
  if (t == PERF_DOUBLE) {
    double x = get_float(t, a), y = get_float(t, b);
    double r = op == PERF_SUM    ? x + y
               : op == PERF_PROD ? x * y
               : op == PERF_MAX  ? (x > y ? x : y)
                                 : (x < y ? x : y);
    memcpy(out, &r, 8);
  } else if (t == PERF_HALF || t == PERF_BF16 || t == PERF_FLOAT) {
    float x = (float)get_float(t, a), y = (float)get_float(t, b);
    float r = op == PERF_SUM    ? x + y
              : op == PERF_PROD ? x * y
              : op == PERF_MAX  ? (x > y ? x : y)
                                : (x < y ? x : y);
    put_float32(t, out, r);
  } else {
    uint64_t x = get_int(t, a), y = get_int(t, b);
    int gt = is_signed(t) ? (int64_t)x > (int64_t)y : x > y;
    put_int(t, out,
            op == PERF_SUM    ? x + y
            : op == PERF_PROD ? x * y
            : op == PERF_MAX  ? (gt ? x : y)
                              : (gt ? y : x));
  }
}

/* avg's last step: the sum (in the type) divided by p. */
static void divide(perf_type t, unsigned char *v, int p) {
  if (t == PERF_DOUBLE) {
    double d = get_float(t, v) / p;
    memcpy(v, &d, 8);
  } else if (t == PERF_HALF || t == PERF_BF16 || t == PERF_FLOAT) {
    put_float32(t, v, (float)get_float(t, v) / (float)p);
  } else {
    uint64_t x = get_int(t, v);
    put_int(t, v, is_signed(t) ? (uint64_t)((int64_t)x / p) : x / (uint64_t)p);
  }
}

/* ---- whole vectors: one element per table entry ---- */

struct job {
  perf_type t;
  perf_op op;
  int p;
  size_t n, es;         /* elements of a period, bytes per element */
  unsigned char **in;   /* in[r]: rank r's input, n elements */
  unsigned char *want;  /* the expected result, n elements */
  hccl__reduce_fn kern; /* the library's kernel, or NULL */
};

/* acc = acc op x, element by element, by the step above or by the library's kernel. */
static void combine(const struct job *j, unsigned char *acc, const unsigned char *x, int lib) {
  if (lib) {
    j->kern(acc, acc, x, j->n, NULL); /* a plain step: no scale */
    return;
  }
  for (size_t i = 0; i < j->n; i++)
    step(j->t, j->op, acc + i * j->es, acc + i * j->es, x + i * j->es);
}

/* Combines pool[0..m) (each an already reduced vector of some ranks) as a tree until
 * pool[0] holds the result: random pairs when seed != NULL; else rounds of pairs, pool[k] with
 * pool[k + m - m/2] (strided, as recursive halving pairs ranks) or pool[2k] with pool[2k + 1]
 * (neighbours); an odd one out waits for the next round. */
static void tree(const struct job *j, unsigned char **pool, int m, uint64_t *seed, int strided,
                 int lib) {
  while (m > 1) {
    if (seed) {
      int a = (int)(rng_next(seed) % (uint64_t)m), b = (int)(rng_next(seed) % (uint64_t)(m - 1));
      if (b >= a) b++;
      combine(j, pool[a], pool[b], lib);
      pool[b] = pool[--m];
      continue;
    }
    int half = m / 2;
    for (int k = 0; k < half; k++) {
      if (strided) {
        combine(j, pool[k], pool[k + m - half], lib);
      } else {
        combine(j, pool[2 * k], pool[2 * k + 1], lib);
        pool[k] = pool[2 * k];
      }
    }
    if (!strided && m % 2) pool[half] = pool[m - 1];
    m -= half;
  }
}

/* The bytes of one element, for messages. */
static unsigned long long raw(const unsigned char *v, size_t es) {
  uint64_t x = 0;
  memcpy(&x, v, es);
  return (unsigned long long)x;
}

/* The result of one order; 0 when every element is the expected one, else prints the first
 * difference and returns 1. order: 0 left fold, 1 right fold, 2 + k ring from rank k,
 * -1 strided tree, -2 random tree (seed), -3 tree of neighbours. */
static int check_order(const struct job *j, int order, uint64_t seed, int lib) {
  int p = j->p;
  unsigned char **pool = calloc((size_t)p, sizeof(*pool));
  unsigned char *mem = malloc((size_t)p * j->n * j->es);
  assert_non_null(pool);
  assert_non_null(mem);
  int perm[64];
  for (int r = 0; r < p; r++)
    perm[r] = r;
  if (order == -2) /* a random permutation, then a random tree */
    for (int r = p - 1; r > 0; r--) {
      int k = (int)(rng_next(&seed) % (uint64_t)(r + 1)), tmp = perm[r];
      perm[r] = perm[k];
      perm[k] = tmp;
    }
  for (int r = 0; r < p; r++) {
    int src = order >= 2 ? (r + order - 2) % p : order == 1 ? p - 1 - r : perm[r];
    pool[r] = mem + (size_t)r * j->n * j->es;
    memcpy(pool[r], j->in[src], j->n * j->es);
  }
  if (order == 1) { /* right fold: x[p-1] first, each next rank on the left */
    for (int r = 1; r < p; r++) {
      combine(j, pool[r], pool[r - 1], lib);
    }
    memmove(pool[0], pool[p - 1], j->n * j->es);
  } else if (order >= 0) {
    for (int r = 1; r < p; r++)
      combine(j, pool[0], pool[r], lib);
  } else {
    tree(j, pool, p, order == -2 ? &seed : NULL, order == -1, lib);
  }
  if (j->op == PERF_AVG)
    for (size_t i = 0; i < j->n; i++)
      divide(j->t, pool[0] + i * j->es, p);
  int bad = 0;
  for (size_t i = 0; i < j->n && !bad; i++)
    if (memcmp(pool[0] + i * j->es, j->want + i * j->es, j->es) != 0) {
      fprintf(stderr,
              "%s %s, %d ranks, order %d%s: element %zu is %016llx in the type's own "
              "arithmetic, the table expects %016llx\n",
              perf_type_name(j->t), perf_op_name(j->op), p, order, lib ? " (library kernel)" : "",
              i, raw(pool[0] + i * j->es, j->es), raw(j->want + i * j->es, j->es));
      bad = 1;
    }
  free(mem);
  free(pool);
  return bad;
}

static int is_sentinel(const unsigned char *v, size_t es) {
  for (size_t b = 0; b < es; b++)
    if (v[b] != PERF_SENTINEL_BYTE) return 0;
  return 1;
}

/* Every order for (t, op) on p ranks; the meaningfulness checks of the header. */
static void check_reduction(perf_type t, perf_op op, int p) {
  struct perf_tables *tb = calloc((size_t)p, sizeof(*tb));
  unsigned char **in = calloc((size_t)p, sizeof(*in));
  assert_non_null(tb);
  assert_non_null(in);
  for (int r = 0; r < p; r++) {
    assert_int_equal(perf_tables_init(&tb[r], r, p), 0);
    perf_tables_reduction(&tb[r], t, op);
    struct perf_seq s = perf_seq_input(&tb[r], r);
    in[r] = (unsigned char *)s.data;
  }
  struct perf_seq want = perf_seq_result(&tb[0]);
  struct job j = {.t = t,
                  .op = op,
                  .p = p,
                  .n = want.period,
                  .es = want.es,
                  .in = in,
                  .want = (unsigned char *)want.data,
                  .kern =
                      op == PERF_AVG ? NULL : hccl__reduce_kernel(perf_hccl_dtype[t], (HcclReduceOp)op)};
  assert_int_equal(j.es, perf_type_size(t));
  assert_int_equal(j.n, 105 * (size_t)p);
  /* the same expectation on every rank, and no value with the sentinel's bytes */
  for (int r = 0; r < p; r++) {
    struct perf_seq w = perf_seq_result(&tb[r]);
    assert_memory_equal(w.data, want.data, j.n * j.es);
    for (size_t i = 0; i < j.n; i++) {
      assert_false(is_sentinel(in[r] + i * j.es, j.es));
      assert_false(is_sentinel(j.want + i * j.es, j.es));
    }
  }
  int bad = 0;
  uint64_t seed = 0x9E3779B97F4A7C15ull ^ ((uint64_t)t << 32) ^ ((uint64_t)op << 16) ^ (uint64_t)p;
  for (int lib = 0; lib <= (j.kern != NULL); lib++) {
    bad += check_order(&j, 0, 0, lib);
    bad += check_order(&j, 1, 0, lib);
    for (int k = 0; k < p; k += p <= 8 ? 1 : p / 4) /* a ring from every start, or 4 */
      bad += check_order(&j, 2 + k, 0, lib);
    bad += check_order(&j, -1, 0, lib);
    bad += check_order(&j, -3, 0, lib);
    for (int k = 0; k < 4; k++)
      bad += check_order(&j, -2, rng_next(&seed), lib);
  }
  assert_int_equal(bad, 0);

  /* meaningful data */
  size_t distinct = 0, floor_differs = 0, fraction = 0, zero = 0;
  for (size_t i = 0; i < j.n; i++) {
    int all_differ = 1;
    for (int a = 0; a < p && all_differ; a++)
      for (int b = a + 1; b < p && all_differ; b++)
        all_differ = memcmp(in[a] + i * j.es, in[b] + i * j.es, j.es) != 0;
    distinct += all_differ;
    if (op == PERF_AVG && is_signed(t)) {
      int64_t sum = 0;
      for (int r = 0; r < p; r++)
        sum += (int64_t)get_int(t, in[r] + i * j.es);
      floor_differs += sum < 0 && sum % p != 0;
    }
    if (op == PERF_AVG && !is_signed(t) && !is_unsigned(t)) {
      double v = get_float(t, j.want + i * j.es);
      fraction += v != (double)(int64_t)v;
    }
    if (op == PERF_PROD && is_unsigned(t)) zero += get_int(t, j.want + i * j.es) == 0;
  }
  if (floor_differs == 0 && is_signed(t) && op == PERF_AVG && p > 1)
    fprintf(stderr, "%s avg, %d ranks: no element whose sum is negative and not a multiple of p\n",
            perf_type_name(t), p);
  if (op == PERF_MAX || op == PERF_MIN) assert_int_equal(distinct, j.n);
  if (op == PERF_AVG && is_signed(t) && p > 1) assert_true(floor_differs > 0);
  if (op == PERF_AVG && !is_signed(t) && !is_unsigned(t) && p > 1) assert_true(fraction > 0);
  assert_int_equal(zero, 0);
  for (int r = 0; r < p; r++)
    perf_tables_free(&tb[r]);
  free(tb);
  free(in);
}

static void test_reductions_any_order(void **state) {
  (void)state;
  alarm(300);
  for (size_t k = 0; k < sizeof(k_ranks) / sizeof(k_ranks[0]); k++)
    for (int t = 0; t < PERF_NTYPES; t++)
      for (int op = 0; op < PERF_NOPS; op++)
        check_reduction((perf_type)t, (perf_op)op, k_ranks[k]);
  alarm(0);
}

/* The data-moving collectives' values: exact in every type (the same small integers read
 * back), different between ranks and neighbours, never the sentinel. */
static void test_copy_values(void **state) {
  (void)state;
  struct perf_tables a, b;
  assert_int_equal(perf_tables_init(&a, 0, 8), 0);
  assert_int_equal(perf_tables_init(&b, 1, 8), 0);
  for (int t = 0; t < PERF_NTYPES; t++) {
    perf_tables_copy(&a, (perf_type)t);
    perf_tables_copy(&b, (perf_type)t);
    struct perf_seq s0 = perf_seq_input(&a, 0), s1 = perf_seq_input(&b, 1);
    size_t es = perf_type_size((perf_type)t);
    unsigned char x[64 * 8], y[64 * 8];
    perf_fill(x, 64, &s0, 0);
    perf_fill(y, 64, &s1, 0);
    for (size_t i = 0; i < 64; i++) {
      long long want = (long long)((i + 0) % 61) - 30;
      if (is_signed((perf_type)t) || is_unsigned((perf_type)t)) {
        uint64_t got = get_int((perf_type)t, x + i * es);
        uint64_t mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
        assert_int_equal(got & mask, (uint64_t)want & mask);
      } else {
        assert_true(get_float((perf_type)t, x + i * es) == (double)want);
      }
      assert_false(is_sentinel(x + i * es, es));
      assert_memory_not_equal(x + i * es, y + i * es, es);
      if (i) assert_memory_not_equal(x + i * es, x + (i - 1) * es, es);
    }
    assert_int_equal(perf_count_wrong(x, 64, &s0, 0), 0);
    assert_int_equal(perf_count_wrong(y, 64, &s0, 0), 64);
  }
  perf_tables_free(&a);
  perf_tables_free(&b);
}

static void test_names_and_sizes(void **state) {
  (void)state;
  static const char *const names[PERF_NTYPES] = {"int8",  "uint8",    "int16", "uint16",
                                                 "int32", "uint32",   "int64", "uint64",
                                                 "half",  "bfloat16", "float", "double"};
  static const size_t sizes[PERF_NTYPES] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
  for (int t = 0; t < PERF_NTYPES; t++) {
    assert_string_equal(perf_type_name((perf_type)t), names[t]);
    assert_int_equal(perf_type_size((perf_type)t), sizes[t]);
  }
  assert_string_equal(perf_op_name(PERF_AVG), "avg");
  assert_string_equal(perf_type_name(PERF_NTYPES), "unknown");
  assert_int_equal(perf_type_size(PERF_NTYPES), 0);
}

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* bfloat16: the top half of a float, rounded to nearest even; NaN stays NaN; half: spot
 * checks (the library's own conversions are tested exhaustively in tests/algo/test_reduce.c). */
static void test_conversions(void **state) {
  (void)state;
  static const struct {
    uint32_t f;
    uint16_t b;
  } bf[] = {
      {0x3f800000u, 0x3f80}, /* 1 */
      {0x3f808000u, 0x3f80}, /* 1 + 2^-8: a tie, to even */
      {0x3f818000u, 0x3f82}, /* a tie, to even (up) */
      {0x3f808001u, 0x3f81}, /* above the tie */
      {0x43800000u, 0x4380}, /* 256 */
      {0x43808000u, 0x4380}, /* 257: a tie, to 256 */
      {0x7f7fffffu, 0x7f80}, /* the largest float rounds to infinity */
      {0xff800000u, 0xff80}, /* -inf */
      {0x80000000u, 0x8000}, /* -0 */
      {0x00000001u, 0x0000}, /* the smallest subnormal rounds to 0 */
  };
  for (size_t i = 0; i < sizeof(bf) / sizeof(bf[0]); i++)
    assert_int_equal(perf_bf16_from_float(u2f(bf[i].f)), bf[i].b);
  uint16_t nan = perf_bf16_from_float(u2f(0x7f800001u));
  assert_true((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
  for (uint32_t b = 0; b < 0x10000u; b++) {
    float f = perf_bf16_to_float((uint16_t)b);
    assert_int_equal(f2u(f), b << 16);
    if (f == f) assert_int_equal(perf_bf16_from_float(f), b);
  }
  assert_int_equal(perf_half_from_float(1.0f), 0x3c00);
  assert_int_equal(perf_half_from_float(2049.0f), 0x6800); /* a tie, to even: 2048 */
  assert_true(perf_half_to_float(0x3555) > 0.333f && perf_half_to_float(0x3555) < 0.334f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_and_sizes),
      cmocka_unit_test(test_conversions),
      cmocka_unit_test(test_copy_values),
      cmocka_unit_test(test_reductions_any_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
