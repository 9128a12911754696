/*
 * scale_probe.c - what one rank of a large job costs, for bench/scale.sh: the time of
 * HcclCommInitFromEnv, the time of the first small allreduce after it, the sockets this process
 * holds and its resident size once both are done. Every rank measures itself; rank 0 prints
 * the largest value of each over the job (gathered with an allreduce MAX, after a check that
 * the first call's result is right):
 *
 *   scale_probe: ranks 64 init_ms 812.4 first_call_ms 3.1 sockets 84 rss_kib 9216 other_sockets 19 ok
 *
 * (sockets: the most any rank holds; other_sockets: the most a rank other than 0 holds, rank 0
 * also serving the bootstrap store)
 *
 * Started like any rank (npu-launch, torchrun's variables). Exit 0 when every step succeeded.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hccl.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Descriptors of this process that are sockets. */
static int count_sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  char path[300], target[64];
  while ((e = readdir(d))) {
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, target, sizeof(target) - 1);
    if (k > 0 && (target[k] = '\0', strncmp(target, "socket:", 7) == 0)) n++;
  }
  closedir(d);
  return n;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld", &v) == 1) break;
  if (f) fclose(f);
  return v;
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    HcclResult r_ = (call);                                                                        \
    if (r_ != HCCL_SUCCESS) {                                                                      \
      fprintf(stderr, "scale_probe: %s: %s\n", #call, HcclGetLastErrorMessage());                  \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  if (argc > 1) {
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
      printf("usage: scale_probe   (no arguments; one process per rank, started like any rank:\n"
             "       npu-launch --device-list 0,1 -- scale_probe; bench/scale.sh runs it)\n");
      return 0;
    }
    fprintf(stderr, "scale_probe: unknown argument '%s' (it takes none); see scale_probe --help\n",
            argv[1]);
    return 2;
  }
  HcclComm comm;
  double t0 = now_ms();
  CHECK(HcclCommInitFromEnv(&comm));
  double t1 = now_ms();
  uint32_t rank, n;
  CHECK(HcclGetRankId(comm, &rank));
  CHECK(HcclGetRankSize(comm, &n));
  int32_t one[1024];
  for (int i = 0; i < 1024; i++) one[i] = (int32_t)rank + i;
  CHECK(HcclAllReduce(one, one, 1024, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL));
  double t2 = now_ms();
  int wrong = 0;
  for (int i = 0; i < 1024; i++)
    wrong += one[i] != (int32_t)((int64_t)n * (n - 1) / 2 + (int64_t)n * i);
  /* int32 MAX of: init us, first call us, sockets, RSS KiB, wrong elements, and the sockets of
   * ranks other than 0 (rank 0 also serves the bootstrap store). */
  int socks = count_sockets();
  int32_t m[6] = {(int32_t)((t1 - t0) * 1000), (int32_t)((t2 - t1) * 1000), socks,
                  (int32_t)rss_kib(), wrong, rank ? socks : 0};
  CHECK(HcclAllReduce(m, m, 6, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, comm, NULL));
  if (rank == 0)
    printf("scale_probe: ranks %u init_ms %.1f first_call_ms %.2f sockets %d rss_kib %d "
           "other_sockets %d %s\n",
           n, m[0] / 1000.0, m[1] / 1000.0, m[2], m[3], m[5], m[4] ? "WRONG" : "ok");
  CHECK(HcclCommDestroy(comm));
  return m[4] ? 1 : 0;
}
