/*
 * reduce_native.c - the reduction kernels of the types the CPU computes in directly: the
 * eight integer types, float32 and float64 (contract and precision: reduce.h; float16 and
 * bfloat16 are reduce_half.c's; which set a call uses, and struct hccl_red: reduce.c). Two
 * kinds of kernel per (type, op): two inputs, out = a (op) b, and n inputs folded in order,
 * out = in[n-1] (op) (... (op) (in[1] (op) in[0])) (reduce.h's wmany).
 *
 * This is the hot loop of every reducing collective, so each kernel is a plain loop with no
 * switch inside, written once as C the compiler vectorizes, and built twice:
 *   - baseline: for the baseline ISA (SSE2 on x86-64), with no -ffast-math: integer sums and
 *     products are done in unsigned types (two's-complement wrap, no undefined behaviour),
 *     float max/min are written as IEEE selects the vectorizer turns into compare + blend;
 *   - avx2: the same loops under __attribute__((target("avx2"))): twice the width, and
 *     AVX2's 32- and 64-bit compares, min/max and multiplies.
 * AVX-512 is not built: no machine this is tested on has it, and the AVX2 kernels already run
 * at the memory's speed (bench/reduce_rate.c).
 *
 * The n-input kernels fold a block of four registers' width of every input into an accumulator
 * of four registers (64 bytes in the SSE2 build, 128 in the AVX2 one), input by input, and finish it with the two-input loop of
 * the last step (so AVG's and PREMUL_SUM's scale too), one write per element: the chain of
 * two-input kernels they replace wrote and re-read a scratch block per input. Each step is the
 * same operation on the same operands in the same order as that chain's, in the type itself,
 * so the bits are the chain's (float32 and float64 round at every step, as before).
 *
 * Integer AVG divides the wrapped sum by the group size, rounded toward zero: a shift (with
 * the rounding correction for negative values) when the size is a power of two, a division in
 * double for types up to 32 bits otherwise (both vectorize), and an integer division for
 * uint32 and the 64-bit types, which does not (x86 has no vector integer divide); only the
 * step that finishes an element divides, a 1/p share of the elements of a ring.
 */
#include "reduce_kern.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
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
  X(i8, uint8_t, int8_t, unsigned, int8_t)                                                         \
  X(u8, uint8_t, uint8_t, unsigned, int8_t)                                                        \
  X(i16, uint16_t, int16_t, unsigned, int16_t)                                                     \
  X(u16, uint16_t, uint16_t, unsigned, int16_t)                                                    \
  X(i32, uint32_t, int32_t, uint32_t, int32_t)                                                     \
  X(u32, uint32_t, uint32_t, uint32_t, int32_t)                                                    \
  X(i64, uint64_t, int64_t, uint64_t, int64_t)                                                     \
  X(u64, uint64_t, uint64_t, uint64_t, int64_t)

/* name: the type's short name; U: its unsigned type; S: its own type (signed or not); P: the
 * type a product is taken in; I: the signed type of its width (the lanes of a vector compare,
 * for the n-input kernels). */
#define HCCL__INT_OPS(name, U, S, P, I)                                                             \
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

#define HCCL__INT_LOOPS(name, U, S, P, I)                                                           \
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

/* ---- n inputs ----
 * name(out, in, n, c, s): blocks of four vectors of W bytes; in each, acc = in[0], acc =
 * OP(in[j], acc) for j = 1..n-2, then FIN (a two-input loop above) writes out = FIN(in[n-1],
 * acc). The accumulator is four GCC vectors, VOP being OP on them, so it stays in registers
 * across the inputs; W is the build's register width (16: SSE2, 32: AVX2; a wider generic
 * vector, or the same fold written as loops, GCC 12 keeps in memory or turns scalar). The
 * last, shorter block takes the scalar OP. Element i of in[n-1] is read before element i of
 * out is written, so out may be in[n-1] exactly. */

/* The ops on vectors VT (their lanes' mask type VI): max/min as the scalar ones, a compare
 * giving the lanes that take x, and a select on the bits. */
#define HCCL__V_SUM(VT, VI, x, a) ((x) + (a))
#define HCCL__V_PROD(VT, VI, x, a) ((x) * (a))
#define HCCL__V_BAND(VT, VI, x, a) ((x) & (a))
#define HCCL__V_BOR(VT, VI, x, a) ((x) | (a))
#define HCCL__V_BXOR(VT, VI, x, a) ((x) ^ (a))
#define HCCL__V_SEL(VT, VI, m, x, a) ((VT)(((VI)(x) & (m)) | ((VI)(a) & ~(m))))
#define HCCL__V_MAX(VT, VI, x, a) HCCL__V_SEL(VT, VI, (VI)(((x) != (x)) | ((x) > (a))), x, a)
#define HCCL__V_MIN(VT, VI, x, a) HCCL__V_SEL(VT, VI, (VI)(((x) != (x)) | ((x) < (a))), x, a)

