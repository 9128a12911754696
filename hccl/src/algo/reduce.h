/*
 * reduce.h - the reduction kernels: out[i] = a[i] (op) b[i] (element sizes and names: dtype.h).
 *
 * Integer results are exact with two's-complement wrap on overflow. float32 follows IEEE 754
 * with round-to-nearest-even. float16 is computed in float32 and rounded once to float16,
 * which is correctly rounded for +, * (float32 has 24 >= 2*11+2 bits), and exact for max/min.
 * NaN propagates through every op, max and min included. The float16 kernels use F16C/AVX2
 * when the CPU has them (checked once at run time) and portable C otherwise (the conversions
 * of base/half.h); both give the same bits.
 */
#ifndef HCCL_REDUCE_H
#define HCCL_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "hccl.h"

/* True for the pairs the library reduces: {int8, int32, fp16, fp32} x {sum, prod, max, min}. */
bool hccl__reduce_supported(HcclDataType dt, HcclReduceOp op);

typedef void (*hccl__reduce_fn)(void *out, const void *a, const void *b, size_t count);

/* The kernel for (dt, op), or NULL when unsupported. out may be the same pointer as a or b
 * (never a partial overlap). */
hccl__reduce_fn hccl__reduce_kernel(HcclDataType dt, HcclReduceOp op);

/* Convenience: looks up and runs the kernel. dt/op must be supported. */
void hccl__reduce(void *out, const void *a, const void *b, size_t count, HcclDataType dt,
                  HcclReduceOp op);

/* memcpy with streaming (non-temporal) stores: dst's lines go to memory without first being
 * read into the cache, a third less memory traffic for a destination that is not read again
 * soon (a large collective's output). dst and src must not overlap. */
void hccl__copy_stream(void *dst, const void *src, size_t n);

/* Forces the portable float16 path (tests compare it with the F16C path); returns whether the
 * F16C path was in use before. */
bool hccl__reduce_force_portable(bool portable);

#endif
