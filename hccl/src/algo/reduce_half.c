/*
 * reduce_half.c - the float16 and bfloat16 kernels (contract and precision: reduce.h). Each
 * element is widened to float32 (exactly), combined in float32, and narrowed with
 * round-to-nearest-even, once per kernel; the w* kinds keep a float32 accumulator between
 * kernels, so a block combined by one reader (zview.h) is rounded once at the end.
 *
 * Two sets, giving the same bits:
 *   - AVX2: 16 elements per iteration (two independent chains), then 8, then the last 0..7
 *     through padded buffers with the same vector code. float16 widens and narrows with F16C
 *     (VCVTPH2PS, VCVTPS2PH); bfloat16 in and out widens the even and odd elements of one load
 *     by a shift and a mask, and narrows with integer adds on the float32 bits
 *     (hccl__float_to_bf16's rounding, eight at once) and a blend of the top halves.
 *   - portable: the conversions of base/half.h in plain loops the compiler vectorizes.
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

/* Every kind of one type T (HALF or BF16), named p_<t>_<kind>. */
#define PLOOPS(t, T)                                                                               \
  PLOOP(p_##t##_sum, R_##T, R_##T, W_##T, b, E_SUM)                                                \
  PLOOP(p_##t##_prod, R_##T, R_##T, W_##T, b, E_PROD)                                              \
  PLOOP(p_##t##_max, R_##T, R_##T, W_##T, b, E_MAX)                                                \
  PLOOP(p_##t##_min, R_##T, R_##T, W_##T, b, E_MIN)                                                \
  PLOOP(p_##t##_sum_div, R_##T, R_##T, W_##T, b, E_SUM_DIV)                                        \
  PLOOP(p_##t##_sum_mul, R_##T, R_##T, W_##T, b, E_SUM_MUL)                                        \
  PLOOP(p_##t##_mul, R_##T, R_##T, W_##T, a, E_MUL)                                                \
  PLOOP(p_##t##_wfirst_sum, R_##T, R_##T, W_F32, b, E_SUM)                                         \
  PLOOP(p_##t##_wfirst_prod, R_##T, R_##T, W_F32, b, E_PROD)                                       \
  PLOOP(p_##t##_wstep_sum, R_##T, R_F32, W_F32, b, E_SUM)                                          \
  PLOOP(p_##t##_wstep_prod, R_##T, R_F32, W_F32, b, E_PROD)                                        \
  PLOOP(p_##t##_wlast_sum, R_##T, R_F32, W_##T, b, E_SUM)                                          \
  PLOOP(p_##t##_wlast_prod, R_##T, R_F32, W_##T, b, E_PROD)                                        \
  PLOOP(p_##t##_wlast_sum_div, R_##T, R_F32, W_##T, b, E_SUM_DIV)                                  \
  PLOOP(p_##t##_wlast_sum_mul, R_##T, R_F32, W_##T, b, E_SUM_MUL)

PLOOPS(half, HALF)
PLOOPS(bf16, BF16)

#define ROW(pre, t)                                                                                \
  {                                                                                                \
    [HK_SUM] = pre##_##t##_sum, [HK_PROD] = pre##_##t##_prod, [HK_MAX] = pre##_##t##_max,          \
    [HK_MIN] = pre##_##t##_min, [HK_SUM_DIV] = pre##_##t##_sum_div,                                \
    [HK_SUM_MUL] = pre##_##t##_sum_mul, [HK_MUL] = pre##_##t##_mul,                                \
    [HK_WFIRST_SUM] = pre##_##t##_wfirst_sum, [HK_WFIRST_PROD] = pre##_##t##_wfirst_prod,          \
    [HK_WSTEP_SUM] = pre##_##t##_wstep_sum, [HK_WSTEP_PROD] = pre##_##t##_wstep_prod,              \
    [HK_WLAST_SUM] = pre##_##t##_wlast_sum, [HK_WLAST_PROD] = pre##_##t##_wlast_prod,              \
    [HK_WLAST_SUM_DIV] = pre##_##t##_wlast_sum_div,                                                \
    [HK_WLAST_SUM_MUL] = pre##_##t##_wlast_sum_mul,                                                \
  }

/* [bf16][kind] */
static const hccl__reduce_fn portable[2][HK_NKINDS] = {ROW(p, half), ROW(p, bf16)};

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
static AVX2 inline __m256 v_ld_f32(const void *p) {
  return _mm256_loadu_ps((const float *)p);
}
static AVX2 inline void v_st_half(void *p, __m256 v) {
  _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static AVX2 inline void v_st_f32(void *p, __m256 v) {
  _mm256_storeu_ps((float *)p, v);
}

/* The element operations on eight lanes. MAXPS(x, y) is (x > y ? x : y), so blending x back
 * in where x is NaN gives E_MAX exactly (likewise min). */
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
  return _mm256_blendv_ps(_mm256_max_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
static AVX2 inline __m256 v_min(__m256 x, __m256 y, __m256 k) {
  (void)k;
  return _mm256_blendv_ps(_mm256_min_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
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
 * are left over): the rounded value, or the quieted NaN. Rounding to the top half needs no
 * shift, so the caller joins two vectors' results with one shift and one blend. */
static AVX2 inline __m256i v_bf_round_top(__m256 v) {
  __m256i x = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
  __m256i q = _mm256_or_si256(x, _mm256_set1_epi32(0x400000));
  return _mm256_blendv_epi8(r, q, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}

/* The same, in the low 16 bits of each lane (the top 16 are zero). */
static AVX2 inline __m256i v_bf_round(__m256 v) {
  return _mm256_srli_epi32(v_bf_round_top(v), 16);
}

/* hccl__float_to_bf16 on eight lanes (v_bf_round), packed to 16 bits (packus works within
 * 128-bit lanes; the permute joins the two lanes' low quads). */
static AVX2 inline void v_st_bf16(void *p, __m256 v) {
  __m256i r = v_bf_round(v);
  __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
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

/* bfloat16 in and out, 16 elements a step (two steps an iteration), each input in one 256-bit
 * load: the even elements
 * widen by a shift left (bf16 is float32's top half), the odd ones by masking off the even
 * ones below them; the two results' top halves go back in place, the even ones shifted down
 * and blended under the odd ones, so no pack or permute is needed. The tail runs the same
 * step on zero-padded copies, so it gives the same bits as the body. */
#define BF_STEP(to, pa, pb, VOP, k)                                                                \
  do {                                                                                             \
    const __m256i top = _mm256_set1_epi32((int)0xffff0000u);                                       \
    __m256i xa = _mm256_loadu_si256((const __m256i *)(pa));                                        \
    __m256i xb = _mm256_loadu_si256((const __m256i *)(pb));                                        \
    __m256 ev = VOP(_mm256_castsi256_ps(_mm256_slli_epi32(xa, 16)),                                \
                    _mm256_castsi256_ps(_mm256_slli_epi32(xb, 16)), k);                            \
    __m256 od = VOP(_mm256_castsi256_ps(_mm256_and_si256(xa, top)),                                \
                    _mm256_castsi256_ps(_mm256_and_si256(xb, top)), k);                            \
    _mm256_storeu_si256((__m256i *)(to),                                                           \
                        _mm256_blend_epi16(_mm256_srli_epi32(v_bf_round_top(ev), 16),              \
                                           v_bf_round_top(od), 0xaa));                             \
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
  VLOOP(v_##t##_wfirst_sum, v_ld_##t, v_ld_##t, v_st_f32, 2, 2, 4, b, v_sum)                       \
  VLOOP(v_##t##_wfirst_prod, v_ld_##t, v_ld_##t, v_st_f32, 2, 2, 4, b, v_prod)                     \
  VLOOP(v_##t##_wstep_sum, v_ld_##t, v_ld_f32, v_st_f32, 2, 4, 4, b, v_sum)                        \
  VLOOP(v_##t##_wstep_prod, v_ld_##t, v_ld_f32, v_st_f32, 2, 4, 4, b, v_prod)                      \
  VLOOP(v_##t##_wlast_sum, v_ld_##t, v_ld_f32, v_st_##t, 2, 4, 2, b, v_sum)                        \
  VLOOP(v_##t##_wlast_prod, v_ld_##t, v_ld_f32, v_st_##t, 2, 4, 2, b, v_prod)                      \
  VLOOP(v_##t##_wlast_sum_div, v_ld_##t, v_ld_f32, v_st_##t, 2, 4, 2, b, v_sum_div)                \
  VLOOP(v_##t##_wlast_sum_mul, v_ld_##t, v_ld_f32, v_st_##t, 2, 4, 2, b, v_sum_mul)

VLOOPS(half)
VLOOPS(bf16)

static const hccl__reduce_fn avx2[2][HK_NKINDS] = {ROW(v, half), ROW(v, bf16)};

#else

static const hccl__reduce_fn avx2[2][HK_NKINDS];

#endif

hccl__reduce_fn hccl__half_kernel(bool bf16, bool use_avx2, enum hccl_kern k) {
  if ((unsigned)k >= HK_NKINDS) return NULL;
  return use_avx2 ? avx2[bf16][k] : portable[bf16][k];
}
