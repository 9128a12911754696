/*
 * perf_data.c - the checking data of the benchmarks: names and sizes of the types, float16 and
 * bfloat16 conversion, and the periodic tables of inputs and expected results (perf_data.h).
 *
 * Reductions. Rank r's element e holds a small integer v(op, r, e) chosen so that the exact
 * result is the same in every reduction order, for every type (all twelve, in the manner of
 * nccl-tests), with any number of ranks p; the check is then exact equality for every type,
 * float16 and bfloat16 included. With s(r, e) = ((7r + e) mod 5) - 2, in [-2, 2]:
 *   sum    v = s. Over 5 ranks in a row s takes each of -2..2 once, so the sum over all ranks
 *          is in [-2, 2], and over ranks in arithmetic progression (a ring's or a server's
 *          partial sums; a step 5 does not divide) in [-3, 3]; any k ranks sum to at most 2k in
 *          magnitude. Exact in bfloat16 (8 significant bits: integers to 256) in any order
 *          up to 128 ranks, in float16 (to 2048) up to 1024. Unsigned types take s + 2, in
 *          [0, 4], so that their sums do not wrap (in uint8 below 64 ranks): the sum is that of
 *          the numbers shown, and Open MPI, whose AVX ops saturate 8- and 16-bit sums instead
 *          of wrapping (open-mpi/ompi#8045), gets them right in the MPI twins too.
 *   prod   by (r + e) mod 3: v = 1, 2 or -1; unsigned types use 3 for -1. 2 is only used on
 *          ranks 0..7 (1 elsewhere), so at most three 2s and |product| <= 8 for signed and
 *          floating types (powers of two: exact in every type); unsigned products are at
 *          most 6^3 = 216 up to 8 ranks (no wrap even in uint8), and past that the 3s wrap,
 *          but an odd factor stays odd modulo 2^n, so the product never collapses to 0.
 *   max, min  v = ((r + e) mod p) + (e mod 7) - 3: distinct across ranks for each element,
 *          and the answer moves with e. Unsigned types store -3..-1 as the top of their range,
 *          so a signed comparison would give another answer.
 *   avg    v = a(e) + s + u, a(e) = (e mod (2A + 1)) - A, and u = (e mod 3) - 1 on rank
 *          e mod p only (0 elsewhere), so the sum over all ranks is p a(e) + S with |S| <= 3
 *          and S = u when 5 divides p: the average a(e) + S/p is a fraction whose rounding
 *          matters, for every p > 1: toward zero on integer types (floor differs where S < 0),
 *          on floating ones the correctly rounded quotient, which one division of the exact
 *          sum gives (in float32 for the 16-bit types; exact when p is a power of two). A is the
 *          largest of 0..3 with p (A + 3) <= L, L the type's exact range (127 for int8, 256
 *          for bfloat16, 2048 for float16, ...), so every partial sum, at most k (A + 3) over
 *          k ranks, is exact in the type (bfloat16: in any order up to 85 ranks). Unsigned
 *          types add A + 3 to v (so v >= 0) and take p (2A + 6) <= L, so that no sum wraps
 *          and the average is that of the numbers shown.
 * Values are stored in the element type (integers wrap), and the expected result is computed
 * from the stored values: integers in 64-bit two's complement wrapped to the type (which equals
 * wrapping after every step), compared as signed or unsigned by type, the average's sum divided
 * with C's truncating division; floating types in double, where these sums and products are
 * exact, the average's quotient rounded to double, then float, then the type, which gives the
 * correctly rounded quotient for p < 8192 (each step's error is far below the distance of
 * sum / p to a rounding boundary of the type). v only depends on e modulo
 * 105 * p (3, 5, 7, 2A + 1 and p all divide it), so one period of this rank's values and one
 * of the expected result are built per (type, op).
 *
 * Data-moving collectives. Rank r's element e holds ((e + 7r) mod 61) - 30, in [-30, 30]
 * (unsigned types: -30..-1 wrap to the top): exact in every type, different on every rank (for
 * up to 61 ranks) and at neighbouring elements, so a block from the wrong rank or the wrong
 * offset is seen. Neither these values nor the reductions' have the sentinel's bytes (0xA5 is
 * int8 -91 and uint8 165, which a uint8 sum reaches from 82 ranks, max and min from 163; 0xA5A5
 * is int16 -23131, uint16 42405, float16 -0.02205 and bfloat16 -2.9e-16; the 32- and 64-bit
 * patterns are not small integers or fractions with small denominators), so an element the
 * call did not write is counted.
 */
