/*
 * test_fingerprint.c - mismatched collectives are caught on every rank, before any data is
 * mixed (algo/fingerprint.c, the stamp check in algo/prims.c).
 *
 * Unit: stamps of equal calls are equal; changing any one field (call number, collective,
 * count, data type, reduction, root) makes them differ, and the message names exactly that
 * field; fields a collective does not use (the root of an allreduce, the reduction of a
 * broadcast, the counts of an alltoallv) never make a difference. In the user's words: calls a
 * framework made in other types than its user's (a float32 broadcast as bytes) are named as
 * the user made them (HcclSetUserTypes, HcclSetCallUserType), and only the fields that differ
 * in those terms are listed; the whole message is checked word for word.
 *
 * Processes: 4 ranks (and 2 and 8 for the first case) where one rank's call differs from the
 * others' in one way: another collective, count, data type, reduction or root, or a call
 * skipped so that the sequences shift. Every rank must fail within seconds (HCCL_EXEC_TIMEOUT
 * is 60 s), every rank's message must say "mismatched collectives" and name the differing
 * field (a skipped call shows as the next call's count), and no allreduce output may hold the
 * full sum (data mixed with the odd rank's). Afterwards the communicator refuses calls and
 * destroys cleanly. One more case makes the calls as a framework would: the odd rank's
 * float32 broadcast as bytes against the others' float32 allreduce, which every rank must name
 * in float32 terms, differing only as collectives. The one rank allowed to finish the mismatched call is one whose whole
 * part of it was right (the root of a broadcast whose only receiver agrees with it); its next
 * call must fail the same way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll_check.h"
#include "fingerprint.h"
#include "harness.h"
#include "hccl.h"

#define RUN_TIMEOUT_S 60

/* ---- unit: the stamp ---- */

static struct hccl_stamp mk(uint64_t seq, enum hccl_coll_kind k, uint64_t n, HcclDataType dt,
                            HcclReduceOp op, uint32_t root) {
  return hccl__fp_make(seq, k, n, dt, op, 0, root, 0);
}

/* The same, made by a framework whose user passed type `ut` (a code of TYPES, below). */
static struct hccl_stamp mku(uint64_t seq, enum hccl_coll_kind k, uint64_t n, HcclDataType dt,
                             HcclReduceOp op, uint32_t root, uint32_t ut) {
  return hccl__fp_make(seq, k, n, dt, op, 0, root, ut + 1);
}

/* A framework's types, as torch_hccl names torch's. */
enum { T_F32, T_I32, T_F64, T_C64 };
static const HcclUserType TYPES[] = {
    [T_F32] = {"torch.float32", 4},
    [T_I32] = {"torch.int32", 4},
    [T_F64] = {"torch.float64", 8},
    [T_C64] = {"torch.complex64", 8},
};
#define NTYPES ((uint32_t)(sizeof(TYPES) / sizeof(TYPES[0])))


static int same(struct hccl_stamp a, struct hccl_stamp b) {
  return hccl__fp_match(&a, &b);
}

#define TAIL                                                                                       \
  "; every rank must make the same collective calls, with the same arguments, in the same order"

/* The whole message for rank 0's call `mine` against rank 3's `theirs`. */
static void expect_msg(struct hccl_stamp mine, struct hccl_stamp theirs, const char *want) {
  assert_false(same(mine, theirs));
  assert_int_equal(hccl__fp_mismatch(0, 3, &mine, &theirs), HCCL_E_PARA);
  const char *msg = HcclGetLastErrorMessage();
  if (!strstr(msg, want)) fail_msg("expected\n  %s\nin\n  %s", want, msg);
}

