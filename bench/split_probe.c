/*
 * split_probe.c - the time to make the groups of a 3D layout (tensor x pipeline x data) from
 * a parent communicator, for bench/split.sh: `split` makes each rank's three groups with
 * HcclCommSplit (no store), one call (one parent round) each; `group` the same three
 * splits between HcclGroupStart and HcclGroupEnd (one parent round for all); `init` the way every group is made today, a bootstrap of its own
 * (the group's first rank runs HcclGetRootInfo, the parent's allgather hands the root infos
 * round, each rank runs HcclCommInitRootInfo). Each group then runs one allreduce, checked;
 * with_first_allreduce_ms adds those three first calls, where a group whose links are made on
 * first use makes them. Rank 0 prints the largest times over the job (an allreduce MAX over the parent), and the world's
 * own HcclCommInitFromEnv as the last rank to start saw it (the least over the ranks: the others
 * also waited for the ranks started after them):
 *
 *   split_probe: ranks 8 layout 2x2x2 mode split groups 3 make_ms 41.2 with_first_allreduce_ms 41.9
 *   world_init_ms 12.0 ok   (one line)
 *
 * usage: split_probe [split|group|init] [TP] [PP]   (DP = ranks / (TP x PP); default split 2 2)
 * Started like any rank (npu-launch, torchrun's variables). Exit 0 when every step succeeded.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hccl.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    HcclResult rc_ = (call);                                                                       \
    if (rc_ != HCCL_SUCCESS) {                                                                     \
      fprintf(stderr, "split_probe: %s: %s\n", #call, HcclGetLastErrorMessage());                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Rank r = (d * PP + p) * TP + t. Group g (0 tensor, 1 pipeline, 2 data) of rank r: its colour
 * (the ranks that differ from r only along g) and r's index in it. */
static void group_of(int g, int r, int tp, int pp, int *color, int *index) {
  int t = r % tp, p = r / tp % pp, d = r / (tp * pp);
  if (g == 0) *color = d * pp + p, *index = t;
  if (g == 1) *color = d * tp + t, *index = p;
  if (g == 2) *color = p * tp + t, *index = d;
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    printf("usage: split_probe [split|group|init] [TP] [PP]\n");
    return 0;
  }
  const char *mode = argc > 1 ? argv[1] : "split";
  int tp = argc > 2 ? atoi(argv[2]) : 2, pp = argc > 3 ? atoi(argv[3]) : 2;
  if (strcmp(mode, "split") && strcmp(mode, "group") && strcmp(mode, "init")) {
    fprintf(stderr, "split_probe: mode '%s' is not split, group or init\n", mode);
    return 2;
  }
  HcclComm world;
  double w0 = now_ms();
  CHECK(HcclCommInitFromEnv(&world));
  double world_ms = now_ms() - w0;
  uint32_t rank, n;
  HcclGetRankId(world, &rank);
  HcclGetRankSize(world, &n);
  if (tp < 1 || pp < 1 || n % (uint32_t)(tp * pp)) {
    fprintf(stderr, "split_probe: %u ranks do not make a %d x %d x DP layout\n", n, tp, pp);
    return 2;
  }
  int dp = (int)n / (tp * pp);
  HcclComm group[3] = {0};
  CHECK(HcclBarrier(world, NULL));
  double t0 = now_ms();
  bool grouped = !strcmp(mode, "group");
  if (grouped) CHECK(HcclGroupStart());
  for (int g = 0; g < 3; g++) {
    int color, index;
    group_of(g, (int)rank, tp, pp, &color, &index);
    if (strcmp(mode, "init")) {
      CHECK(HcclCommSplit(world, color, index, &group[g], NULL));
      continue;
    }
    /* Today's way: the group's first rank starts a bootstrap store; its root info reaches
     * the group's ranks through the parent. */
    HcclRootInfo *all = calloc(n, sizeof(HcclRootInfo)), mine;
    memset(&mine, 0, sizeof(mine));
    if (index == 0) CHECK(HcclGetRootInfo(&mine));
    CHECK(HcclAllGather(&mine, all, sizeof(mine), HCCL_DATA_TYPE_UINT8, world, NULL));
    int first = -1;
    for (uint32_t r = 0; r < n && first < 0; r++) {
      int c, i;
      group_of(g, (int)r, tp, pp, &c, &i);
      if (c == color && i == 0) first = (int)r;
    }
    int size = g == 0 ? tp : g == 1 ? pp : dp;
    CHECK(HcclCommInitRootInfo((uint32_t)size, &all[first], (uint32_t)index, &group[g]));
    free(all);
  }
  if (grouped) CHECK(HcclGroupEnd());
  double make_ms = now_ms() - t0;
  int ok = 1;
  double first_ms = 0; /* each group's first allreduce: where links made on first use cost */
  for (int g = 0; g < 3; g++) {
    uint32_t size;
    HcclGetRankSize(group[g], &size);
    int32_t v = (int32_t)rank + 1, sum = v;
    double f0 = now_ms();
    CHECK(HcclAllReduce(&v, &sum, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, group[g], NULL));
    first_ms += now_ms() - f0;
    int32_t want = 0; /* the group's parent ranks + 1 */
    int color, index;
    group_of(g, (int)rank, tp, pp, &color, &index);
    for (uint32_t r = 0; r < n; r++) {
      int c, i;
      group_of(g, (int)r, tp, pp, &c, &i);
      if (c == color) want += (int32_t)r + 1;
    }
    if (sum != want || (int)size != (g == 0 ? tp : g == 1 ? pp : dp)) ok = 0;
    CHECK(HcclCommDestroy(group[g]));
  }
  double worst = make_ms, world_least = world_ms, made = make_ms + first_ms, made_worst = made;
  int32_t all_ok = ok;
  CHECK(HcclAllReduce(&make_ms, &worst, 1, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_MAX, world, NULL));
  CHECK(HcclAllReduce(&made, &made_worst, 1, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_MAX, world, NULL));
  CHECK(HcclAllReduce(&world_ms, &world_least, 1, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_MIN, world,
                      NULL));
  CHECK(HcclAllReduce(&ok, &all_ok, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MIN, world, NULL));
  if (rank == 0)
    printf("split_probe: ranks %u layout %dx%dx%d mode %s groups 3 make_ms %.1f "
           "with_first_allreduce_ms %.1f world_init_ms %.1f %s\n",
           n, tp, pp, dp, mode, worst, made_worst, world_least, all_ok ? "ok" : "WRONG");
  HcclCommDestroy(world);
  return all_ok ? 0 : 1;
}
