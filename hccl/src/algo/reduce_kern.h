/*
 * reduce_kern.h - what the two files of kernels share (reduce.c: the integer, float32 and
 * float64 kernels, the choice of kernel set, struct hccl_red; reduce_half.c: the float16 and
 * bfloat16 kernels): the kinds of kernel a type has, and how reduce.c asks reduce_half.c for
 * one. Internal to those two files; everything else uses reduce.h.
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

/* The n-input float32-accumulating kernel (reduce.h, struct hccl_red's wmany) of float16 or
 * bfloat16 whose last step is kind k (HK_SUM, HK_PROD, HK_SUM_DIV, HK_SUM_MUL; the others
 * combine with the sum), from the AVX2/F16C set or the portable one; NULL for other kinds. */
hccl__reduce_many_fn hccl__half_many(bool bf16, bool avx2, enum hccl_kern k);

#endif
