/*
 * reduce_rate.c - the reduction kernels (hccl/src/algo/reduce_native.c, reduce_half.c) against the
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
 * with the portable set.
 *
 *   reduce_rate -p P [MiB] [runs]
 *
 * The p-input mode: the block reduction of the zero-copy and staged paths at P members
 * (hccl__red_fold, chunk by chunk as the zero-copy and staged paths cut a block), a sum of P inputs of MiB each (8 by
 * default) into an output, for every type, interleaved: each of `runs` rounds (10) times every
 * type once and memcpy once, so a moment of load on a shared machine hits all alike. Prints
 * per type the median and best GB/s ((P read + 1 written) x MiB / time), the median of the
 * rounds' ratios to memcpy's rate (read + written) and to float32's in the same round: ratios
 * hold better than absolute rates under noise.
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

#define USAGE                                                                                      \
  "usage: reduce_rate [MiB] [runs]   inputs of MiB each (default 64), best of runs (10)\n"        \
  "       reduce_rate -p P [MiB] [runs]   P-input block sums, every type interleaved (8 MiB)\n"

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(*v), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* fill() of the first MiB of p (bytes a multiple of 1 MiB), repeated: quick enough to redo
 * before every type of every round, and the values are as fill's. */
static void fill_tiled(HcclDataType dt, char *p, size_t bytes, uint64_t seed) {
  const size_t tile = 1 << 20;
  fill(dt, p, tile / hccl__dtype_size(dt), seed);
  for (size_t at = tile; at < bytes; at += tile)
    memcpy(p + at, p, tile);
}

/* One fold of the P inputs into out, chunk by chunk as the zero-copy and staged paths cut a block; its time. */
static double fold_time(const struct hccl_red *r, size_t es, char *const in[], uint32_t p,
                        char *out, size_t n) {
  size_t per = HCCL_FOLD_CHUNK_BYTES / es; /* as hccl__zview_per */
  double t0 = now();
  for (size_t lo = 0; lo < n; lo += per) {
    const void *src[HCCL_FOLD_MAX_INPUTS];
    for (uint32_t k = 0; k < p; k++)
      src[k] = in[k] + lo * es;
    hccl__red_fold(r, true, out + lo * es, src, p, n - lo < per ? n - lo : per);
  }
  return now() - t0;
}

#define NTYPES ((int)HCCL_DATA_TYPE_RESERVED)
#define MAX_RUNS 1000

/* The p-input mode (see the top of the file). */
static int many(uint32_t p, size_t mib, int runs) {
  size_t bytes = mib << 20;
  char *in[HCCL_FOLD_MAX_INPUTS], *out = aligned_alloc(64, bytes);
  bool ok = out != NULL;
  for (uint32_t k = 0; k < p; k++)
    ok = ok && (in[k] = aligned_alloc(64, bytes)) != NULL;
  if (!ok) {
    fprintf(stderr, "reduce_rate: out of memory for %u x %zu MiB\n", p + 1, mib);
    return 1;
  }
  memset(out, 3, bytes);
  static double t[NTYPES][MAX_RUNS], tcopy[MAX_RUNS], ratio[MAX_RUNS];
  for (int run = 0; run < runs; run++) {
    tcopy[run] = 1e30;
    copy_best(out, in[0], bytes, 1, &tcopy[run]);
    for (int d = 0; d < NTYPES; d++) {
      HcclDataType dt = (HcclDataType)d;
      size_t es = hccl__dtype_size(dt), n = bytes / es;
      for (uint32_t k = 0; k < p; k++)
        fill_tiled(dt, in[k], bytes, 11 + k);
      struct hccl_red r;
      uint64_t scalar = 0;
      hccl__red_make(&r, dt, HCCL_REDUCE_SUM, &scalar, p);
      t[d][run] = fold_time(&r, es, in, p, out, n);
    }
  }
  printf("# reduce_rate -p %u: sums of %u inputs of %zu MiB, %d interleaved rounds, kernel set "
         "%s\n", p, p, mib, runs, hccl__reduce_isa());
  printf("# GB/s = (%u read + 1 written) x %zu MiB / time; memcpy's = (1 read + 1 written); "
         "ratios are medians of the rounds' own\n", p, mib);
  for (int run = 0; run < runs; run++)
    ratio[run] = 2.0 * (double)bytes / tcopy[run] / 1e9;
  printf("%-9s %8s %8s %8s %8s\n", "type", "median", "best", "/memcpy", "/float32");
  printf("%-9s %8.2f\n", "memcpy", median(ratio, runs));
  const int f32 = HCCL_DATA_TYPE_FP32;
  for (int d = 0; d < NTYPES; d++) {
    double rate[MAX_RUNS], rc[MAX_RUNS], rf[MAX_RUNS], best = 0;
    for (int run = 0; run < runs; run++) {
      rate[run] = (p + 1.0) * (double)bytes / t[d][run] / 1e9;
      rc[run] = rate[run] / (2.0 * (double)bytes / tcopy[run] / 1e9);
      rf[run] = t[f32][run] / t[d][run];
      if (rate[run] > best) best = rate[run];
    }
    printf("%-9s %8.2f %8.2f %8.2f %8.2f\n", hccl__dtype_name((HcclDataType)d), median(rate, runs),
           best, median(rc, runs), median(rf, runs));
  }
  for (uint32_t k = 0; k < p; k++)
    free(in[k]);
  free(out);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-p") == 0) {
    long p = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
    size_t mib = argc > 3 ? strtoul(argv[3], NULL, 10) : 8;
    int runs = argc > 4 ? atoi(argv[4]) : 10;
    if (p < 2 || p > HCCL_FOLD_MAX_INPUTS || mib == 0 || runs <= 0 || runs > MAX_RUNS || argc > 5) {
      fprintf(stderr, "reduce_rate: -p %s %s %s: P must be in 2..%d, MiB positive, runs in "
              "1..%d; " USAGE, argc > 2 ? argv[2] : "(no P)", argc > 3 ? argv[3] : "",
              argc > 4 ? argv[4] : "", HCCL_FOLD_MAX_INPUTS, MAX_RUNS);
      return 2;
    }
    return many((uint32_t)p, mib, runs);
  }
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
       *o = aligned_alloc(64, bytes);
  if (!a || !b || !o) {
    fprintf(stderr, "reduce_rate: out of memory for 3 x %zu MiB\n", mib);
    return 1;
  }
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  memset(o, 3, bytes);
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
  }
  copy_rate = 2.0 * (double)bytes / copy / 1e9;
  printf("# memcpy's best over the run: %.2f GB/s; the slowest sum: %.2f of memcpy's best "
         "so far when it ran\n", copy_rate, worst);
  free(a);
  free(b);
  free(o);
  return 0;
}
