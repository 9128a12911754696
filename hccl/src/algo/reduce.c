/*
 * reduce.c - the element-wise reduction kernels of the integer types, float32 and float64,
 * the choice of kernel set, and struct hccl_red, what a call hands its algorithms (contract
 * and precision: reduce.h). The float16 and bfloat16 kernels are reduce_half.c's. Beside
 * them, the copy with streaming stores that a step uses for a large output.
 *
 * This is the hot loop of every reducing collective, so the kernels of a call are looked up
 * once (hccl__red_make) and each is a plain loop with no switch inside. Each loop is written
 * once, as C the compiler vectorizes, and built twice:
 *   - baseline: for the baseline ISA (SSE2 on x86-64), with no -ffast-math: integer sums and
 *     products are done in unsigned types (two's-complement wrap, no undefined behaviour),
 *     float max/min are written as IEEE selects the vectorizer turns into compare + blend;
 *   - avx2: the same loops under __attribute__((target("avx2"))): twice the width, and
 *     AVX2's 32- and 64-bit compares, min/max and multiplies.
 * The avx2 set is used when the CPU has AVX2 and F16C (checked once, at the first lookup, by
 * CPUID: no ifunc resolver, which crashed under TSan); otherwise the baseline set.
 * AVX-512 is not built: no machine this is tested on has it, and the AVX2 kernels already run
 * at the memory's speed (bench/reduce_rate.c).
 *
 * Integer AVG divides the wrapped sum by the group size, rounded toward zero: a shift (with
 * the rounding correction for negative values) when the size is a power of two, a division in
 * double for types up to 32 bits otherwise (both vectorize), and an integer division for
 * uint32 and the 64-bit types, which does not (x86 has no vector integer divide); only the
 * step that finishes an element divides, a 1/p share of the elements of a ring.
 */
#include "reduce.h"

#include <string.h>

#include "half.h"
#include "reduce_kern.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HCCL__HAVE_X86 1
#else
#define HCCL__HAVE_X86 0
#endif

/* ---- element ops ----
 * Sums and products in the unsigned type of the same width (wrap by definition); the product
 * of two narrow unsigned values is taken in `unsigned` (uint8_t * uint8_t would be an int,
 * which overflows for uint16_t). Float max/min return a if a is NaN, b if b is NaN, so NaN
 * propagates from either side; on ties (+0 vs -0 included) they return b, as MAXPS does. */

#define HCCL__INT_TYPES(X)                                                                         \
  X(i8, uint8_t, int8_t, unsigned)                                                                 \
  X(u8, uint8_t, uint8_t, unsigned)                                                                \
  X(i16, uint16_t, int16_t, unsigned)                                                              \
  X(u16, uint16_t, uint16_t, unsigned)                                                             \
  X(i32, uint32_t, int32_t, uint32_t)                                                              \
  X(u32, uint32_t, uint32_t, uint32_t)                                                             \
  X(i64, uint64_t, int64_t, uint64_t)                                                              \
  X(u64, uint64_t, uint64_t, uint64_t)

/* name: the type's short name; U: its unsigned type; S: its own type (signed or not); P: the
 * type a product is taken in. */
#define HCCL__INT_OPS(name, U, S, P)                                                               \
  static inline U name##_sum(U a, U b) {                                                           \
    return (U)(a + b);                                                                             \
  }                                                                                                \
  static inline U name##_prod(U a, U b) {                                                          \
    return (U)((P)a * (P)b);                                                                       \
  }                                                                                                \
  static inline S name##_max(S a, S b) {                                                           \
    return a > b ? a : b;                                                                          \
  }                                                                                                \
  static inline S name##_min(S a, S b) {                                                           \
    return a < b ? a : b;                                                                          \
  }                                                                                                \
  static inline U name##_band(U a, U b) {                                                          \
    return (U)(a & b);                                                                             \
  }                                                                                                \
  static inline U name##_bor(U a, U b) {                                                           \
    return (U)(a | b);                                                                             \
  }                                                                                                \
  static inline U name##_bxor(U a, U b) {                                                          \
    return (U)(a ^ b);                                                                             \
  }                                                                                                \
  static inline U name##_sum_mul(U a, U b, uint64_t k) {                                           \
    return (U)((P)(U)(a + b) * (P)k);                                                              \
  }                                                                                                \
  static inline U name##_mul(U a, uint64_t k) {                                                    \
    return (U)((P)a * (P)k);                                                                       \
  }