/* The message for a != b names `field` and no other of the six. */
static void expect_field(struct hccl_stamp a, struct hccl_stamp b, const char *field) {
  static const char *const all[] = {"call number", "collective", "count",
                                    "data type",   "reduction",  "root"};
  assert_false(same(a, b));
  assert_int_equal(hccl__fp_mismatch(0, 3, &a, &b), HCCL_E_PARA);
  const char *msg = HcclGetLastErrorMessage();
  const char *from = strstr(msg, "(they differ in ");
  assert_non_null(from);
  char in[128];
  snprintf(in, sizeof(in), "%s", from);
  char *close = strchr(in, ')');
  assert_non_null(close);
  *close = '\0';
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    int named = strstr(in, all[i]) != NULL;
    if (named != (strcmp(all[i], field) == 0)) fail_msg("field %s: %s", all[i], msg);
  }
}

static void test_stamp_fields(void **st) {
  (void)st;
  struct hccl_stamp base = mk(57, HCCL_K_REDUCE, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1);
  assert_true(same(base, mk(57, HCCL_K_REDUCE, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1)));
  expect_field(base, mk(58, HCCL_K_REDUCE, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1),
               "call number");
  expect_field(base, mk(57, HCCL_K_REDUCE, 4097, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1), "count");
  expect_field(base, mk(57, HCCL_K_REDUCE, 4096, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, 1),
               "data type");
  expect_field(base, mk(57, HCCL_K_REDUCE, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, 1),
               "reduction");
  expect_field(base, mk(57, HCCL_K_REDUCE, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 2), "root");
  /* A reduce and a broadcast with the same count, type and root differ only as collectives:
   * the broadcast has no reduction, which is part of what "collective" means. */
  struct hccl_stamp bc = mk(57, HCCL_K_ALLREDUCE, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0);
  expect_field(bc, mk(57, HCCL_K_ALLGATHER, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0),
               "collective");
  /* Unused fields never differ. */
  assert_true(same(mk(9, HCCL_K_ALLREDUCE, 8, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0),
                   mk(9, HCCL_K_ALLREDUCE, 8, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 5)));
  assert_true(same(mk(9, HCCL_K_BROADCAST, 8, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 2),
                   mk(9, HCCL_K_BROADCAST, 8, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_MAX, 2)));
  assert_true(same(mk(9, HCCL_K_ALLTOALLV, 8, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0),
                   mk(9, HCCL_K_ALLTOALLV, 3, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0)));
  assert_true(same(mk(9, HCCL_K_BARRIER, 0, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0),
                   mk(9, HCCL_K_BARRIER, 0, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, 3)));
  /* A zero stamp (point-to-point) accepts anything. */
  struct hccl_stamp zero = {{0, 0}};
  assert_true(hccl__fp_match(&zero, &base));
  /* The words of the message: both ranks, both calls, their arguments. */
  struct hccl_stamp mine = mk(57, HCCL_K_ALLREDUCE, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0);
  struct hccl_stamp theirs =
      mk(57, HCCL_K_BROADCAST, 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1);
  expect_msg(mine, theirs,
             "mismatched collectives: rank 3 called broadcast (count 4096, float, root 1) as "
             "call 57 while rank 0 called allreduce (count 4096, float, sum) as call 57 (they "
             "differ in collective)" TAIL);
  /* A C caller's own type and count are the user's: another type over the same bytes. */
  expect_msg(mk(5, HCCL_K_ALLREDUCE, 1000, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0),
             mk(5, HCCL_K_ALLREDUCE, 2000, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, 0),
             "mismatched collectives: rank 3 called allreduce (count 2000, half, sum) as call 5 "
             "while rank 0 called allreduce (count 1000, float, sum) as call 5 (they differ in "
             "count, data type)" TAIL);
}