#include "perf_data.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COPY_PERIOD 61
#define SENTINEL_PERIOD 64 /* elements: checks go by windows of this many */
#define MAX_ES 8           /* bytes of the widest type */

enum kind { SIGNED, UNSIGNED, FLOATING };

static const struct type_info {
  const char *name;
  size_t size;
  enum kind kind;
  uint64_t exact; /* integers of magnitude up to this are exact in the type (L above) */
} type_info[PERF_NTYPES] = {
    [PERF_INT8] = {"int8", 1, SIGNED, INT8_MAX},
    [PERF_UINT8] = {"uint8", 1, UNSIGNED, UINT8_MAX},
    [PERF_INT16] = {"int16", 2, SIGNED, INT16_MAX},
    [PERF_UINT16] = {"uint16", 2, UNSIGNED, UINT16_MAX},
    [PERF_INT32] = {"int32", 4, SIGNED, INT32_MAX},
    [PERF_UINT32] = {"uint32", 4, UNSIGNED, UINT32_MAX},
    [PERF_INT64] = {"int64", 8, SIGNED, INT64_MAX},
    [PERF_UINT64] = {"uint64", 8, UNSIGNED, UINT64_MAX},
    [PERF_HALF] = {"half", 2, FLOATING, 1u << 11},
    [PERF_BF16] = {"bfloat16", 2, FLOATING, 1u << 8},
    [PERF_FLOAT] = {"float", 4, FLOATING, 1u << 24},
    [PERF_DOUBLE] = {"double", 8, FLOATING, 1ull << 53},
};
static const char *const op_names[PERF_NOPS] = {"sum", "prod", "max", "min", "avg"};

const char *perf_type_name(perf_type t) {
  return (unsigned)t < PERF_NTYPES ? type_info[t].name : "unknown";
}

const char *perf_op_name(perf_op op) {
  return (unsigned)op < PERF_NOPS ? op_names[op] : "unknown";
}

size_t perf_type_size(perf_type t) {
  return (unsigned)t < PERF_NTYPES ? type_info[t].size : 0;
}

/* ---- float16 ---- */

uint16_t perf_half_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu, e = absx >> 23;
  if (absx >= 0x7f800000u) /* inf stays inf; NaN stays a (quiet) NaN */
    return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) /* >= 65520 rounds to infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (e < 113) { /* below 2^-14: a half subnormal, in units of 2^-24 */
    if (e < 102) return (uint16_t)sign;
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14..24 */
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((e - 112) << 10) | ((absx & 0x7fffffu) >> 13), rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* a carry may reach inf: right */
  return (uint16_t)(sign | h);
}

float perf_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0) {
    float f = (float)m * (1.0f / 16777216.0f); /* m * 2^-24, exact */
    return sign ? -f : f;
  }
  if (e == 31)
    x = sign | 0x7f800000u | (m << 13);
  else
    x = sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, sizeof(f));
  return f;
}

/* ---- bfloat16 ---- */

uint16_t perf_bf16_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN stays a (quiet) NaN */
    return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1); /* to nearest even; a carry may reach inf: right */
  return (uint16_t)(x >> 16);
}

float perf_bf16_to_float(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, sizeof(f));
  return f;
}

/* ---- values ---- */

/* A of the average's values (see the top): the largest of 0..3 that keeps every partial sum
 * of p ranks within the type's exact range (0 when none does). */
static long long avg_spread(perf_type t, int p) {
  const struct type_info *ti = &type_info[t];
  uint64_t per_rank = ti->exact / (uint64_t)p / (ti->kind == UNSIGNED ? 2 : 1);
  return per_rank >= 6 ? 3 : per_rank <= 3 ? 0 : (long long)per_rank - 3;
}

static long long pattern_value(perf_type t, perf_op op, int r, size_t e, int p) {
  long long s = (long long)((7 * (size_t)r + e) % 5) - 2;
  switch (op) {
  case PERF_SUM:
    return s + (type_info[t].kind == UNSIGNED ? 2 : 0);
  case PERF_PROD: {
    size_t k = ((size_t)r + e) % 3;
    return k == 0 ? 1 : k == 1 ? (r < 8 ? 2 : 1) : type_info[t].kind == UNSIGNED ? 3 : -1;
  }
  case PERF_AVG: {
    long long A = avg_spread(t, p), a = (long long)(e % (size_t)(2 * A + 1)) - A;
    long long u = e % (size_t)p == (size_t)r ? (long long)(e % 3) - 1 : 0;
    return a + s + u + (type_info[t].kind == UNSIGNED ? A + 3 : 0);
  }
  default:
    return (long long)(((size_t)r + e) % (size_t)p) + (long long)(e % 7) - 3;
  }
}

