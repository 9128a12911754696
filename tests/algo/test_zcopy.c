/*
 * test_zcopy.c - the zero-copy allreduce (algo/zcopy.c) and the memory it needs (HcclMemAlloc,
 * core/mem.c; the shm transport's map_window), on real processes through the public calls.
 *
 *   sweep      2, 4 and 8 ranks; every dtype x op; counts of 64 KiB + 7 elements and, for
 *              float sum, 1 Mi + 3; in place and out of place; buffers at an odd offset inside
 *              their region, with guard bytes around them. Every element is compared with a
 *              reference that never calls the library, the send buffer must be untouched, and
 *              the call must really have run zero-copy (the communicator's own record).
 *   mixed      one rank passes malloc memory: every rank runs the ring and gets the right
 *              answer; the next call (all shared) is skipped by the back-off and the one after
 *              runs zero-copy, alike on every rank.
 *   regions    12 regions in turn, each freed before the next is made (descriptor numbers are
 *              reused): more than the 8 a peer keeps mapped, and never a stale mapping.
 *   forced     HCCL_ALGO=ring never runs zero-copy.
 *   dead peer  a rank that exits instead of calling makes the others fail, not hang.
 *   api        HcclMemAlloc(0) and HcclMemFree of a foreign pointer fail naming the rule.
 * Every rank must have unmapped its peers' regions after destroy (harness.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_check.h"
#include "comm.h"
#include "harness.h"
#include "hccl.h"

#define TIMEOUT_S 240
#define GUARD 64 /* bytes before and after each buffer inside its region */

static const HcclDataType DT[] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_FP16,
                                  HCCL_DATA_TYPE_FP32};
static const HcclReduceOp OP[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                  HCCL_REDUCE_MIN};

static HcclResult init_comm(const char *algo, HcclComm *comm) {
  if (algo)
    setenv("HCCL_ALGO", algo, 1);
  else
    unsetenv("HCCL_ALGO");
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  unsetenv("DEVICE_ID");
  return HcclCommInitFromEnv(comm);
}

static int ran_zcopy(HcclComm comm) {
  return comm->zcopy_ran == comm->coll_seq + 1;
}

/* A buffer of `bytes` at offset GUARD inside a region (HcclMemAlloc) or a malloc block, the
 * guards filled with CC_GUARD_BYTE and the payload with CC_SENTINEL_BYTE. */
struct zbuf {
  unsigned char *mem, *p;
  size_t bytes;
  int shared;
};

static int zbuf_alloc(struct zbuf *b, size_t bytes, int shared) {
  b->bytes = bytes;
  b->shared = shared;
  if (shared) {
    if (HcclMemAlloc((void **)&b->mem, bytes + 2 * GUARD) != HCCL_SUCCESS) return -1;
  } else if (!(b->mem = malloc(bytes + 2 * GUARD))) {
    return -1;
  }
  b->p = b->mem + GUARD;
  memset(b->mem, CC_GUARD_BYTE, GUARD);
  memset(b->p, CC_SENTINEL_BYTE, bytes);
  memset(b->p + bytes, CC_GUARD_BYTE, GUARD);
  return 0;
}

static int zbuf_guards_ok(const struct zbuf *b) {
  for (size_t k = 0; k < GUARD; k++)
    if (b->mem[k] != CC_GUARD_BYTE || b->p[b->bytes + k] != CC_GUARD_BYTE) return 0;
  return 1;
}

static void zbuf_free(struct zbuf *b) {
  if (b->shared)
    HcclMemFree(b->mem);
  else
    free(b->mem);
  b->mem = b->p = NULL;
}

/* One allreduce of `count` elements, checked against the reference; `shared` says whether this
 * rank's buffers come from HcclMemAlloc. Returns 0 when right; *zc tells whether it ran
 * zero-copy. */
