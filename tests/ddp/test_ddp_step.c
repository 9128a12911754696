/*
 * test_ddp_step.c - ddp/src/step.c, half.c and stats.c: one training step and what it reports.
 *
 * Forked ranks run steps over a small model of five parameters (three buckets) with exact
 * gradients (ddp_check.h), so results are compared bit for bit with the mean over ranks:
 *   - averaging at 1, 2, 4 and 8 ranks, each rank marking its gradients in its own order
 *     (buckets must still start in the same order everywhere), in view and in copy mode;
 *   - a gradient marked twice and one never marked: errors naming them, on every rank, from
 *     ddp_grad_ready or ddp_finish, and the next step works;
 *   - no-sync: two local steps accumulate, nothing is communicated, the synced step reduces
 *     the sum;
 *   - inf and nan in one rank's gradient are reported by every rank's ddp_finish (with the
 *     parameter), and an fp16-wire overflow is reported too;
 *   - fp16 on the wire: the error against the fp32 mean is measured and bounded;
 *   - statistics (intervals and their union) and the Chrome trace file;
 *   - calls out of order (ready before begin, begin twice, finish without begin).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "ddp_check.h"

#define NP 5
static const uint64_t g_counts[NP] = {4096, 200000, 33, 150000, 7};

struct model {
  HcclComm comm;
  ddp_t *d;
  float *data[NP], *grad[NP];
};

/* Buckets of 512 KB (first 256 KB): {4, 3}, {2, 1}, {0}. */
static int model_open(struct model *m, const ddp_config *over) {
  if (ddp_test_comm(&m->comm) != HCCL_SUCCESS) return -1;
  ddp_param p[NP];
  ddp_config cfg;
  ddp_config_init(&cfg);
  if (over) cfg = *over;
  cfg.first_bucket_cap_bytes = 256 * 1024;
  cfg.bucket_cap_bytes = 512 * 1024;
  for (size_t i = 0; i < NP; i++) {
    m->data[i] = calloc(g_counts[i], sizeof(float));
    m->grad[i] = calloc(g_counts[i], sizeof(float));
    p[i] = (ddp_param){m->data[i], m->grad[i], g_counts[i], HCCL_DATA_TYPE_FP32, NULL};
  }
  return ddp_create(m->comm, p, NP, &cfg, &m->d) == HCCL_SUCCESS ? 0 : -1;
}

static int model_close(struct model *m) {
  ddp_destroy(m->d);
  for (size_t i = 0; i < NP; i++) {
    free(m->data[i]);
    free(m->grad[i]);
  }
  return HcclCommDestroy(m->comm) == HCCL_SUCCESS ? 0 : -1;
}

/* Writes (accumulate: adds) this rank's gradient of `step` into parameter i. */
static void produce(struct model *m, int rank, int step, size_t i, int accumulate) {
  float *g = ddp_grad(m->d, i);
  for (uint64_t e = 0; e < g_counts[i]; e++) {
    float v = ddp_test_grad(rank, step, i, e);
    g[e] = accumulate ? g[e] + v : v;
  }
}

/* 1 when every gradient equals the mean over ranks of steps s0..s1. */
static int check_mean(struct model *m, int nranks, int s0, int s1) {
  for (size_t i = 0; i < NP; i++) {
    const float *g = ddp_grad(m->d, i);
    for (uint64_t e = 0; e < g_counts[i]; e++) {
      float w = ddp_test_mean(nranks, s0, s1, i, e);
      if (g[e] != w) {
        fprintf(stderr, "param %zu element %llu: %g, want %g\n", i, (unsigned long long)e, g[e], w);
        return 0;
      }
    }
  }
  return 1;
}

/* ---- averaging ---- */

struct avg_arg {
  int view;
};

