/*
 * reduce_half.c - the float16 and bfloat16 kernels (contract and precision: reduce.h). Each
 * element is widened to float32 (exactly), combined in float32, and narrowed with
 * round-to-nearest-even, once per kernel; the n-input (many) kernels of sum and product keep
 * every input of an element in float32, so a block combined by one reader (zview.h) is rounded
 * once at the end (those of max and min too, where it makes no difference: they are exact).
 *
 * Two sets, giving the same bits:
 *   - AVX2: 16 elements per iteration (two independent chains), then 8, then the last 0..7
 *     through padded buffers with the same vector code. float16 widens and narrows with F16C
 *     (VCVTPH2PS, VCVTPS2PH); bfloat16 in and out widens the even and odd elements of one load
 *     by a shift and a mask, and narrows with integer adds on the float32 bits
 *     (hccl__float_to_bf16's rounding, eight at once, with no NaN test: v_bf_round_top says
 *     why none is needed) and a blend of the top halves.
 *     The many kernels take 32 elements of the first input into four float32 registers, fold
 *     each further input's 32 into them (one load or two, the same widening), and narrow once;
 *     a block at 8 members goes from 8 reads, 7 float32 scratch writes and 7 scratch reads per
 *     element (the chain of two-input kernels they replace) to 8 reads and one write (the
 *     rates before and after: docs/performance.md, "Measurements behind the code").
 *   - portable: the conversions of base/half.h in plain loops the compiler vectorizes; the
 *     many kernels fold blocks of PBLK elements in a float32 array on the stack, and do the
 *     AVX2 kernels' last 0..31 elements (the same bits).
 * Why both give the same bits: the float32 operations are the same IEEE operations in the same
 * order, and both conversions are exact (widening) or correctly rounded (narrowing) with the
 * same NaN rules (half.h). One exception, as for float32: when BOTH inputs of a sum or product
 * are NaN, the payload (and sign) of the NaN may come from either input. It is a NaN on both.
 */
#include <string.h>

#include "half.h"
#include "reduce_kern.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HCCL__HAVE_X86 1
#else
#define HCCL__HAVE_X86 0
#endif

/* ---- the element operations, in float32 (k: the scale of the finishing kinds) ---- */
#define E_SUM(x, y, k) ((x) + (y))
#define E_PROD(x, y, k) ((x) * (y))
#define E_MAX(x, y, k) ((((x) != (x)) | ((x) > (y))) ? (x) : (y))
#define E_MIN(x, y, k) ((((x) != (x)) | ((x) < (y))) ? (x) : (y))
#define E_SUM_DIV(x, y, k) (((x) + (y)) / (k))
#define E_SUM_MUL(x, y, k) (((x) + (y)) * (k))
#define E_MUL(x, y, k) ((x) * (k))

/* ---- portable ----
 * RA/RB read element i of a/b as float32, WO writes element i of out; B is the second input
 * (b, or a for the one-input kinds, whose b may be NULL). */
#define R_HALF(p, i) hccl__half_to_float(((const uint16_t *)(p))[i])
#define R_BF16(p, i) hccl__bf16_to_float(((const uint16_t *)(p))[i])
#define R_F32(p, i) (((const float *)(p))[i])
#define W_HALF(p, i, v) (((uint16_t *)(p))[i] = hccl__float_to_half(v))
#define W_BF16(p, i, v) (((uint16_t *)(p))[i] = hccl__float_to_bf16(v))
#define W_F32(p, i, v) (((float *)(p))[i] = (v))

#define PLOOP(name, RA, RB, WO, B, EXPR)                                                           \
  static void name(void *out, const void *a, const void *b, size_t n,                              \
                   const struct hccl_scale *s) {                                                   \
    const float k = s ? s->f32 : 1.0f;                                                             \
    const void *second = (B);                                                                      \
    (void)k, (void)b;                                                                              \
    for (size_t i = 0; i < n; i++) {                                                               \
      float x = RA(a, i), y = RB(second, i);                                                       \
      (void)y;                                                                                     \
      WO(out, i, EXPR(x, y, k));                                                                   \
    }                                                                                              \
  }

/* n inputs folded in float32, as reduce.h's wmany: elements [from, c) in blocks of PBLK (a
 * float32 array on the stack), EXPR combining an input into the array, FIN the last one. The
 * kernel proper is name(..., 0, ...); name##_from does an AVX2 kernel's tail. Element i of the
 * last input is read before element i of out is written, so out may be that input. */
