/*
 * ddp_train - a data-parallel training loop in C over the DDP layer (ddp/include/ddp.h).
 *
 * An MLP (mlp.c; 256 -> 1024 -> 1024 -> 1024 -> 1024 -> 10 by default, 3.4 M parameters) is
 * trained with SGD on a deterministic synthetic stream. Every rank starts from the same
 * weights (rank 0's, broadcast by ddp_create) and takes its own slice of each global batch;
 * the DDP layer averages the gradients, so 1, 2, 4 and 8 ranks compute the same mathematics up
 * to the order of floating-point sums. Backward runs one layer at a time and marks each
 * gradient ready as soon as it is computed; the DDP layer starts the allreduce of each full
 * bucket at once, while the layers below are still being computed.
 *
 *   npu-launch --device-list 0-3 -- ddp_train --steps 40 --global-batch 64
 *
 * Restarts (npu-launch --max-restarts N): --checkpoint FILE makes rank 0 write the parameters
 * and the next step to FILE (atomically: a new file renamed over the old) every
 * --checkpoint-every K steps (10), and every rank start from FILE when it exists. The data of a
 * step depend only on its number, so a job that resumes ends at the loss of one that never
 * stopped. --fail-at-step K makes rank 1 exit with status 3 at step K of the first start
 * (TORCHELASTIC_RESTART_COUNT unset or 0): the failure test/ddp tests inject.
 *
 * Options: --steps N (40), --global-batch B (64), --bucket-mb X (4), --no-overlap,
 * --fp16-wire, --trace FILE (Chrome trace of the last step), --lr X (0.05, reached after a
 * linear warm-up of 5 steps), --hidden H (1024),
 * --layers L (5), --threads T (compute threads per rank: OMP_NUM_THREADS, else the CPUs this
 * rank may run on). Rank 0 prints `step K loss X` for every step, then `final loss X` (the loss
 * after the last update, on the next global batch), the mean step time and its parts over
 * steps 1..N-1, and `NN% of communication hidden`.
 *
 * Why --bucket-mb defaults to 4 and not DDP's 25: this model holds 13 MiB of gradients, so
 * 25 MiB buckets would make the whole of backward after the last layer one bucket that can only
 * start when backward ends; at 4 MiB each 1024 x 1024 layer is a bucket of its own.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ddp.h"
#include "hccl.h"
#include "mlp.h"

#define DATA_SEED 20240607ull
#define INIT_SEED 7ull
#define WARMUP_STEPS 5

struct opts {
  int steps, global_batch, overlap, fp16_wire, hidden, layers, threads;
  double bucket_mb, lr;
  const char *trace;
  const char *checkpoint;
  int checkpoint_every, fail_at_step;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --help; a bad option gets one line on stderr that points here. */
static void usage(void) {
  printf("Usage: ddp_train [options]   (one process per rank, e.g. under npu-launch)\n"
         "  --steps N             training steps (default 40)\n"
         "  --global-batch B      samples per step over all ranks, split evenly (default 64)\n"
         "  --bucket-mb X         DDP bucket cap in MiB (default 4)\n"
         "  --no-overlap          start every bucket's allreduce after backward\n"
         "  --fp16-wire           fp32 buckets travel as fp16\n"
         "  --trace FILE          Chrome trace of the last step\n"
         "  --lr X                learning rate after a 5-step warm-up (default 0.05)\n"
         "  --hidden H            hidden layer width (default 1024)\n"
         "  --layers L            layers, 2-%d (default 5)\n"
         "  --threads T           compute threads per rank (default OMP_NUM_THREADS, else the\n"
         "                        CPUs this rank may run on)\n"
         "  --checkpoint FILE     rank 0 saves there; every rank resumes from it when present\n"
         "  --checkpoint-every K  steps between checkpoints (default 10)\n"
         "  --fail-at-step K      rank 1 exits 3 at step K of the first start\n"
         "  -h, --help            this text\n"
         "See docs/ddp.md.\n",
         MLP_MAX_LAYERS);
}