static int one_call(HcclComm comm, int rank, int n, HcclDataType dt, HcclReduceOp op,
                    uint64_t count, int inplace, int shared, uint32_t salt, int *zc) {
  size_t es = cc_dtype_size(dt), bytes = count * es;
  struct zbuf sb, rb;
  RANK_CHECK(zbuf_alloc(&sb, bytes, shared) == 0, "rank %d: no memory for %zu bytes", rank, bytes);
  if (!inplace)
    RANK_CHECK(zbuf_alloc(&rb, bytes, shared) == 0, "rank %d: no memory for %zu bytes", rank,
               bytes);
  cc_fill_input(sb.p, dt, op, salt, rank, 0, count);
  void *want = malloc(bytes), *orig = malloc(bytes);
  RANK_CHECK(want && orig, "out of memory");
  cc_reduce_expect(want, dt, op, salt, n, 0, count);
  memcpy(orig, sb.p, bytes);
  void *out = inplace ? sb.p : rb.p;
  HcclResult r = HcclAllReduce(sb.p, out, count, dt, op, comm, NULL);
  int bad = r != HCCL_SUCCESS;
  if (bad)
    fprintf(stderr, "rank %d: %s %s count %llu %s: %s\n", rank, cc_dtype_name(dt), cc_op_name(op),
            (unsigned long long)count, inplace ? "in place" : "out of place",
            HcclGetLastErrorMessage());
  int64_t i = bad ? -1 : cc_first_mismatch(out, want, dt, count);
  if (i >= 0) {
    char e[64], g[64];
    fprintf(stderr, "rank %d: %s %s count %llu %s: element %lld is %s, expected %s\n", rank,
            cc_dtype_name(dt), cc_op_name(op), (unsigned long long)count,
            inplace ? "in place" : "out of place", (long long)i,
            cc_elem_str(dt, out, (uint64_t)i, g, sizeof(g)),
            cc_elem_str(dt, want, (uint64_t)i, e, sizeof(e)));
    bad = 1;
  }
  if (!inplace && memcmp(orig, sb.p, bytes) != 0) {
    fprintf(stderr, "rank %d: out-of-place allreduce changed its send buffer\n", rank);
    bad = 1;
  }
  if (!zbuf_guards_ok(&sb) || (!inplace && !zbuf_guards_ok(&rb))) {
    fprintf(stderr, "rank %d: guard bytes around a buffer were written\n", rank);
    bad = 1;
  }
  *zc = ran_zcopy(comm);
  free(want);
  free(orig);
  zbuf_free(&sb);
  if (!inplace) zbuf_free(&rb);
  return bad;
}

/* ---- sweep ---- */

static int sweep_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  int failures = 0, checks = 0;
  uint32_t salt = 1;
  for (size_t d = 0; d < 4; d++)
    for (size_t o = 0; o < 4; o++)
      for (int big = 0; big < 2; big++) {
        if (big && !(DT[d] == HCCL_DATA_TYPE_FP32 && OP[o] == HCCL_REDUCE_SUM)) continue;
        uint64_t count = big ? (1u << 20) + 3 : (64u << 10) + 7;
        for (int inplace = 0; inplace < 2; inplace++) {
          int zc = 0;
          failures += one_call(comm, rank, n, DT[d], OP[o], count, inplace, 1, salt++, &zc);
          if (!zc) {
            fprintf(stderr, "rank %d: %s %s count %llu did not run zero-copy\n", rank,
                    cc_dtype_name(DT[d]), cc_op_name(OP[o]), (unsigned long long)count);
            failures++;
          }
          checks++;
        }
      }
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  RANK_CHECK(failures == 0, "rank %d: %d of %d calls wrong", rank, failures, checks);
  return 0;
}

static void test_sweep(void **state) {
  (void)state;
  for (int n = 2; n <= 8; n *= 2) {
    double t0 = cc_now();
    assert_int_equal(harness_run_ranks(n, TIMEOUT_S, sweep_rank, NULL), 0);
    printf("zero-copy sweep at %d ranks: 34 calls per rank, %.1f s\n", n, cc_now() - t0);
  }
}

/* ---- mixed memory and the back-off ---- */

