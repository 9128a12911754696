/*
 * reduce.c - the element-wise reduction kernels, out[i] = a[i] (op) b[i], that every reducing
 * collective runs on each chunk it receives. This is the hot loop of allreduce, so the kernel
 * for a (dtype, op) pair is looked up once (hccl__reduce_kernel) and each kernel is a plain
 * loop with no switch inside. Beside them, the copy with streaming stores that a step uses for
 * a large output (hccl__copy_stream).
 *
 * Three builds of the kernels live here:
 *   - baseline: plain C loops that GCC auto-vectorizes at -O3 for the baseline ISA (SSE2 on
 *     x86-64), with no -ffast-math: integer ops are done in unsigned types (two's-complement
 *     wrap, no undefined behaviour), float ops are written as IEEE selects the vectorizer can
 *     turn into compare + blend.
 *   - avx2: the same C loops compiled with __attribute__((target("avx2"))) (twice the vector
 *     width, and vpmulld for int32 prod), plus the float16 kernels written with F16C
 *     intrinsics: 8 halves are widened to float32, combined, and narrowed with
 *     round-to-nearest-even, 16 elements per iteration.
 *   - portable float16: half -> float, compute in float32, float -> half (RNE), in C with
 *     branch-free conversions that GCC vectorizes. It is about 15x slower than F16C on SSE2
 *     (SSE2 has no blend, unsigned compare or 32->16 pack, so a conversion costs ~20
 *     instructions): a fallback for CPUs (or VMs, e.g. QEMU's qemu64 model) without F16C.
 * The avx2 set is used when the CPU has both AVX2 and F16C (checked once); otherwise the
 * baseline set with the portable float16 kernels. hccl__reduce_force_portable() switches to
 * the latter so tests can compare the two.
 *
 * Why both float16 paths give the same bits: float32 holds the exact value of every half,
 * and a sum or product of two halves computed in float32 and rounded once to half is the
 * correctly rounded result (24 >= 2*11+2), so any RNE conversion gives the same answer.
 * NaN: hccl__half_to_float / hccl__float_to_half (base/half.h) reproduce what VCVTPH2PS /
 * VCVTPS2PH do (the quiet bit is set, the payload is shifted left / truncated), and max/min
 * select one input, so a NaN result has the same bits on both paths, with one exception: when
 * BOTH inputs of a sum or product are NaN, x86 returns the first source operand of the
 * instruction, and the compiler may swap the operands of the portable loop, so the payload
 * (and sign) of that NaN may come from either input. It is a NaN on both paths.
 *
 * Aliasing: out may equal a or b exactly (in-place allreduce). Every loop reads element i of
 * a and b before writing element i of out, and the vector loops read a whole vector before
 * writing it, so exact aliasing is correct; the kernels use no `restrict`. A partial overlap
 * is not supported.
 */
#include "reduce.h"

#include <string.h>

#include "half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HCCL__HAVE_X86 1
#else
#define HCCL__HAVE_X86 0
#endif

/* Row of the kernel tables for a dtype, or -1 when the library does not reduce it. */
static int dtype_row(HcclDataType dt) {
  switch (dt) {
  case HCCL_DATA_TYPE_INT8:
    return 0;
  case HCCL_DATA_TYPE_INT32:
    return 1;
  case HCCL_DATA_TYPE_FP16:
    return 2;
  case HCCL_DATA_TYPE_FP32:
    return 3;
  default:
    return -1;
  }
}

bool hccl__reduce_supported(HcclDataType dt, HcclReduceOp op) {
  return dtype_row(dt) >= 0 && hccl__op_valid(op);
}

/* ---- element ops ----
 * Integers go through unsigned types: the sum/product of two uint8_t is an int that cannot
 * overflow, and uint32_t arithmetic wraps by definition; storing back truncates (mod 2^8 /
 * 2^32), which is two's-complement wrap of the signed values. max/min use the signed types.
 * Float max/min return a if a is NaN, b if b is NaN, so NaN propagates from either side; on
 * ties (including +0 vs -0) they return b, the same as MAXPS/MINPS. */

