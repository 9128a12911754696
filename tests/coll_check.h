/*
 * coll_check.h - what test_coll.c and test_comm.c share: deterministic per-rank inputs, an
 * independent reference for every reduction, element-wise comparison that reports the first
 * mismatch, and buffers with guard bytes on both sides.
 *
 * The reference never calls the library: every rank can compute every other rank's input from
 * (salt, rank, index), so expected results are computed locally and compared bit for bit (any
 * NaN equals any NaN). Inputs are chosen so results are exact whatever the reduction order:
 * integers use the whole range and wrap (two's complement, as the library specifies); floating
 * sums use small integers, products values in {1, 2, -1} (|product| <= 2^8 on 8 ranks), and
 * max/min multiples of 1/4 in [-250, 250], all exact in float16.
 *
 * Header-only (static inline) because only test_*.c and harness.c are compiled into a test.
 */
#ifndef HCCL_TEST_COLL_CHECK_H
#define HCCL_TEST_COLL_CHECK_H

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "hccl.h"

/* ---- time ---- */

static inline double cc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- element types ---- */

static inline size_t cc_dtype_size(HcclDataType dt) {
  switch (dt) {
  case HCCL_DATA_TYPE_INT8:
  case HCCL_DATA_TYPE_UINT8:
    return 1;
  case HCCL_DATA_TYPE_FP16:
  case HCCL_DATA_TYPE_BFP16:
  case HCCL_DATA_TYPE_INT16:
  case HCCL_DATA_TYPE_UINT16:
    return 2;
  case HCCL_DATA_TYPE_INT32:
  case HCCL_DATA_TYPE_UINT32:
  case HCCL_DATA_TYPE_FP32:
    return 4;
  case HCCL_DATA_TYPE_INT64:
  case HCCL_DATA_TYPE_UINT64:
  case HCCL_DATA_TYPE_FP64:
    return 8;
  default:
    return 0;
  }
}

static inline const char *cc_dtype_name(HcclDataType dt) {
  switch (dt) {
  case HCCL_DATA_TYPE_INT8:
    return "int8";
  case HCCL_DATA_TYPE_UINT8:
    return "uint8";
  case HCCL_DATA_TYPE_INT16:
    return "int16";
  case HCCL_DATA_TYPE_UINT16:
    return "uint16";
  case HCCL_DATA_TYPE_INT32:
    return "int32";
  case HCCL_DATA_TYPE_UINT32:
    return "uint32";
  case HCCL_DATA_TYPE_FP16:
    return "fp16";
  case HCCL_DATA_TYPE_BFP16:
    return "bf16";
  case HCCL_DATA_TYPE_FP32:
    return "fp32";
  case HCCL_DATA_TYPE_INT64:
    return "int64";
  case HCCL_DATA_TYPE_UINT64:
    return "uint64";
  case HCCL_DATA_TYPE_FP64:
    return "fp64";
  default:
    return "?";
  }
}