static int mixed_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  uint64_t count = 100003;
  int zc;
  /* Rank 1's buffers are ordinary memory: every rank runs the ring. */
  RANK_CHECK(one_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, count, 0, rank != 1, 11,
                      &zc) == 0,
             "mixed call wrong");
  RANK_CHECK(!zc, "rank %d ran zero-copy although rank 1's buffers are malloc memory", rank);
  /* All shared now, but the back-off skips one offer. */
  RANK_CHECK(one_call(comm, rank, n, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, count, 1, 1, 12, &zc) ==
                 0,
             "skipped call wrong");
  RANK_CHECK(!zc, "rank %d: the call after a refused offer should run the ring", rank);
  RANK_CHECK(one_call(comm, rank, n, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_MAX, count, 0, 1, 13, &zc) ==
                 0,
             "shared call wrong");
  RANK_CHECK(zc, "rank %d: the second call after a refused offer should run zero-copy", rank);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_mixed(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(4, TIMEOUT_S, mixed_rank, NULL), 0);
}

/* ---- many regions, freed and made again ---- */

static int regions_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  for (int k = 0; k < 12; k++) {
    int zc;
    /* Sizes differ, so a stale mapping of an earlier region would also be the wrong size. */
    uint64_t count = (64u << 10) + 1000u * (uint64_t)k;
    RANK_CHECK(one_call(comm, rank, n, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, count, k % 2, 1,
                        100 + (uint32_t)k, &zc) == 0,
               "region %d wrong", k);
    RANK_CHECK(zc, "region %d did not run zero-copy", k);
  }
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_regions(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(4, TIMEOUT_S, regions_rank, NULL), 0);
}

/* ---- HCCL_ALGO=ring ---- */

static int forced_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm("ring", &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  int zc;
  RANK_CHECK(one_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MIN, 300007, 0, 1, 21,
                      &zc) == 0,
             "forced ring wrong");
  RANK_CHECK(!zc, "HCCL_ALGO=ring ran zero-copy");
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_forced_ring(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(2, TIMEOUT_S, forced_rank, NULL), 0);
}

/* ---- a peer that leaves ---- */

static int dead_rank(int rank, int n, void *arg) {
  (void)arg;
  (void)n;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  size_t count = 1u << 20;
  float *b;
  RANK_CHECK(HcclMemAlloc((void **)&b, count * 4) == HCCL_SUCCESS, "alloc");
  int zc;
  /* One good call first, so the peers have mapped rank 2's region. */
  RANK_CHECK(one_call(comm, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, count, 1, 1, 31, &zc) ==
                 0,
             "first call wrong");
  if (rank == 2) _exit(0);
  double t0 = cc_now();
  HcclResult r = HcclAllReduce(b, b, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL);
  double took = cc_now() - t0;
  RANK_CHECK(r != HCCL_SUCCESS, "rank %d: allreduce succeeded without rank 2", rank);
  RANK_CHECK(cc_msg_names_rank(HcclGetLastErrorMessage(), 2) || r == HCCL_E_REMOTE,
             "rank %d: the error does not name rank 2: %s", rank, HcclGetLastErrorMessage());
  RANK_CHECK(took < 30, "rank %d took %.1f s to notice", rank, took);
  HcclMemFree(b);
  HcclCommDestroy(comm);
  return 0;
}

static void test_dead_peer(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(4, TIMEOUT_S, dead_rank, NULL), 0);
}

/* ---- the allocator's own checks ---- */

static void test_api(void **state) {
  (void)state;
  void *p = NULL;
  assert_int_equal(HcclMemAlloc(&p, 0), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "size is 0"));
  assert_int_equal(HcclMemAlloc(NULL, 16), HCCL_E_PTR);
  assert_int_equal(HcclMemAlloc(&p, 10), HCCL_SUCCESS);
  assert_int_equal(((uintptr_t)p) % 4096, 0);
  assert_int_equal(((unsigned char *)p)[9], 0);
  int x;
  assert_int_equal(HcclMemFree(&x), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "not returned by HcclMemAlloc"));
  assert_int_equal(HcclMemFree((char *)p + 1), HCCL_E_PARA);
  assert_int_equal(HcclMemFree(p), HCCL_SUCCESS);
  assert_int_equal(HcclMemFree(p), HCCL_E_PARA);
  assert_int_equal(HcclMemFree(NULL), HCCL_SUCCESS);
  assert_int_equal(harness_links_left(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_api),         cmocka_unit_test(test_sweep),
      cmocka_unit_test(test_mixed),       cmocka_unit_test(test_regions),
      cmocka_unit_test(test_forced_ring), cmocka_unit_test(test_dead_peer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
