/*
 * half.c - the element work of a bucket: fp32 <-> fp16 for the compressed wire, scaling by
 * 1/world size, and the inf/nan scan.
 *
 * Conversions round to nearest even and keep inf, nan and subnormals. The F16C instructions
 * do the bulk when the CPU has them (checked once at run time, so the library still runs on
 * any x86-64 and builds on any compiler that knows the target attribute); the portable
 * scalar code is the reference and the fallback.
 */
#include <string.h>

#include "ddp_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DDP_HAVE_F16C_PATH 1
#endif

float ddp__half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13); /* inf, nan */
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    int e = -1;
    do {
      man <<= 1;
      e++;
    } while (!(man & 0x400u));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t ddp__float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf or nan (nan keeps a quiet payload bit) */
    return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0);
  if (ax >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: inf */
  if (ax < 0x38800000u) {                       /* below the smallest normal half */
    if (ax < 0x33000000u) return sign;          /* below half the smallest subnormal */
    uint32_t e = ax >> 23, man = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1))) h++;
    return sign | (uint16_t)h;
  }
  uint32_t h = ((ax >> 13) - (112u << 10)), rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return sign | (uint16_t)h;
}

#ifdef DDP_HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(uint16_t *dst, const float *src,
                                                                uint64_t n, float scale) {
  uint64_t i = 0;
  __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), s);
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; i++)
    dst[i] = ddp__float_to_half(src[i] * scale);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(float *dst, const uint16_t *src,
                                                                uint64_t n) {
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; i++)
    dst[i] = ddp__half_to_float(src[i]);
}

static int have_f16c(void) {
  static int cached = -1;
  if (cached < 0) cached = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return cached;
}
#endif

void ddp__f32_to_f16_scaled(uint16_t *dst, const float *src, uint64_t n, float scale) {
#ifdef DDP_HAVE_F16C_PATH
  if (have_f16c()) {
    f32_to_f16_f16c(dst, src, n, scale);
    return;
  }
#endif
  for (uint64_t i = 0; i < n; i++)
    dst[i] = ddp__float_to_half(src[i] * scale);
}

void ddp__f16_to_f32(float *dst, const uint16_t *src, uint64_t n) {
#ifdef DDP_HAVE_F16C_PATH
  if (have_f16c()) {
    f16_to_f32_f16c(dst, src, n);
    return;
  }
#endif
  for (uint64_t i = 0; i < n; i++)
    dst[i] = ddp__half_to_float(src[i]);
}

void ddp__scale(void *buf, HcclDataType dt, uint64_t n, float scale) {
  if (scale == 1.0f) return;
  if (dt == HCCL_DATA_TYPE_FP32) {
    float *f = buf;
    for (uint64_t i = 0; i < n; i++)
      f[i] *= scale;
  } else {
    uint16_t *h = buf;
    for (uint64_t i = 0; i < n; i++)
      h[i] = ddp__float_to_half(ddp__half_to_float(h[i]) * scale);
  }
}

int64_t ddp__first_nonfinite(const void *buf, HcclDataType dt, uint64_t n) {
  /* An OR over the exponent test vectorises; the index is looked for only when one is found. */
  const uint64_t block = 4096;
  for (uint64_t s = 0; s < n; s += block) {
    uint64_t e = s + block < n ? s + block : n;
    unsigned bad = 0;
    if (dt == HCCL_DATA_TYPE_FP32) {
      const uint32_t *u = buf;
      for (uint64_t i = s; i < e; i++)
        bad |= (u[i] & 0x7f800000u) == 0x7f800000u;
      if (bad)
        for (uint64_t i = s; i < e; i++)
          if ((u[i] & 0x7f800000u) == 0x7f800000u) return (int64_t)i;
    } else {
      const uint16_t *u = buf;
      for (uint64_t i = s; i < e; i++)
        bad |= (u[i] & 0x7c00u) == 0x7c00u;
      if (bad)
        for (uint64_t i = s; i < e; i++)
          if ((u[i] & 0x7c00u) == 0x7c00u) return (int64_t)i;
    }
  }
  return -1;
}