static int average_body(int rank, int nranks, void *argp) {
  const struct avg_arg *a = argp;
  struct model m;
  ddp_config cfg;
  ddp_config_init(&cfg);
  cfg.grad_as_bucket_view = a->view;
  cfg.rebuild_buckets = 0; /* keep the reverse layout: the order of marks varies per rank */
  RANK_CHECK(model_open(&m, &cfg) == 0, "open: %s", ddp_last_error());
  RANK_CHECK(ddp_bucket_count(m.d) == 3, "%zu buckets, want 3", ddp_bucket_count(m.d));
  for (int step = 0; step < 3; step++) {
    DDP_OK(ddp_backward_begin(m.d, 1));
    for (size_t k = 0; k < NP; k++) {
      size_t i = (k * 3 + (size_t)rank + (size_t)step) % NP; /* a permutation per rank/step */
      produce(&m, rank, step, i, 0);
      DDP_OK(ddp_grad_ready(m.d, i));
    }
    int nonfinite = -1;
    DDP_OK(ddp_finish(m.d, &nonfinite));
    RANK_CHECK(nonfinite == 0, "nonfinite %d on finite gradients", nonfinite);
    RANK_CHECK(check_mean(&m, nranks, step, step), "step %d: wrong mean", step);
    if (!a->view) /* copy mode: results land in the caller's buffers */
      for (size_t i = 0; i < NP; i++)
        RANK_CHECK(ddp_grad(m.d, i) == m.grad[i], "copy mode must hand back the caller's grad");
    ddp_step_stats st;
    DDP_OK(ddp_last_stats(m.d, &st));
    RANK_CHECK(st.synced == 1 && st.step == (uint64_t)step && st.buckets == 3,
               "stats: synced %d step %llu buckets %u", st.synced, (unsigned long long)st.step,
               st.buckets);
    RANK_CHECK(st.comm_s >= 0 && st.overlap_s >= 0 && st.overlap_s <= st.comm_s + 1e-12 &&
                   fabs(st.exposed_s - (st.comm_s - st.overlap_s)) < 1e-9 && st.backward_s >= 0,
               "stats: comm %g overlap %g exposed %g backward %g", st.comm_s, st.overlap_s,
               st.exposed_s, st.backward_s);
    uint64_t want_bytes = 0;
    for (size_t i = 0; i < NP; i++)
      want_bytes += g_counts[i] * 4;
    RANK_CHECK(nranks == 1 ? st.wire_bytes == 0 : st.wire_bytes >= want_bytes,
               "wire bytes %llu for %llu of gradients", (unsigned long long)st.wire_bytes,
               (unsigned long long)want_bytes);
  }
  return model_close(&m);
}

#define AVG_TEST(name, n, v)                                                                       \
  static void name(void **st) {                                                                    \
    (void)st;                                                                                      \
    struct avg_arg a = {v};                                                                        \
    ddp_run(n, average_body, &a);                                                                  \
  }
AVG_TEST(test_average_1, 1, 1)
AVG_TEST(test_average_2, 2, 1)
AVG_TEST(test_average_4, 4, 1)
AVG_TEST(test_average_8, 8, 1)
AVG_TEST(test_average_copy_mode_4, 4, 0)

/* ---- ready marks ---- */

static int double_mark_body(int rank, int nranks, void *argp) {
  (void)argp;
  struct model m;
  RANK_CHECK(model_open(&m, NULL) == 0, "open: %s", ddp_last_error());
  DDP_OK(ddp_backward_begin(m.d, 1));
  for (size_t k = NP; k-- > 0;) {
    produce(&m, rank, 0, k, 0);
    DDP_OK(ddp_grad_ready(m.d, k));
    if (k == 3) {
      HcclResult rc = ddp_grad_ready(m.d, 3);
      RANK_CHECK(rc == HCCL_E_PARA, "second mark returned %d", rc);
      RANK_CHECK(strstr(ddp_last_error(), "gradient 3 ('param 3') marked ready twice in step 0"),
                 "message: %s", ddp_last_error());
    }
  }
  HcclResult rc = ddp_finish(m.d, NULL);
  RANK_CHECK(rc == HCCL_E_PARA, "finish after a double mark returned %d", rc);
  RANK_CHECK(strstr(ddp_last_error(), "marked ready twice"), "finish says: %s", ddp_last_error());
  /* The reduction itself still happened once, so the values are right. */
  RANK_CHECK(check_mean(&m, nranks, 0, 0), "values after a double mark");
  /* The next step is clean. */
  DDP_OK(ddp_backward_begin(m.d, 1));
  for (size_t k = NP; k-- > 0;) {
    produce(&m, rank, 1, k, 0);
    DDP_OK(ddp_grad_ready(m.d, k));
  }
  DDP_OK(ddp_finish(m.d, NULL));
  RANK_CHECK(check_mean(&m, nranks, 1, 1), "step after the error");
  return model_close(&m);
}