static inline const char *cc_op_name(HcclReduceOp op) {
  static const char *const names[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
  return (unsigned)op < 8 ? names[op] : "?";
}

static inline int cc_is_float(HcclDataType dt) {
  return dt == HCCL_DATA_TYPE_FP16 || dt == HCCL_DATA_TYPE_BFP16 || dt == HCCL_DATA_TYPE_FP32 ||
         dt == HCCL_DATA_TYPE_FP64;
}

static inline int cc_is_signed(HcclDataType dt) {
  return dt == HCCL_DATA_TYPE_INT8 || dt == HCCL_DATA_TYPE_INT16 || dt == HCCL_DATA_TYPE_INT32 ||
         dt == HCCL_DATA_TYPE_INT64;
}

/* Whether the library reduces dt with op: everything, but the bitwise ops on floats. */
static inline int cc_reduces(HcclDataType dt, HcclReduceOp op) {
  return op < HCCL_REDUCE_BAND || !cc_is_float(dt);
}

/* float16 <-> float32, written here independently of the library's converters. Only values
 * exactly representable in float16 (and NaN, +-Inf) are converted by the tests, so the
 * narrowing direction only needs to be exact for those; it rounds to nearest-even anyway. */
static inline float cc_half_to_float(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0)
    v = ldexpf((float)man, -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = ldexpf((float)(man | 0x400), exp - 25);
  return sign ? -v : v;
}

static inline uint16_t cc_float_to_half(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isnan(f)) return 0x7e00;
  float a = fabsf(f);
  if (a >= 65520.0f) return sign | 0x7c00; /* rounds to Inf */
  if (a < ldexpf(1.0f, -14)) {             /* subnormal: units of 2^-24 */
    return sign | (uint16_t)nearbyintf(ldexpf(a, 24));
  }
  int e;
  frexpf(a, &e);                                /* a = m * 2^e, m in [0.5, 1) */
  float scaled = nearbyintf(ldexpf(a, 11 - e)); /* 11 significant bits */
  if (scaled >= 2048.0f) {
    scaled /= 2;
    e++;
  }
  if (e + 14 >= 31) return sign | 0x7c00;
  return sign | (uint16_t)((e + 14) << 10) | ((uint16_t)scaled & 0x3ff);
}

/* bfloat16: the top half of a float32; narrowed with round-to-nearest-even on the value
 * (double arithmetic, not the library's bit trick). */
static inline float cc_bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t cc_float_to_bf16(double x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  if (isnan(x)) return 0x7fc0;
  if (isinf(x)) return sign | 0x7f80;
  if (a < ldexp(1.0, -126)) return sign | (uint16_t)nearbyint(ldexp(a, 133));
  int e;
  frexp(a, &e);
  double scaled = nearbyint(ldexp(a, 8 - e)); /* 8 significant bits */
  if (scaled >= 256.0) {
    scaled /= 2;
    e++;
  }
  if (e + 126 >= 255) return sign | 0x7f80;
  return sign | (uint16_t)((e + 126) << 7) | ((uint16_t)scaled & 0x7f);
}

/* ---- deterministic inputs ---- */