static inline uint8_t u8_sum(uint8_t a, uint8_t b) {
  return (uint8_t)(a + b);
}
static inline uint8_t u8_prod(uint8_t a, uint8_t b) {
  return (uint8_t)(a * b);
}
static inline int8_t i8_max(int8_t a, int8_t b) {
  return a > b ? a : b;
}
static inline int8_t i8_min(int8_t a, int8_t b) {
  return a < b ? a : b;
}
static inline uint32_t u32_sum(uint32_t a, uint32_t b) {
  return a + b;
}
static inline uint32_t u32_prod(uint32_t a, uint32_t b) {
  return a * b;
}
static inline int32_t i32_max(int32_t a, int32_t b) {
  return a > b ? a : b;
}
static inline int32_t i32_min(int32_t a, int32_t b) {
  return a < b ? a : b;
}
static inline float f32_sum(float a, float b) {
  return a + b;
}
static inline float f32_prod(float a, float b) {
  return a * b;
}
static inline float f32_max(float a, float b) {
  return ((a != a) | (a > b)) ? a : b; /* `|`, not `||`: no branch, so it vectorizes */
}
static inline float f32_min(float a, float b) {
  return ((a != a) | (a < b)) ? a : b;
}

/* ---- generic loops ----
 * One always-inline loop per (type, op); each ISA build below wraps it in a function with its
 * own target attribute, and the loop is vectorized for that target after inlining. */

#define HCCL__LOOP(name, T, OP)                                                                    \
  static inline __attribute__((always_inline)) void name(void *out, const void *a, const void *b,  \
                                                         size_t n) {                               \
    T *o = out;                                                                                    \
    const T *x = a, *y = b;                                                                        \
    for (size_t i = 0; i < n; i++)                                                                 \
      o[i] = OP(x[i], y[i]);                                                                       \
  }

HCCL__LOOP(loop_i8_sum, uint8_t, u8_sum)
HCCL__LOOP(loop_i8_prod, uint8_t, u8_prod)
HCCL__LOOP(loop_i8_max, int8_t, i8_max)
HCCL__LOOP(loop_i8_min, int8_t, i8_min)
HCCL__LOOP(loop_i32_sum, uint32_t, u32_sum)
HCCL__LOOP(loop_i32_prod, uint32_t, u32_prod)
HCCL__LOOP(loop_i32_max, int32_t, i32_max)
HCCL__LOOP(loop_i32_min, int32_t, i32_min)
HCCL__LOOP(loop_f32_sum, float, f32_sum)
HCCL__LOOP(loop_f32_prod, float, f32_prod)
HCCL__LOOP(loop_f32_max, float, f32_max)
HCCL__LOOP(loop_f32_min, float, f32_min)

/* Portable float16: widen, combine in float32, round once. */
#define HCCL__LOOP_F16(name, OP)                                                                   \
  static void name(void *out, const void *a, const void *b, size_t n) {                            \
    uint16_t *o = out;                                                                             \
    const uint16_t *x = a, *y = b;                                                                 \
    for (size_t i = 0; i < n; i++)                                                                 \
      o[i] = hccl__float_to_half(OP(hccl__half_to_float(x[i]), hccl__half_to_float(y[i])));        \
  }

HCCL__LOOP_F16(f16_sum_portable, f32_sum)
HCCL__LOOP_F16(f16_prod_portable, f32_prod)
HCCL__LOOP_F16(f16_max_portable, f32_max)
HCCL__LOOP_F16(f16_min_portable, f32_min)

/* Wraps every generic loop in a function built with ATTR; the functions are named
 * <loop>_<SUFFIX>. */
#define HCCL__WRAP(loop, SUFFIX, ATTR)                                                             \
  static ATTR void loop##_##SUFFIX(void *out, const void *a, const void *b, size_t n) {            \
    loop(out, a, b, n);                                                                            \
  }