static void test_marked_twice(void **st) {
  (void)st;
  ddp_run(2, double_mark_body, NULL);
}

static int missing_mark_body(int rank, int nranks, void *argp) {
  (void)argp;
  struct model m;
  RANK_CHECK(model_open(&m, NULL) == 0, "open: %s", ddp_last_error());
  DDP_OK(ddp_backward_begin(m.d, 1));
  for (size_t k = NP; k-- > 0;) {
    produce(&m, rank, 0, k, 0);
    if (k != 2) DDP_OK(ddp_grad_ready(m.d, k)); /* parameter 2 is forgotten */
  }
  HcclResult rc = ddp_finish(m.d, NULL);
  RANK_CHECK(rc == HCCL_E_PARA, "finish with a missing mark returned %d", rc);
  RANK_CHECK(strstr(ddp_last_error(), "gradient 2 ('param 2') was never marked ready in step 0"),
             "message: %s", ddp_last_error());
  ddp_step_stats st;
  DDP_OK(ddp_last_stats(m.d, &st));
  RANK_CHECK(st.buckets == 1, "%u buckets reduced; only the one before parameter 2's", st.buckets);
  DDP_OK(ddp_backward_begin(m.d, 1));
  for (size_t k = NP; k-- > 0;) {
    produce(&m, rank, 1, k, 0);
    DDP_OK(ddp_grad_ready(m.d, k));
  }
  DDP_OK(ddp_finish(m.d, NULL));
  RANK_CHECK(check_mean(&m, nranks, 1, 1), "step after the error");
  return model_close(&m);
}

static void test_never_marked(void **st) {
  (void)st;
  ddp_run(4, missing_mark_body, NULL);
}

/* ---- no-sync ---- */

static int no_sync_body(int rank, int nranks, void *argp) {
  (void)argp;
  struct model m;
  RANK_CHECK(model_open(&m, NULL) == 0, "open: %s", ddp_last_error());
  for (int step = 0; step < 3; step++) {
    int sync = step == 2;
    DDP_OK(ddp_backward_begin(m.d, sync));
    for (size_t k = NP; k-- > 0;) {
      produce(&m, rank, step, k, step > 0);
      DDP_OK(ddp_grad_ready(m.d, k));
    }
    DDP_OK(ddp_finish(m.d, NULL));
    ddp_step_stats st;
    DDP_OK(ddp_last_stats(m.d, &st));
    RANK_CHECK(st.synced == sync && st.buckets == (sync ? 3u : 0u) && (sync || st.comm_s == 0),
               "step %d: synced %d, %u buckets, comm %g", step, st.synced, st.buckets, st.comm_s);
    if (!sync) { /* local sum so far, untouched by the other ranks */
      const float *g = ddp_grad(m.d, 1);
      for (uint64_t e = 0; e < g_counts[1]; e++) {
        float w = 0;
        for (int s = 0; s <= step; s++)
          w += ddp_test_grad(rank, s, 1, e);
        RANK_CHECK(g[e] == w, "no-sync step %d element %llu: %g, want %g", step,
                   (unsigned long long)e, g[e], w);
      }
    }
  }
  RANK_CHECK(check_mean(&m, nranks, 0, 2), "synced step must reduce the accumulated sum");
  return model_close(&m);
}

static void test_no_sync(void **st) {
  (void)st;
  ddp_run(4, no_sync_body, NULL);
}

/* ---- inf / nan ---- */

static int nonfinite_body(int rank, int nranks, void *argp) {
  const int *fp16_wire = argp;
  (void)nranks;
  struct model m;
  ddp_config cfg;
  ddp_config_init(&cfg);
  cfg.fp16_wire = *fp16_wire;
  RANK_CHECK(model_open(&m, &cfg) == 0, "open: %s", ddp_last_error());
  /* step 0: inf on rank 1 in param 3; step 1: nan on rank 0 in param 0; step 2: finite but
   * too large for fp16 (overflows the wire only); step 3: clean */
  for (int step = 0; step < 4; step++) {
    DDP_OK(ddp_backward_begin(m.d, 1));
    for (size_t k = NP; k-- > 0;) {
      produce(&m, rank, step, k, 0);
      float *g = ddp_grad(m.d, k);
      if (step == 0 && rank == 1 && k == 3) g[17] = INFINITY;
      if (step == 1 && rank == 0 && k == 0) g[4095] = NAN;
      if (step == 2 && rank == 0 && k == 1) g[5] = 3e5f;
      DDP_OK(ddp_grad_ready(m.d, k));
    }
    int nonfinite = -1;
    DDP_OK(ddp_finish(m.d, &nonfinite));
    ddp_step_stats st;
    DDP_OK(ddp_last_stats(m.d, &st));
    int want = step < 2 || (step == 2 && *fp16_wire);
    int64_t want_param = step == 0 ? 3 : step == 1 ? 0 : step == 2 && *fp16_wire ? 1 : -1;
    RANK_CHECK(nonfinite == want && st.nonfinite == want && st.first_nonfinite_param == want_param,
               "step %d: nonfinite %d (param %lld), want %d (param %lld)", step, nonfinite,
               (long long)st.first_nonfinite_param, want, (long long)want_param);
  }
  return model_close(&m);
}