static inline uint64_t cc_hash(uint32_t salt, int rank, uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull ^ (uint64_t)(rank + 1) * 0xC2B2AE3D27D4EB4Full ^
               (uint64_t)salt * 0x165667B19E3779F9ull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

/* Integer input of rank `rank`, element i, as the low bits of a hash (the whole range),
 * sign- or zero-extended to 64 bits. */
static inline int64_t cc_in_int(HcclDataType dt, uint32_t salt, int rank, uint64_t i) {
  uint64_t h = cc_hash(salt, rank, i);
  unsigned bits = (unsigned)cc_dtype_size(dt) * 8;
  if (bits == 64) return (int64_t)h;
  h &= (1ull << bits) - 1;
  if (cc_is_signed(dt) && (h >> (bits - 1))) h |= ~((1ull << bits) - 1);
  return (int64_t)h;
}

/* Floating input (exact in float16 and bfloat16) chosen for op, as described at the top:
 * max and min take multiples of 1/4 in [-250, 250] (float16, float32, float64) or in
 * [-31.75, 31.75] (bfloat16, 8 significant bits). */
static inline float cc_in_float_dt(HcclDataType dt, HcclReduceOp op, uint32_t salt, int rank,
                                   uint64_t i) {
  uint64_t h = cc_hash(salt, rank, i);
  switch (op) {
  case HCCL_REDUCE_SUM:
  case HCCL_REDUCE_AVG:
    return (float)((int)(h % 17) - 8);
  case HCCL_REDUCE_PROD: {
    static const float v[3] = {1.0f, 2.0f, -1.0f};
    return v[h % 3];
  }
  default:
    if (dt == HCCL_DATA_TYPE_BFP16) return (float)((int)(h % 255) - 127) * 0.25f;
    return (float)((int)(h % 2001) - 1000) * 0.25f;
  }
}
static inline float cc_in_float(HcclReduceOp op, uint32_t salt, int rank, uint64_t i) {
  return cc_in_float_dt(HCCL_DATA_TYPE_FP32, op, salt, rank, i);
}

/* Stores the value v (exact in the type, or rounded to it) as element j of p. */
static inline void cc_store(void *p, HcclDataType dt, uint64_t j, double v, uint64_t bits) {
  switch (dt) {
  case HCCL_DATA_TYPE_FP16:
    ((uint16_t *)p)[j] = cc_float_to_half((float)v);
    break;
  case HCCL_DATA_TYPE_BFP16:
    ((uint16_t *)p)[j] = cc_float_to_bf16(v);
    break;
  case HCCL_DATA_TYPE_FP32:
    ((float *)p)[j] = (float)v;
    break;
  case HCCL_DATA_TYPE_FP64:
    ((double *)p)[j] = v;
    break;
  default:
    memcpy((char *)p + j * cc_dtype_size(dt), &bits, cc_dtype_size(dt)); /* little-endian */
  }
}

/* Writes input(rank, first + j) for j in [0, count) into p. */
static inline void cc_fill_input(void *p, HcclDataType dt, HcclReduceOp op, uint32_t salt, int rank,
                                 uint64_t first, uint64_t count) {
  for (uint64_t j = 0; j < count; j++) {
    uint64_t i = first + j;
    if (cc_is_float(dt))
      cc_store(p, dt, j, cc_in_float_dt(dt, op, salt, rank, i), 0);
    else
      cc_store(p, dt, j, 0, (uint64_t)cc_in_int(dt, salt, rank, i));
  }
}

/* Writes the reduction over ranks 0..nranks-1 of input(r, first + j) into out[j]. Integers
 * accumulate modulo 2^64 and are truncated (the same as wrapping at every step); AVG divides
 * the wrapped sum toward zero. Floats are exact sums, products and selections; AVG is the
 * exact sum divided by nranks, rounded once to the type. */
static inline void cc_reduce_expect(void *out, HcclDataType dt, HcclReduceOp op, uint32_t salt,
                                    int nranks, uint64_t first, uint64_t count) {
  unsigned bits = (unsigned)cc_dtype_size(dt) * 8;
  uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  for (uint64_t j = 0; j < count; j++) {
    uint64_t i = first + j;
    if (!cc_is_float(dt)) {
      int64_t v0 = cc_in_int(dt, salt, 0, i);
      uint64_t acc = (uint64_t)v0;
      int64_t best = v0;
      uint64_t ubest = (uint64_t)v0 & mask;
      for (int r = 1; r < nranks; r++) {
        int64_t v = cc_in_int(dt, salt, r, i);
        uint64_t u = (uint64_t)v & mask;
        if (op == HCCL_REDUCE_SUM || op == HCCL_REDUCE_AVG) acc += (uint64_t)v;
        if (op == HCCL_REDUCE_PROD) acc *= (uint64_t)v;
        if (op == HCCL_REDUCE_BAND) acc &= (uint64_t)v;
        if (op == HCCL_REDUCE_BOR) acc |= (uint64_t)v;
        if (op == HCCL_REDUCE_BXOR) acc ^= (uint64_t)v;
        if (v > best) best = op == HCCL_REDUCE_MAX ? v : best;
        if (v < best) best = op == HCCL_REDUCE_MIN ? v : best;
        if (u > ubest) ubest = op == HCCL_REDUCE_MAX ? u : ubest;
        if (u < ubest) ubest = op == HCCL_REDUCE_MIN ? u : ubest;
      }
      if (op == HCCL_REDUCE_MAX || op == HCCL_REDUCE_MIN)
        acc = cc_is_signed(dt) ? (uint64_t)best : ubest;
      if (op == HCCL_REDUCE_AVG) {
        uint64_t sum = acc & mask;
        if (cc_is_signed(dt)) {
          int64_t ssum = bits < 64 && (sum >> (bits - 1)) ? (int64_t)(sum | ~mask) : (int64_t)sum;
          acc = (uint64_t)(ssum / nranks);
        } else {
          acc = sum / (uint64_t)nranks;
        }
      }
      cc_store(out, dt, j, 0, acc & mask);
    } else {
      double acc = cc_in_float_dt(dt, op, salt, 0, i);
      for (int r = 1; r < nranks; r++) {
        double v = cc_in_float_dt(dt, op, salt, r, i);
        if (op == HCCL_REDUCE_SUM || op == HCCL_REDUCE_AVG) acc += v;
        if (op == HCCL_REDUCE_PROD) acc *= v;
        if (op == HCCL_REDUCE_MAX && v > acc) acc = v;
        if (op == HCCL_REDUCE_MIN && v < acc) acc = v;
      }
      if (op == HCCL_REDUCE_AVG) acc /= nranks;
      /* float16's and float32's round trip through float: exact but for AVG's quotient, which
       * float32 rounds once (correct for float32 and, 24 >= 2 * 11 + 2, for float16 too) */
      cc_store(out, dt, j, acc, 0);
    }
  }
}

/* ---- comparison ---- */

static inline int cc_is_nan(HcclDataType dt, const void *p, uint64_t i) {
  if (dt == HCCL_DATA_TYPE_FP32) return isnan(((const float *)p)[i]);
  if (dt == HCCL_DATA_TYPE_FP64) return isnan(((const double *)p)[i]);
  if (dt == HCCL_DATA_TYPE_FP16) {
    uint16_t h = ((const uint16_t *)p)[i];
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
  }
  if (dt == HCCL_DATA_TYPE_BFP16) {
    uint16_t h = ((const uint16_t *)p)[i];
    return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
  }
  return 0;
}

/* Human form of element i (with its bits for floats). */
static inline const char *cc_elem_str(HcclDataType dt, const void *p, uint64_t i, char *buf,
                                      size_t len) {
  switch (dt) {
  case HCCL_DATA_TYPE_INT8:
    snprintf(buf, len, "%d", ((const int8_t *)p)[i]);
    break;
  case HCCL_DATA_TYPE_INT32:
    snprintf(buf, len, "%d", ((const int32_t *)p)[i]);
    break;
  case HCCL_DATA_TYPE_INT64:
    snprintf(buf, len, "0x%016llx", (unsigned long long)((const uint64_t *)p)[i]);
    break;
  case HCCL_DATA_TYPE_FP32: {
    uint32_t b;
    memcpy(&b, (const float *)p + i, 4);
    snprintf(buf, len, "%.9g (0x%08x)", ((const float *)p)[i], b);
    break;
  }
  case HCCL_DATA_TYPE_FP16: {
    uint16_t h = ((const uint16_t *)p)[i];
    snprintf(buf, len, "%.6g (0x%04x)", cc_half_to_float(h), h);
    break;
  }
  case HCCL_DATA_TYPE_FP64:
    snprintf(buf, len, "%.17g", ((const double *)p)[i]);
    break;
  case HCCL_DATA_TYPE_BFP16: {
    uint16_t h = ((const uint16_t *)p)[i];
    snprintf(buf, len, "%.4g (0x%04x)", cc_bf16_to_float(h), h);
    break;
  }
  default: { /* the other integer types: their bits */
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * cc_dtype_size(dt), cc_dtype_size(dt));
    snprintf(buf, len, "0x%llx", (unsigned long long)v);
  }
  }
  return buf;
}