#define HCCL__LOOP_MANY(name, T, I, OP, VOP, FIN, W)                                               \
  HCCL__INLINE void name##_##W(void *out, const void *const in[], uint32_t n, size_t c,            \
                               const struct hccl_scale *s) {                                       \
    typedef T vt __attribute__((vector_size(W)));                                                  \
    typedef I vi __attribute__((vector_size(W), unused));                                          \
    enum { L = W / sizeof(T), BLK = 4 * L };                                                       \
    T *o = out, a[BLK];                                                                            \
    size_t i0 = 0;                                                                                 \
    for (; i0 + BLK <= c; i0 += BLK) {                                                             \
      vt a0, a1, a2, a3, x0, x1, x2, x3;                                                           \
      const T *p = (const T *)in[0] + i0;                                                          \
      memcpy(&a0, p, W), memcpy(&a1, p + L, W), memcpy(&a2, p + 2 * L, W);                         \
      memcpy(&a3, p + 3 * L, W);                                                                   \
      for (uint32_t j = 1; j + 1 < n; j++) {                                                       \
        p = (const T *)in[j] + i0;                                                                 \
        memcpy(&x0, p, W), memcpy(&x1, p + L, W), memcpy(&x2, p + 2 * L, W);                       \
        memcpy(&x3, p + 3 * L, W);                                                                 \
        a0 = VOP(vt, vi, x0, a0), a1 = VOP(vt, vi, x1, a1), a2 = VOP(vt, vi, x2, a2);              \
        a3 = VOP(vt, vi, x3, a3);                                                                  \
      }                                                                                            \
      memcpy(a, &a0, W), memcpy(a + L, &a1, W), memcpy(a + 2 * L, &a2, W);                         \
      memcpy(a + 3 * L, &a3, W);                                                                   \
      FIN(o + i0, (const T *)in[n - 1] + i0, a, BLK, s);                                           \
    }                                                                                              \
    if (i0 == c) return;                                                                           \
    size_t m = c - i0;                                                                             \
    memcpy(a, (const T *)in[0] + i0, m * sizeof(T));                                               \
    for (uint32_t j = 1; j + 1 < n; j++) {                                                         \
      const T *x = (const T *)in[j] + i0;                                                          \
      for (size_t i = 0; i < m; i++)                                                               \
        a[i] = OP(x[i], a[i]);                                                                     \
    }                                                                                              \
    FIN(o + i0, (const T *)in[n - 1] + i0, a, m, s);                                               \
  }

/* Every op's n-input kernel of one type at width W, named many_<t>_<kind>_<W> after its last
 * step: the plain ops fold with themselves; AVG and PREMUL_SUM fold with the sum and finish
 * with sum_div / sum_mul. U: the type sums are taken in, S: the one max/min compare in, I: the
 * signed integer type of the same width (the vector compares' lanes). */
