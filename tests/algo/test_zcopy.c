/*
 * test_zcopy.c - the zero-copy path (algo/zcopy.c) of allreduce, reduce-scatter, allgather and
 * broadcast, and the memory it needs (HcclMemAlloc, base/mem_region.c; the shm transport's
 * map_window), on real processes through the public calls.
 *
 *   sweep      2, 4 and 8 ranks; the four collectives; every dtype, x every op for the
 *              reductions, x root 0 and root n-1 for broadcast; counts 0, 1 and 13 (the size
 *              threshold lowered, so that zero-copy meets empty and one-element blocks), an odd
 *              count just past the threshold in int8 (65543 elements of a whole buffer, 33331
 *              per rank: several 32 KiB chunks from int32 up) and, for float, 1 Mi + 3 or 262147
 *              per rank; in place and out of place, the two buffers
 *              in two regions or in one; every buffer at an odd element offset inside its
 *              region that differs per rank. Every element is compared with a reference that
 *              never calls the library; every byte of a region outside the buffers must keep
 *              its guard value; an out-of-place input, the other blocks of an in-place
 *              reduce-scatter's and the root's broadcast buffer must be untouched; the call
 *              must have run zero-copy exactly when it should (the communicator's own record),
 *              and a call of count 0 must run nothing.
 *   order      with inexact floats and +-0 ties, zero-copy reduce-scatter and allreduce give
 *              the ring's bits (the same calls on a communicator with HCCL_ALGO=ring).
 *   mixed      one rank passes malloc memory (both buffers, or only the receive buffer): every
 *              rank runs the ordinary algorithm and gets the right answer; that collective's
 *              next call is skipped by the back-off and the one after runs zero-copy, alike on
 *              every rank, while another collective's offers are not held back.
 *   regions    12 regions in turn, each freed before the next is made (descriptor numbers are
 *              reused): more than the 8 a peer keeps mapped, and never a stale mapping.
 *   repeat     2, 4 and 8 ranks call allreduce and allgather over 3 buffer sets of their
 *              own, rank r moving to its next set every r + 1 calls: the exchange's messages
 *              are the last ones again (sent empty, zcopy.c's memo) for some steps and ranks
 *              and not for others, and every result must still come from the right buffers.
 *   forced     HCCL_ALGO=ring never runs zero-copy, for any of the four.
 *   threshold  4 KiB runs zero-copy when the server has a core for each rank, 2 KiB never
 *              (2 and 8 ranks, each collective, in place and out of place).
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

#define TIMEOUT_S 300
#define GUARD 64 /* guard bytes before and after each buffer inside its region */

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

/* ---- one call of any of the four, checked ---- */

enum coll { AR, RS, AG, BC };
static const char *const COLL_NAME[] = {"allreduce", "reduce-scatter", "allgather", "broadcast"};

struct zcall {
  enum coll coll;
  HcclDataType dt;
  HcclReduceOp op; /* the reductions'; for the others it only picks the values (coll_check.h) */
  uint64_t count;  /* the API's count */
  uint32_t root;   /* broadcast */
  int inplace;     /* allreduce, reduce-scatter, allgather */
  int pool;        /* out of place: both buffers in one region */
  int shared;      /* this rank's buffers come from HcclMemAlloc */
  int recv_malloc; /* out of place and shared: the receive buffer from malloc all the same */
  uint32_t salt;
};

/* A region (HcclMemAlloc or malloc) full of guard bytes, with up to two buffers carved out. */
struct zregion {
  unsigned char *mem;
  size_t size;
  int shared;
  unsigned char *buf[2];
  size_t len[2];
  int nbuf;
};

static int region_alloc(struct zregion *g, size_t size, int shared) {
  memset(g, 0, sizeof(*g));
  g->size = size;
  g->shared = shared;
  if (shared) {
    if (HcclMemAlloc((void **)&g->mem, size) != HCCL_SUCCESS) return -1;
  } else if (!(g->mem = malloc(size))) {
    return -1;
  }
  memset(g->mem, CC_GUARD_BYTE, size);
  return 0;
}