static int parse(int argc, char **argv, struct opts *o) {
  *o = (struct opts){40, 64, 1, 0, 1024, 5, 0, 4.0, 0.05, NULL, NULL, 10, -1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-overlap")) {
      o->overlap = 0;
      continue;
    }
    if (!strcmp(a, "--fp16-wire")) {
      o->fp16_wire = 1;
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage();
      exit(0);
    }
    static const char *const with_value[] = {
        "--steps",  "--global-batch", "--bucket-mb",  "--trace",            "--lr",
        "--hidden", "--layers",       "--threads",    "--checkpoint",       "--checkpoint-every",
        "--fail-at-step"};
    bool known = false;
    for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++)
      known = known || !strcmp(a, with_value[k]);
    if (!known || !v) {
      fprintf(stderr, "ddp_train: option '%s' %s; see ddp_train --help\n", a,
              known ? "needs a value" : "is not known");
      return -1;
    }
    i++;
    if (!strcmp(a, "--steps"))
      o->steps = atoi(v);
    else if (!strcmp(a, "--global-batch"))
      o->global_batch = atoi(v);
    else if (!strcmp(a, "--bucket-mb"))
      o->bucket_mb = atof(v);
    else if (!strcmp(a, "--trace"))
      o->trace = v;
    else if (!strcmp(a, "--lr"))
      o->lr = atof(v);
    else if (!strcmp(a, "--hidden"))
      o->hidden = atoi(v);
    else if (!strcmp(a, "--layers"))
      o->layers = atoi(v);
    else if (!strcmp(a, "--threads"))
      o->threads = atoi(v);
    else if (!strcmp(a, "--checkpoint"))
      o->checkpoint = v;
    else if (!strcmp(a, "--checkpoint-every"))
      o->checkpoint_every = atoi(v);
    else /* --fail-at-step, the last of with_value */
      o->fail_at_step = atoi(v);
  }
  if (o->steps < 1 || o->global_batch < 1 || o->bucket_mb <= 0 || o->hidden < 1 || o->layers < 2 ||
      o->layers > MLP_MAX_LAYERS || o->checkpoint_every < 1) {
    fprintf(stderr,
            "ddp_train: --steps, --global-batch, --bucket-mb, --hidden and --checkpoint-every "
            "must be > 0 and "
            "--layers in 2..%d\n",
            MLP_MAX_LAYERS);
    return -1;
  }
  return 0;
}

/* Compute threads: --threads, else OMP_NUM_THREADS (npu-launch sets it to the rank's CPUs),
 * else the CPUs this process may run on. */