HCCL__INT_TYPES(HCCL__INT_OPS)

#define HCCL__FLOAT_OPS(name, T, K)                                                                \
  static inline T name##_sum(T a, T b) {                                                           \
    return a + b;                                                                                  \
  }                                                                                                \
  static inline T name##_prod(T a, T b) {                                                          \
    return a * b;                                                                                  \
  }                                                                                                \
  static inline T name##_max(T a, T b) {                                                           \
    return ((a != a) | (a > b)) ? a : b; /* `|`, not `||`: no branch, so it vectorizes */          \
  }                                                                                                \
  static inline T name##_min(T a, T b) {                                                           \
    return ((a != a) | (a < b)) ? a : b;                                                           \
  }                                                                                                \
  static inline T name##_sum_div(T a, T b, K k) {                                                  \
    return (a + b) / k;                                                                            \
  }                                                                                                \
  static inline T name##_sum_mul(T a, T b, K k) {                                                  \
    return (a + b) * k;                                                                            \
  }                                                                                                \
  static inline T name##_mul(T a, K k) {                                                           \
    return a * k;                                                                                  \
  }
HCCL__FLOAT_OPS(f32, float, float)
HCCL__FLOAT_OPS(f64, double, double)

/* ---- generic loops ----
 * One always-inline loop per (type, op); each ISA build below wraps it in a function with
 * its own target attribute, and the loop is vectorized for that target after inlining. The
 * scale is read into a local first: a store through `o` could alias *s otherwise. */

#define HCCL__INLINE static inline __attribute__((always_inline))

#define HCCL__LOOP2(name, T, OP)                                                                   \
  HCCL__INLINE void name(void *out, const void *a, const void *b, size_t n,                        \
                         const struct hccl_scale *s) {                                             \
    (void)s;                                                                                       \
    T *o = out;                                                                                    \
    const T *x = a, *y = b;                                                                        \
    for (size_t i = 0; i < n; i++)                                                                 \
      o[i] = OP(x[i], y[i]);                                                                       \
  }
#define HCCL__LOOP2S(name, T, OP, FIELD)                                                           \
  HCCL__INLINE void name(void *out, const void *a, const void *b, size_t n,                        \
                         const struct hccl_scale *s) {                                             \
    const __typeof__(s->FIELD) k = s->FIELD;                                                       \
    T *o = out;                                                                                    \
    const T *x = a, *y = b;                                                                        \
    for (size_t i = 0; i < n; i++)                                                                 \
      o[i] = OP(x[i], y[i], k);                                                                    \
  }
#define HCCL__LOOP1S(name, T, OP, FIELD)                                                           \
  HCCL__INLINE void name(void *out, const void *a, const void *b, size_t n,                        \
                         const struct hccl_scale *s) {                                             \
    (void)b;                                                                                       \
    const __typeof__(s->FIELD) k = s->FIELD;                                                       \
    T *o = out;                                                                                    \
    const T *x = a;                                                                                \
    for (size_t i = 0; i < n; i++)                                                                 \
      o[i] = OP(x[i], k);                                                                          \
  }

/* Integer AVG: the wrapped sum in the type S, divided by k toward zero. A power of two is a
 * shift; a negative value first gets k - 1 added, so the shift rounds toward zero too. Other
 * divisors: for types whose values fit an int32 (NARROW), a division in double, truncated,
 * which vectorizes and is exact (|v| < 2^31 and k < 2^20: a quotient below an integer by at
 * least 1/k > 2^-20 stays below it after rounding to 53 bits); else an integer division. */