/* The next buffer of `bytes` in g, `skew` bytes past GUARD guard bytes after the previous. */
static unsigned char *region_carve(struct zregion *g, size_t skew, size_t bytes) {
  size_t at = g->nbuf ? (size_t)(g->buf[g->nbuf - 1] - g->mem) + g->len[g->nbuf - 1] : 0;
  g->buf[g->nbuf] = g->mem + at + GUARD + skew;
  g->len[g->nbuf++] = bytes;
  memset(g->mem + at + GUARD + skew, CC_SENTINEL_BYTE, bytes);
  return g->mem + at + GUARD + skew;
}

/* Offset of the first byte outside the buffers that lost its guard value, or -1. */
static long region_damage(const struct zregion *g) {
  for (size_t i = 0; i < g->size; i++) {
    int inside = 0;
    for (int b = 0; b < g->nbuf; b++)
      inside |= g->mem + i >= g->buf[b] && g->mem + i < g->buf[b] + g->len[b];
    if (!inside && g->mem[i] != CC_GUARD_BYTE) return (long)i;
  }
  return -1;
}

static void region_free(struct zregion *g) {
  if (!g->mem) return;
  if (g->shared)
    HcclMemFree(g->mem);
  else
    free(g->mem);
  g->mem = NULL;
}

static void describe(char *buf, size_t len, int rank, const struct zcall *c) {
  char how[32];
  if (c->coll == BC)
    snprintf(how, sizeof(how), "root %u", c->root);
  else
    snprintf(how, sizeof(how), "%s",
             c->inplace ? "in place"
             : c->pool  ? "out of place, one region"
                        : "out of place");
  int reduces = c->coll == AR || c->coll == RS;
  snprintf(buf, len, "rank %d: %s %s%s%s count %llu, %s", rank, COLL_NAME[c->coll],
           cc_dtype_name(c->dt), reduces ? " " : "", reduces ? cc_op_name(c->op) : "",
           (unsigned long long)c->count, how);
}

/* The result c must leave on this rank: *elems elements into want. */
static void expect(void *want, const struct zcall *c, int rank, int n, size_t *elems) {
  size_t es = cc_dtype_size(c->dt), cnt = c->count;
  switch (c->coll) {
  case AR:
    cc_reduce_expect(want, c->dt, c->op, c->salt, n, 0, cnt);
    *elems = cnt;
    break;
  case RS:
    cc_reduce_expect(want, c->dt, c->op, c->salt, n, (uint64_t)rank * cnt, cnt);
    *elems = cnt;
    break;
  case AG:
    for (int k = 0; k < n; k++)
      cc_fill_input((char *)want + (size_t)k * cnt * es, c->dt, c->op, c->salt, k, 0, cnt);
    *elems = (size_t)n * cnt;
    break;
  case BC:
    cc_fill_input(want, c->dt, c->op, c->salt, (int)c->root, 0, cnt);
    *elems = cnt;
    break;
  }
}

/* Runs c on this rank and checks it (see the top of the file). Returns the number of problems
 * found, each printed; *zc tells whether the call ran zero-copy. */
