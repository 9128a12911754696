/*
 * perf_data.c - the checking data of the benchmarks: names and sizes of the types, float16
 * conversion, and the periodic tables of inputs and expected results (see perf_data.h).
 *
 * Reductions. Rank r's element e holds a small integer v(op, r, e) chosen so that the exact
 * result is the same in every reduction order, for every type, with any number of ranks:
 *   sum       v = ((7r + e) mod 5) - 2, in [-2, 2]; |sum| <= 2p, exact in half up to p = 1024.
 *   prod      v in {1, 2, -1} by (r + e) mod 3, where 2 is only used on ranks 0..7, so
 *             |product| <= 2^8 (exact in half and float; int8 wraps, e.g. 128 -> -128, 256 -> 0,
 *             and wrapping multiplication is associative, so the order does not matter).
 *   max/min   v = ((r + e) mod p) + (e mod 7) - 3: distinct across ranks for each element,
 *             and the answer moves with e.
 * Values are stored in the element type (int8 wraps), and the expected result is computed from
 * the stored values, in the same type. v only depends on e modulo 105 * p (5, 3, 7 and p all
 * divide it), so one period of this rank's values and one of the expected result are built
 * per (type, op). Integer sums and products are done in 64 bits and wrapped to the type once
 * at the end, which equals wrapping after every step.
 *
 * Data-moving collectives. Rank r's element e holds ((e + 7r) mod 61) - 30, in [-30, 30]:
 * exact in every type, different on every rank (for up to 61 ranks) and at neighbouring
 * elements, so a block from the wrong rank or the wrong offset is seen. Neither these values
 * nor the reductions' ever have the sentinel's bytes (0xA5 = int8 -91; the int32, half and
 * float patterns are not small integers), so an element the call did not write is counted.
 */
#include "perf_data.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COPY_PERIOD 61
#define SENTINEL_PERIOD 64 /* elements: checks go by windows of this many */

static const char *const type_names[PERF_NTYPES] = {"int8", "int32", "half", "float"};
static const size_t type_sizes[PERF_NTYPES] = {1, 4, 2, 4};
static const char *const op_names[PERF_NOPS] = {"sum", "prod", "max", "min"};

const char *perf_type_name(perf_type t) {
  return (unsigned)t < PERF_NTYPES ? type_names[t] : "unknown";
}

const char *perf_op_name(perf_op op) {
  return (unsigned)op < PERF_NOPS ? op_names[op] : "unknown";
}

size_t perf_type_size(perf_type t) {
  return (unsigned)t < PERF_NTYPES ? type_sizes[t] : 0;
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

/* ---- values ---- */

static long long pattern_value(perf_op op, int r, size_t e, int p) {
  switch (op) {
  case PERF_SUM:
    return (long long)((7 * (size_t)r + e) % 5) - 2;
  case PERF_PROD: {
    size_t k = ((size_t)r + e) % 3;
    return k == 0 ? 1 : k == 1 ? (r < 8 ? 2 : 1) : -1;
  }
  default:
    return (long long)(((size_t)r + e) % (size_t)p) + (long long)(e % 7) - 3;
  }
}

static void store_value(perf_type t, void *dst, double v) {
  switch (t) {
  case PERF_INT8:
    *(int8_t *)dst = (int8_t)(long long)v;
    break;
  case PERF_INT32:
    *(int32_t *)dst = (int32_t)(long long)v;
    break;
  case PERF_HALF:
    *(uint16_t *)dst = perf_half_from_float((float)v);
    break;
  default:
    *(float *)dst = (float)v;
    break;
  }
}

static double load_value(perf_type t, const void *src) {
  switch (t) {
  case PERF_INT8:
    return *(const int8_t *)src;
  case PERF_INT32:
    return *(const int32_t *)src;
  case PERF_HALF:
    return perf_half_to_float(*(const uint16_t *)src);
  default:
    return *(const float *)src;
  }
}

/* ---- tables ---- */

int perf_tables_init(struct perf_tables *tb, int rank, int nranks) {
  *tb = (struct perf_tables){.rank = rank, .nranks = nranks, .red_period = 105 * (size_t)nranks};
  tb->mine = malloc(2 * tb->red_period * 4);
  tb->want = malloc(2 * tb->red_period * 4);
  if (!tb->mine || !tb->want) {
    perf_tables_free(tb);
    return -1;
  }
  return 0;
}

void perf_tables_free(struct perf_tables *tb) {
  free(tb->mine);
  free(tb->want);
  tb->mine = tb->want = NULL;
}

/* The second period of a doubled table is a copy of the first. */
static void double_up(unsigned char *tab, size_t period, size_t es) {
  memcpy(tab + period * es, tab, period * es);
}

static void fill_sentinel(struct perf_tables *tb) {
  memset(tb->sentinel, PERF_SENTINEL_BYTE, sizeof(tb->sentinel));
}

void perf_tables_reduction(struct perf_tables *tb, perf_type t, perf_op op) {
  size_t es = type_sizes[t], period = tb->red_period;
  unsigned char tmp[8];
  tb->es = es;
  tb->reduction = 1;
  for (size_t i = 0; i < period; i++) {
    double acc = 0;
    for (int r = 0; r < tb->nranks; r++) {
      store_value(t, tmp, (double)pattern_value(op, r, i, tb->nranks));
      double v = load_value(t, tmp);
      if (r == tb->rank) memcpy(tb->mine + i * es, tmp, es);
      if (r == 0)
        acc = v;
      else if (op == PERF_SUM)
        acc += v;
      else if (op == PERF_PROD)
        acc *= v;
      else if (op == PERF_MAX)
        acc = v > acc ? v : acc;
      else
        acc = v < acc ? v : acc;
    }
    store_value(t, tb->want + i * es, acc);
  }
  double_up(tb->mine, period, es);
  double_up(tb->want, period, es);
  fill_sentinel(tb);
}

void perf_tables_copy(struct perf_tables *tb, perf_type t) {
  size_t es = type_sizes[t];
  tb->es = es;
  tb->reduction = 0;
  for (size_t i = 0; i < COPY_PERIOD; i++)
    store_value(t, tb->copy + i * es, (double)i - 30);
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