#define PBLK 256
#define PMANY(name, RT, WT, EXPR, FIN)                                                             \
  static void name##_from(void *out, const void *const in[], uint32_t n, size_t from, size_t c,  \
                          const struct hccl_scale *s) {                                            \
    const float k = s ? s->f32 : 1.0f;                                                             \
    (void)k;                                                                                       \
    for (size_t i0 = from; i0 < c; i0 += PBLK) {                                                   \
      size_t m = c - i0 < PBLK ? c - i0 : PBLK;                                                    \
      float acc[PBLK];                                                                             \
      for (size_t i = 0; i < m; i++)                                                               \
        acc[i] = RT(in[0], i0 + i);                                                                \
      for (uint32_t j = 1; j + 1 < n; j++)                                                         \
        for (size_t i = 0; i < m; i++)                                                             \
          acc[i] = EXPR(RT(in[j], i0 + i), acc[i], k);                                             \
      for (size_t i = 0; i < m; i++)                                                               \
        WT(out, i0 + i, FIN(RT(in[n - 1], i0 + i), acc[i], k));                                   \
    }                                                                                              \
  }                                                                                                \
  static void name(void *out, const void *const in[], uint32_t n, size_t c,                       \
                   const struct hccl_scale *s) {                                                   \
    name##_from(out, in, n, 0, c, s);                                                              \
  }