static int compute_threads(const struct opts *o) {
  if (o->threads > 0) return o->threads;
  const char *e = getenv("OMP_NUM_THREADS");
  if (e && atoi(e) > 0) return atoi(e);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return 1;
}

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    HcclResult rc_ = (expr);                                                                       \
    if (rc_ != HCCL_SUCCESS) {                                                                     \
      fprintf(stderr, "ddp_train rank %u: %s failed: %s\n", rank, #expr,                           \
              *ddp_last_error() ? ddp_last_error() : HcclGetLastErrorMessage());                   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* Lets the allreduces in flight progress: see ddp_poll. */
static void progress(void *ctx) {
  ddp_poll(ctx);
}

/* Sum of v[0..n) over ranks, in place (a tiny blocking allreduce). */
static HcclResult sum_over_ranks(HcclComm comm, float *v, int n) {
  return HcclAllReduce(v, v, (uint64_t)n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
}

#define CKPT_MAGIC 0x74706b6370646468ull /* "hddpckpt" */

/* Writes the next step and every parameter to path, through path.tmp renamed over it, so a
 * failure while writing leaves the previous checkpoint whole. Returns 0, or -1 (said). */
static int checkpoint_save(const char *path, const mlp_t *m, const int *dims, int layers,
                           int next_step) {
  char tmp[1024];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  uint64_t head[3] = {CKPT_MAGIC, (uint64_t)layers, (uint64_t)next_step};
  int ok = f && fwrite(head, sizeof(head), 1, f) == 1 &&
           fwrite(dims, sizeof(int), (size_t)layers + 1, f) == (size_t)layers + 1;
  for (int l = 0; ok && l < layers; l++) {
    size_t nw = (size_t)dims[l] * dims[l + 1], nb = (size_t)dims[l + 1];
    ok = fwrite(m->w[l], sizeof(float), nw, f) == nw && fwrite(m->b[l], sizeof(float), nb, f) == nb;
  }
  if (f && fclose(f) != 0) ok = 0;
  if (ok && rename(tmp, path) == 0) return 0;
  fprintf(stderr, "ddp_train: cannot write checkpoint %s\n", path);
  return -1;
}

/* The next step from path, with the parameters loaded into m; 0 when there is no checkpoint,
 * -1 (said) when it is not one of this model. */
static int checkpoint_load(const char *path, mlp_t *m, const int *dims, int layers) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  uint64_t head[3];
  int got[MLP_MAX_LAYERS + 1];
  int ok = fread(head, sizeof(head), 1, f) == 1 && head[0] == CKPT_MAGIC &&
           head[1] == (uint64_t)layers &&
           fread(got, sizeof(int), (size_t)layers + 1, f) == (size_t)layers + 1 &&
           memcmp(got, dims, sizeof(int) * ((size_t)layers + 1)) == 0;
  for (int l = 0; ok && l < layers; l++) {
    size_t nw = (size_t)dims[l] * dims[l + 1], nb = (size_t)dims[l + 1];
    ok = fread(m->w[l], sizeof(float), nw, f) == nw && fread(m->b[l], sizeof(float), nb, f) == nb;
  }
  fclose(f);
  if (!ok) {
    fprintf(stderr, "ddp_train: %s is not a checkpoint of this model (--layers, --hidden)\n", path);
    return -1;
  }
  return (int)head[2];
}

int main(int argc, char **argv) {
  struct opts o;
  if (parse(argc, argv, &o) != 0) return 2;
  HcclComm comm;
  uint32_t rank = 0, nranks = 1;
  CHECK(HcclCommInitFromEnv(&comm));
  CHECK(HcclGetRankId(comm, &rank));
  CHECK(HcclGetRankSize(comm, &nranks));
  if (o.global_batch % (int)nranks != 0) {
    fprintf(stderr,
            "ddp_train: --global-batch %d does not split over %u ranks; use a multiple "
            "of %u\n",
            o.global_batch, nranks, nranks);
    return 2;
  }
  int local = o.global_batch / (int)nranks, first_row = (int)rank * local;
  int threads = compute_threads(&o);
  mlp_set_threads(threads);

  int dims[MLP_MAX_LAYERS + 1];
  dims[0] = 256;
  for (int l = 1; l < o.layers; l++)
    dims[l] = o.hidden;
  dims[o.layers] = 10;
  mlp_t m;
  if (mlp_create(&m, o.layers, dims, local, INIT_SEED) != 0) {
    fprintf(stderr, "ddp_train: out of memory for the model\n");
    return 1;
  }

  int start = 0;
  if (o.checkpoint && (start = checkpoint_load(o.checkpoint, &m, dims, o.layers)) < 0) return 1;
  const char *restart = getenv("TORCHELASTIC_RESTART_COUNT");
  bool first_start = !restart || atoi(restart) == 0;
  if (rank == 0 && start > 0)
    printf("ddp_train: resuming at step %d from %s\n", start, o.checkpoint);

  /* Parameters in forward order: w0, b0, w1, b1, ... */
  ddp_param params[2 * MLP_MAX_LAYERS];
  char names[2 * MLP_MAX_LAYERS][32];
  for (int l = 0; l < o.layers; l++) {
    snprintf(names[2 * l], sizeof(names[0]), "fc%d.weight", l);
    snprintf(names[2 * l + 1], sizeof(names[0]), "fc%d.bias", l);
    params[2 * l] = (ddp_param){m.w[l], NULL, (uint64_t)dims[l] * dims[l + 1], HCCL_DATA_TYPE_FP32,
                                names[2 * l]};
    params[2 * l + 1] =
        (ddp_param){m.b[l], NULL, (uint64_t)dims[l + 1], HCCL_DATA_TYPE_FP32, names[2 * l + 1]};
  }
  ddp_config cfg;
  ddp_config_init(&cfg);
  cfg.bucket_cap_bytes = (uint64_t)(o.bucket_mb * 1048576.0);
  cfg.overlap = o.overlap;
  cfg.fp16_wire = o.fp16_wire;
  ddp_t *d;
  CHECK(ddp_create(comm, params, (size_t)(2 * o.layers), &cfg, &d));
  mlp_set_progress(progress, d); /* between blocks of backward's matrix products */
  if (rank == 0)
    printf("ddp_train: %u ranks, %d rows each, %d compute threads per rank, %.2f M parameters, "
           "%zu buckets, overlap %s, wire %s\n",
           nranks, local, threads, mlp_param_count(&m) / 1e6, ddp_bucket_count(d),
           o.overlap ? "on" : "off", o.fp16_wire ? "fp16" : "fp32");

  float *x = malloc((size_t)local * dims[0] * sizeof(float));
  int *labels = malloc((size_t)local * sizeof(int));
  double sum_step = 0, sum_bwd = 0, sum_comm = 0, sum_hidden = 0, sum_exposed = 0;
  for (int step = start; step < o.steps; step++) {
    if (step == o.fail_at_step && rank == 1 && first_start) {
      fprintf(stderr, "ddp_train: rank 1 fails at step %d (--fail-at-step)\n", step);
      exit(3);
    }
    uint64_t first = (uint64_t)step * o.global_batch + first_row;
    mlp_make_batch(&m, first, local, DATA_SEED, x, labels);
    double t0 = now_s();
    mlp_forward(&m, x, local);
    float loss = (float)mlp_loss_backward(&m, labels, local);
    CHECK(ddp_backward_begin(d, 1));
    for (int l = o.layers - 1; l >= 0; l--) {
      mlp_backward_params(&m, l, local, ddp_grad(d, 2 * l), ddp_grad(d, 2 * l + 1));
      CHECK(ddp_grad_ready(d, 2 * l + 1));
      CHECK(ddp_grad_ready(d, 2 * l));
      if (l > 0) mlp_backward_input(&m, l, local);
    }
    int nonfinite = 0;
    CHECK(ddp_finish(d, &nonfinite));
    if (nonfinite) {
      fprintf(stderr, "ddp_train: step %d: inf/nan in the gradients; step skipped\n", step);
    } else {
      /* linear warm-up over the first WARMUP_STEPS steps, as large-batch SGD recipes do */
      float lr = (float)(o.lr * (step < WARMUP_STEPS ? (step + 1.0) / WARMUP_STEPS : 1.0));
      for (int l = 0; l < o.layers; l++) {
        mlp_sgd(m.w[l], ddp_grad(d, 2 * l), (uint64_t)dims[l] * dims[l + 1], lr);
        mlp_sgd(m.b[l], ddp_grad(d, 2 * l + 1), (uint64_t)dims[l + 1], lr);
      }
    }
    double t1 = now_s();
    ddp_step_stats st;
    ddp_last_stats(d, &st);
    float v[6] = {loss,
                  (float)(t1 - t0),
                  (float)st.backward_s,
                  (float)st.comm_s,
                  (float)st.overlap_s,
                  (float)st.exposed_s};
    CHECK(sum_over_ranks(comm, v, 6));
    if (rank == 0) printf("step %d loss %.6f\n", step, v[0] / o.global_batch);
    if (o.checkpoint && rank == 0 && (step + 1) % o.checkpoint_every == 0 &&
        checkpoint_save(o.checkpoint, &m, dims, o.layers, step + 1) != 0)
      return 1;
    if (step > start || o.steps == 1) { /* the first step pays first touches of every buffer */
      sum_step += v[1] / nranks;
      sum_bwd += v[2] / nranks;
      sum_comm += v[3] / nranks;
      sum_hidden += v[4] / nranks;
      sum_exposed += v[5] / nranks;
    }
    fflush(stdout);
  }
  if (o.trace) CHECK(ddp_trace_write(d, o.trace));

  /* The loss after the last update, on the next global batch. */
  mlp_make_batch(&m, (uint64_t)o.steps * o.global_batch + first_row, local, DATA_SEED, x, labels);
  mlp_forward(&m, x, local);
  float final = (float)mlp_loss_backward(&m, labels, local);
  CHECK(sum_over_ranks(comm, &final, 1));
  int timed = o.steps - start > 1 ? o.steps - start - 1 : 1;
  if (rank == 0) {
    printf("final loss %.6f\n", final / o.global_batch);
    printf("step time %.2f ms (backward %.2f ms, communication %.2f ms of which exposed %.2f "
           "ms), mean over steps 1..%d and ranks\n",
           1e3 * sum_step / timed, 1e3 * sum_bwd / timed, 1e3 * sum_comm / timed,
           1e3 * sum_exposed / timed, o.steps - 1);
    if (nranks > 1)
      printf("%.0f%% of communication hidden\n", sum_comm > 0 ? 100.0 * sum_hidden / sum_comm : 0);
    else
      printf("0%% of communication hidden (one rank: nothing to communicate)\n");
    if (o.trace) printf("trace of step %d written to %s\n", o.steps - 1, o.trace);
  }
  free(x);
  free(labels);
  ddp_destroy(d);
  mlp_free(&m);
  HcclCommDestroy(comm);
  return 0;
}
