/*
 * test_ddp_half.c - ddp/src/half.c: the fp16 wire's bulk conversions and scaling give exactly
 * the bits of the scalar conversions of hccl/src/base/half.h (themselves checked against
 * references and F16C in tests/algo/test_reduce.c), body and tail alike.
 *
 * On a CPU with F16C the bulk runs on it (8 elements a step) and the last n % 8 on the scalar
 * code, so every value is also run at each offset 0..7, to pass through both. Checked: a table
 * of expected bit patterns (1.0, 65504, 65520 -> Inf, the smallest subnormal 2^-24, 2^-25 ties
 * to even 0, 3 * 2^-25 to 2, -0, NaN stays NaN with its quiet bit set), every one of the 65536
 * halves to float and back, a sweep of float bit patterns with a scale, and ddp__scale on fp16.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ddp_int.h"
#include "half.h"
#include "half_cases.h"

static int setup_alarm(void **state) {
  (void)state;
  alarm(60);
  return 0;
}

static bool h_isnan(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

/* dst[i] for src[i] run through ddp__f32_to_f16_scaled at offset `off` of an n-element call,
 * so that with off in 0..7 each value goes through the F16C body and the scalar tail. */
static uint16_t wire_one(float f, float scale, unsigned off) {
  float src[16];
  uint16_t dst[16];
  for (unsigned i = 0; i < 16; i++)
    src[i] = 1.0f;
  src[off] = f;
  ddp__f32_to_f16_scaled(dst, src, off + 1 + (off & 1) * 8, scale); /* n in 1..16 */
  return dst[off];
}

static void test_expected_bits(void **state) {
  (void)state;
  const struct half_case *t = HALF_CASES;
  for (size_t i = 0; i < HALF_NCASES; i++) {
    assert_int_equal(hccl__float_to_half(t[i].f), t[i].h);
    for (unsigned off = 0; off < 8; off++) {
      uint16_t got = wire_one(t[i].f, 1.0f, off);
      if (got != t[i].h)
        fprintf(stderr, "wire(%a) at offset %u = %#x, want %#x\n", t[i].f, off, got, t[i].h);
      assert_int_equal(got, t[i].h);
    }
    /* and back: every half here is exact in float */
    float back[9];
    uint16_t h[9];
    for (unsigned k = 0; k < 9; k++)
      h[k] = t[i].h;
    ddp__f16_to_f32(back, h, 9);
    for (unsigned k = 0; k < 9; k++) {
      float want = hccl__half_to_float(t[i].h);
      assert_memory_equal(&back[k], &want, sizeof(float));
    }
  }
  /* NaN stays NaN (quiet bit set, sign kept), body and tail alike */
  uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u};
  for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
    float f;
    memcpy(&f, &nans[i], sizeof(f));
    for (unsigned off = 0; off < 8; off++) {
      uint16_t got = wire_one(f, 1.0f, off);
      assert_true(h_isnan(got));
      assert_true(got & 0x0200);
      assert_int_equal(got & 0x8000, (nans[i] >> 16) & 0x8000);
    }
  }
}

/* Every half to float (ddp__f16_to_f32) and back (ddp__f32_to_f16_scaled), in one call whose
 * length is not a multiple of 8: the same bits as the scalar conversions, and the same half
 * back (a NaN: quiet bit set, the rest kept). */
static void test_every_half(void **state) {
  (void)state;
  enum { N = 65536 + 5 };
  uint16_t *h = malloc(N * sizeof(uint16_t)), *back = malloc(N * sizeof(uint16_t));
  float *f = malloc(N * sizeof(float));
  assert_non_null(h);
  assert_non_null(back);
  assert_non_null(f);
  for (uint32_t i = 0; i < N; i++)
    h[i] = (uint16_t)(i < 5 ? 0xfc01 + i * 0x41 : i - 5); /* 5 NaNs first: shifts the tail */
  ddp__f16_to_f32(f, h, N);
  ddp__f32_to_f16_scaled(back, f, N, 1.0f);
  int bad = 0;
  for (uint32_t i = 0; i < N; i++) {
    float want = hccl__half_to_float(h[i]);
    bad += memcmp(&f[i], &want, sizeof(float)) != 0;
    bad += back[i] != hccl__float_to_half(f[i]);
    bad += back[i] != (h_isnan(h[i]) ? (h[i] | 0x0200) : h[i]);
  }
  fprintf(stderr, "every half: %d mismatches (F16C %s)\n", bad,
          hccl__cpu_has_f16c() ? "on" : "off");
  assert_int_equal(bad, 0);
  free(h);
  free(back);
  free(f);
}

/* A sweep of float bit patterns (every 4099th, all exponents and signs), scaled by 1/3 and
 * by 2^-4 as the wire does with 1/world size: the bits of hccl__float_to_half(f * scale). */
static void test_scaled_sweep(void **state) {
  (void)state;
  enum { BLOCK = 4099 };
  static float src[BLOCK];
  static uint16_t dst[BLOCK];
  const float scales[] = {1.0f / 3.0f, 0x1p-4f};
  int bad = 0;
  uint64_t n = 0;
  for (size_t s = 0; s < 2; s++) {
    uint64_t u = s; /* the two passes see different patterns */
    while (u <= 0xffffffffu) {
      size_t k = 0;
      for (; k < BLOCK && u <= 0xffffffffu; k++, u += 4099) {
        uint32_t b = (uint32_t)u;
        memcpy(&src[k], &b, sizeof(float));
      }
      ddp__f32_to_f16_scaled(dst, src, k, scales[s]);
      for (size_t i = 0; i < k; i++) {
        uint16_t want = hccl__float_to_half(src[i] * scales[s]);
        bad += dst[i] != want;
      }
      n += k;
    }
  }
  fprintf(stderr, "scaled sweep: %llu floats, %d mismatches\n", (unsigned long long)n, bad);
  assert_int_equal(bad, 0);
}

/* ddp__scale on fp16 rounds once per element: the half of (float(h) * scale). */
static void test_scale_f16(void **state) {
  (void)state;
  enum { N = 65536 };
  uint16_t *h = malloc(N * sizeof(uint16_t));
  assert_non_null(h);
  for (uint32_t i = 0; i < N; i++)
    h[i] = (uint16_t)i;
  ddp__scale(h, HCCL_DATA_TYPE_FP16, N, 0.125f);
  int bad = 0;
  for (uint32_t i = 0; i < N; i++) {
    uint16_t want = hccl__float_to_half(hccl__half_to_float((uint16_t)i) * 0.125f);
    bad += h[i] != want;
  }
  assert_int_equal(bad, 0);
  assert_int_equal(h[0x3c00], 0x3000); /* 1.0 / 8 */
  assert_int_equal(h[0x0001], 0x0000); /* 2^-27: below half the smallest subnormal */
  assert_int_equal(h[0x0004], 0x0000); /* 2^-25: the tie goes to even, 0 */
  assert_int_equal(h[0x000c], 0x0002); /* 3 * 2^-25: the tie goes to even, 2 units */
  free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_expected_bits, setup_alarm),
      cmocka_unit_test_setup(test_every_half, setup_alarm),
      cmocka_unit_test_setup(test_scaled_sweep, setup_alarm),
      cmocka_unit_test_setup(test_scale_f16, setup_alarm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
