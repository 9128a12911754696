/*
 * half.h - float16 and bfloat16 <-> float32, the one definition the library's reduction kernels
 * (algo/reduce.c) and the DDP layer's fp16 wire (ddp/src/half.c) both use. Header only
 * (static inline), so that a loop calling it is vectorized where it is compiled, and so that
 * ddp, which links only libhccl's public names, can use it without a symbol of its own.
 *
 * Both conversions give the same bits as the F16C instructions (VCVTPH2PS, VCVTPS2PH with
 * round-to-nearest-even), so a loop may do its bulk with F16C and its tail, or a whole run on
 * a CPU without F16C, with these:
 *   - half -> float is exact; a NaN gets its quiet bit set and keeps its payload, shifted
 *     into the top of the float mantissa;
 *   - float -> half rounds to nearest, ties to even; values >= 65520 (halfway between 65504
 *     and 2^16) become Inf; results below 2^-14 become subnormal halves (2^-25, the tie
 *     between 0 and the smallest subnormal 2^-24, goes to 0); a NaN gets the quiet bit set and
 *     keeps the top 10 bits of its payload; the sign always survives (-0 stays -0).
 * hccl__cpu_has_f16c says whether a loop may use F16C here.
 *
 * Written without branches: every case is computed and one is picked with an all-ones /
 * all-zeros mask, so GCC vectorizes a loop of them for the baseline ISA too. (With `?:` GCC
 * moves the float operation of a case into a branch, and then, under the default
 * -ftrapping-math, will not if-convert the loop.) A branchy version with a fast path for
 * normal numbers was measured ~30% slower in the reduction kernels. The float arithmetic
 * assumes the default rounding mode (to nearest even), as all float math in the library does;
 * it is right under DAZ/FTZ too (it never adds or subtracts a float subnormal whose value
 * matters).
 */
#ifndef HCCL_HALF_H
#define HCCL_HALF_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static inline uint32_t hccl__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

static inline float hccl__f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

/* All ones when cond holds, else 0. */
static inline uint32_t hccl__mask_if(bool cond) {
  return 0u - (uint32_t)cond;
}

/* Exact. Normal halves are rebiased; a subnormal half m * 2^-24 is built as the float
 * 2^-14 * (1 + m/1024) minus 2^-14, an exact subtraction of two normal floats (so neither the
 * DAZ/FTZ modes nor denormal-operand slow paths come into it). NaN: quiet bit set, payload
 * shifted into the top of the float mantissa (as VCVTPH2PS does). */
static inline float hccl__half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t normal = (em << 13) + ((uint32_t)(127 - 15) << 23);
  uint32_t special =
      0x7f800000u | ((em & 0x3ffu) << 13) | (hccl__mask_if(em > 0x7c00u) & 0x00400000u);
  uint32_t sub = hccl__f32_bits(hccl__f32_from_bits((em << 13) + (113u << 23)) -
                                hccl__f32_from_bits(113u << 23));
  uint32_t is_special = hccl__mask_if(em >= 0x7c00u), is_sub = hccl__mask_if(em < 0x0400u);
  uint32_t u = (special & is_special) | (sub & is_sub) | (normal & ~(is_special | is_sub));
  return hccl__f32_from_bits(u | sign);
}

/* Round to nearest, ties to even. Normal results: rebias and round off 13 bits in integers
 * (add 0xfff plus the lowest kept bit, so a tie rounds to even). Subnormal results: add 0.5,
 * whose float ulp is 2^-24, the unit of a subnormal half, so the float addition (in the
 * default round-to-nearest-even mode) does the rounding and the low mantissa bits are the
 * result (1024 means the smallest normal, 0x0400). Values >= 65520 become Inf. NaN: quiet bit
 * set, payload truncated to its top 10 bits (as VCVTPS2PH does). */
static inline uint16_t hccl__float_to_half(float f) {
  uint32_t x = hccl__f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  uint32_t nan = 0x7e00u | ((x >> 13) & 0x3ffu);
  uint32_t normal = (x - ((uint32_t)(127 - 15) << 23) + 0xfffu + ((x >> 13) & 1u)) >> 13;
  uint32_t sub = hccl__f32_bits(hccl__f32_from_bits(x) + 0.5f) - hccl__f32_bits(0.5f);
  uint32_t is_nan = hccl__mask_if(x > 0x7f800000u);
  uint32_t is_inf = hccl__mask_if(x >= 0x477ff000u) & ~is_nan;
  uint32_t is_sub = hccl__mask_if(x < 0x38800000u);
  uint32_t is_normal = ~(is_nan | is_inf | is_sub);
  uint32_t r = (nan & is_nan) | (0x7c00u & is_inf) | (sub & is_sub) | (normal & is_normal);
  return (uint16_t)(r | sign);
}

/* bfloat16 is the top half of a float32: widening is exact (a NaN keeps its bits, payload
 * and all). */
static inline float hccl__bf16_to_float(uint16_t h) {
  return hccl__f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest, ties to even, on the bits: add 0x7fff plus the lowest kept bit and drop
 * the low 16 (subnormals round the same way, since bfloat16 has float32's exponent range, and
 * the largest values round up to Inf as they should). NaN: the top 16 bits with the quiet
 * bit set, so a payload in the low bits cannot round it into Inf. */
static inline uint16_t hccl__float_to_bf16(float f) {
  uint32_t x = hccl__f32_bits(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  uint32_t q = (x >> 16) | 0x40u;
  uint32_t is_nan = hccl__mask_if((x & 0x7fffffffu) > 0x7f800000u);
  return (uint16_t)((r & ~is_nan) | (q & is_nan));
}

/* Whether this CPU has F16C and the OS saves the AVX registers its 256-bit forms use, so a
 * function built with __attribute__((target("avx,f16c"))) may run. False off x86. F16C is
 * read from CPUID because clang's __builtin_cpu_supports does not know "f16c"; it costs a
 * CPUID, so callers ask once and keep the answer. */
static inline bool hccl__cpu_has_f16c(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  __builtin_cpu_init(); /* needed if we run before libgcc's constructor */
  if (!__builtin_cpu_supports("avx")) return false;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

#endif
