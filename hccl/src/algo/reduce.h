/*
 * reduce.h - the reduction kernels, out[i] = a[i] (op) b[i], for every HcclDataType and
 * reduction (element sizes and names: dtype.h), and what a call hands its algorithms: one
 * struct hccl_red with the kernels of its (type, op) and the scale its last step applies.
 *
 * The precision contract (docs/design.md, "Precision"; tests/algo/test_reduce.c and
 * tests/core/test_dtypes.c check it):
 *   - Integers are exact, with two's-complement wrap on overflow (sum, prod), as NCCL's.
 *     AVG is the wrapped sum divided by the group size, rounded toward zero (NCCL's integer
 *     average). PREMUL_SUM on integers is the sum times the scalar, wrapped: the same as
 *     multiplying each input first, since both are exact modulo 2^bits.
 *   - float32 and float64 follow IEEE 754, round to nearest even: each kernel rounds once.
 *   - float16 and bfloat16 are widened to float32 (exactly), combined in float32 and rounded
 *     once to their own type. One such step is correctly rounded for +, * (24 >= 2*11+2 and
 *     2*8+2) and exact for max and min. Where one rank reads every input of a block (the
 *     zero-copy and staged paths inside a server, zview.h), the whole block is accumulated in
 *     float32 (the `wmany` kernels, every input of a vector in registers) and rounded once at
 *     the end; where partial results cross
 *     ranks (ring and halving-doubling hops, servers), each hop rounds to the type.
 *   - AVG on floats is the sum divided by the group size, PREMUL_SUM the sum times the
 *     scalar, applied once, on the step that finishes each element (the `last` kernel), in
 *     the type's precision (float32 for float16 and bfloat16); no second pass.
 *   - NaN propagates through every op, max and min included.
 * Two kernel sets: AVX2 (with F16C for float16) when the CPU has them, checked once at the
 * first lookup; plain C otherwise (GCC vectorizes it for the baseline ISA). Both give the same
 * bits; hccl__reduce_force_portable() lets tests compare them.
 *
 * Aliasing: out may equal a or b exactly (in place); never a partial overlap.
 */
#ifndef HCCL_REDUCE_H
#define HCCL_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "hccl.h"

/* The scalar of a last step: AVG's divisor (the group size), PREMUL_SUM's multiplier. */
struct hccl_scale {
  float f32;  /* float16, bfloat16, float32 */
  double f64; /* float64 */
  uint64_t i; /* integers: the divisor (AVG) or multiplier (PREMUL_SUM), as two's complement */
};

/* out = a (op) b for n elements; s is read only by kernels that scale (NULL otherwise). */
typedef void (*hccl__reduce_fn)(void *out, const void *a, const void *b, size_t n,
                                const struct hccl_scale *s);

/* out = in[n-1] (op) (... (op) (in[1] (op) in[0])) for c elements, n >= 2, in the precision
 * of struct hccl_red's wmany; out may be in[n-1] exactly (in place), never another input. */
typedef void (*hccl__reduce_many_fn)(void *out, const void *const in[], uint32_t n, size_t c,
                                     const struct hccl_scale *s);

/* What a reducing call's algorithms apply (made once per call by hccl__red_make). */
struct hccl_red {
  hccl__reduce_fn step; /* out = a op b */
  hccl__reduce_fn last; /* out = post(a op b): the step that finishes an element; = step when
                           the op has no scale (everything but AVG and PREMUL_SUM) */
  hccl__reduce_fn only; /* one rank: out = post(a) (b unused); NULL where post(a) = a */
  /* Where one reader combines a whole block (zview.h, hccl__red_fold): n inputs read, the
   * partial result kept in registers, one write. For float16 and bfloat16 sum and prod, in
   * float32, rounded once: N(W(in[n-1]) op (... op (W(in[1]) op W(in[0])))); for every other
   * (type, op), the same steps and bits as a chain of `step` kernels (each step rounded in
   * the type). Set for every (type, op) hccl__red_make accepts. */
  hccl__reduce_many_fn wmany;
  hccl__reduce_many_fn wfinal; /* the same with `last`'s post() on the last op */
  bool pair_by_step; /* a fold of 2 inputs is one `step`/`last`, the same bits (every type but
                        float16 and bfloat16, whose wmany rounds once from float32) */
  struct hccl_scale s;
};

/* Whether the library reduces dt with the built-in op (HcclReduceOp's values, AVG included):
 * every type takes sum, prod, max, min and avg; the integer types also band, bor, bxor. */
bool hccl__reduce_supported(HcclDataType dt, HcclReduceOp op);

/* Fills r for dt and op (a built-in op, or HCCL__RED_PREMUL_SUM with `scalar` pointing at
 * one element of type dt) over a group of nranks. dt and op must be supported (callers
 * validate first); returns false otherwise and leaves r zeroed. */
bool hccl__red_make(struct hccl_red *r, HcclDataType dt, HcclReduceOp op, const void *scalar,
                    uint32_t nranks);

/* How the zero-copy and staged paths cut a block for hccl__red_fold (zview.h): chunks of this
 * many bytes, so the inputs' pieces stream through while the output chunk stays in L1/L2; at
 * most this many inputs. */
#define HCCL_FOLD_CHUNK_BYTES (32u << 10)
#define HCCL_FOLD_MAX_INPUTS 64

/* dst = src[0..n) folded in order, as one reader combines a block (zview.h): acc = src[0],
 * then acc = src[k] (op) acc for k = 1..n-1, the last step with r->last's post() when finish
 * (r->wfinal, else r->wmany): a float16 or bfloat16 sum or product in float32, rounded once;
 * every other (type, op) rounded at each step, as a chain of r->step would be. n >= 2 and c
 * elements. dst may be src[n-1] exactly (in place), never another input. No scratch. */
void hccl__red_fold(const struct hccl_red *r, bool finish, void *dst, const void *const src[],
                    uint32_t n, size_t c);

/* The plain kernel for (dt, op), or NULL when unsupported: r.step of hccl__red_make. */
hccl__reduce_fn hccl__reduce_kernel(HcclDataType dt, HcclReduceOp op);

/* memcpy with streaming (non-temporal) stores: dst's lines go to memory without first being
 * read into the cache, a third less memory traffic for a destination that is not read again
 * soon (a large collective's output). dst and src must not overlap. */
void hccl__copy_stream(void *dst, const void *src, size_t n);

/* Forces the portable (plain C) kernels, or back to the fastest the CPU has; returns whether
 * the AVX2 set was in use before. Tests compare the two sets with it. */
bool hccl__reduce_force_portable(bool portable);

/* The name of the kernel set in use: "avx2" or "portable" (benchmarks print it). */
const char *hccl__reduce_isa(void);

#endif