static int run_call(HcclComm comm, int rank, int n, const struct zcall *c, int *zc) {
  size_t es = cc_dtype_size(c->dt), cnt = c->count;
  size_t send_n = c->coll == RS ? (size_t)n * cnt : cnt,
         recv_n = c->coll == AG ? (size_t)n * cnt : cnt;
  size_t sb = send_n * es, rb = recv_n * es, skew = (2 * (size_t)rank + 1) * es;
  int one = c->inplace || c->coll == BC;
  struct zregion g[2] = {{0}};
  unsigned char *send, *recv;
  char what[160];
  describe(what, sizeof(what), rank, c);
  if (one) {
    RANK_CHECK(region_alloc(&g[0], 2 * GUARD + skew + (sb > rb ? sb : rb), c->shared) == 0,
               "%s: no memory", what);
  } else if (c->pool) {
    RANK_CHECK(region_alloc(&g[0], 3 * GUARD + 2 * skew + sb + rb, c->shared) == 0, "%s: no memory",
               what);
  } else {
    RANK_CHECK(region_alloc(&g[0], 2 * GUARD + skew + sb, c->shared) == 0, "%s: no memory", what);
    RANK_CHECK(region_alloc(&g[1], 2 * GUARD + skew + rb, c->shared && !c->recv_malloc) == 0,
               "%s: no memory", what);
  }
  if (one) {
    /* In place, the one buffer is the larger side: the input at the API's offset in it. */
    unsigned char *b = region_carve(&g[0], skew, sb > rb ? sb : rb);
    send = c->coll == AG ? b + (size_t)rank * cnt * es : b;
    recv = c->coll == RS ? b + (size_t)rank * cnt * es : b;
  } else {
    send = region_carve(&g[0], skew, sb);
    recv = region_carve(c->pool ? &g[0] : &g[1], skew, rb);
  }
  if (c->coll == BC) {
    if ((uint32_t)rank == c->root) cc_fill_input(send, c->dt, c->op, c->salt, rank, 0, cnt);
  } else {
    cc_fill_input(send, c->dt, c->op, c->salt, rank, 0, send_n);
  }
  /* The input side as it was: the whole buffer in place. */
  unsigned char *orig_at = one ? g[0].buf[0] : send;
  size_t orig_len = one ? g[0].len[0] : sb;
  void *want = malloc(rb + 1), *orig = malloc(orig_len + 1);
  RANK_CHECK(want && orig, "out of memory");
  memcpy(orig, orig_at, orig_len);
  size_t elems = 0;
  expect(want, c, rank, n, &elems);

  uint64_t seq = comm->coll_seq;
  HcclResult r;
  switch (c->coll) {
  case AR:
    r = HcclAllReduce(send, recv, cnt, c->dt, c->op, comm, NULL);
    break;
  case RS:
    r = HcclReduceScatter(send, recv, cnt, c->dt, c->op, comm, NULL);
    break;
  case AG:
    r = HcclAllGather(send, recv, cnt, c->dt, comm, NULL);
    break;
  default:
    r = HcclBroadcast(send, cnt, c->dt, c->root, comm, NULL);
    break;
  }
  int bad = 0;
  if (r != HCCL_SUCCESS) {
    fprintf(stderr, "%s: %s\n", what, HcclGetLastErrorMessage());
    bad++;
  }
  int64_t i = bad ? -1 : cc_first_mismatch(recv, want, c->dt, elems);
  if (i >= 0) {
    char e[64], got[64];
    fprintf(stderr, "%s: element %lld is %s, expected %s\n", what, (long long)i,
            cc_elem_str(c->dt, recv, (uint64_t)i, got, sizeof(got)),
            cc_elem_str(c->dt, want, (uint64_t)i, e, sizeof(e)));
    bad++;
  }
  /* What must be as it was: out of place the input, in place (reduce-scatter) the blocks
   * around the result. */
  for (size_t k = 0; !one && k < orig_len; k++)
    if (orig_at[k] != ((unsigned char *)orig)[k]) {
      fprintf(stderr, "%s: input byte %zu changed\n", what, k);
      bad++;
      break;
    }
  if (c->inplace && c->coll == RS) {
    size_t lo = (size_t)rank * cnt * es, hi = lo + cnt * es;
    if (memcmp(orig_at, orig, lo) != 0 || memcmp(orig_at + hi, (char *)orig + hi, orig_len - hi)) {
      fprintf(stderr, "%s: a block of the input other than this rank's changed\n", what);
      bad++;
    }
  }
  for (int k = 0; k < 2; k++) {
    long at = g[k].mem ? region_damage(&g[k]) : -1;
    if (at >= 0) {
      fprintf(stderr, "%s: guard byte %ld of region %d (%zu bytes) was written\n", what, at, k,
              g[k].size);
      bad++;
    }
  }
  if (cnt == 0 && comm->coll_seq != seq) {
    fprintf(stderr, "%s: a call of count 0 ran\n", what);
    bad++;
  }
  *zc = cnt > 0 && ran_zcopy(comm);
  free(want);
  free(orig);
  region_free(&g[0]);
  region_free(&g[1]);
  return bad;
}

/* run_call that also fails when the call did (not) run zero-copy against want_zc. */
static int run_expect(HcclComm comm, int rank, int n, const struct zcall *c, int want_zc) {
  int zc = 0, bad = run_call(comm, rank, n, c, &zc);
  if (zc != want_zc) {
    char what[160];
    describe(what, sizeof(what), rank, c);
    fprintf(stderr, "%s: %s zero-copy\n", what, want_zc ? "did not run" : "ran");
    bad++;
  }
  return bad;
}

