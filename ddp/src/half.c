/*
 * half.c - the element work of a bucket: fp32 <-> fp16 for the compressed wire, scaling by
 * 1/world size, and the inf/nan scan.
 *
 * Conversions round to nearest even and keep inf, nan and subnormals. The F16C instructions
 * do the bulk when the CPU has them (checked once at run time, so the library still runs on
 * any x86-64 and builds on any compiler that knows the target attribute); the scalar
 * conversions of hccl/src/base/half.h (header only, the ones libhccl's reduction kernels use)
 * do the tails and the whole run elsewhere, and give the same bits as F16C.
 */
#include "ddp_int.h"
#include "hccl_iface.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DDP_HAVE_F16C_PATH 1
#endif

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
    dst[i] = hccl__float_to_half(src[i] * scale);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(float *dst, const uint16_t *src,
                                                                uint64_t n) {
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; i++)
    dst[i] = hccl__half_to_float(src[i]);
}

static int have_f16c(void) {
  static int cached = -1;
  if (cached < 0) cached = hccl__cpu_has_f16c();
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
    dst[i] = hccl__float_to_half(src[i] * scale);
}

void ddp__f16_to_f32(float *dst, const uint16_t *src, uint64_t n) {
#ifdef DDP_HAVE_F16C_PATH
  if (have_f16c()) {
    f16_to_f32_f16c(dst, src, n);
    return;
  }
#endif
  for (uint64_t i = 0; i < n; i++)
    dst[i] = hccl__half_to_float(src[i]);
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
      h[i] = hccl__float_to_half(hccl__half_to_float(h[i]) * scale);
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