/* Calls a framework made in its own way, named as its user made them. */
static void test_user_words(void **st) {
  (void)st;
  assert_int_equal(HcclSetUserTypes(TYPES, NTYPES), HCCL_SUCCESS);
  assert_int_equal(HcclSetUserTypes(TYPES, NTYPES), HCCL_SUCCESS); /* the same list again */
  assert_int_equal(HcclSetUserTypes(TYPES, 2), HCCL_E_PARA);       /* another list */
  assert_non_null(strstr(HcclGetLastErrorMessage(), "named its types already"));
  assert_int_equal(HcclSetCallUserType(NTYPES), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "type 4 was not named by HcclSetUserTypes"));
  /* torch_hccl's broadcast of 1000 float32 goes as 4000 bytes; an allreduce of 1000 float32
   * as 1000 floats: one difference, the collective. (Issue 58's report was "broadcast (count
   * 4000, int8, root 0) ... (they differ in collective, count, data type)".) */
  struct hccl_stamp ar = mku(2, HCCL_K_ALLREDUCE, 1000, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0,
                             T_F32);
  struct hccl_stamp bc = mku(2, HCCL_K_BROADCAST, 4000, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0,
                             T_F32);
  expect_msg(ar, bc,
             "mismatched collectives: rank 3 called broadcast (count 1000, torch.float32, root 0) "
             "as call 2 while rank 0 called allreduce (count 1000, torch.float32, sum) as call 2 "
             "(they differ in collective)" TAIL);
  /* The same bytes as another type: the calls differ, in data type only. */
  expect_msg(bc, mku(2, HCCL_K_BROADCAST, 4000, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0, T_I32),
             "rank 3 called broadcast (count 1000, torch.int32, root 0) as call 2 while rank 0 "
             "called broadcast (count 1000, torch.float32, root 0) as call 2 (they differ in data "
             "type)" TAIL);
  /* A count in the user's elements: 1000 float32 against 2000. */
  expect_msg(bc, mku(2, HCCL_K_BROADCAST, 8000, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0, T_F32),
             "rank 3 called broadcast (count 2000, torch.float32, root 0) as call 2 while rank 0 "
             "called broadcast (count 1000, torch.float32, root 0) as call 2 (they differ in "
             "count)" TAIL);
  /* float64 against float32, 10 each: the type only. */
  expect_msg(mku(7, HCCL_K_ALLREDUCE, 10, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, T_F32),
             mku(7, HCCL_K_ALLREDUCE, 10, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_SUM, 0, T_F64),
             "rank 3 called allreduce (count 10, torch.float64, sum) as call 7 while rank 0 called "
             "allreduce (count 10, torch.float32, sum) as call 7 (they differ in data type)" TAIL);
  /* complex64 as float pairs: 10 complex numbers are 20 floats. */
  expect_msg(mku(7, HCCL_K_ALLREDUCE, 20, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, T_C64),
             mku(7, HCCL_K_REDUCE, 20, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1, T_C64),
             "rank 3 called reduce (count 10, torch.complex64, sum, root 1) as call 7 while rank "
             "0 called allreduce (count 10, torch.complex64, sum) as call 7 (they differ in "
             "collective)" TAIL);
  /* Alike in the user's terms, made differently: both named as made. */
  expect_msg(mku(7, HCCL_K_BROADCAST, 10, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, T_F32),
             mku(7, HCCL_K_BROADCAST, 40, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0, T_F32),
             "rank 3 called broadcast (count 40, int8, root 0) as call 7 while rank 0 called "
             "broadcast (count 10, float, root 0) as call 7 (they differ in count, data type)" TAIL);
  /* A call that names no type is named as made. */
  assert_true(same(mk(7, HCCL_K_ALLREDUCE, 10, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0),
                   mk(7, HCCL_K_ALLREDUCE, 10, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0)));
}

/* ---- processes ---- */

enum wrong { W_KIND, W_COUNT, W_DTYPE, W_OP, W_ROOT, W_SKIP, W_USER, W_NCASES };
static const char *const wrong_field[W_NCASES] = {"collective", "count", "data type", "reduction",
                                                  "root",       "count", "collective"};

struct mcase {
  enum wrong what;
  int odd; /* the rank whose call differs */
};

#define COUNT 4096