/* ---- sweep ---- */

static int sweep_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  int failures = 0, calls = 0;
  uint32_t salt = 1;
  for (int coll = AR; coll <= BC; coll++) {
    int reduces = coll == AR || coll == RS;
    for (size_t d = 0; d < 4; d++)
      for (size_t o = 0; o < (reduces ? 4u : 1u); o++)
        for (int size = 0; size < 5; size++) {
          int big = size == 4, tiny = size == 1 || size == 2;
          /* Elements of the whole buffer for allreduce and broadcast, per rank otherwise: the
           * fourth is odd and, in int8 on 2 ranks, just past the 64 KiB threshold. */
          int whole = coll == AR || coll == BC;
          static const uint64_t counts[4] = {0, 1, 13, 0};
          uint64_t count = big         ? (whole ? (1u << 20) + 3 : 262147)
                           : size == 3 ? (whole ? 65543 : 33331)
                                       : counts[size];
          if (big && !(DT[d] == HCCL_DATA_TYPE_FP32 && (!reduces || OP[o] == HCCL_REDUCE_SUM)))
            continue;
          /* Zero-copy from 1 byte for the tiny counts, from its own threshold otherwise. */
          comm->zcopy_min_bytes = tiny ? 1 : 0;
          for (int v = 0; v < 2; v++) {
            struct zcall c = {.coll = (enum coll)coll,
                              .dt = DT[d],
                              .op = reduces ? OP[o] : HCCL_REDUCE_MAX,
                              .count = count,
                              .root = v ? (uint32_t)n - 1 : 0,
                              .inplace = coll != BC && v,
                              .pool = salt % 2,
                              .shared = 1,
                              .salt = salt++};
            failures += run_expect(comm, rank, n, &c, count > 0);
            calls++;
          }
        }
  }
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  RANK_CHECK(failures == 0, "rank %d: %d problems in %d calls", rank, failures, calls);
  if (rank == 0) printf("zero-copy sweep at %d ranks: %d calls per rank\n", n, calls);
  return 0;
}

static void test_sweep(void **state) {
  (void)state;
  for (int n = 2; n <= 8; n *= 2) {
    double t0 = cc_now();
    assert_int_equal(harness_run_ranks(n, TIMEOUT_S, sweep_rank, NULL), 0);
    printf("zero-copy sweep at %d ranks: %.1f s\n", n, cc_now() - t0);
  }
}

/* ---- the ring's bits ---- */

/* Inexact inputs: sums of floats with 24 random bits at mixed scales, products of values in
 * [0.75, 1.25), and max/min over +0, -0 and 1, whose result's sign depends on which operand a
 * tie returns. */
static void fill_inexact(void *p, HcclDataType dt, HcclReduceOp op, uint32_t salt, int rank,
                         size_t count) {
  for (size_t i = 0; i < count; i++) {
    uint64_t h = cc_hash(salt, rank, i);
    float f;
    if (op == HCCL_REDUCE_SUM)
      f = ldexpf((float)(int32_t)(h >> 40 << 8) / 2147483648.0f, (int)(h % 7) - 3);
    else if (op == HCCL_REDUCE_PROD)
      f = 0.75f + (float)(h >> 41) / 4194304.0f * 0.5f;
    else
      f = h % 5 == 0 ? 1.0f : h % 2 ? -0.0f : 0.0f;
    if (dt == HCCL_DATA_TYPE_FP32)
      ((float *)p)[i] = f;
    else
      ((uint16_t *)p)[i] = cc_float_to_half(f);
  }
}

struct order_arg {
  char port2[16]; /* MASTER_PORT of the HCCL_ALGO=ring communicator */
};