/* Every kind of one type T (HALF or BF16), named p_<t>_<kind>. */
#define PLOOPS(t, T)                                                                               \
  PLOOP(p_##t##_sum, R_##T, R_##T, W_##T, b, E_SUM)                                                \
  PLOOP(p_##t##_prod, R_##T, R_##T, W_##T, b, E_PROD)                                              \
  PLOOP(p_##t##_max, R_##T, R_##T, W_##T, b, E_MAX)                                                \
  PLOOP(p_##t##_min, R_##T, R_##T, W_##T, b, E_MIN)                                                \
  PLOOP(p_##t##_sum_div, R_##T, R_##T, W_##T, b, E_SUM_DIV)                                        \
  PLOOP(p_##t##_sum_mul, R_##T, R_##T, W_##T, b, E_SUM_MUL)                                        \
  PLOOP(p_##t##_mul, R_##T, R_##T, W_##T, a, E_MUL)                                                \
  PMANY(p_##t##_many_sum, R_##T, W_##T, E_SUM, E_SUM)                                              \
  PMANY(p_##t##_many_prod, R_##T, W_##T, E_PROD, E_PROD)                                           \
  PMANY(p_##t##_many_sum_div, R_##T, W_##T, E_SUM, E_SUM_DIV)                                      \
  PMANY(p_##t##_many_sum_mul, R_##T, W_##T, E_SUM, E_SUM_MUL)                                      \
  PMANY(p_##t##_many_max, R_##T, W_##T, E_MAX, E_MAX)                                              \
  PMANY(p_##t##_many_min, R_##T, W_##T, E_MIN, E_MIN)

PLOOPS(half, HALF)
PLOOPS(bf16, BF16)

#define ROW(pre, t)                                                                                \
  {                                                                                                \
    [HK_SUM] = pre##_##t##_sum, [HK_PROD] = pre##_##t##_prod, [HK_MAX] = pre##_##t##_max,          \
    [HK_MIN] = pre##_##t##_min, [HK_SUM_DIV] = pre##_##t##_sum_div,                                \
    [HK_SUM_MUL] = pre##_##t##_sum_mul, [HK_MUL] = pre##_##t##_mul,                                \
  }

/* [bf16][kind] */
static const hccl__reduce_fn portable[2][HK_NKINDS] = {ROW(p, half), ROW(p, bf16)};

#define MANY_ROW(pre, t)                                                                           \
  {                                                                                                \
    [HK_SUM] = pre##_##t##_many_sum, [HK_PROD] = pre##_##t##_many_prod,                            \
    [HK_SUM_DIV] = pre##_##t##_many_sum_div, [HK_SUM_MUL] = pre##_##t##_many_sum_mul,              \
    [HK_MAX] = pre##_##t##_many_max, [HK_MIN] = pre##_##t##_many_min,                              \
  }

/* [bf16][kind] */
static const hccl__reduce_many_fn portable_many[2][HK_NKINDS] = {MANY_ROW(p, half),
                                                                 MANY_ROW(p, bf16)};

#if HCCL__HAVE_X86

#define AVX2 __attribute__((target("avx2,f16c")))

/* Loads and stores of 8 elements as float32. */
static AVX2 inline __m256 v_ld_half(const void *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static AVX2 inline __m256 v_ld_bf16(const void *p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static AVX2 inline void v_st_half(void *p, __m256 v) {
  _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
/* The element operations on eight lanes. MAXPS(x, y) is (x > y ? x : y), so blending x back
 * in where x is NaN gives E_MAX's choice (likewise min); the NaN it passes on is then quieted,
 * as every arithmetic result is, which v_bf_round_top relies on (the narrowing quiets it
 * anyway, so the bits are E_MAX's). */
static AVX2 inline __m256 v_quiet(__m256 r) {
  __m256 q = _mm256_and_ps(_mm256_cmp_ps(r, r, _CMP_UNORD_Q),
                           _mm256_castsi256_ps(_mm256_set1_epi32(0x400000)));
  return _mm256_or_ps(r, q);
}
static AVX2 inline __m256 v_sum(__m256 x, __m256 y, __m256 k) {
  (void)k;
  return _mm256_add_ps(x, y);
}
static AVX2 inline __m256 v_prod(__m256 x, __m256 y, __m256 k) {
  (void)k;
  return _mm256_mul_ps(x, y);
}
static AVX2 inline __m256 v_max(__m256 x, __m256 y, __m256 k) {
  (void)k;
  return v_quiet(_mm256_blendv_ps(_mm256_max_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}
static AVX2 inline __m256 v_min(__m256 x, __m256 y, __m256 k) {
  (void)k;
  return v_quiet(_mm256_blendv_ps(_mm256_min_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}
static AVX2 inline __m256 v_sum_div(__m256 x, __m256 y, __m256 k) {
  return _mm256_div_ps(_mm256_add_ps(x, y), k);
}
static AVX2 inline __m256 v_sum_mul(__m256 x, __m256 y, __m256 k) {
  return _mm256_mul_ps(_mm256_add_ps(x, y), k);
}
static AVX2 inline __m256 v_mul(__m256 x, __m256 y, __m256 k) {
  (void)y;
  return _mm256_mul_ps(x, k);
}

/* hccl__float_to_bf16 on eight lanes, the result in the top 16 bits of each lane (the low 16
 * are left over), for the values these kernels narrow: four integer operations, no NaN test.
 * Every NaN here is quiet with its low 16 bits zero: the inputs are widened bfloat16 (low 16
 * zero), an arithmetic result that is NaN is an operand's NaN quieted (its payload kept) or
 * the default NaN 0xffc00000, and v_max/v_min quiet what they pass on. For such a NaN the
 * rounding add (at most 0x8000 onto zero low bits) carries nothing into the top half, which is
 * then the quiet NaN hccl__float_to_bf16 gives: the same bits as the portable kernels, with
 * the compare and blend of a NaN test gone from the 2-input bfloat16 loop (the one a 2-rank
 * zero-copy or staged allreduce runs). Rounding to the top half needs no shift, so the caller
 * joins two vectors' results with one shift and one blend. */
static AVX2 inline __m256i v_bf_round_top(__m256 v) {
  __m256i x = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
}

/* LA/LB/SO: loads of a and b, store of out; EA/EB/EO their element sizes; B the second
 * input (b, or a for the one-input kind). The tail runs the same vector code on zero-padded
 * copies, so it gives the same bits as the body. */
#define VLOOP(name, LA, LB, SO, EA, EB, EO, B, VOP)                                                \
  static AVX2 void name(void *out, const void *a, const void *b, size_t n,                         \
                        const struct hccl_scale *s) {                                              \
    const __m256 k = _mm256_set1_ps(s ? s->f32 : 1.0f);                                            \
    const char *x = a, *y = (const char *)(B);                                                     \
    char *o = out;                                                                                 \
    (void)b;                                                                                       \
    size_t i = 0;                                                                                  \
    for (; i + 16 <= n; i += 16) {                                                                 \
      __m256 r0 = VOP(LA(x + i * EA), LB(y + i * EB), k);                                          \
      __m256 r1 = VOP(LA(x + (i + 8) * EA), LB(y + (i + 8) * EB), k);                              \
      SO(o + i * EO, r0);                                                                          \
      SO(o + (i + 8) * EO, r1);                                                                    \
    }                                                                                              \
    for (; i + 8 <= n; i += 8)                                                                     \
      SO(o + i * EO, VOP(LA(x + i * EA), LB(y + i * EB), k));                                      \
    if (i < n) {                                                                                   \
      char ta[32] = {0}, tb[32] = {0}, to[32];                                                     \
      memcpy(ta, x + i * EA, (n - i) * EA);                                                        \
      memcpy(tb, y + i * EB, (n - i) * EB);                                                        \
      SO(to, VOP(LA(ta), LB(tb), k));                                                              \
      memcpy(o + i * EO, to, (n - i) * EO);                                                        \
    }                                                                                              \
  }

/* 16 elements of a 16-bit float type as two float32 vectors, and back. bfloat16 by one
 * 256-bit load: the even elements widen by a shift left (bf16 is float32's top half), the odd
 * ones by masking off the even ones below them; narrowing puts the two results' top halves back
 * in place, the even ones shifted down and blended under the odd ones, so no pack or permute
 * is needed. float16: two F16C conversions of 8. */
static AVX2 inline void v2_ld_bf16(const uint16_t *p, __m256 *ev, __m256 *od) {
  __m256i x = _mm256_loadu_si256((const __m256i *)p);
  *ev = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  *od = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)));
}
static AVX2 inline void v2_st_bf16(uint16_t *p, __m256 ev, __m256 od) {
  _mm256_storeu_si256((__m256i *)p, _mm256_blend_epi16(_mm256_srli_epi32(v_bf_round_top(ev), 16),
                                                       v_bf_round_top(od), 0xaa));
}
static AVX2 inline void v2_ld_half(const uint16_t *p, __m256 *lo, __m256 *hi) {
  *lo = v_ld_half(p);
  *hi = v_ld_half(p + 8);
}
static AVX2 inline void v2_st_half(uint16_t *p, __m256 lo, __m256 hi) {
  v_st_half(p, lo);
  v_st_half(p + 8, hi);
}

/* bfloat16 in and out, 16 elements a step (two steps an iteration), each input in one 256-bit
 * load (v2_ld_bf16). The tail runs the same step on zero-padded copies, so it gives the same
 * bits as the body. */
#define BF_STEP(to, pa, pb, VOP, k)                                                                \
  do {                                                                                             \
    __m256 ea, oa, eb, ob;                                                                         \
    v2_ld_bf16(pa, &ea, &oa);                                                                      \
    v2_ld_bf16(pb, &eb, &ob);                                                                      \
    v2_st_bf16(to, VOP(ea, eb, k), VOP(oa, ob, k));                                                \
  } while (0)

#define VLOOP_BF(name, B, VOP)                                                                     \
  static AVX2 void name(void *out, const void *a, const void *b, size_t n,                         \
                        const struct hccl_scale *s) {                                              \
    const __m256 k = _mm256_set1_ps(s ? s->f32 : 1.0f);                                            \
    const uint16_t *x = a, *y = (const uint16_t *)(B);                                             \
    uint16_t *o = out;                                                                             \
    (void)b;                                                                                       \
    size_t i = 0;                                                                                  \
    for (; i + 32 <= n; i += 32) {                                                                 \
      BF_STEP(o + i, x + i, y + i, VOP, k);                                                        \
      BF_STEP(o + i + 16, x + i + 16, y + i + 16, VOP, k);                                         \
    }                                                                                              \
    for (; i + 16 <= n; i += 16) BF_STEP(o + i, x + i, y + i, VOP, k);                             \
    if (i < n) {                                                                                   \
      uint16_t ta[16] = {0}, tb[16] = {0}, to[16];                                                 \
      memcpy(ta, x + i, (n - i) * 2);                                                              \
      memcpy(tb, y + i, (n - i) * 2);                                                              \
      BF_STEP(to, ta, tb, VOP, k);                                                                 \
      memcpy(o + i, to, (n - i) * 2);                                                              \
    }                                                                                              \
  }

/* The n-input kernels (PMANY's order and bits): 32 elements an iteration in four float32
 * registers, the first input loaded into them, every further one but the last folded in with
 * VOP(input, acc), the last with FIN, narrowed once; the last 0..31 elements by the portable
 * kernel's _from, which gives the same bits. */
#define VMANY(t, kind, VOP, FIN)                                                                   \
  static AVX2 void v_##t##_many_##kind(void *out, const void *const in[], uint32_t n, size_t c,                  \
                        const struct hccl_scale *s) {                                              \
    const __m256 k = _mm256_set1_ps(s ? s->f32 : 1.0f);                                            \
    const uint16_t *const *x = (const uint16_t *const *)in;                                        \
    uint16_t *o = out;                                                                             \
    size_t i = 0;                                                                                  \
    for (; i + 32 <= c; i += 32) {                                                                 \
      __m256 a0, a1, a2, a3, b0, b1, b2, b3;                                                       \
      v2_ld_##t(x[0] + i, &a0, &a1);                                                               \
      v2_ld_##t(x[0] + i + 16, &a2, &a3);                                                          \
      for (uint32_t j = 1; j + 1 < n; j++) {                                                       \
        v2_ld_##t(x[j] + i, &b0, &b1);                                                             \
        v2_ld_##t(x[j] + i + 16, &b2, &b3);                                                        \
        a0 = VOP(b0, a0, k), a1 = VOP(b1, a1, k), a2 = VOP(b2, a2, k), a3 = VOP(b3, a3, k);        \
      }                                                                                            \
      v2_ld_##t(x[n - 1] + i, &b0, &b1);                                                           \
      v2_ld_##t(x[n - 1] + i + 16, &b2, &b3);                                                      \
      v2_st_##t(o + i, FIN(b0, a0, k), FIN(b1, a1, k));                                            \
      v2_st_##t(o + i + 16, FIN(b2, a2, k), FIN(b3, a3, k));                                       \
    }                                                                                              \
    p_##t##_many_##kind##_from(out, in, n, i, c, s);                                                          \
  }

/* The narrow kinds: bfloat16 by VLOOP_BF, float16 by VLOOP. */
#define VNARROW_half(name, B, VOP) VLOOP(name, v_ld_half, v_ld_half, v_st_half, 2, 2, 2, B, VOP)
#define VNARROW_bf16(name, B, VOP) VLOOP_BF(name, B, VOP)

#define VLOOPS(t)                                                                                  \
  VNARROW_##t(v_##t##_sum, b, v_sum)                                                               \
  VNARROW_##t(v_##t##_prod, b, v_prod)                                                             \
  VNARROW_##t(v_##t##_max, b, v_max)                                                               \
  VNARROW_##t(v_##t##_min, b, v_min)                                                               \
  VNARROW_##t(v_##t##_sum_div, b, v_sum_div)                                                       \
  VNARROW_##t(v_##t##_sum_mul, b, v_sum_mul)                                                       \
  VNARROW_##t(v_##t##_mul, a, v_mul)                                                               \
  VMANY(t, sum, v_sum, v_sum)                                                                     \
  VMANY(t, prod, v_prod, v_prod)                                                                  \
  VMANY(t, sum_div, v_sum, v_sum_div)                                                             \
  VMANY(t, sum_mul, v_sum, v_sum_mul)                                                             \
  VMANY(t, max, v_max, v_max)                                                                     \
  VMANY(t, min, v_min, v_min)

VLOOPS(half)
VLOOPS(bf16)

static const hccl__reduce_fn avx2[2][HK_NKINDS] = {ROW(v, half), ROW(v, bf16)};
static const hccl__reduce_many_fn avx2_many[2][HK_NKINDS] = {MANY_ROW(v, half), MANY_ROW(v, bf16)};

#else

static const hccl__reduce_fn avx2[2][HK_NKINDS];
static const hccl__reduce_many_fn avx2_many[2][HK_NKINDS];

#endif

hccl__reduce_fn hccl__half_kernel(bool bf16, bool use_avx2, enum hccl_kern k) {
  if ((unsigned)k >= HK_NKINDS) return NULL;
  return use_avx2 ? avx2[bf16][k] : portable[bf16][k];
}

hccl__reduce_many_fn hccl__half_many(bool bf16, bool use_avx2, enum hccl_kern k) {
  if ((unsigned)k >= HK_NKINDS) return NULL;
  return use_avx2 ? avx2_many[bf16][k] : portable_many[bf16][k];
}
