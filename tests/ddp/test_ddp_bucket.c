/*
 * test_ddp_bucket.c - ddp/src/bucket.c: which gradients share a bucket, and the rebuild.
 *
 * Unit tests drive the pure assignment rule: reverse order with the small first cap and the
 * large cap, a parameter never split (one larger than the cap sits alone), one dtype per
 * bucket with a first cap per dtype, and an arbitrary (ready) order. Then ranks are forked:
 * the layout a ddp_t builds at create (reverse order, 64-byte aligned views), and the rebuild
 * after the first step, where every rank marks its gradients in its own order and all must
 * end with rank 0's order, gradient values kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ddp_check.h"
#include "ddp_int.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

static void test_reverse_order_caps(void **st) {
  (void)st;
  /* forward order: sizes in bytes */
  const uint64_t bytes[6] = {100, 2 * MiB, 100, 3 * MiB, 500 * KiB, 600 * KiB};
  const HcclDataType dt[6] = {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP32,
                              HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP32};
  const size_t order[6] = {5, 4, 3, 2, 1, 0};
  size_t b[6];
  size_t nb = ddp__assign_buckets(order, 6, bytes, dt, 1 * MiB, 4 * MiB, b);
  /* 600K + 500K >= 1 MiB closes the first bucket; 3M + 100 + 2M >= 4 MiB the second. */
  assert_int_equal(nb, 3);
  assert_int_equal(b[5], 0);
  assert_int_equal(b[4], 0);
  assert_int_equal(b[3], 1);
  assert_int_equal(b[2], 1);
  assert_int_equal(b[1], 1);
  assert_int_equal(b[0], 2);
}

static void test_never_split(void **st) {
  (void)st;
  const uint64_t bytes[3] = {10 * MiB, 40 * MiB, 10 * MiB};
  const HcclDataType dt[3] = {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP32};
  const size_t order[3] = {2, 1, 0};
  size_t b[3];
  /* 10M >= 1M closes bucket 0; 40M alone >= 25M; the last one is left in an open bucket. */
  assert_int_equal(ddp__assign_buckets(order, 3, bytes, dt, 1 * MiB, 25 * MiB, b), 3);
  assert_int_equal(b[2], 0);
  assert_int_equal(b[1], 1);
  assert_int_equal(b[0], 2);
}

static void test_one_dtype_per_bucket(void **st) {
  (void)st;
  const HcclDataType F32 = HCCL_DATA_TYPE_FP32, F16 = HCCL_DATA_TYPE_FP16;
  /* reverse order visits: 5 (f16 600K), 4 (f32 600K), 3 (f16 600K), 2 (f32 600K), 1, 0 */
  const uint64_t bytes[6] = {100, 100, 600 * KiB, 600 * KiB, 600 * KiB, 600 * KiB};
  const HcclDataType dt[6] = {F32, F16, F32, F16, F32, F16};
  const size_t order[6] = {5, 4, 3, 2, 1, 0};
  size_t b[6];
  size_t nb = ddp__assign_buckets(order, 6, bytes, dt, 1 * MiB, 25 * MiB, b);
  /* f16: {5, 3} closes at 1.2 MiB (bucket 0), then {1} opens bucket 2; f32: {4, 2} closes
   * (bucket 1), then {0} opens bucket 3. Buckets are numbered by their first visit. */
  assert_int_equal(nb, 4);
  assert_int_equal(b[5], 0);
  assert_int_equal(b[3], 0);
  assert_int_equal(b[4], 1);
  assert_int_equal(b[2], 1);
  assert_int_equal(b[1], 2);
  assert_int_equal(b[0], 3);
}

static void test_ready_order(void **st) {
  (void)st;
  const uint64_t bytes[4] = {MiB, MiB, MiB, MiB};
  const HcclDataType dt[4] = {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP32,
                              HCCL_DATA_TYPE_FP32};
  const size_t order[4] = {1, 3, 0, 2}; /* the order gradients were seen ready */
  size_t b[4];
  assert_int_equal(ddp__assign_buckets(order, 4, bytes, dt, 1 * MiB, 2 * MiB, b), 3);
  assert_int_equal(b[1], 0);
  assert_int_equal(b[3], 1);
  assert_int_equal(b[0], 1);
  assert_int_equal(b[2], 2);
}

/* ---- layouts built by ddp_create and rebuilt after the first step ---- */

#define NP 6
static const uint64_t g_counts[NP] = {1000, 300000, 17, 300000, 5, 200000}; /* fp32 */

static int make(HcclComm comm, float **data, ddp_t **d) {
  ddp_param p[NP];
  for (size_t i = 0; i < NP; i++) {
    data[i] = calloc(g_counts[i], sizeof(float));
    p[i] = (ddp_param){data[i], NULL, g_counts[i], HCCL_DATA_TYPE_FP32, NULL};
  }
  ddp_config cfg;
  ddp_config_init(&cfg);
  cfg.first_bucket_cap_bytes = 1000 * 1000; /* 200000 floats = 800 KB + 5: open; + 300000 */
  cfg.bucket_cap_bytes = 1200 * 1000;
  return ddp_create(comm, p, NP, &cfg, d) == HCCL_SUCCESS ? 0 : -1;
}