static int order_rank(int rank, int n, void *arg) {
  const struct order_arg *a = arg;
  HcclComm zc_comm, ring_comm;
  RANK_CHECK(init_comm(NULL, &zc_comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  setenv("MASTER_PORT", a->port2, 1);
  RANK_CHECK(init_comm("ring", &ring_comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  static const HcclDataType fdt[2] = {HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32};
  int failures = 0;
  for (int coll = AR; coll <= RS; coll++)
    for (int d = 0; d < 2; d++)
      for (int o = 0; o < 4; o++) {
        /* float16 sum and product over 3+ ranks are accumulated in float32 by the one reader of
         * each block and rounded once, where the ring rounds at every hop: not the ring's bits
         * (tests/core/test_dtypes.c holds both to their bounds against float64). */
        if (fdt[d] == HCCL_DATA_TYPE_FP16 && o < 2 && n > 2) continue;
        size_t cnt = coll == AR ? 262147 : 33331, es = cc_dtype_size(fdt[d]);
        size_t sn = coll == RS ? (size_t)n * cnt : cnt;
        unsigned char *send, *got, *ring = malloc(cnt * es);
        RANK_CHECK(ring && HcclMemAlloc((void **)&send, sn * es) == HCCL_SUCCESS &&
                       HcclMemAlloc((void **)&got, cnt * es) == HCCL_SUCCESS,
                   "no memory");
        fill_inexact(send, fdt[d], OP[o], 40 + (uint32_t)o, rank, sn);
        HcclComm cs[2] = {zc_comm, ring_comm};
        unsigned char *outs[2] = {got, ring};
        for (int k = 0; k < 2; k++) {
          HcclResult r = coll == AR
                             ? HcclAllReduce(send, outs[k], cnt, fdt[d], OP[o], cs[k], NULL)
                             : HcclReduceScatter(send, outs[k], cnt, fdt[d], OP[o], cs[k], NULL);
          RANK_CHECK(r == HCCL_SUCCESS, "%s: %s", COLL_NAME[coll], HcclGetLastErrorMessage());
          RANK_CHECK(ran_zcopy(cs[k]) == !k, "%s %s %s: zero-copy %s on the %s communicator",
                     COLL_NAME[coll], cc_dtype_name(fdt[d]), cc_op_name(OP[o]),
                     k ? "ran" : "did not run", k ? "HCCL_ALGO=ring" : "default");
        }
        int64_t i = -1;
        for (size_t e = 0; i < 0 && e < cnt; e++)
          if (memcmp(got + e * es, ring + e * es, es) != 0) i = (int64_t)e;
        if (i >= 0) {
          char x[64], y[64];
          fprintf(stderr, "rank %d: %s %s %s: element %lld is %s zero-copy but %s in the ring\n",
                  rank, COLL_NAME[coll], cc_dtype_name(fdt[d]), cc_op_name(OP[o]), (long long)i,
                  cc_elem_str(fdt[d], got, (uint64_t)i, x, sizeof(x)),
                  cc_elem_str(fdt[d], ring, (uint64_t)i, y, sizeof(y)));
          failures++;
        }
        HcclMemFree(send);
        HcclMemFree(got);
        free(ring);
      }
  RANK_CHECK(HcclCommDestroy(zc_comm) == HCCL_SUCCESS, "destroy");
  RANK_CHECK(HcclCommDestroy(ring_comm) == HCCL_SUCCESS, "destroy");
  RANK_CHECK(failures == 0, "rank %d: %d results differ from the ring's", rank, failures);
  return 0;
}

static void test_ring_order(void **state) {
  (void)state;
  for (int n = 4; n <= 8; n *= 2) {
    struct order_arg a;
    snprintf(a.port2, sizeof(a.port2), "%u", harness_free_port());
    assert_int_equal(harness_run_ranks(n, TIMEOUT_S, order_rank, &a), 0);
  }
}

/* ---- mixed memory and the back-off ---- */

/* A zcall of coll, FP32 (sum for the reductions), out of place, 100003 elements. */
static struct zcall mixed_call(enum coll coll, int shared, int recv_malloc, uint32_t root,
                               uint32_t salt) {
  return (struct zcall){.coll = coll,
                        .dt = HCCL_DATA_TYPE_FP32,
                        .op = coll == AR || coll == RS ? HCCL_REDUCE_SUM : HCCL_REDUCE_MAX,
                        .count = 100003,
                        .root = root,
                        .shared = shared,
                        .recv_malloc = recv_malloc,
                        .salt = salt};
}

static int mixed_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  int failures = 0;
  uint32_t salt = 11;
  struct zcall c;
  for (int coll = AR; coll <= BC; coll++) {
    /* Rank 1's buffers are ordinary memory (only its receive buffer for allgather; for
     * broadcast a receiver's, root 2's shared): every rank runs the ordinary algorithm. */
    c = mixed_call(coll, rank != 1 || coll == AG, rank == 1 && coll == AG, 2, salt++);
    failures += run_expect(comm, rank, n, &c, 0);
    /* Another collective's offers are not held back by this one's refusal. */
    c = mixed_call(coll == AR ? BC : AR, 1, 0, 0, salt++);
    failures += run_expect(comm, rank, n, &c, 1);
    /* All shared now: this collective's next offer is skipped, the one after runs. */
    c = mixed_call(coll, 1, 0, 3, salt++);
    failures += run_expect(comm, rank, n, &c, 0);
    c = mixed_call(coll, 1, 0, 0, salt++);
    failures += run_expect(comm, rank, n, &c, 1);
  }
  /* A broadcast whose root's buffer is ordinary memory. */
  c = mixed_call(BC, rank != 1, 0, 1, salt++);
  failures += run_expect(comm, rank, n, &c, 0);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  RANK_CHECK(failures == 0, "rank %d: %d problems", rank, failures);
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
  int failures = 0;
  for (int k = 0; k < 12; k++) {
    /* Sizes differ, so a stale mapping of an earlier region would also be the wrong size. */
    struct zcall c = {.coll = AR,
                      .dt = HCCL_DATA_TYPE_INT32,
                      .op = HCCL_REDUCE_SUM,
                      .count = (64u << 10) + 1000u * (uint64_t)k,
                      .inplace = k % 2,
                      .shared = 1,
                      .salt = 100 + (uint32_t)k};
    failures += run_expect(comm, rank, n, &c, 1);
  }
  RANK_CHECK(failures == 0, "rank %d: %d problems", rank, failures);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_regions(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(4, TIMEOUT_S, regions_rank, NULL), 0);
}

/* ---- the same buffers again ---- */

#define REPEAT_CALLS 30
#define REPEAT_COUNT 20000u /* 80 KB of floats: zero-copy at any number of ranks */

static int repeat_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  size_t all = (size_t)n * REPEAT_COUNT;
  float *send[3], *recv[3], *want = malloc(all * sizeof(float));
  RANK_CHECK(want != NULL, "no memory");
  for (int k = 0; k < 3; k++)
    RANK_CHECK(HcclMemAlloc((void **)&send[k], all * sizeof(float)) == HCCL_SUCCESS &&
                   HcclMemAlloc((void **)&recv[k], all * sizeof(float)) == HCCL_SUCCESS,
               "HcclMemAlloc: %s", HcclGetLastErrorMessage());
  int failures = 0;
  for (int i = 0; i < REPEAT_CALLS; i++) {
    int k = (i / (rank + 1)) % 3, ag = i % 3 == 2;
    uint32_t salt = 700 + (uint32_t)i;
    cc_fill_input(send[k], HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, salt, rank, 0, REPEAT_COUNT);
    HcclResult r = ag ? HcclAllGather(send[k], recv[k], REPEAT_COUNT, HCCL_DATA_TYPE_FP32, comm,
                                      NULL)
                      : HcclAllReduce(send[k], recv[k], REPEAT_COUNT, HCCL_DATA_TYPE_FP32,
                                      HCCL_REDUCE_SUM, comm, NULL);
    RANK_CHECK(r == HCCL_SUCCESS, "rank %d call %d: %s", rank, i, HcclGetLastErrorMessage());
    if (ag)
      for (int m = 0; m < n; m++)
        cc_fill_input(want + (size_t)m * REPEAT_COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, salt,
                      m, 0, REPEAT_COUNT);
    else
      cc_reduce_expect(want, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, salt, n, 0, REPEAT_COUNT);
    int64_t at = cc_first_mismatch(recv[k], want, HCCL_DATA_TYPE_FP32, ag ? all : REPEAT_COUNT);
    if (at >= 0 || !ran_zcopy(comm)) {
      fprintf(stderr, "rank %d call %d (%s, buffer set %d): %s\n", rank, i,
              ag ? "allgather" : "allreduce", k,
              at >= 0 ? "wrong result" : "did not run zero-copy");
      failures++;
    }
  }
  for (int k = 0; k < 3; k++) {
    HcclMemFree(send[k]);
    HcclMemFree(recv[k]);
  }
  free(want);
  RANK_CHECK(failures == 0, "rank %d: %d problems", rank, failures);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_repeat(void **state) {
  (void)state;
  static const int sizes[] = {2, 4, 8};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
    assert_int_equal(harness_run_ranks(sizes[i], TIMEOUT_S, repeat_rank, NULL), 0);
}

/* ---- HCCL_ALGO=ring ---- */

static int forced_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm("ring", &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  int failures = 0;
  for (int coll = AR; coll <= BC; coll++) {
    struct zcall c = {.coll = (enum coll)coll,
                      .dt = HCCL_DATA_TYPE_FP32,
                      .op = HCCL_REDUCE_MIN,
                      .count = 300007,
                      .root = 1,
                      .shared = 1,
                      .salt = 21};
    failures += run_expect(comm, rank, n, &c, 0);
  }
  RANK_CHECK(failures == 0, "rank %d: %d problems", rank, failures);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  return 0;
}

static void test_forced_ring(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(2, TIMEOUT_S, forced_rank, NULL), 0);
}

/* ---- where zero-copy starts ---- */

/* The communicator's own threshold (plan.c): with a core for each rank (online CPUs >= ranks
 * on the server) from 4 KiB, else from 64 KiB; never at 2 KiB. Each collective, in place and
 * out of place, every element checked. */
static int threshold_rank(int rank, int n, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(init_comm(NULL, &comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int own = cpus >= n;
  RANK_CHECK(comm->own_cores == own, "rank %d: own_cores %d with %ld CPUs for %d ranks", rank,
             (int)comm->own_cores, cpus, n);
  int failures = 0;
  uint32_t salt = 41;
  for (int coll = AR; coll <= BC; coll++) {
    int whole = coll == AR || coll == BC;
    for (int kib = 2; kib <= 4; kib += 2) {
      /* The larger buffer has kib KiB: the whole (allreduce, broadcast) or n blocks. */
      uint64_t count = whole ? kib * 256u : kib * 256u / (uint64_t)n;
      for (int v = 0; v < 2; v++) {
        struct zcall c = {.coll = (enum coll)coll,
                          .dt = HCCL_DATA_TYPE_FP32,
                          .op = HCCL_REDUCE_SUM,
                          .count = count,
                          .inplace = coll != BC && v,
                          .shared = 1,
                          .salt = salt++};
        failures += run_expect(comm, rank, n, &c, own && kib == 4);
      }
    }
  }
  RANK_CHECK(failures == 0, "rank %d: %d problems", rank, failures);
  RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
  if (rank == 0)
    printf("zero-copy threshold at %d ranks, %ld CPUs: %s\n", n, cpus,
           own ? "4 KiB runs zero-copy, 2 KiB does not" : "neither 2 nor 4 KiB runs zero-copy");
  return 0;
}

static void test_threshold(void **state) {
  (void)state;
  assert_int_equal(harness_run_ranks(2, TIMEOUT_S, threshold_rank, NULL), 0);
  assert_int_equal(harness_run_ranks(8, TIMEOUT_S, threshold_rank, NULL), 0);
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
  /* One good call first, so the peers have mapped rank 2's region. */
  struct zcall c = {.coll = AR,
                    .dt = HCCL_DATA_TYPE_FP32,
                    .op = HCCL_REDUCE_SUM,
                    .count = count,
                    .inplace = 1,
                    .shared = 1,
                    .salt = 31};
  RANK_CHECK(run_expect(comm, rank, n, &c, 1) == 0, "first call wrong");
  if (rank == 2) _exit(0);
  RANK_CHECK(cc_allreduce_without(comm, b, count, rank, 2, 30) == 0, "rank 2 left");
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
      cmocka_unit_test(test_api),        cmocka_unit_test(test_sweep),
      cmocka_unit_test(test_ring_order), cmocka_unit_test(test_mixed),
      cmocka_unit_test(test_regions),    cmocka_unit_test(test_repeat),
      cmocka_unit_test(test_forced_ring),
      cmocka_unit_test(test_threshold),  cmocka_unit_test(test_dead_peer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