/* The low bytes of the two's complement x, as the type stores them. */
static void store_int(size_t es, void *dst, uint64_t x) {
  uint8_t b1 = (uint8_t)x;
  uint16_t b2 = (uint16_t)x;
  uint32_t b4 = (uint32_t)x;
  memcpy(dst,
         es == 1   ? (void *)&b1
         : es == 2 ? (void *)&b2
         : es == 4 ? (void *)&b4
                   : (void *)&x,
         es);
}

/* An integer element, sign- or zero-extended to 64 bits. */
static uint64_t load_int(perf_type t, const void *src) {
  const struct type_info *ti = &type_info[t];
  uint64_t x = 0;
  switch (ti->size) {
  case 1: {
    uint8_t v;
    memcpy(&v, src, 1);
    x = ti->kind == SIGNED ? (uint64_t)(int8_t)v : v;
    break;
  }
  case 2: {
    uint16_t v;
    memcpy(&v, src, 2);
    x = ti->kind == SIGNED ? (uint64_t)(int16_t)v : v;
    break;
  }
  case 4: {
    uint32_t v;
    memcpy(&v, src, 4);
    x = ti->kind == SIGNED ? (uint64_t)(int32_t)v : v;
    break;
  }
  default:
    memcpy(&x, src, 8);
    break;
  }
  return x;
}

static void store_float(perf_type t, void *dst, double v) {
  if (t == PERF_HALF || t == PERF_BF16) {
    uint16_t h = t == PERF_HALF ? perf_half_from_float((float)v) : perf_bf16_from_float((float)v);
    memcpy(dst, &h, 2);
  } else if (t == PERF_FLOAT) {
    float f = (float)v;
    memcpy(dst, &f, 4);
  } else {
    memcpy(dst, &v, 8);
  }
}

static double load_float(perf_type t, const void *src) {
  uint16_t h;
  float f;
  double d;
  switch (t) {
  case PERF_HALF:
  case PERF_BF16:
    memcpy(&h, src, 2);
    return t == PERF_HALF ? perf_half_to_float(h) : perf_bf16_to_float(h);
  case PERF_FLOAT:
    memcpy(&f, src, 4);
    return f;
  default:
    memcpy(&d, src, 8);
    return d;
  }
}

/* A small integer v as type t stores it (integers wrap). */
static void store_value(perf_type t, void *dst, long long v) {
  if (type_info[t].kind == FLOATING)
    store_float(t, dst, (double)v);
  else
    store_int(type_info[t].size, dst, (uint64_t)v);
}

/* The reduction with op of the n stored elements vals[0], vals[es], ... of type t, written to
 * dst in the type (see the top for how each kind is computed). */
static void reduce_reference(perf_type t, perf_op op, const unsigned char *vals, int n, void *dst) {
  const struct type_info *ti = &type_info[t];
  size_t es = ti->size;
  if (ti->kind == FLOATING) {
    double acc = load_float(t, vals);
    for (int r = 1; r < n; r++) {
      double v = load_float(t, vals + (size_t)r * es);
      acc = op == PERF_PROD  ? acc * v
            : op == PERF_MAX ? (v > acc ? v : acc)
            : op == PERF_MIN ? (v < acc ? v : acc)
                             : acc + v; /* sum, avg */
    }
    store_float(t, dst, op == PERF_AVG ? acc / n : acc);
    return;
  }
  uint64_t acc = load_int(t, vals);
  for (int r = 1; r < n; r++) {
    uint64_t v = load_int(t, vals + (size_t)r * es);
    int greater = ti->kind == SIGNED ? (int64_t)v > (int64_t)acc : v > acc;
    acc = op == PERF_PROD  ? acc * v
          : op == PERF_MAX ? (greater ? v : acc)
          : op == PERF_MIN ? (greater || v == acc ? acc : v)
                           : acc + v; /* sum, avg: wrapping, like the type's own */
  }
  if (op == PERF_AVG) { /* the sum in the type, then C's division (toward zero) */
    unsigned char sum[MAX_ES];
    store_int(es, sum, acc);
    acc = load_int(t, sum);
    acc = ti->kind == SIGNED ? (uint64_t)((int64_t)acc / n) : acc / (uint64_t)n;
  }
  store_int(es, dst, acc);
}