static int layout_body(int rank, int nranks, void *arg) {
  (void)arg;
  HcclComm comm;
  DDP_OK(ddp_test_comm(&comm));
  float *data[NP];
  ddp_t *d;
  RANK_CHECK(make(comm, data, &d) == 0, "create: %s", ddp_last_error());
  /* reverse order: {5, 4, 3} (800K + 20 + 1.2M >= 1M), {2, 1} (68 + 1.2M >= 1.2M), {0} */
  const int want[NP] = {2, 1, 1, 0, 0, 0};
  RANK_CHECK(ddp_bucket_count(d) == 3, "%zu buckets, want 3", ddp_bucket_count(d));
  for (size_t i = 0; i < NP; i++) {
    RANK_CHECK(ddp_bucket_of(d, i, NULL) == want[i], "param %zu in bucket %d, want %d", i,
               ddp_bucket_of(d, i, NULL), want[i]);
    float *g = ddp_grad(d, i);
    RANK_CHECK(((uintptr_t)g & 63) == 0, "gradient %zu view not 64-byte aligned", i);
    for (uint64_t e = 0; e < g_counts[i]; e++)
      RANK_CHECK(g[e] == 0, "gradient %zu not zeroed", i);
  }
  size_t pos;
  RANK_CHECK(ddp_bucket_of(d, 4, &pos) == 0 && pos == 1, "param 4 at position %zu, want 1", pos);
  RANK_CHECK(ddp_bucket_of(d, NP, NULL) == -1, "out of range must give -1");
  (void)rank;
  (void)nranks;
  ddp_destroy(d);
  for (size_t i = 0; i < NP; i++)
    free(data[i]);
  DDP_OK(HcclCommDestroy(comm));
  return 0;
}

static void test_layout_at_create(void **st) {
  (void)st;
  ddp_run(2, layout_body, NULL);
}

/* Each rank marks its gradients in its own order; rank 0's is forward order 0..5. */
static void mark_order(int rank, size_t *order) {
  for (size_t k = 0; k < NP; k++)
    order[k] = rank == 0 ? k : (k * 5 + (size_t)rank) % NP;
}

static int rebuild_body(int rank, int nranks, void *arg) {
  (void)arg;
  HcclComm comm;
  DDP_OK(ddp_test_comm(&comm));
  float *data[NP];
  ddp_t *d;
  RANK_CHECK(make(comm, data, &d) == 0, "create: %s", ddp_last_error());
  size_t order[NP];
  mark_order(rank, order);
  DDP_OK(ddp_backward_begin(d, 1));
  for (size_t k = 0; k < NP; k++) {
    size_t i = order[k];
    float *g = ddp_grad(d, i);
    for (uint64_t e = 0; e < g_counts[i]; e++)
      g[e] = ddp_test_grad(rank, 0, i, e);
    DDP_OK(ddp_grad_ready(d, i));
  }
  DDP_OK(ddp_finish(d, NULL));
  DDP_OK(ddp_backward_begin(d, 1)); /* rebuilds, collectively */
  /* Rank 0's order 0..5: {0, 1} (4000 + 1.2M >= 1M), {2, 3} (68 + 1.2M >= 1.2M), {4, 5} */
  const int want[NP] = {0, 0, 1, 1, 2, 2};
  RANK_CHECK(ddp_bucket_count(d) == 3, "%zu buckets after rebuild, want 3", ddp_bucket_count(d));
  for (size_t i = 0; i < NP; i++) {
    size_t pos;
    RANK_CHECK(ddp_bucket_of(d, i, &pos) == want[i],
               "after rebuild param %zu in bucket %d, want %d", i, ddp_bucket_of(d, i, NULL),
               want[i]);
    const float *g = ddp_grad(d, i); /* values survive the move */
    for (uint64_t e = 0; e < g_counts[i]; e++) {
      float w = ddp_test_mean(nranks, 0, 0, i, e);
      RANK_CHECK(g[e] == w, "param %zu element %llu after rebuild: %g, want %g", i,
                 (unsigned long long)e, g[e], w);
    }
  }
  /* Step 1 runs on the new layout and is right; no second rebuild follows. */
  for (size_t k = 0; k < NP; k++) {
    size_t i = order[NP - 1 - k];
    float *g = ddp_grad(d, i);
    for (uint64_t e = 0; e < g_counts[i]; e++)
      g[e] = ddp_test_grad(rank, 1, i, e);
    DDP_OK(ddp_grad_ready(d, i));
  }
  DDP_OK(ddp_finish(d, NULL));
  for (size_t i = 0; i < NP; i++) {
    const float *g = ddp_grad(d, i);
    for (uint64_t e = 0; e < g_counts[i]; e++)
      RANK_CHECK(g[e] == ddp_test_mean(nranks, 1, 1, i, e), "step 1 param %zu element %llu", i,
                 (unsigned long long)e);
  }
  DDP_OK(ddp_backward_begin(d, 1));
  for (size_t i = 0; i < NP; i++)
    RANK_CHECK(ddp_bucket_of(d, i, NULL) == want[i], "layout changed again at step 2");
  for (size_t i = 0; i < NP; i++)
    DDP_OK(ddp_grad_ready(d, i));
  DDP_OK(ddp_finish(d, NULL));
  ddp_destroy(d);
  for (size_t i = 0; i < NP; i++)
    free(data[i]);
  DDP_OK(HcclCommDestroy(comm));
  return 0;
}

static void test_rebuild_2(void **st) {
  (void)st;
  ddp_run(2, rebuild_body, NULL);
}

static void test_rebuild_4(void **st) {
  (void)st;
  ddp_run(4, rebuild_body, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reverse_order_caps),
      cmocka_unit_test(test_never_split),
      cmocka_unit_test(test_one_dtype_per_bucket),
      cmocka_unit_test(test_ready_order),
      cmocka_unit_test(test_layout_at_create),
      cmocka_unit_test(test_rebuild_2),
      cmocka_unit_test(test_rebuild_4),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