#define HCCL__WRAP_ALL(SUFFIX, ATTR)                                                               \
  HCCL__WRAP(loop_i8_sum, SUFFIX, ATTR)                                                            \
  HCCL__WRAP(loop_i8_prod, SUFFIX, ATTR)                                                           \
  HCCL__WRAP(loop_i8_max, SUFFIX, ATTR)                                                            \
  HCCL__WRAP(loop_i8_min, SUFFIX, ATTR)                                                            \
  HCCL__WRAP(loop_i32_sum, SUFFIX, ATTR)                                                           \
  HCCL__WRAP(loop_i32_prod, SUFFIX, ATTR)                                                          \
  HCCL__WRAP(loop_i32_max, SUFFIX, ATTR)                                                           \
  HCCL__WRAP(loop_i32_min, SUFFIX, ATTR)                                                           \
  HCCL__WRAP(loop_f32_sum, SUFFIX, ATTR)                                                           \
  HCCL__WRAP(loop_f32_prod, SUFFIX, ATTR)                                                          \
  HCCL__WRAP(loop_f32_max, SUFFIX, ATTR)                                                           \
  HCCL__WRAP(loop_f32_min, SUFFIX, ATTR)

HCCL__WRAP_ALL(base, )

/* Rows: int8, int32, fp16, fp32 (dtype_row); columns: HcclReduceOp. */
static const hccl__reduce_fn kernels_portable[4][HCCL_REDUCE_RESERVED] = {
    {loop_i8_sum_base, loop_i8_prod_base, loop_i8_max_base, loop_i8_min_base},
    {loop_i32_sum_base, loop_i32_prod_base, loop_i32_max_base, loop_i32_min_base},
    {f16_sum_portable, f16_prod_portable, f16_max_portable, f16_min_portable},
    {loop_f32_sum_base, loop_f32_prod_base, loop_f32_max_base, loop_f32_min_base},
};

#if HCCL__HAVE_X86

#define HCCL__AVX2 __attribute__((target("avx2,f16c")))

HCCL__WRAP_ALL(avx2, HCCL__AVX2)

/* float16 with F16C. The ops mirror the scalar ones: MAXPS(x, y) is (x > y ? x : y), so
 * blending x back in where x is NaN gives f32_max exactly (likewise min). */
static HCCL__AVX2 inline __m256 v_sum(__m256 x, __m256 y) {
  return _mm256_add_ps(x, y);
}
static HCCL__AVX2 inline __m256 v_prod(__m256 x, __m256 y) {
  return _mm256_mul_ps(x, y);
}
static HCCL__AVX2 inline __m256 v_max(__m256 x, __m256 y) {
  return _mm256_blendv_ps(_mm256_max_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
static HCCL__AVX2 inline __m256 v_min(__m256 x, __m256 y) {
  return _mm256_blendv_ps(_mm256_min_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static HCCL__AVX2 inline __m128i v_f16(const uint16_t *p, size_t i) {
  return _mm_loadu_si128((const __m128i *)(p + i));
}

/* 16 elements per iteration (two independent chains), then 8, then the last 0..7 through a
 * padded buffer with the same vector code, so the tail gives the same bits as the body. */
#define HCCL__LOOP_F16C(name, VOP)                                                                 \
  static HCCL__AVX2 void name(void *out, const void *a, const void *b, size_t n) {                 \
    uint16_t *o = out;                                                                             \
    const uint16_t *x = a, *y = b;                                                                 \
    size_t i = 0;                                                                                  \
    for (; i + 16 <= n; i += 16) {                                                                 \
      __m256 r0 = VOP(_mm256_cvtph_ps(v_f16(x, i)), _mm256_cvtph_ps(v_f16(y, i)));                 \
      __m256 r1 = VOP(_mm256_cvtph_ps(v_f16(x, i + 8)), _mm256_cvtph_ps(v_f16(y, i + 8)));         \
      _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(r0, _MM_FROUND_TO_NEAREST_INT));        \
      _mm_storeu_si128((__m128i *)(o + i + 8), _mm256_cvtps_ph(r1, _MM_FROUND_TO_NEAREST_INT));    \
    }                                                                                              \
    for (; i + 8 <= n; i += 8) {                                                                   \
      __m256 r = VOP(_mm256_cvtph_ps(v_f16(x, i)), _mm256_cvtph_ps(v_f16(y, i)));                  \
      _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));         \
    }                                                                                              \
    if (i < n) {                                                                                   \
      uint16_t tx[8] = {0}, ty[8] = {0}, to[8];                                                    \
      memcpy(tx, x + i, (n - i) * sizeof(uint16_t));                                               \
      memcpy(ty, y + i, (n - i) * sizeof(uint16_t));                                               \
      __m256 r = VOP(_mm256_cvtph_ps(v_f16(tx, 0)), _mm256_cvtph_ps(v_f16(ty, 0)));                \
      _mm_storeu_si128((__m128i *)to, _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));              \
      memcpy(o + i, to, (n - i) * sizeof(uint16_t));                                               \
    }                                                                                              \
  }