/* ---- tables ---- */

int perf_tables_init(struct perf_tables *tb, int rank, int nranks) {
  *tb = (struct perf_tables){.rank = rank, .nranks = nranks, .red_period = 105 * (size_t)nranks};
  tb->mine = malloc(2 * tb->red_period * MAX_ES);
  tb->want = malloc(2 * tb->red_period * MAX_ES);
  tb->column = malloc((size_t)nranks * MAX_ES);
  if (!tb->mine || !tb->want || !tb->column) {
    perf_tables_free(tb);
    return -1;
  }
  return 0;
}

void perf_tables_free(struct perf_tables *tb) {
  free(tb->mine);
  free(tb->want);
  free(tb->column);
  tb->mine = tb->want = tb->column = NULL;
}

/* The second period of a doubled table is a copy of the first. */
static void double_up(unsigned char *tab, size_t period, size_t es) {
  memcpy(tab + period * es, tab, period * es);
}

static void fill_sentinel(struct perf_tables *tb) {
  memset(tb->sentinel, PERF_SENTINEL_BYTE, sizeof(tb->sentinel));
}

void perf_tables_reduction(struct perf_tables *tb, perf_type t, perf_op op) {
  size_t es = type_info[t].size, period = tb->red_period;
  tb->es = es;
  tb->reduction = 1;
  for (size_t i = 0; i < period; i++) {
    for (int r = 0; r < tb->nranks; r++)
      store_value(t, tb->column + (size_t)r * es, pattern_value(t, op, r, i, tb->nranks));
    memcpy(tb->mine + i * es, tb->column + (size_t)tb->rank * es, es);
    reduce_reference(t, op, tb->column, tb->nranks, tb->want + i * es);
  }
  double_up(tb->mine, period, es);
  double_up(tb->want, period, es);
  fill_sentinel(tb);
}

void perf_tables_copy(struct perf_tables *tb, perf_type t) {
  size_t es = type_info[t].size;
  tb->es = es;
  tb->reduction = 0;
  for (size_t i = 0; i < COPY_PERIOD; i++)
    store_value(t, tb->copy + i * es, (long long)i - 30);
  double_up(tb->copy, COPY_PERIOD, es);
  fill_sentinel(tb);
}

struct perf_seq perf_seq_input(const struct perf_tables *tb, int owner) {
  if (tb->reduction)
    return (struct perf_seq){.data = tb->mine, .period = tb->red_period, .es = tb->es};
  return (struct perf_seq){.data = tb->copy,
                           .period = COPY_PERIOD,
                           .shift = 7 * (size_t)owner % COPY_PERIOD,
                           .es = tb->es};
}

struct perf_seq perf_seq_result(const struct perf_tables *tb) {
  return (struct perf_seq){.data = tb->want, .period = tb->red_period, .es = tb->es};
}

struct perf_seq perf_seq_untouched(const struct perf_tables *tb) {
  return (struct perf_seq){.data = tb->sentinel, .period = SENTINEL_PERIOD, .es = tb->es};
}

/* ---- fill and check ---- */

void perf_fill(void *buf, size_t n, const struct perf_seq *s, size_t from) {
  unsigned char *b = buf;
  for (size_t done = 0; done < n;) {
    size_t at = (from + done + s->shift) % s->period;
    size_t k = n - done < s->period ? n - done : s->period;
    memcpy(b + done * s->es, s->data + at * s->es, k * s->es);
    done += k;
  }
}

long long perf_count_wrong(const void *buf, size_t n, const struct perf_seq *s, size_t from) {
  const unsigned char *b = buf;
  long long wrong = 0;
  size_t es = s->es;
  for (size_t done = 0; done < n;) {
    size_t at = (from + done + s->shift) % s->period;
    size_t k = n - done < s->period ? n - done : s->period;
    const unsigned char *want = s->data + at * es, *got = b + done * es;
    if (memcmp(got, want, k * es) != 0)
      for (size_t i = 0; i < k; i++)
        wrong += memcmp(got + i * es, want + i * es, es) != 0;
    done += k;
  }
  return wrong;
}
