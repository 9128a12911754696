/*
 * reduce_kern.h - what the kernel files share with reduce.c (the choice of kernel set, struct
 * hccl_red): the kinds of kernel a type has, and how reduce.c asks reduce_native.c (integers,
 * float32, float64) and reduce_half.c (float16, bfloat16) for one. Internal to those three
 * files; everything else uses reduce.h.
 */
#ifndef HCCL_REDUCE_KERN_H
#define HCCL_REDUCE_KERN_H

#include <stdbool.h>

#include "reduce.h"

/* The kernels of one type. The first seven are a op b; then the finishing forms of sum (AVG:
 * divided by the scale, PREMUL_SUM: times it) and the one-rank scale (a times it). */
enum hccl_kern {
  HK_SUM,
  HK_PROD,
  HK_MAX,
  HK_MIN,
  HK_BAND,
  HK_BOR,
  HK_BXOR,
  HK_SUM_DIV,
  HK_SUM_MUL,
  HK_MUL,
  HK_NKINDS
};

/* The float16 (bf16 false) or bfloat16 kernel of kind k, from the AVX2/F16C set or the
 * portable one; NULL for the bitwise kinds. */
hccl__reduce_fn hccl__half_kernel(bool bf16, bool avx2, enum hccl_kern k);

/* The n-input kernel (reduce.h, struct hccl_red's wmany) of float16 or bfloat16 whose last
 * step is kind k: HK_SUM and HK_PROD accumulate in float32; HK_SUM_DIV and HK_SUM_MUL the
 * same with the sum; HK_MAX and HK_MIN (exact either way) as the chain would. From the
 * AVX2/F16C set or the portable one; NULL for the other kinds. */
hccl__reduce_many_fn hccl__half_many(bool bf16, bool avx2, enum hccl_kern k);

/* The two-input kernel of kind k of an integer type, float32 or float64 (dt), from the AVX2
 * set or the portable one; NULL for the bitwise kinds of the floats, HK_MUL's absent forms
 * and every other dt. */
hccl__reduce_fn hccl__native_kernel(HcclDataType dt, bool avx2, enum hccl_kern k);

/* The n-input kernel (struct hccl_red's wmany) of such a type whose last step is kind k (the
 * plain kinds fold with themselves, HK_SUM_DIV and HK_SUM_MUL with the sum): the same steps
 * as a chain of two-input kernels, no scratch. NULL for HK_MUL and the floats' bitwise kinds.
 */
hccl__reduce_many_fn hccl__native_many(HcclDataType dt, bool avx2, enum hccl_kern k);

#endif