HCCL__LOOP_F16C(f16_sum_f16c, v_sum)
HCCL__LOOP_F16C(f16_prod_f16c, v_prod)
HCCL__LOOP_F16C(f16_max_f16c, v_max)
HCCL__LOOP_F16C(f16_min_f16c, v_min)

static const hccl__reduce_fn kernels_avx2[4][HCCL_REDUCE_RESERVED] = {
    {loop_i8_sum_avx2, loop_i8_prod_avx2, loop_i8_max_avx2, loop_i8_min_avx2},
    {loop_i32_sum_avx2, loop_i32_prod_avx2, loop_i32_max_avx2, loop_i32_min_avx2},
    {f16_sum_f16c, f16_prod_f16c, f16_max_f16c, f16_min_f16c},
    {loop_f32_sum_avx2, loop_f32_prod_avx2, loop_f32_max_avx2, loop_f32_min_avx2},
};

/* __builtin_cpu_supports("avx2") also checks that the OS saves the AVX registers (after
 * hccl__cpu_has_f16c's __builtin_cpu_init). */
static bool cpu_has_avx2_f16c(void) {
  return hccl__cpu_has_f16c() && __builtin_cpu_supports("avx2");
}

#else

static const hccl__reduce_fn kernels_avx2[4][HCCL_REDUCE_RESERVED] = {{0}};
static bool cpu_has_avx2_f16c(void) {
  return false;
}

#endif

/* ---- choosing a kernel set ----
 * -1 until the first lookup, then 1 for the avx2/F16C set, 0 for the portable one. Relaxed
 * atomics are enough: the value only picks between two tables of valid kernels. */
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

/* Contract: see reduce.h. Besides float16, forcing "portable" also selects the baseline
 * (non-AVX2) build of the int8/int32/float32 loops, so a test run with it covers every
 * kernel a CPU without AVX2 would use. Asking for the fast path on a CPU without AVX2 and
 * F16C leaves the portable one in place. Not meant to be called while kernels are looked up
 * on other threads (a kernel already returned stays valid either way). */
bool hccl__reduce_force_portable(bool portable) {
  bool before = use_avx2();
  int v = (!portable && cpu_has_avx2_f16c()) ? 1 : 0;
  __atomic_store_n(&g_use_avx2, v, __ATOMIC_RELAXED);
  return before;
}

hccl__reduce_fn hccl__reduce_kernel(HcclDataType dt, HcclReduceOp op) {
  if (!hccl__reduce_supported(dt, op)) return NULL;
  int row = dtype_row(dt);
  return use_avx2() ? kernels_avx2[row][op] : kernels_portable[row][op];
}

/* Contract: see reduce.h. An unsupported (dt, op) is a caller bug (callers validate with
 * hccl__reduce_supported first); it writes nothing rather than crash. */
void hccl__reduce(void *out, const void *a, const void *b, size_t count, HcclDataType dt,
                  HcclReduceOp op) {
  hccl__reduce_fn fn = hccl__reduce_kernel(dt, op);
  if (fn != NULL && count > 0) fn(out, a, b, count);
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