static void test_inf_nan_reported(void **st) {
  (void)st;
  int wire = 0;
  ddp_run(2, nonfinite_body, &wire);
}

static void test_inf_nan_reported_fp16_wire(void **st) {
  (void)st;
  int wire = 1;
  ddp_run(2, nonfinite_body, &wire);
}

/* ---- fp16 on the wire ---- */

/* Gradients like a network's: normal values of several magnitudes (1e-1 down to 1e-5). */
static float realistic_grad(int rank, size_t i, uint64_t e) {
  uint64_t h = (e + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull ^
               (uint64_t)(rank + 1) * 0x94d049bb133111ebull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  double u = (double)(h >> 11) / 9007199254740992.0 * 2 - 1;
  return (float)(u * pow(10.0, -1.0 - (double)(e % 5)));
}

static int fp16_body(int rank, int nranks, void *argp) {
  (void)argp;
  struct model m;
  ddp_config cfg;
  ddp_config_init(&cfg);
  cfg.fp16_wire = 1;
  RANK_CHECK(model_open(&m, &cfg) == 0, "open: %s", ddp_last_error());
  DDP_OK(ddp_backward_begin(m.d, 1));
  for (size_t k = NP; k-- > 0;) {
    float *g = ddp_grad(m.d, k);
    for (uint64_t e = 0; e < g_counts[k]; e++)
      g[e] = realistic_grad(rank, k, e);
    DDP_OK(ddp_grad_ready(m.d, k));
  }
  DDP_OK(ddp_finish(m.d, NULL));
  ddp_step_stats st;
  DDP_OK(ddp_last_stats(m.d, &st));
  uint64_t elems = 0;
  for (size_t i = 0; i < NP; i++)
    elems += g_counts[i];
  RANK_CHECK(st.wire_bytes >= 2 * elems && st.wire_bytes < 3 * elems, "fp16 wire moved %llu bytes",
             (unsigned long long)st.wire_bytes);
  /* Error per element relative to the magnitude of that element's decade, and overall. */
  double worst[5] = {0}, sum2 = 0, ref2 = 0;
  for (size_t i = 0; i < NP; i++) {
    const float *g = ddp_grad(m.d, i);
    for (uint64_t e = 0; e < g_counts[i]; e++) {
      double want = 0;
      for (int r = 0; r < nranks; r++)
        want += realistic_grad(r, i, e);
      want /= nranks;
      double err = fabs((double)g[e] - want), scale = pow(10.0, -1.0 - (double)(e % 5));
      if (err / scale > worst[e % 5]) worst[e % 5] = err / scale;
      sum2 += err * err;
      ref2 += want * want;
    }
  }
  if (rank == 0) {
    printf("  fp16 wire, %d ranks: relative RMS error %.2e; worst error / magnitude by decade:",
           nranks, sqrt(sum2 / ref2));
    for (int k = 0; k < 5; k++)
      printf(" 1e-%d: %.1e", k + 1, worst[k]);
    printf("\n");
  }
  /* fp16 keeps 11 significant bits (2^-11 = 4.9e-4 relative); a sum over n ranks rounds at
   * most log2(n)+1 times. Values down to 6e-5 are normal fp16 numbers; below that, subnormals
   * keep an absolute step of 6e-8, which is why the 1e-5 decade's relative error is larger. */
  RANK_CHECK(sqrt(sum2 / ref2) < 2e-3, "relative RMS error %.2e too large", sqrt(sum2 / ref2));
  for (int k = 0; k < 4; k++)
    RANK_CHECK(worst[k] < 4e-3, "decade 1e-%d: %.2e", k + 1, worst[k]);
  RANK_CHECK(worst[4] < 5e-2, "decade 1e-5: %.2e", worst[4]);
  return model_close(&m);
}

static void test_fp16_wire_error_2(void **st) {
  (void)st;
  ddp_run(2, fp16_body, NULL);
}

static void test_fp16_wire_error_8(void **st) {
  (void)st;
  ddp_run(8, fp16_body, NULL);
}

/* ---- trace ---- */

static int trace_body(int rank, int nranks, void *argp) {
  const char *path = argp;
  (void)nranks;
  struct model m;
  RANK_CHECK(model_open(&m, NULL) == 0, "open: %s", ddp_last_error());
  for (int step = 0; step < 2; step++) {
    DDP_OK(ddp_backward_begin(m.d, 1));
    for (size_t k = NP; k-- > 0;) {
      produce(&m, rank, step, k, 0);
      DDP_OK(ddp_grad_ready(m.d, k));
      DDP_OK(ddp_poll(m.d));
    }
    DDP_OK(ddp_finish(m.d, NULL));
  }
  DDP_OK(ddp_trace_write(m.d, rank == 0 ? path : NULL));
  return model_close(&m);
}

static void test_trace_file(void **st) {
  (void)st;
  char path[] = "/tmp/test_ddp_trace_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  ddp_run(2, trace_body, path);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = 0;
  fclose(f);
  unlink(path);
  assert_non_null(strstr(buf, "\"traceEvents\":["));
  assert_non_null(strstr(buf, "\"name\":\"rank 1\""));
  assert_non_null(strstr(buf, "\"name\":\"bucket 2\",\"ph\":\"X\",\"pid\":1,\"tid\":2"));
  assert_non_null(strstr(buf, "\"name\":\"grad param 4\""));
  assert_non_null(strstr(buf, "\"name\":\"ddp_finish\""));
  assert_true(n > 10 && strcmp(buf + n - 4, "\n]}\n") == 0);
}

/* ---- calls out of order ---- */

static int order_body(int rank, int nranks, void *argp) {
  (void)argp;
  (void)rank;
  (void)nranks;
  struct model m;
  RANK_CHECK(model_open(&m, NULL) == 0, "open: %s", ddp_last_error());
  RANK_CHECK(ddp_grad_ready(m.d, 0) == HCCL_E_PARA &&
                 strstr(ddp_last_error(), "outside a step; call ddp_backward_begin"),
             "ready before begin: %s", ddp_last_error());
  RANK_CHECK(ddp_finish(m.d, NULL) == HCCL_E_PARA, "finish before begin");
  DDP_OK(ddp_backward_begin(m.d, 1));
  RANK_CHECK(ddp_backward_begin(m.d, 1) == HCCL_E_PARA &&
                 strstr(ddp_last_error(), "begun and not finished"),
             "begin twice: %s", ddp_last_error());
  RANK_CHECK(ddp_grad_ready(m.d, NP) == HCCL_E_PARA && strstr(ddp_last_error(), "does not exist"),
             "ready out of range: %s", ddp_last_error());
  for (size_t k = NP; k-- > 0;)
    DDP_OK(ddp_grad_ready(m.d, k));
  DDP_OK(ddp_finish(m.d, NULL));
  RANK_CHECK(ddp_grad(m.d, NP) == NULL, "ddp_grad out of range");
  return model_close(&m);
}

static void test_calls_out_of_order(void **st) {
  (void)st;
  ddp_run(2, order_body, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_average_1),           cmocka_unit_test(test_average_2),
      cmocka_unit_test(test_average_4),           cmocka_unit_test(test_average_8),
      cmocka_unit_test(test_average_copy_mode_4), cmocka_unit_test(test_marked_twice),
      cmocka_unit_test(test_never_marked),        cmocka_unit_test(test_no_sync),
      cmocka_unit_test(test_inf_nan_reported),    cmocka_unit_test(test_inf_nan_reported_fp16_wire),
      cmocka_unit_test(test_fp16_wire_error_2),   cmocka_unit_test(test_fp16_wire_error_8),
      cmocka_unit_test(test_trace_file),          cmocka_unit_test(test_calls_out_of_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