static int mismatch_body(int rank, int n, void *argp) {
  const struct mcase *m = argp;
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "60", 1);
  if (m->what == W_ROOT)
    setenv("HCCL_ALGO", "ring", 1);
  else
    unsetenv("HCCL_ALGO");
  HcclComm comm = NULL;
  HcclResult rc = HcclCommInitFromEnv(&comm);
  RANK_CHECK(rc == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  float *in = malloc(COUNT * 2 * sizeof(float)), *out = malloc(COUNT * 2 * sizeof(float));
  for (int i = 0; i < COUNT * 2; i++) {
    in[i] = (float)(rank + 1);
    out[i] = -1.0f;
  }
  /* One good call first, so the mismatch is not the first message on any link. A rank still
   * finishing it may already see the others' failure of the next call: a call never succeeds
   * on one rank after another rank has failed (coll_run.c reads aborts at its end). */
  double t0 = cc_now();
  rc = HcclBarrier(comm, NULL);
  if (rc != HCCL_SUCCESS) goto failed;

  int odd = rank == m->odd;
  switch (m->what) {
  case W_KIND:
    rc = odd ? HcclBroadcast(out, COUNT, HCCL_DATA_TYPE_FP32, 1, comm, NULL)
             : HcclAllReduce(in, out, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    break;
  case W_COUNT:
    rc = HcclAllReduce(in, out, odd ? COUNT + 1 : COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm,
                       NULL);
    break;
  case W_DTYPE:
    /* The same bytes, read as twice as many halves on the odd rank. */
    rc =
        HcclAllReduce(in, out, odd ? 2 * COUNT : COUNT,
                      odd ? HCCL_DATA_TYPE_FP16 : HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    break;
  case W_OP:
    rc = HcclAllReduce(in, out, COUNT, HCCL_DATA_TYPE_FP32, odd ? HCCL_REDUCE_MAX : HCCL_REDUCE_SUM,
                       comm, NULL);
    break;
  case W_ROOT:
    /* Over the pipelined chain (HCCL_ALGO=ring, set by run_case): rank odd-1 forwards to the
     * odd rank, which expects the chain from root 1. Under the binomial tree a rank that
     * waits for a parent which, in the others' tree, never sends to it cannot see the
     * difference; that case ends at HCCL_EXEC_TIMEOUT naming the rank waited for. */
    rc = HcclBroadcast(out, COUNT, HCCL_DATA_TYPE_FP32, odd ? 1 : 0, comm, NULL);
    break;
  case W_SKIP: {
    /* The odd rank skips a small allreduce, so its large one (queued) meets the others'
     * small one: same collective, same number, another count. */
    HcclRequest r1 = NULL, r2 = NULL;
    if (!odd) rc = HcclAllReduce(in, out, 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, &r1);
    if (rc == HCCL_SUCCESS)
      rc = HcclAllReduce(in, out, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, &r2);
    if (rc == HCCL_SUCCESS && r1) rc = HcclRequestWait(r1);
    if (r2) {
      HcclResult rc2 = HcclRequestWait(r2);
      if (rc == HCCL_SUCCESS) rc = rc2;
    }
    break;
  }
  case W_USER:
    /* As torch_hccl makes them: the odd rank's broadcast of COUNT float32 as bytes, the
     * others' allreduce of COUNT float32, each named as its user's float32. */
    RANK_CHECK(HcclSetUserTypes(TYPES, NTYPES) == HCCL_SUCCESS, "types: %s",
               HcclGetLastErrorMessage());
    RANK_CHECK(HcclSetCallUserType(T_F32) == HCCL_SUCCESS, "call type");
    rc = odd ? HcclBroadcast(out, COUNT * sizeof(float), HCCL_DATA_TYPE_INT8, 1, comm, NULL)
             : HcclAllReduce(in, out, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
    break;
  default:
    break;
  }
  /* Rank 0, the others' root, sends only to rank 1, which agrees with it: its part of the
   * broadcast is complete and right, so it may finish the call; its next call must fail. */
  if (rc == HCCL_SUCCESS && m->what == W_ROOT && rank == 0) rc = HcclBarrier(comm, NULL);
failed:;
  double dt = cc_now() - t0;
  const char *msg = HcclGetLastErrorMessage();
  RANK_CHECK(rc != HCCL_SUCCESS, "case %d: rank %d succeeded", m->what, rank);
  RANK_CHECK(dt < 10.0, "case %d: the failure took %.2f s (HCCL_EXEC_TIMEOUT=60)", m->what, dt);
  RANK_CHECK(strstr(msg, "mismatched collectives") != NULL, "case %d rank %d: %s", m->what, rank,
             msg);
  RANK_CHECK(strstr(msg, wrong_field[m->what]) != NULL, "case %d rank %d: does not name %s: %s",
             m->what, rank, wrong_field[m->what], msg);
  RANK_CHECK(cc_msg_names_rank(msg, m->odd), "case %d rank %d: does not name rank %d: %s", m->what,
             rank, m->odd, msg);
  if (m->what == W_USER) {
    RANK_CHECK(strstr(msg, "called broadcast (count 4096, torch.float32, root 1) as call 2") &&
                   strstr(msg, "called allreduce (count 4096, torch.float32, sum) as call 2") &&
                   strstr(msg, "(they differ in collective);"),
               "rank %d: not in the user's words: %s", rank, msg);
  }
  /* No mixed data: an allreduce's output holds only the sentinel or values reachable without
   * the odd rank's input. With inputs rank+1, a sum that includes the odd rank's input would
   * be the full sum n(n+1)/2; the check is that no element holds it. */
  if (m->what == W_COUNT || m->what == W_OP || m->what == W_KIND || m->what == W_USER) {
    float full = (float)(n * (n + 1) / 2);
    for (int i = 0; i < COUNT; i++)
      RANK_CHECK(out[i] != full, "case %d rank %d: element %d holds the full sum %g", m->what, rank,
                 i, (double)full);
  }
  rc = HcclAllReduce(in, out, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
  RANK_CHECK(rc != HCCL_SUCCESS, "a broken communicator accepted a call");
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  free(in);
  free(out);
  return 0;
}

static void run_case(int n, enum wrong what, int odd) {
  struct mcase m = {what, odd};
  double t0 = cc_now();
  int failed = harness_run_ranks(n, RUN_TIMEOUT_S, mismatch_body, &m);
  printf("  %d ranks, case %s, odd rank %d: %d failed, %.2f s\n", n, wrong_field[what], odd, failed,
         cc_now() - t0);
  assert_int_equal(failed, 0);
}

static void test_kind_2(void **st) {
  (void)st;
  run_case(2, W_KIND, 1);
}
static void test_kind_4(void **st) {
  (void)st;
  run_case(4, W_KIND, 3);
}
static void test_kind_8(void **st) {
  (void)st;
  run_case(8, W_KIND, 5);
}
static void test_count_4(void **st) {
  (void)st;
  run_case(4, W_COUNT, 2);
}
static void test_dtype_4(void **st) {
  (void)st;
  run_case(4, W_DTYPE, 1);
}
static void test_op_4(void **st) {
  (void)st;
  run_case(4, W_OP, 0);
}
static void test_root_4(void **st) {
  (void)st;
  run_case(4, W_ROOT, 2);
}
static void test_skip_4(void **st) {
  (void)st;
  run_case(4, W_SKIP, 3);
}
static void test_user_4(void **st) {
  (void)st;
  run_case(4, W_USER, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stamp_fields), cmocka_unit_test(test_kind_2),
      cmocka_unit_test(test_kind_4),       cmocka_unit_test(test_kind_8),
      cmocka_unit_test(test_count_4),      cmocka_unit_test(test_dtype_4),
      cmocka_unit_test(test_op_4),         cmocka_unit_test(test_root_4),
      cmocka_unit_test(test_skip_4),       cmocka_unit_test(test_user_words),
      cmocka_unit_test(test_user_4),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
