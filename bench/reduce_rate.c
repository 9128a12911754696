/*
 * reduce_rate.c - the reduction kernels (hccl/src/algo/reduce.c, reduce_half.c) against the
 * rate this core copies memory: for every type and op, out = a (op) b over inputs of N MiB
 * each (64 by default: far beyond the caches), the best of R runs, as bytes moved per second
 * (two read streams and one written: 3 N), beside memcpy's rate over the same N MiB (one read
 * stream and one written: 2 N) measured in the same run. A kernel at the memory's speed moves
 * its bytes as fast as the copy does (ratio 1.0); one that computes more slowly falls below.
 *
 *   reduce_rate [MiB] [runs]
 *
 * One thread; the same buffers for every kernel (floats in [-2, 2), like gradients; random
 * integers). Prints the kernel set the library chose (avx2 or portable) and a second column
 * with the portable set, then for float16 and bfloat16 the float32-accumulating step the
 * zero-copy and staged paths run (acc = W(a) + acc: 2 N + 2 N read, 2 N written).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hccl_iface.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1DULL;
}

static void fill(HcclDataType dt, void *p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng(&seed);
    float f = (float)((double)(r >> 11) * 0x1p-51 - 2.0);
    switch (dt) {
    case HCCL_DATA_TYPE_FP16:
      ((uint16_t *)p)[i] = hccl__float_to_half(f);
      break;
    case HCCL_DATA_TYPE_BFP16:
      ((uint16_t *)p)[i] = hccl__float_to_bf16(f);
      break;
    case HCCL_DATA_TYPE_FP32:
      ((float *)p)[i] = f;
      break;
    case HCCL_DATA_TYPE_FP64:
      ((double *)p)[i] = f;
      break;
    default:
      memcpy((char *)p + i * hccl__dtype_size(dt), &r, hccl__dtype_size(dt));
    }
  }
}

/* Best time of `runs` calls of fn. */
static double best_of(int runs, hccl__reduce_fn fn, void *out, const void *a, const void *b,
                      size_t n, const struct hccl_scale *s) {
  double best = 1e30;
  for (int k = 0; k < runs; k++) {
    double t0 = now();
    fn(out, a, b, n, s);
    double t = now() - t0;
    if (t < best) best = t;
  }
  return best;
}

static void copy_best(void *dst, const void *src, size_t bytes, int runs, double *best) {
  for (int k = 0; k < runs; k++) {
    double t0 = now();
    memcpy(dst, src, bytes);
    double t = now() - t0;
    if (t < *best) *best = t;
  }
}

#define USAGE "usage: reduce_rate [MiB] [runs]   inputs of MiB each (default 64), best of runs (10)\n"

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf(USAGE);
      return 0;
    }
    if (argv[i][0] == '-') {
      fprintf(stderr, "reduce_rate: unknown flag '%s'; " USAGE, argv[i]);
      return 2;
    }
  }
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  int runs = argc > 2 ? atoi(argv[2]) : 10;
  if (mib == 0 || runs <= 0 || argc > 3) {
    fprintf(stderr, "reduce_rate: MiB and runs must be positive numbers; " USAGE);
    return 2;
  }
  size_t bytes = mib << 20;
  char *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes),
       *o = aligned_alloc(64, 2 * bytes); /* room for a float32 accumulator of 16-bit types */
  if (!a || !b || !o) {
    fprintf(stderr, "reduce_rate: out of memory for 4 x %zu MiB\n", mib);
    return 1;
  }
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  memset(o, 3, 2 * bytes);
  /* memcpy's best, measured before every type too (and the best of all kept), so a moment of
   * other load on the machine does not lower the yardstick */
  double copy = 1e30;
  copy_best(o, a, bytes, runs, &copy);
  double copy_rate = 2.0 * (double)bytes / copy / 1e9;
  printf("# reduce_rate: %zu MiB inputs, best of %d; memcpy moves %.2f GB/s (read + written)\n",
         mib, runs, copy_rate);
  printf("# kernel set: %s; GB/s = (2 read + 1 written) x %zu MiB / time; ratio = GB/s / memcpy's\n",
         hccl__reduce_isa(), mib);
  printf("%-9s %-5s %9s %6s %9s %6s\n", "type", "op", hccl__reduce_isa(), "ratio", "portable",
         "ratio");
  static const HcclReduceOp ops[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                     HCCL_REDUCE_MIN, HCCL_REDUCE_AVG};
  bool fast = hccl__reduce_force_portable(false);
  hccl__reduce_force_portable(!fast);
  double worst = 1e30;
  for (int d = 0; d < (int)HCCL_DATA_TYPE_RESERVED; d++) {
    HcclDataType dt = (HcclDataType)d;
    size_t n = bytes / hccl__dtype_size(dt);
    copy_best(o, a, bytes, runs, &copy);
    copy_rate = 2.0 * (double)bytes / copy / 1e9;
    fill(dt, a, n, 11);
    fill(dt, b, n, 12);
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
      double rate[2];
      for (int set = 0; set < 2; set++) {
        bool before = hccl__reduce_force_portable(set == 1 || !fast);
        struct hccl_red r;
        uint64_t scalar = 0;
        hccl__red_make(&r, dt, ops[k], &scalar, 3);
        double t = best_of(runs, r.last, o, a, b, n, &r.s); /* avg: its dividing step */
        rate[set] = 3.0 * (double)bytes / t / 1e9;
        hccl__reduce_force_portable(!before);
      }
      if (ops[k] == HCCL_REDUCE_SUM && rate[0] / copy_rate < worst) worst = rate[0] / copy_rate;
      printf("%-9s %-5s %9.2f %6.2f %9.2f %6.2f\n", hccl__dtype_name(dt), hccl__op_name(ops[k]),
             rate[0], rate[0] / copy_rate, rate[1], rate[1] / copy_rate);
    }
    if (dt == HCCL_DATA_TYPE_FP16 || dt == HCCL_DATA_TYPE_BFP16) {
      struct hccl_red r;
      uint64_t scalar = 0;
      hccl__red_make(&r, dt, HCCL_REDUCE_SUM, &scalar, 3);
      double t = best_of(runs, r.wstep, o, a, o, n, &r.s);
      double rate = (2.0 + 4.0) * (double)bytes / t / 1e9; /* a, acc read; acc written */
      printf("%-9s %-5s %9.2f %6.2f %9s %6s   (float32 accumulator: acc = a + acc)\n",
             hccl__dtype_name(dt), "wstep", rate, rate / copy_rate, "-", "-");
    }
  }
  copy_rate = 2.0 * (double)bytes / copy / 1e9;
  printf("# memcpy's best over the run: %.2f GB/s; the slowest sum: %.2f of memcpy's best "
         "so far when it ran\n", copy_rate, worst);
  free(a);
  free(b);
  free(o);
  return 0;
}