/* Index of the first element where got differs from want (bitwise; NaN == NaN), or -1. */
static inline int64_t cc_first_mismatch(const void *got, const void *want, HcclDataType dt,
                                        uint64_t count) {
  size_t es = cc_dtype_size(dt);
  if (memcmp(got, want, count * es) == 0) return -1;
  for (uint64_t i = 0; i < count; i++) {
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) == 0) continue;
    if (cc_is_nan(dt, got, i) && cc_is_nan(dt, want, i)) continue;
    return (int64_t)i;
  }
  return -1;
}

/* ---- guarded buffers ---- */

#define CC_GUARD 64
#define CC_GUARD_BYTE 0xE7
#define CC_SENTINEL_BYTE 0xA5

/* bytes of payload at p, CC_GUARD guard bytes before and after it. */
typedef struct {
  unsigned char *mem;
  unsigned char *p;
  size_t bytes;
} cc_buf;

/* Allocates and fills the payload with CC_SENTINEL_BYTE; aborts when memory runs out. */
static inline void cc_buf_alloc(cc_buf *b, size_t bytes) {
  b->mem = malloc(bytes + 2 * CC_GUARD);
  if (!b->mem) abort();
  b->p = b->mem + CC_GUARD;
  b->bytes = bytes;
  memset(b->mem, CC_GUARD_BYTE, CC_GUARD);
  memset(b->p, CC_SENTINEL_BYTE, bytes);
  memset(b->p + bytes, CC_GUARD_BYTE, CC_GUARD);
}