#define HCCL__LOOP_AVG(name, U, S, W, NARROW)                                                      \
  HCCL__INLINE void name(void *out, const void *a, const void *b, size_t n,                        \
                         const struct hccl_scale *s) {                                             \
    const uint64_t k = s->i;                                                                       \
    S *o = out;                                                                                    \
    const U *x = a, *y = b;                                                                        \
    if ((k & (k - 1)) == 0 && k != 0) {                                                            \
      const unsigned sh = (unsigned)__builtin_ctzll(k);                                            \
      const W bias = (W)(k - 1);                                                                   \
      for (size_t i = 0; i < n; i++) {                                                             \
        W v = (W)(S)(U)(x[i] + y[i]);                                                              \
        o[i] = (S)((v + (v < 0 ? bias : 0)) >> sh);                                                \
      }                                                                                            \
    } else if (NARROW && k < (1u << 20)) {                                                         \
      const double kd = (double)k;                                                                 \
      for (size_t i = 0; i < n; i++)                                                               \
        o[i] = (S)(int32_t)((double)(int32_t)(S)(U)(x[i] + y[i]) / kd);                            \
    } else {                                                                                       \
      for (size_t i = 0; i < n; i++)                                                               \
        o[i] = (S)((W)(S)(U)(x[i] + y[i]) / (W)k);                                                 \
    }                                                                                              \
  }
/* The unsigned types: the same with nothing to correct. */
#define HCCL__LOOP_UAVG(name, U, NARROW)                                                           \
  HCCL__INLINE void name(void *out, const void *a, const void *b, size_t n,                        \
                         const struct hccl_scale *s) {                                             \
    const uint64_t k = s->i;                                                                       \
    U *o = out;                                                                                    \
    const U *x = a, *y = b;                                                                        \
    if ((k & (k - 1)) == 0 && k != 0) {                                                            \
      const unsigned sh = (unsigned)__builtin_ctzll(k);                                            \
      for (size_t i = 0; i < n; i++)                                                               \
        o[i] = (U)((uint64_t)(U)(x[i] + y[i]) >> sh);                                              \
    } else if (NARROW && k < (1u << 20)) {                                                         \
      const double kd = (double)k;                                                                 \
      for (size_t i = 0; i < n; i++)                                                               \
        o[i] = (U)(int32_t)((double)(int32_t)(U)(x[i] + y[i]) / kd);                               \
    } else {                                                                                       \
      for (size_t i = 0; i < n; i++)                                                               \
        o[i] = (U)((uint64_t)(U)(x[i] + y[i]) / k);                                                \
    }                                                                                              \
  }

