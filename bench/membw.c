/*
 * membw.c - the memory limit bench/sweep.py compares against: T threads (default: the number
 * of CPUs) each copy a 64 MiB buffer into another of their own, over and over for about a
 * second; prints the bytes copied per second by all of them together, in GB/s (1e9), as the
 * first word of its one line of output.
 *
 *   membw [threads]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BYTES (64u << 20)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static pthread_barrier_t start;

static void *copier(void *arg) {
  double *rate = arg;
  char *a = malloc(BYTES), *b = malloc(BYTES);
  if (!a || !b) return NULL;
  memset(a, 1, BYTES);
  memset(b, 2, BYTES); /* both touched: no page faults while timed */
  pthread_barrier_wait(&start);
  double t0 = now(), t;
  size_t copied = 0;
  do {
    memcpy(b, a, BYTES);
    copied += BYTES;
    t = now();
  } while (t - t0 < 1.0);
  *rate = copied / (t - t0) / 1e9;
  free(a);
  free(b);
  return NULL;
}

int main(int argc, char **argv) {
  const char *usage = "usage: membw [threads 1-256 (default: the number of CPUs)]\n";
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    fputs(usage, stdout);
    return 0;
  }
  if (argc > 1 && argv[1][0] == '-') {
    fprintf(stderr, "membw: unknown option '%s'; see membw --help\n", argv[1]);
    return 2;
  }
  long n = argc > 1 ? atol(argv[1]) : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1 || n > 256) {
    fputs(usage, stderr);
    return 2;
  }
  pthread_t th[256];
  double rate[256] = {0}, sum = 0;
  pthread_barrier_init(&start, NULL, (unsigned)n);
  for (long i = 0; i < n; i++) pthread_create(&th[i], NULL, copier, &rate[i]);
  for (long i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    sum += rate[i];
  }
  printf("%.2f GB/s copied by %ld threads together\n", sum, n);
  return 0;
}
