/*
 * copy_floor.c - the floor under a small allreduce between two ranks on this machine, the
 * limit bench/compare.sh prints beside its 4 KiB column: two parties that each copy `bytes`
 * of floats into a slot the other reads (8 slots, as the shm transport keeps), raise a flag,
 * wait for the other's flag and add the other's slot to their own input. Nothing else: no
 * checks, no stamps, no deadlines. The parties are two processes sharing memory (what ranks
 * are), each pinned to its own CPU (0 and 1) when the machine has two.
 *
 * The same for the zero-copy path (HcclMemAlloc buffers, allreduce_perf -R 1), whose inputs and
 * outputs both parties map: raise a flag and wait for the other's (both have entered), add
 * the two inputs' halves of one's own into one's own output and copy the sums into the other's
 * output, raise a second flag and wait for the other's (both have finished). Three forms:
 *   zcopy_us          out of place, the inputs not written between exchanges, as in
 *                     allreduce_perf's out-of-place column: the inputs' lines stay in both
 *                     caches, and only the halves written into the other's output cross;
 *   zcopy_inplace_us  in place (each buffer is its party's input and output), as in its
 *                     in-place column;
 *   zcopy_fresh_us    out of place with each input rewritten by its owner before every
 *                     exchange, as a training step's new gradients are: the other half of
 *                     every input crosses too.
 * Prints one line:
 *
 *   copy_floor bytes=4096 us=1.20 zcopy_us=0.32 zcopy_inplace_us=0.50 zcopy_fresh_us=0.97
 *
 * (the median of 5 runs of 20000 exchanges each, microseconds per exchange). Build it as
 * compare.sh does, `cc -O3 -march=native`: a scalar add loop (plain -O2) takes
 * 0.8 us more at 4 KiB than the vector kernels libhccl runs.
 *
 *   copy_floor [bytes]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSLOTS 8
#define ITERS 20000
#define WARMUP 1000
#define RUNS 5
/* The slots start on a page of their own, as the shm transport's do. */
#define HEAD 4096

struct shared {
  alignas(64) _Atomic unsigned flag[2][16]; /* flag[r][0]: what the other party posted to r */
  alignas(64) _Atomic unsigned done[2][16]; /* the zero-copy floor's second flag */
  alignas(64) double took_us;               /* party 0's result, for the process run */
};

/* The exchanges measured: copying, and the zero-copy floor's three forms (the slots are then
 * the two inputs, and the two outputs unless in place). */
enum form { COPY, ZCOPY, ZCOPY_INPLACE, ZCOPY_FRESH, NFORMS };

struct party {
  struct shared *sh;
  char *slots; /* 2 x NSLOTS slots of `bytes`: party r reads slots[r], writes slots[1 - r] */
  size_t bytes;
  int me;
  enum form form;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sysconf(_SC_NPROCESSORS_ONLN) >= 2) sched_setaffinity(0, sizeof(set), &set);
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static float *slot(const struct party *p, int owner, unsigned i) {
  return (float *)(p->slots + ((size_t)owner * NSLOTS + i % NSLOTS) * p->bytes);
}

static void exchange(struct party *p) {
  size_t n = p->bytes / sizeof(float);
  int peer = 1 - p->me;
  pin(p->me);
  float *in = aligned_alloc(64, p->bytes + 64), *out = aligned_alloc(64, p->bytes + 64);
  for (size_t k = 0; k < n; k++)
    in[k] = (float)(k + (size_t)p->me), out[k] = 0;
  double t0 = 0;
  for (unsigned i = 1; i <= WARMUP + ITERS; i++) {
    if (i == WARMUP + 1) t0 = now();
    memcpy(slot(p, peer, i), in, p->bytes);
    atomic_store(&p->sh->flag[peer][0], i);
    while (atomic_load_explicit(&p->sh->flag[p->me][0], memory_order_acquire) < i)
      relax();
    const float *src = slot(p, p->me, i);
    for (size_t k = 0; k < n; k++)
      out[k] = in[k] + src[k];
  }
  double us = (now() - t0) / ITERS * 1e6;
  if (out[n ? n - 1 : 0] < 0) us = -1; /* keeps the sums */
  if (p->me == 0) p->sh->took_us = us;
  free(in);
  free(out);
}

/* The zero-copy floor: party r's input is slot(p, 0, r), its output slot(p, 1, r) (or its
 * input, in place). */
static void zcopy_exchange(struct party *p) {
  size_t n = p->bytes / sizeof(float), half = n / 2;
  int peer = 1 - p->me;
  pin(p->me);
  float *in[2] = {slot(p, 0, 0), slot(p, 0, 1)}, *out[2] = {slot(p, 1, 0), slot(p, 1, 1)};
  if (p->form == ZCOPY_INPLACE) out[0] = in[0], out[1] = in[1];
  for (size_t k = 0; k < n; k++)
    in[p->me][k] = (float)(k + (size_t)p->me), out[p->me][k] = 0;
  size_t lo = p->me ? half : 0, hi = p->me ? n : half;
  double t0 = 0;
  for (unsigned i = 1; i <= WARMUP + ITERS; i++) {
    if (i == WARMUP + 1) t0 = now();
    if (p->form == ZCOPY_FRESH)
      for (size_t k = 0; k < n; k++)
        in[p->me][k] = (float)(k + i);
    atomic_store(&p->sh->flag[peer][0], i);
    while (atomic_load_explicit(&p->sh->flag[p->me][0], memory_order_acquire) < i)
      relax();
    for (size_t k = lo; k < hi; k++)
      out[p->me][k] = out[peer][k] = in[0][k] + in[1][k];
    atomic_store(&p->sh->done[peer][0], i);
    while (atomic_load_explicit(&p->sh->done[p->me][0], memory_order_acquire) < i)
      relax();
  }
  double us = (now() - t0) / ITERS * 1e6;
  if (out[p->me][n ? n - 1 : 0] < 0) us = -1; /* keeps the sums */
  if (p->me == 0) p->sh->took_us = us;
}

/* One run of ITERS exchanges by two processes; microseconds each. */
static double run(size_t bytes, enum form form) {
  size_t total = HEAD + 2 * NSLOTS * bytes;
  void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return -1;
  struct shared *sh = m;
  struct party ps[2];
  for (int r = 0; r < 2; r++)
    ps[r] = (struct party){sh, (char *)m + HEAD, bytes, r, form};
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    (form == COPY ? exchange : zcopy_exchange)(&ps[1]);
    _exit(0);
  }
  (form == COPY ? exchange : zcopy_exchange)(&ps[0]);
  waitpid(child, NULL, 0);
  double us = sh->took_us;
  munmap(m, total);
  return us;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(size_t bytes, enum form form) {
  double v[RUNS];
  for (int k = 0; k < RUNS; k++)
    v[k] = run(bytes, form);
  qsort(v, RUNS, sizeof(v[0]), cmp);
  return v[RUNS / 2];
}

int main(int argc, char **argv) {
  long b = argc > 1 ? atol(argv[1]) : 4096;
  if (b < 64 || b % 64) {
    fprintf(stderr, "copy_floor: bytes must be a multiple of 64, at least 64 (got %ld)\n", b);
    return 2;
  }
  static const char *const names[NFORMS] = {"us", "zcopy_us", "zcopy_inplace_us",
                                             "zcopy_fresh_us"};
  int bad = 0;
  printf("copy_floor bytes=%ld", b);
  for (enum form f = COPY; f < NFORMS; f++) {
    double us = median((size_t)b, f);
    bad |= us < 0;
    printf(" %s=%.2f", names[f], us);
  }
  printf("\n");
  return bad;
}