/* 0 when both guards are intact; else the offset (relative to p, negative = before) + 1e9. */
static inline long cc_buf_guard_damage(const cc_buf *b) {
  for (long k = 0; k < CC_GUARD; k++) {
    if (b->mem[k] != CC_GUARD_BYTE) return k - CC_GUARD + 1000000000L;
    if (b->p[b->bytes + k] != CC_GUARD_BYTE) return (long)b->bytes + k + 1000000000L;
  }
  return 0;
}

static inline void cc_buf_free(cc_buf *b) {
  free(b->mem);
  b->mem = b->p = NULL;
}

/* Index of the first byte of p[0..n) that is not CC_SENTINEL_BYTE, or -1. */
static inline long cc_first_non_sentinel(const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t k = 0; k < n; k++)
    if (c[k] != CC_SENTINEL_BYTE) return (long)k;
  return -1;
}

/* ---- messages ---- */

/* True when msg mentions rank r: the word "rank" (any case, so "ranks" and "Rank" too)
 * followed by optional ' ', '=', ':' or '#' and then the number r with no further digit
 * ("rank 2", "rank=2", "peer rank #2"). */
static inline int cc_msg_names_rank(const char *msg, int r) {
  char num[16];
  snprintf(num, sizeof(num), "%d", r);
  size_t nl = strlen(num);
  for (const char *s = msg; *s; s++) {
    if (strncasecmp(s, "rank", 4) != 0) continue;
    const char *q = s + 4;
    if (*q == 's') q++;
    while (*q == ' ' || *q == '=' || *q == ':' || *q == '#')
      q++;
    if (strncmp(q, num, nl) == 0 && !isdigit((unsigned char)q[nl])) return 1;
  }
  return 0;
}

/* An in-place float sum allreduce of count elements at b on comm, after rank `gone` left the
 * job: it must fail, naming that rank (or as HCCL_E_REMOTE, a peer's report), within limit_s
 * seconds. 0 when it did; otherwise prints why (as rank `rank`) and returns 1. */
static inline int cc_allreduce_without(HcclComm comm, float *b, size_t count, int rank, int gone,
                                       double limit_s) {
  double t0 = cc_now();
  HcclResult r = HcclAllReduce(b, b, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
  double took = cc_now() - t0;
  const char *why = r == HCCL_SUCCESS ? "succeeded"
                    : !cc_msg_names_rank(HcclGetLastErrorMessage(), gone) && r != HCCL_E_REMOTE
                        ? "failed without naming it"
                    : took >= limit_s ? "took too long to fail"
                                      : NULL;
  if (!why) return 0;
  fprintf(stderr, "rank %d: allreduce without rank %d %s (%.1f s): %s\n", rank, gone, why, took,
          HcclGetLastErrorMessage());
  return 1;
}

#endif