#define HCCL__INT_LOOPS(name, U, S, P)                                                             \
  HCCL__LOOP2(loop_##name##_sum, U, name##_sum)                                                    \
  HCCL__LOOP2(loop_##name##_prod, U, name##_prod)                                                  \
  HCCL__LOOP2(loop_##name##_max, S, name##_max)                                                    \
  HCCL__LOOP2(loop_##name##_min, S, name##_min)                                                    \
  HCCL__LOOP2(loop_##name##_band, U, name##_band)                                                  \
  HCCL__LOOP2(loop_##name##_bor, U, name##_bor)                                                    \
  HCCL__LOOP2(loop_##name##_bxor, U, name##_bxor)                                                  \
  HCCL__LOOP2S(loop_##name##_sum_mul, U, name##_sum_mul, i)                                        \
  HCCL__LOOP1S(loop_##name##_mul, U, name##_mul, i)
HCCL__INT_TYPES(HCCL__INT_LOOPS)

/* The division's wide type: int64_t for the signed types (an int8_t sum over 200 ranks is
 * divided by 200, not by (int8_t)200), uint64_t for the unsigned ones. */
HCCL__LOOP_AVG(loop_i8_sum_div, uint8_t, int8_t, int64_t, 1)
HCCL__LOOP_AVG(loop_i16_sum_div, uint16_t, int16_t, int64_t, 1)
HCCL__LOOP_AVG(loop_i32_sum_div, uint32_t, int32_t, int64_t, 1)
HCCL__LOOP_AVG(loop_i64_sum_div, uint64_t, int64_t, int64_t, 0)
HCCL__LOOP_UAVG(loop_u8_sum_div, uint8_t, 1)
HCCL__LOOP_UAVG(loop_u16_sum_div, uint16_t, 1)
HCCL__LOOP_UAVG(loop_u32_sum_div, uint32_t, 0)
HCCL__LOOP_UAVG(loop_u64_sum_div, uint64_t, 0)

#define HCCL__FLOAT_LOOPS(name, T, FIELD)                                                          \
  HCCL__LOOP2(loop_##name##_sum, T, name##_sum)                                                    \
  HCCL__LOOP2(loop_##name##_prod, T, name##_prod)                                                  \
  HCCL__LOOP2(loop_##name##_max, T, name##_max)                                                    \
  HCCL__LOOP2(loop_##name##_min, T, name##_min)                                                    \
  HCCL__LOOP2S(loop_##name##_sum_div, T, name##_sum_div, FIELD)                                    \
  HCCL__LOOP2S(loop_##name##_sum_mul, T, name##_sum_mul, FIELD)                                    \
  HCCL__LOOP1S(loop_##name##_mul, T, name##_mul, FIELD)
HCCL__FLOAT_LOOPS(f32, float, f32)
HCCL__FLOAT_LOOPS(f64, double, f64)

/* ---- the two builds ----
 * Every loop wrapped in a function built with ATTR, named <loop>_<SUFFIX>, and a table of
 * them: rows in HcclDataType order (NULL rows for float16 and bfloat16, reduce_half.c's),
 * columns enum hccl_kern. */
#define HCCL__WRAP(loop, SUFFIX, ATTR)                                                             \
  static ATTR void loop##_##SUFFIX(void *out, const void *a, const void *b, size_t n,              \
                                   const struct hccl_scale *s) {                                   \
    loop(out, a, b, n, s);                                                                         \
  }
/* The kernels every type has; the integer types also have the bitwise ones. */
#define HCCL__WRAP_FLOAT(name, SUFFIX, ATTR)                                                       \
  HCCL__WRAP(loop_##name##_sum, SUFFIX, ATTR)                                                      \
  HCCL__WRAP(loop_##name##_prod, SUFFIX, ATTR)                                                     \
  HCCL__WRAP(loop_##name##_max, SUFFIX, ATTR)                                                      \
  HCCL__WRAP(loop_##name##_min, SUFFIX, ATTR)                                                      \
  HCCL__WRAP(loop_##name##_sum_div, SUFFIX, ATTR)                                                  \
  HCCL__WRAP(loop_##name##_sum_mul, SUFFIX, ATTR)                                                  \
  HCCL__WRAP(loop_##name##_mul, SUFFIX, ATTR)
#define HCCL__WRAP_INT(name, SUFFIX, ATTR)                                                         \
  HCCL__WRAP_FLOAT(name, SUFFIX, ATTR)                                                             \
  HCCL__WRAP(loop_##name##_band, SUFFIX, ATTR)                                                     \
  HCCL__WRAP(loop_##name##_bor, SUFFIX, ATTR)                                                      \
  HCCL__WRAP(loop_##name##_bxor, SUFFIX, ATTR)
#define HCCL__WRAP_ALL(SUFFIX, ATTR)                                                               \
  HCCL__WRAP_INT(i8, SUFFIX, ATTR)                                                                 \
  HCCL__WRAP_INT(u8, SUFFIX, ATTR)                                                                 \
  HCCL__WRAP_INT(i16, SUFFIX, ATTR)                                                                \
  HCCL__WRAP_INT(u16, SUFFIX, ATTR)                                                                \
  HCCL__WRAP_INT(i32, SUFFIX, ATTR)                                                                \
  HCCL__WRAP_INT(u32, SUFFIX, ATTR)                                                                \
  HCCL__WRAP_INT(i64, SUFFIX, ATTR)                                                                \
  HCCL__WRAP_INT(u64, SUFFIX, ATTR)                                                                \
  HCCL__WRAP_FLOAT(f32, SUFFIX, ATTR)                                                              \
  HCCL__WRAP_FLOAT(f64, SUFFIX, ATTR)

#define HCCL__ROW_COMMON(name, SUFFIX)                                                             \
  [HK_SUM] = loop_##name##_sum_##SUFFIX, [HK_PROD] = loop_##name##_prod_##SUFFIX,                  \
  [HK_MAX] = loop_##name##_max_##SUFFIX, [HK_MIN] = loop_##name##_min_##SUFFIX,                    \
  [HK_SUM_DIV] = loop_##name##_sum_div_##SUFFIX, [HK_SUM_MUL] = loop_##name##_sum_mul_##SUFFIX,    \
  [HK_MUL] = loop_##name##_mul_##SUFFIX
#define HCCL__ROW_FLOAT(name, SUFFIX) {HCCL__ROW_COMMON(name, SUFFIX)}
#define HCCL__ROW_INT(name, SUFFIX)                                                                \
  {                                                                                                \
    HCCL__ROW_COMMON(name, SUFFIX), [HK_BAND] = loop_##name##_band_##SUFFIX,                       \
    [HK_BOR] = loop_##name##_bor_##SUFFIX, [HK_BXOR] = loop_##name##_bxor_##SUFFIX,                \
  }
#define HCCL__TABLE(SUFFIX)                                                                        \
  {                                                                                                \
    [HCCL_DATA_TYPE_INT8] = HCCL__ROW_INT(i8, SUFFIX),                                             \
    [HCCL_DATA_TYPE_UINT8] = HCCL__ROW_INT(u8, SUFFIX),                                            \
    [HCCL_DATA_TYPE_INT16] = HCCL__ROW_INT(i16, SUFFIX),                                           \
    [HCCL_DATA_TYPE_UINT16] = HCCL__ROW_INT(u16, SUFFIX),                                          \
    [HCCL_DATA_TYPE_INT32] = HCCL__ROW_INT(i32, SUFFIX),                                           \
    [HCCL_DATA_TYPE_UINT32] = HCCL__ROW_INT(u32, SUFFIX),                                          \
    [HCCL_DATA_TYPE_INT64] = HCCL__ROW_INT(i64, SUFFIX),                                           \
    [HCCL_DATA_TYPE_UINT64] = HCCL__ROW_INT(u64, SUFFIX),                                          \
    [HCCL_DATA_TYPE_FP32] = HCCL__ROW_FLOAT(f32, SUFFIX),                                          \
    [HCCL_DATA_TYPE_FP64] = HCCL__ROW_FLOAT(f64, SUFFIX),                                          \
  }

HCCL__WRAP_ALL(base, )
static const hccl__reduce_fn kernels_portable[HCCL_DATA_TYPE_RESERVED][HK_NKINDS] =
    HCCL__TABLE(base);

#if HCCL__HAVE_X86

HCCL__WRAP_ALL(avx2, __attribute__((target("avx2"))))
static const hccl__reduce_fn kernels_avx2[HCCL_DATA_TYPE_RESERVED][HK_NKINDS] =
    HCCL__TABLE(avx2);

/* __builtin_cpu_supports("avx2") also checks that the OS saves the AVX registers (after
 * hccl__cpu_has_f16c's __builtin_cpu_init). */
static bool cpu_has_avx2_f16c(void) {
  return hccl__cpu_has_f16c() && __builtin_cpu_supports("avx2");
}

#else

static const hccl__reduce_fn kernels_avx2[HCCL_DATA_TYPE_RESERVED][HK_NKINDS];
static bool cpu_has_avx2_f16c(void) {
  return false;
}

#endif

/* ---- choosing a kernel set ----
 * -1 until the first lookup, then 1 for the avx2 set, 0 for the portable one. Relaxed atomics
 * are enough: the value only picks between two tables of valid kernels. */
static int g_use_avx2 = -1;

static bool use_avx2(void) {
  int v = __atomic_load_n(&g_use_avx2, __ATOMIC_RELAXED);
  if (v < 0) {
    int expected = -1;
    v = cpu_has_avx2_f16c() ? 1 : 0;
    /* a concurrent hccl__reduce_force_portable() wins over the first detection */
    if (!__atomic_compare_exchange_n(&g_use_avx2, &expected, v, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
      v = expected;
  }
  return v == 1;
}

/* Contract: see reduce.h. Asking for the fast set on a CPU without AVX2 and F16C leaves the
 * portable one in place. Not meant to be called while kernels are looked up on other threads
 * (a kernel already returned stays valid either way). */
bool hccl__reduce_force_portable(bool portable) {
  bool before = use_avx2();
  int v = (!portable && cpu_has_avx2_f16c()) ? 1 : 0;
  __atomic_store_n(&g_use_avx2, v, __ATOMIC_RELAXED);
  return before;
}

const char *hccl__reduce_isa(void) {
  return use_avx2() ? "avx2" : "portable";
}

static bool is_half(HcclDataType dt) {
  return dt == HCCL_DATA_TYPE_FP16 || dt == HCCL_DATA_TYPE_BFP16;
}

static bool is_float(HcclDataType dt) {
  return is_half(dt) || dt == HCCL_DATA_TYPE_FP32 || dt == HCCL_DATA_TYPE_FP64;
}

static hccl__reduce_fn kernel(HcclDataType dt, enum hccl_kern k) {
  bool avx2 = use_avx2();
  if (is_half(dt)) return hccl__half_kernel(dt == HCCL_DATA_TYPE_BFP16, avx2, k);
  return avx2 ? kernels_avx2[dt][k] : kernels_portable[dt][k];
}

bool hccl__reduce_supported(HcclDataType dt, HcclReduceOp op) {
  if (hccl__dtype_size(dt) == 0 || !hccl__op_valid(op)) return false;
  bool bitwise = op == HCCL_REDUCE_BAND || op == HCCL_REDUCE_BOR || op == HCCL_REDUCE_BXOR;
  return !(bitwise && is_float(dt));
}

/* The kernel kind of a built-in op's ordinary step (AVG's is the sum). */
static enum hccl_kern step_kind(HcclReduceOp op) {
  switch (op) {
  case HCCL_REDUCE_PROD:
    return HK_PROD;
  case HCCL_REDUCE_MAX:
    return HK_MAX;
  case HCCL_REDUCE_MIN:
    return HK_MIN;
  case HCCL_REDUCE_BAND:
    return HK_BAND;
  case HCCL_REDUCE_BOR:
    return HK_BOR;
  case HCCL_REDUCE_BXOR:
    return HK_BXOR;
  default: /* sum, avg, premul sum */
    return HK_SUM;
  }
}

/* The scale of a PREMUL_SUM, from one element of type dt: 16-bit floats widen exactly to
 * float32, integers are kept as their two's-complement bits (a product mod 2^bits does not
 * care whether the scalar was signed). */
static struct hccl_scale premul_scale(HcclDataType dt, const void *scalar) {
  struct hccl_scale s = {0};
  uint16_t h;
  switch (dt) {
  case HCCL_DATA_TYPE_FP16:
    memcpy(&h, scalar, 2);
    s.f32 = hccl__half_to_float(h);
    break;
  case HCCL_DATA_TYPE_BFP16:
    memcpy(&h, scalar, 2);
    s.f32 = hccl__bf16_to_float(h);
    break;
  case HCCL_DATA_TYPE_FP32:
    memcpy(&s.f32, scalar, 4);
    break;
  case HCCL_DATA_TYPE_FP64:
    memcpy(&s.f64, scalar, 8);
    break;
  case HCCL_DATA_TYPE_INT8: {
    int8_t v;
    memcpy(&v, scalar, 1);
    s.i = (uint64_t)(int64_t)v;
    break;
  }
  case HCCL_DATA_TYPE_INT16: {
    int16_t v;
    memcpy(&v, scalar, 2);
    s.i = (uint64_t)(int64_t)v;
    break;
  }
  case HCCL_DATA_TYPE_INT32: {
    int32_t v;
    memcpy(&v, scalar, 4);
    s.i = (uint64_t)(int64_t)v;
    break;
  }
  default: { /* the unsigned types and int64: zero-extended bits */
    size_t n = hccl__dtype_size(dt);
    memcpy(&s.i, scalar, n); /* little-endian: the low bytes */
    break;
  }
  }
  return s;
}

bool hccl__red_make(struct hccl_red *r, HcclDataType dt, HcclReduceOp op, const void *scalar,
                    uint32_t nranks) {
  memset(r, 0, sizeof(*r));
  bool premul = op == HCCL__RED_PREMUL_SUM;
  if (premul ? (hccl__dtype_size(dt) == 0 || !scalar) : !hccl__reduce_supported(dt, op))
    return false;
  enum hccl_kern k = step_kind(op);
  r->step = r->last = kernel(dt, k);
  if (op == HCCL_REDUCE_AVG) {
    r->s = (struct hccl_scale){.f32 = (float)nranks, .f64 = nranks, .i = nranks};
    r->last = kernel(dt, HK_SUM_DIV);
  } else if (premul) {
    r->s = premul_scale(dt, scalar);
    r->last = kernel(dt, HK_SUM_MUL);
    r->only = kernel(dt, HK_MUL);
  }
  if (is_half(dt) && (k == HK_SUM || k == HK_PROD)) {
    bool bf = dt == HCCL_DATA_TYPE_BFP16, avx2 = use_avx2();
    r->wmany = hccl__half_many(bf, avx2, k);
    r->wfinal = hccl__half_many(bf, avx2,
                                op == HCCL_REDUCE_AVG ? HK_SUM_DIV : premul ? HK_SUM_MUL : k);
  }
  return true;
}

/* Contract: see reduce.h. */
void hccl__red_fold(const struct hccl_red *r, bool finish, void *dst, const void *const src[],
                    uint32_t n, size_t c, void *tmp) {
  const struct hccl_scale *s = &r->s;
  if (r->wmany) {
    (finish ? r->wfinal : r->wmany)(dst, src, n, c, s);
    return;
  }
  const void *acc = src[0];
  for (uint32_t k = 1; k < n; k++) {
    void *to = k + 1 == n ? dst : tmp;
    (k + 1 == n && finish ? r->last : r->step)(to, src[k], acc, c, s);
    acc = to;
  }
}

hccl__reduce_fn hccl__reduce_kernel(HcclDataType dt, HcclReduceOp op) {
  static const uint64_t no_scalar;
  struct hccl_red r;
  return hccl__red_make(&r, dt, op, &no_scalar, 1) ? r.step : NULL;
}

/* Contract: see reduce.h. SSE2 streaming stores (baseline x86-64, so no dispatch), 64 bytes
 * per iteration once dst is 16-byte aligned; the head and the tail go through memcpy. The
 * closing sfence orders the streamed stores before any later store (a flag or counter another
 * thread or process polls), as ordinary stores are ordered on x86. */
void hccl__copy_stream(void *dst, const void *src, size_t n) {
#if HCCL__HAVE_X86
  char *d = dst;
  const char *s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; d += 64, s += 64, n -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16)),
            c = _mm_loadu_si128((const __m128i *)(s + 32)),
            e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  memcpy(d, s, n);
  _mm_sfence();
#else
  memcpy(dst, src, n);
#endif
}
