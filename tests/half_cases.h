/*
 * half_cases.h - float -> half conversions with the bits they must give (round to nearest,
 * ties to even; subnormals, overflow to Inf, signed zeros), shared by the tests of the one
 * conversion (base/half.h: tests/algo/test_reduce.c) and of ddp's loops over it
 * (tests/ddp/test_ddp_half.c). Every half here is exact in float.
 */
#ifndef HCCL_TEST_HALF_CASES_H
#define HCCL_TEST_HALF_CASES_H

#include <math.h>
#include <stdint.h>

static const struct half_case {
  float f;
  uint16_t h;
} HALF_CASES[] = {
    {1.0f, 0x3c00},
    {1.0f + 0x1p-11f, 0x3c00},            /* tie between 1 and 1+2^-10: even is 1 */
    {1.0f + 3 * 0x1p-11f, 0x3c02},        /* tie between 0x3c01 and 0x3c02: even */
    {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01}, /* just above the tie */
    {-(1.0f + 0x1p-11f), 0xbc00},
    {2049.0f, 0x6800},  /* 2048 and 2050 are halves: tie -> 2048 */
    {2051.0f, 0x6802},  /* tie -> 2052 */
    {0x1p-24f, 0x0001}, /* smallest subnormal */
    {0x1p-25f, 0x0000}, /* tie between 0 and 2^-24: even is 0 */
    {0x1p-25f + 0x1p-40f, 0x0001},
    {3 * 0x1p-25f, 0x0002}, /* tie between 1 and 2 units: 2 */
    {5 * 0x1p-25f, 0x0002}, /* tie between 2 and 3 units: 2 */
    {-0x1p-25f, 0x8000},
    {0x1p-14f, 0x0400},           /* smallest normal */
    {1023.5f * 0x1p-24f, 0x0400}, /* tie between largest subnormal and 2^-14 */
    {1022.5f * 0x1p-24f, 0x03fe},
    {0x1p-30f, 0x0000},
    {1e-30f, 0x0000},
    {0x1p-149f, 0x0000}, /* float subnormal */
    {65504.0f, 0x7bff},
    {65519.99f, 0x7bff},
    {65520.0f, 0x7c00}, /* tie between 65504 and 2^16: rounds to Inf */
    {-65520.0f, 0xfc00},
    {1e10f, 0x7c00},
    {INFINITY, 0x7c00},
    {-INFINITY, 0xfc00},
    {0.0f, 0x0000},
    {-0.0f, 0x8000},
    {0.1f, 0x2e66},
    {-2.5f, 0xc100},
};
#define HALF_NCASES (sizeof(HALF_CASES) / sizeof(HALF_CASES[0]))

#endif
