/*
 * reduce.c - which kernels a reducing call uses, and struct hccl_red, what it hands its
 * algorithms (contract and precision: reduce.h): the kernel set chosen once, the (type, op)
 * looked up once per call (hccl__red_make) so the hot loops have no switch inside, the scale
 * of AVG and PREMUL_SUM, and the fold of a block one reader combines (hccl__red_fold). The
 * kernels are reduce_native.c's (integers, float32, float64) and reduce_half.c's (float16,
 * bfloat16). Beside them, the copy with streaming stores that a step uses for a large output.
 *
 * The avx2 set is used when the CPU has AVX2 and F16C (checked once, at the first lookup, by
 * CPUID: no ifunc resolver, which crashed under TSan); otherwise the baseline set.
 */
#include "reduce.h"

#include <string.h>

#include "half.h"
#include "reduce_kern.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HCCL__HAVE_X86 1
#else
#define HCCL__HAVE_X86 0
#endif

#if HCCL__HAVE_X86
/* __builtin_cpu_supports("avx2") also checks that the OS saves the AVX registers (after
 * hccl__cpu_has_f16c's __builtin_cpu_init). */
static bool cpu_has_avx2_f16c(void) {
  return hccl__cpu_has_f16c() && __builtin_cpu_supports("avx2");
}
#else
static bool cpu_has_avx2_f16c(void) {
  return false;
}
#endif

/* ---- choosing a kernel set ----
 * -1 until the first lookup, then 1 for the avx2 set, 0 for the portable one. Relaxed atomics
 * are enough: the value only picks between two tables of valid kernels. */
static int g_use_avx2 = -1;

