/*
 * test_ddp_create.c - ddp/src/create.c: the agreement at ddp_create and the broadcast.
 *
 * Forked ranks register parameters that differ on purpose: a rank with one parameter fewer,
 * a rank whose parameter 1 has another size while a later rank has another dtype (the first
 * difference is the one named), a rank with another fp16_wire, and a rank whose own arguments
 * are invalid (a NULL pointer). Every rank must fail with HCCL_E_PARA and the message must name
 * the difference and the ranks; nobody may hang. With matching parameters, every rank ends
 * with rank 0's values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ddp_check.h"

enum { SAME, FEWER, SHAPE_AND_DTYPE, WIRE, NULL_DATA };

struct case_arg {
  int kind;
  const char *want[3]; /* substrings every rank's message must hold */
};

static int mismatch_body(int rank, int nranks, void *argp) {
  const struct case_arg *a = argp;
  (void)nranks;
  HcclComm comm;
  DDP_OK(ddp_test_comm(&comm));
  static float w0[64], w1[11], w2[8];
  ddp_param p[3] = {
      {w0, NULL, 64, HCCL_DATA_TYPE_FP32, "w0"},
      {w1, NULL, 10, HCCL_DATA_TYPE_FP32, "w1"},
      {w2, NULL, 8, HCCL_DATA_TYPE_FP32, "w2"},
  };
  size_t np = 3;
  ddp_config cfg;
  ddp_config_init(&cfg);
  if (a->kind == FEWER && rank == 1) np = 2;
  if (a->kind == SHAPE_AND_DTYPE && rank == 2) p[1].count = 11;
  if (a->kind == SHAPE_AND_DTYPE && rank == 3) p[2].dtype = HCCL_DATA_TYPE_FP16;
  if (a->kind == WIRE && rank == 1) cfg.fp16_wire = 1;
  if (a->kind == NULL_DATA && rank == 1) p[2].data = NULL;
  ddp_t *d = NULL;
  HcclResult rc = ddp_create(comm, p, np, &cfg, &d);
  RANK_CHECK(rc == HCCL_E_PARA, "rank %d: ddp_create returned %d, want HCCL_E_PARA", rank, rc);
  RANK_CHECK(d == NULL, "*out set on failure");
  const char *msg = ddp_last_error();
  for (int k = 0; k < 3 && a->want[k]; k++)
    RANK_CHECK(strstr(msg, a->want[k]) != NULL, "rank %d: message '%s' lacks '%s'", rank, msg,
               a->want[k]);
  if (a->kind == NULL_DATA && rank == 1)
    RANK_CHECK(strstr(msg, "parameter 2 ('w2'): data is NULL"), "rank 1: message '%s'", msg);
  if (rank == 0) printf("  rank 0 says: %s\n", msg);
  /* The communicator is still usable: the refusal was agreed, not a broken collective. */
  int one = 1;
  DDP_OK(HcclAllReduce(&one, &one, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, NULL));
  DDP_OK(HcclCommDestroy(comm));
  return 0;
}

static void test_fewer_parameters(void **st) {
  (void)st;
  struct case_arg a = {FEWER, {"rank 0 registered 3 parameters", "rank 1 registered 2"}};
  ddp_run(2, mismatch_body, &a);
}

static void test_first_difference_named(void **st) {
  (void)st;
  struct case_arg a = {
      SHAPE_AND_DTYPE,
      {"parameter 1 ('w1')", "10 fp32 elements on rank 0", "11 fp32 elements on rank 2"}};
  ddp_run(4, mismatch_body, &a);
}

static void test_wire_knob_differs(void **st) {
  (void)st;
  struct case_arg a = {WIRE, {"fp16_wire is 0 on rank 0 but 1 on rank 1"}};
  ddp_run(2, mismatch_body, &a);
}

static void test_invalid_arguments_on_one_rank(void **st) {
  (void)st;
  /* Rank 1 names its own mistake; the others name rank 1. */
  struct case_arg a = {NULL_DATA, {"rank 1"}};
  ddp_run(4, mismatch_body, &a);
}

static int broadcast_body(int rank, int nranks, void *argp) {
  (void)argp;
  (void)nranks;
  HcclComm comm;
  DDP_OK(ddp_test_comm(&comm));
  enum { N0 = 1000, N1 = 77 };
  float *w = malloc(N0 * sizeof(float));
  uint16_t *h = malloc(N1 * sizeof(uint16_t));
  for (int e = 0; e < N0; e++)
    w[e] = (float)(rank * 1000 + e);
  for (int e = 0; e < N1; e++)
    h[e] = (uint16_t)(rank * 100 + e);
  ddp_param p[2] = {{w, NULL, N0, HCCL_DATA_TYPE_FP32, "w"},
                    {h, NULL, N1, HCCL_DATA_TYPE_FP16, "h"}};
  ddp_t *d;
  DDP_OK(ddp_create(comm, p, 2, NULL, &d));
  for (int e = 0; e < N0; e++)
    RANK_CHECK(w[e] == (float)e, "w[%d] = %g, want rank 0's", e, w[e]);
  for (int e = 0; e < N1; e++)
    RANK_CHECK(h[e] == (uint16_t)e, "h[%d] = %u, want rank 0's", e, h[e]);
  ddp_destroy(d);
  free(w);
  free(h);
  DDP_OK(HcclCommDestroy(comm));
  return 0;
}

static void test_broadcast_from_rank0(void **st) {
  (void)st;
  ddp_run(4, broadcast_body, NULL);
}

static void test_local_refusals(void **st) {
  (void)st;
  /* Checks made before any communication: no communicator needed. */
  ddp_t *d = NULL;
  float w[4];
  ddp_param p = {w, NULL, 4, HCCL_DATA_TYPE_FP32, "w"};
  assert_int_equal(ddp_create(NULL, &p, 1, NULL, &d), HCCL_E_PTR);
  assert_non_null(strstr(ddp_last_error(), "comm is NULL"));
  ddp_config cfg = {0};
  assert_int_equal(ddp_create((HcclComm)&cfg, &p, 1, &cfg, &d), HCCL_E_PARA);
  assert_non_null(strstr(ddp_last_error(), "ddp_config_init"));
  assert_int_equal(ddp_create((HcclComm)&cfg, &p, 0, NULL, &d), HCCL_E_PARA);
  assert_null(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_local_refusals),
      cmocka_unit_test(test_fewer_parameters),
      cmocka_unit_test(test_first_difference_named),
      cmocka_unit_test(test_wire_knob_differs),
      cmocka_unit_test(test_invalid_arguments_on_one_rank),
      cmocka_unit_test(test_broadcast_from_rank0),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