#define HCCL__MANY_COMMON(name, U, S, I, W)                                                        \
  HCCL__LOOP_MANY(many_##name##_sum, U, I, name##_sum, HCCL__V_SUM, loop_##name##_sum, W)          \
  HCCL__LOOP_MANY(many_##name##_prod, U, I, name##_prod, HCCL__V_PROD, loop_##name##_prod, W)      \
  HCCL__LOOP_MANY(many_##name##_max, S, I, name##_max, HCCL__V_MAX, loop_##name##_max, W)          \
  HCCL__LOOP_MANY(many_##name##_min, S, I, name##_min, HCCL__V_MIN, loop_##name##_min, W)          \
  HCCL__LOOP_MANY(many_##name##_sum_div, U, I, name##_sum, HCCL__V_SUM, loop_##name##_sum_div, W)  \
  HCCL__LOOP_MANY(many_##name##_sum_mul, U, I, name##_sum, HCCL__V_SUM, loop_##name##_sum_mul, W)
#define HCCL__INT_MANY(name, U, S, I, W)                                                           \
  HCCL__MANY_COMMON(name, U, S, I, W)                                                              \
  HCCL__LOOP_MANY(many_##name##_band, U, I, name##_band, HCCL__V_BAND, loop_##name##_band, W)      \
  HCCL__LOOP_MANY(many_##name##_bor, U, I, name##_bor, HCCL__V_BOR, loop_##name##_bor, W)          \
  HCCL__LOOP_MANY(many_##name##_bxor, U, I, name##_bxor, HCCL__V_BXOR, loop_##name##_bxor, W)
#define HCCL__INT_MANY16(name, U, S, P, I) HCCL__INT_MANY(name, U, S, I, 16)
#define HCCL__INT_MANY32(name, U, S, P, I) HCCL__INT_MANY(name, U, S, I, 32)
HCCL__INT_TYPES(HCCL__INT_MANY16)
HCCL__MANY_COMMON(f32, float, float, int32_t, 16)
HCCL__MANY_COMMON(f64, double, double, int64_t, 16)
#if HCCL__HAVE_X86
HCCL__INT_TYPES(HCCL__INT_MANY32)
HCCL__MANY_COMMON(f32, float, float, int32_t, 32)
HCCL__MANY_COMMON(f64, double, double, int64_t, 32)
#endif

/* ---- the two builds ----
 * Every kernel wrapped in a function built with ATTR, named <PRE>_<t>_<kind>_<SUFFIX>, PRE
 * being loop (two inputs) or many (n inputs, at vector width W), and a table of each: rows in
 * HcclDataType order (NULL rows for float16 and bfloat16, reduce_half.c's), columns enum
 * hccl_kern. HK_MUL (post(a) alone) has only the two-input form: HCCL__IF_<PRE>. */
#define HCCL__WRAP_loop(fn, SUFFIX, ATTR, W)                                                       \
  static ATTR void fn##_##SUFFIX(void *out, const void *a, const void *b, size_t n,                \
                                 const struct hccl_scale *s) {                                     \
    fn(out, a, b, n, s);                                                                           \
  }
#define HCCL__WRAP_many(fn, SUFFIX, ATTR, W)                                                       \
  static ATTR void fn##_##SUFFIX(void *out, const void *const in[], uint32_t n, size_t c,          \
                                 const struct hccl_scale *s) {                                     \
    fn##_##W(out, in, n, c, s);                                                                    \
  }
#define HCCL__IF_loop(...) __VA_ARGS__
#define HCCL__IF_many(...)

/* The kernels every type has; the integer types also have the bitwise ones. */
#define HCCL__WRAP_FLOAT(PRE, name, SUFFIX, ATTR, W)                                               \
  HCCL__WRAP_##PRE(PRE##_##name##_sum, SUFFIX, ATTR, W)                                            \
  HCCL__WRAP_##PRE(PRE##_##name##_prod, SUFFIX, ATTR, W)                                           \
  HCCL__WRAP_##PRE(PRE##_##name##_max, SUFFIX, ATTR, W)                                            \
  HCCL__WRAP_##PRE(PRE##_##name##_min, SUFFIX, ATTR, W)                                            \
  HCCL__WRAP_##PRE(PRE##_##name##_sum_div, SUFFIX, ATTR, W)                                        \
  HCCL__WRAP_##PRE(PRE##_##name##_sum_mul, SUFFIX, ATTR, W)                                        \
  HCCL__IF_##PRE(HCCL__WRAP_##PRE(PRE##_##name##_mul, SUFFIX, ATTR, W))
#define HCCL__WRAP_INT(PRE, name, SUFFIX, ATTR, W)                                                 \
  HCCL__WRAP_FLOAT(PRE, name, SUFFIX, ATTR, W)                                                     \
  HCCL__WRAP_##PRE(PRE##_##name##_band, SUFFIX, ATTR, W)                                           \
  HCCL__WRAP_##PRE(PRE##_##name##_bor, SUFFIX, ATTR, W)                                            \
  HCCL__WRAP_##PRE(PRE##_##name##_bxor, SUFFIX, ATTR, W)
#define HCCL__WRAP_ALL(PRE, SUFFIX, ATTR, W)                                                       \
  HCCL__WRAP_INT(PRE, i8, SUFFIX, ATTR, W)                                                         \
  HCCL__WRAP_INT(PRE, u8, SUFFIX, ATTR, W)                                                         \
  HCCL__WRAP_INT(PRE, i16, SUFFIX, ATTR, W)                                                        \
  HCCL__WRAP_INT(PRE, u16, SUFFIX, ATTR, W)                                                        \
  HCCL__WRAP_INT(PRE, i32, SUFFIX, ATTR, W)                                                        \
  HCCL__WRAP_INT(PRE, u32, SUFFIX, ATTR, W)                                                        \
  HCCL__WRAP_INT(PRE, i64, SUFFIX, ATTR, W)                                                        \
  HCCL__WRAP_INT(PRE, u64, SUFFIX, ATTR, W)                                                        \
  HCCL__WRAP_FLOAT(PRE, f32, SUFFIX, ATTR, W)                                                      \
  HCCL__WRAP_FLOAT(PRE, f64, SUFFIX, ATTR, W)

#define HCCL__ROW_COMMON(PRE, name, SUFFIX)                                                        \
  [HK_SUM] = PRE##_##name##_sum_##SUFFIX, [HK_PROD] = PRE##_##name##_prod_##SUFFIX,                \
  [HK_MAX] = PRE##_##name##_max_##SUFFIX, [HK_MIN] = PRE##_##name##_min_##SUFFIX,                  \
  [HK_SUM_DIV] = PRE##_##name##_sum_div_##SUFFIX,                                                  \
  [HK_SUM_MUL] = PRE##_##name##_sum_mul_##SUFFIX                                                   \
  HCCL__IF_##PRE(, [HK_MUL] = PRE##_##name##_mul_##SUFFIX)
#define HCCL__ROW_FLOAT(PRE, name, SUFFIX) {HCCL__ROW_COMMON(PRE, name, SUFFIX)}
#define HCCL__ROW_INT(PRE, name, SUFFIX)                                                           \
  {                                                                                                \
    HCCL__ROW_COMMON(PRE, name, SUFFIX), [HK_BAND] = PRE##_##name##_band_##SUFFIX,                 \
    [HK_BOR] = PRE##_##name##_bor_##SUFFIX, [HK_BXOR] = PRE##_##name##_bxor_##SUFFIX,              \
  }
#define HCCL__TABLE(PRE, SUFFIX)                                                                   \
  {                                                                                                \
    [HCCL_DATA_TYPE_INT8] = HCCL__ROW_INT(PRE, i8, SUFFIX),                                        \
    [HCCL_DATA_TYPE_UINT8] = HCCL__ROW_INT(PRE, u8, SUFFIX),                                       \
    [HCCL_DATA_TYPE_INT16] = HCCL__ROW_INT(PRE, i16, SUFFIX),                                      \
    [HCCL_DATA_TYPE_UINT16] = HCCL__ROW_INT(PRE, u16, SUFFIX),                                     \
    [HCCL_DATA_TYPE_INT32] = HCCL__ROW_INT(PRE, i32, SUFFIX),                                      \
    [HCCL_DATA_TYPE_UINT32] = HCCL__ROW_INT(PRE, u32, SUFFIX),                                     \
    [HCCL_DATA_TYPE_INT64] = HCCL__ROW_INT(PRE, i64, SUFFIX),                                      \
    [HCCL_DATA_TYPE_UINT64] = HCCL__ROW_INT(PRE, u64, SUFFIX),                                     \
    [HCCL_DATA_TYPE_FP32] = HCCL__ROW_FLOAT(PRE, f32, SUFFIX),                                     \
    [HCCL_DATA_TYPE_FP64] = HCCL__ROW_FLOAT(PRE, f64, SUFFIX),                                     \
  }

HCCL__WRAP_ALL(loop, base, , 16)
HCCL__WRAP_ALL(many, base, , 16)
static const hccl__reduce_fn kernels_portable[HCCL_DATA_TYPE_RESERVED][HK_NKINDS] =
    HCCL__TABLE(loop, base);
static const hccl__reduce_many_fn many_portable[HCCL_DATA_TYPE_RESERVED][HK_NKINDS] =
    HCCL__TABLE(many, base);

#if HCCL__HAVE_X86

HCCL__WRAP_ALL(loop, avx2, __attribute__((target("avx2"))), 32)
HCCL__WRAP_ALL(many, avx2, __attribute__((target("avx2"))), 32)
static const hccl__reduce_fn kernels_avx2[HCCL_DATA_TYPE_RESERVED][HK_NKINDS] =
    HCCL__TABLE(loop, avx2);
static const hccl__reduce_many_fn many_avx2[HCCL_DATA_TYPE_RESERVED][HK_NKINDS] =
    HCCL__TABLE(many, avx2);

#else

static const hccl__reduce_fn kernels_avx2[HCCL_DATA_TYPE_RESERVED][HK_NKINDS];
static const hccl__reduce_many_fn many_avx2[HCCL_DATA_TYPE_RESERVED][HK_NKINDS];

#endif

hccl__reduce_fn hccl__native_kernel(HcclDataType dt, bool avx2, enum hccl_kern k) {
  if ((unsigned)dt >= HCCL_DATA_TYPE_RESERVED || (unsigned)k >= HK_NKINDS) return NULL;
  return avx2 ? kernels_avx2[dt][k] : kernels_portable[dt][k];
}

hccl__reduce_many_fn hccl__native_many(HcclDataType dt, bool avx2, enum hccl_kern k) {
  if ((unsigned)dt >= HCCL_DATA_TYPE_RESERVED || (unsigned)k >= HK_NKINDS) return NULL;
  return avx2 ? many_avx2[dt][k] : many_portable[dt][k];
}