static bool use_avx2(void) {
  int v = __atomic_load_n(&g_use_avx2, __ATOMIC_RELAXED);
  if (v < 0) {
    int expected = -1;
    v = cpu_has_avx2_f16c() ? 1 : 0;
    /* a concurrent hccl__reduce_force_portable() wins over the first detection */
    if (!__atomic_compare_exchange_n(&g_use_avx2, &expected, v, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
      v = expected;
  }
  return v == 1;
}

/* Contract: see reduce.h. Asking for the fast set on a CPU without AVX2 and F16C leaves the
 * portable one in place. Not meant to be called while kernels are looked up on other threads
 * (a kernel already returned stays valid either way). */
bool hccl__reduce_force_portable(bool portable) {
  bool before = use_avx2();
  int v = (!portable && cpu_has_avx2_f16c()) ? 1 : 0;
  __atomic_store_n(&g_use_avx2, v, __ATOMIC_RELAXED);
  return before;
}

const char *hccl__reduce_isa(void) {
  return use_avx2() ? "avx2" : "portable";
}

static bool is_half(HcclDataType dt) {
  return dt == HCCL_DATA_TYPE_FP16 || dt == HCCL_DATA_TYPE_BFP16;
}

static bool is_float(HcclDataType dt) {
  return is_half(dt) || dt == HCCL_DATA_TYPE_FP32 || dt == HCCL_DATA_TYPE_FP64;
}

static hccl__reduce_fn kernel(HcclDataType dt, enum hccl_kern k) {
  bool avx2 = use_avx2();
  if (is_half(dt)) return hccl__half_kernel(dt == HCCL_DATA_TYPE_BFP16, avx2, k);
  return hccl__native_kernel(dt, avx2, k);
}

static hccl__reduce_many_fn many(HcclDataType dt, enum hccl_kern k) {
  bool avx2 = use_avx2();
  if (is_half(dt)) return hccl__half_many(dt == HCCL_DATA_TYPE_BFP16, avx2, k);
  return hccl__native_many(dt, avx2, k);
}

bool hccl__reduce_supported(HcclDataType dt, HcclReduceOp op) {
  if (hccl__dtype_size(dt) == 0 || !hccl__op_valid(op)) return false;
  bool bitwise = op == HCCL_REDUCE_BAND || op == HCCL_REDUCE_BOR || op == HCCL_REDUCE_BXOR;
  return !(bitwise && is_float(dt));
}

/* The kernel kind of a built-in op's ordinary step (AVG's is the sum). */
static enum hccl_kern step_kind(HcclReduceOp op) {
  switch (op) {
  case HCCL_REDUCE_PROD:
    return HK_PROD;
  case HCCL_REDUCE_MAX:
    return HK_MAX;
  case HCCL_REDUCE_MIN:
    return HK_MIN;
  case HCCL_REDUCE_BAND:
    return HK_BAND;
  case HCCL_REDUCE_BOR:
    return HK_BOR;
  case HCCL_REDUCE_BXOR:
    return HK_BXOR;
  default: /* sum, avg, premul sum */
    return HK_SUM;
  }
}

/* The scale of a PREMUL_SUM, from one element of type dt: 16-bit floats widen exactly to
 * float32, integers are kept as their two's-complement bits (a product mod 2^bits does not
 * care whether the scalar was signed). */
static struct hccl_scale premul_scale(HcclDataType dt, const void *scalar) {
  struct hccl_scale s = {0};
  uint16_t h;
  switch (dt) {
  case HCCL_DATA_TYPE_FP16:
    memcpy(&h, scalar, 2);
    s.f32 = hccl__half_to_float(h);
    break;
  case HCCL_DATA_TYPE_BFP16:
    memcpy(&h, scalar, 2);
    s.f32 = hccl__bf16_to_float(h);
    break;
  case HCCL_DATA_TYPE_FP32:
    memcpy(&s.f32, scalar, 4);
    break;
  case HCCL_DATA_TYPE_FP64:
    memcpy(&s.f64, scalar, 8);
    break;
  case HCCL_DATA_TYPE_INT8: {
    int8_t v;
    memcpy(&v, scalar, 1);
    s.i = (uint64_t)(int64_t)v;
    break;
  }
  case HCCL_DATA_TYPE_INT16: {
    int16_t v;
    memcpy(&v, scalar, 2);
    s.i = (uint64_t)(int64_t)v;
    break;
  }
  case HCCL_DATA_TYPE_INT32: {
    int32_t v;
    memcpy(&v, scalar, 4);
    s.i = (uint64_t)(int64_t)v;
    break;
  }
  default: { /* the unsigned types and int64: zero-extended bits */
    size_t n = hccl__dtype_size(dt);
    memcpy(&s.i, scalar, n); /* little-endian: the low bytes */
    break;
  }
  }
  return s;
}

bool hccl__red_make(struct hccl_red *r, HcclDataType dt, HcclReduceOp op, const void *scalar,
                    uint32_t nranks) {
  memset(r, 0, sizeof(*r));
  bool premul = op == HCCL__RED_PREMUL_SUM;
  if (premul ? (hccl__dtype_size(dt) == 0 || !scalar) : !hccl__reduce_supported(dt, op))
    return false;
  enum hccl_kern k = step_kind(op), fin = k;
  r->step = kernel(dt, k);
  if (op == HCCL_REDUCE_AVG) {
    r->s = (struct hccl_scale){.f32 = (float)nranks, .f64 = nranks, .i = nranks};
    fin = HK_SUM_DIV;
  } else if (premul) {
    r->s = premul_scale(dt, scalar);
    fin = HK_SUM_MUL;
    r->only = kernel(dt, HK_MUL);
  }
  r->last = kernel(dt, fin);
  r->wmany = many(dt, k);
  r->wfinal = many(dt, fin);
  r->pair_by_step = !is_half(dt);
  return true;
}

/* Contract: see reduce.h. */
void hccl__red_fold(const struct hccl_red *r, bool finish, void *dst, const void *const src[],
                    uint32_t n, size_t c) {
  if (n == 2 && r->pair_by_step) /* the two-input kernel: 2 ranks' every zero-copy block */
    (finish ? r->last : r->step)(dst, src[1], src[0], c, &r->s);
  else
    (finish ? r->wfinal : r->wmany)(dst, src, n, c, &r->s);
}

hccl__reduce_fn hccl__reduce_kernel(HcclDataType dt, HcclReduceOp op) {
  static const uint64_t no_scalar;
  struct hccl_red r;
  return hccl__red_make(&r, dt, op, &no_scalar, 1) ? r.step : NULL;
}

/* Contract: see reduce.h. SSE2 streaming stores (baseline x86-64, so no dispatch), 64 bytes
 * per iteration once dst is 16-byte aligned; the head and the tail go through memcpy. The
 * closing sfence orders the streamed stores before any later store (a flag or counter another
 * thread or process polls), as ordinary stores are ordered on x86. */
void hccl__copy_stream(void *dst, const void *src, size_t n) {
#if HCCL__HAVE_X86
  char *d = dst;
  const char *s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; d += 64, s += 64, n -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16)),
            c = _mm_loadu_si128((const __m128i *)(s + 32)),
            e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  memcpy(d, s, n);
  _mm_sfence();
#else
  memcpy(dst, src, n);
#endif
}
