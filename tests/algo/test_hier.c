/*
 * test_hier.c - the two-level allreduce (algo/hier.c) and the group views it runs over
 * (algo/group.h), on real processes: 8 ranks of one server are cut into S pretend servers of
 * L ranks each (local groups of consecutive ranks, cross groups of equal local index), and
 * hccl__hier_allreduce runs over those groups on the shared-memory links. Shapes 2x2, 2x4,
 * 4x2, 8x1, 3x2 (three servers: halving-doubling folds a group that is not a power of two) and
 * 2x3 (three ranks a server, as flat servers allow);
 * every dtype x op, counts 1 (shards of zero elements), 7, 33333 and several slots plus an odd
 * tail, in place and not, ring and halving-doubling between the servers; each result compared
 * bit for bit with a reference that never calls the library. Each case four ways: malloc
 * buffers (the ring inside each server), HcclMemAlloc buffers everywhere (zero-copy inside
 * each server, which must then run), HcclMemAlloc everywhere but on rank 0 (server 0 runs
 * the ring, the others zero-copy, over the same exchange between servers), and malloc buffers
 * with the staged path asked for (algo/staged.c, which must then run: 4 KiB slots, so the
 * larger counts take several rounds, and every call starts at the part the last one left);
 * with one rank a server (8x1) only the first two, the others having nothing inside to run.
 * Ranks outside the S x L shape sit the case out. The multi-server path through real TCP
 * links is tests/transport/test_tcp.c.
 *
 * test_lead_layouts: the form through leaders for servers of different counts (a shrink's
 * survivors, or any flat job), hccl__lead_allreduce, on pretend layouts 2 + 1, 4 + 2 + 1 and
 * 3 + 2 (lead_body's comment); through a real uneven communicator it is
 * tests/torch/test_shrink.py's test_two_servers. The same test runs hccl__lead_broadcast and hccl__lead_reduce on those
 * layouts from every root (lead_rooted_layout's comment).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo.h"
#include "coll_check.h"
#include "comm.h"
#include "comm_wait.h"
#include "harness.h"
#include "reduce.h"
#include "wait.h"

#define NRANKS 8
#define TIMEOUT_S 300

static const HcclDataType DT[] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_FP16,
                                  HCCL_DATA_TYPE_FP32};
static const HcclReduceOp OP[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                  HCCL_REDUCE_MIN};

struct shape {
  uint32_t servers, per_server;
};

/* Member arrays for one rank's local and cross groups in the S x L shape. */
struct groups {
  struct hccl_group local, cross;
  uint32_t lrank[NRANKS], lring[NRANKS], lpos[NRANKS];
  uint32_t xrank[NRANKS], xring[NRANKS], xpos[NRANKS];
};

/* A guarded buffer as cc_buf_alloc's, from HcclMemAlloc when shared. */
static void buf_alloc(cc_buf *b, size_t bytes, bool shared) {
  if (!shared) {
    cc_buf_alloc(b, bytes);
    return;
  }
  void *m = NULL;
  if (HcclMemAlloc(&m, bytes + 2 * CC_GUARD) != HCCL_SUCCESS) abort();
  b->mem = m;
  b->p = b->mem + CC_GUARD;
  b->bytes = bytes;
  memset(b->mem, CC_GUARD_BYTE, CC_GUARD);
  memset(b->p, CC_SENTINEL_BYTE, bytes);
  memset(b->p + bytes, CC_GUARD_BYTE, CC_GUARD);
}

static void buf_free(cc_buf *b, bool shared) {
  if (shared)
    HcclMemFree(b->mem);
  else
    cc_buf_free(b);
}

/* The primitive of an allreduce of dt with op over `members` ranks, waiting with w; false when
 * the library has no kernel for them. */
static bool make_prim(struct hccl_prim *p, const struct hccl_wait *w, struct hccl_red *red,
                      HcclDataType dt, HcclReduceOp op, uint32_t members) {
  uint64_t no_scalar = 0;
  if (!hccl__red_make(red, dt, op, &no_scalar, members)) return false;
  *p = (struct hccl_prim){
      .w = w, .esz = cc_dtype_size(dt), .red = red, .reduce = red->step, .finish = true};
  return true;
}

/* After a call: sb's payload still `in` when rb (out of place) is given, no guard damaged;
 * frees sb, rb, in and want. 0 when all is well. */
static int bufs_done(cc_buf *sb, cc_buf *rb, void *in, void *want, bool shared) {
  int bad = (rb && memcmp(sb->p, in, sb->bytes) != 0) || cc_buf_guard_damage(sb) != 0 ||
            (rb && cc_buf_guard_damage(rb) != 0);
  buf_free(sb, shared);
  if (rb) buf_free(rb, shared);
  free(want);
  free(in);
  return bad;
}

static void make_groups(struct hccl_comm *c, struct shape sh, struct groups *g) {
  uint32_t s = c->rank / sh.per_server, k = c->rank % sh.per_server;
  for (uint32_t i = 0; i < sh.per_server; i++) {
    g->lrank[i] = s * sh.per_server + i;
    /* A ring order that is not the member order, as a topology's may be: 0, L-1, ..., 1. */
    g->lring[i] = i == 0 ? 0 : sh.per_server - i;
  }
  for (uint32_t i = 0; i < sh.per_server; i++)
    g->lpos[g->lring[i]] = i;
  for (uint32_t i = 0; i < sh.servers; i++) {
    g->xrank[i] = i * sh.per_server + k;
    g->xring[i] = g->xpos[i] = i;
  }
  struct hccl_group base = c->world;
  g->local = base;
  g->local.n = sh.per_server;
  g->local.me = k;
  g->local.rank = g->lrank;
  g->local.ring = g->lring;
  g->local.pos = g->lpos;
  g->cross = base;
  g->cross.n = sh.servers;
  g->cross.me = s;
  g->cross.rank = g->xrank;
  g->cross.ring = g->xring;
  g->cross.pos = g->xpos;
  g->local.zmemo = g->cross.zmemo = NULL; /* the world group's own (group.h) */
}

static int hier_body(int rank, int nranks, void *arg) {
  (void)arg;
  (void)nranks;
  setenv("HCCL_BUFFSIZE", "1", 1); /* 4 KiB slots: large counts take many chunks */
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  HcclComm comm;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  struct hccl_comm *c = comm;
  static const struct shape shapes[] = {{2, 2}, {2, 4}, {4, 2}, {8, 1}, {3, 2}, {2, 3}};
  uint32_t salt = 0;
  int checks = 0;
  for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
    struct shape sh = shapes[si];
    uint32_t members = sh.servers * sh.per_server;
    struct groups g;
    if ((uint32_t)rank < members) make_groups(c, sh, &g);
    for (size_t di = 0; di < 4; di++)
      for (size_t oi = 0; oi < 4; oi++) {
        HcclDataType dt = DT[di];
        size_t es = cc_dtype_size(dt);
        uint64_t counts[] = {1, 7, 33333, 3 * 4096 / es * sh.per_server + 5};
        for (size_t ci = 0; ci < 4; ci++)
          for (int kind = 0; kind < 2; kind++)
            for (int inplace = 0; inplace < 2; inplace++)
              for (int zc = 0; zc < 4; zc++) {
              salt++;
              if ((uint32_t)rank >= members) continue;
              /* One rank a server has no steps inside to run zero-copy or staged: zc 2 and 3
               * would repeat zc 1 (which checks that neither runs). */
              if (sh.per_server == 1 && zc >= 2) continue;
              uint64_t count = counts[ci];
              size_t bytes = count * es;
              void *want = malloc(bytes), *in = malloc(bytes);
              cc_reduce_expect(want, dt, OP[oi], salt, (int)members, 0, count);
              cc_fill_input(in, dt, OP[oi], salt, rank, 0, count);
              /* zc 1: every buffer shared; zc 2: all but rank 0's (its server runs the ring);
               * zc 3: none, staged offered (every server runs staged) */
              bool shared = zc == 1 || (zc == 2 && rank != 0);
              bool want_zc = zc == 1 || (zc == 2 && rank / sh.per_server != 0);
              bool want_st = zc == 3 && sh.per_server > 1;
              cc_buf sb, rb = {0};
              buf_alloc(&sb, bytes, shared);
              memcpy(sb.p, in, bytes);
              if (!inplace) buf_alloc(&rb, bytes, shared);
              void *out = inplace ? sb.p : rb.p;
              struct hccl_wait w = hccl__comm_wait(c, "two-level allreduce", NULL);
              struct hccl_red red;
              struct hccl_prim p;
              RANK_CHECK(make_prim(&p, &w, &red, dt, OP[oi], members), "no kernel");
              bool ran_zc = zc == 1 || zc == 2, ran_st = zc == 3;
              HcclResult r = hccl__hier_allreduce(&g.local, &g.cross, (enum hccl_algo_kind)kind, &p,
                                                  sb.p, out, count, &ran_zc, &ran_st);
              RANK_CHECK(r == HCCL_SUCCESS, "%ux%u %s %s count %llu: %s", sh.servers, sh.per_server,
                         cc_dtype_name(dt), cc_op_name(OP[oi]), (unsigned long long)count,
                         HcclGetLastErrorMessage());
              /* One rank per server has no local steps to run zero-copy. */
              RANK_CHECK(ran_zc == (want_zc && sh.per_server > 1),
                         "%ux%u zc %d: zero-copy %s on rank %d", sh.servers, sh.per_server, zc,
                         ran_zc ? "ran" : "did not run", rank);
              RANK_CHECK(ran_st == want_st, "%ux%u zc %d: staged %s on rank %d", sh.servers,
                         sh.per_server, zc, ran_st ? "ran" : "did not run", rank);
              int64_t bad = cc_first_mismatch(out, want, dt, count);
              RANK_CHECK(bad < 0,
                         "%ux%u servers, %s %s, count %llu, %s, %s between servers, %s: "
                         "element %lld wrong",
                         sh.servers, sh.per_server, cc_dtype_name(dt), cc_op_name(OP[oi]),
                         (unsigned long long)count, inplace ? "in place" : "out of place",
                         kind ? "halving-doubling" : "ring",
                         ran_zc ? "zero-copy" : ran_st ? "staged" : "ring inside",
                         (long long)bad);
              RANK_CHECK(bufs_done(&sb, inplace ? NULL : &rb, in, want, shared) == 0,
                         "%ux%u: send buffer changed or a guard damaged", sh.servers,
                         sh.per_server);
              checks++;
            }
      }
    /* The next shape starts when every rank is done with this one. */
    RANK_CHECK(HcclBarrier(comm, NULL) == HCCL_SUCCESS, "barrier: %s", HcclGetLastErrorMessage());
  }
  printf("rank %d: %d two-level allreduces checked\n", rank, checks);
  RANK_CHECK(checks > 0, "no case ran");
  HcclCommDestroy(comm);
  return 0;
}

/* Servers of different counts, as a shrink leaves them: `count` ranks on each, consecutive. */
struct layout {
  uint32_t servers, count[3];
};

/* One rank's local group (its server's ranks, ring order 0, L-1, ..., 1) and cross group (the
 * servers' first ranks for a leader, itself alone otherwise) in layout lo, as group.c makes
 * them for an uneven communicator. */
static void make_uneven(struct hccl_comm *c, const struct layout *lo, struct groups *g) {
  uint32_t first = 0, s = 0, starts[3];
  for (uint32_t i = 0; i < lo->servers; i++) {
    starts[i] = first;
    if (c->rank >= first && c->rank < first + lo->count[i]) s = i;
    first += lo->count[i];
  }
  uint32_t L = lo->count[s], k = c->rank - starts[s];
  for (uint32_t i = 0; i < L; i++) {
    g->lrank[i] = starts[s] + i;
    g->lring[i] = i == 0 ? 0 : L - i;
  }
  for (uint32_t i = 0; i < L; i++)
    g->lpos[g->lring[i]] = i;
  bool leader = k == 0;
  for (uint32_t i = 0; i < (leader ? lo->servers : 1); i++) {
    g->xrank[i] = leader ? starts[i] : c->rank;
    g->xring[i] = g->xpos[i] = i;
  }
  g->local = c->world;
  g->local.n = L;
  g->local.me = k;
  g->local.rank = g->lrank;
  g->local.ring = g->lring;
  g->local.pos = g->lpos;
  g->cross = c->world;
  g->cross.n = leader ? lo->servers : 1;
  g->cross.me = leader ? s : 0;
  g->cross.rank = g->xrank;
  g->cross.ring = g->xring;
  g->cross.pos = g->xpos;
  g->local.zmemo = g->cross.zmemo = NULL;
}

static const HcclDataType ALL_DT[] = {
    HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_UINT8,  HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_UINT16,
    HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,  HCCL_DATA_TYPE_FP64};

/* One broadcast (op < 0) or reduce through leaders from root on layout lo (g: this rank's
 * groups): the root's result bit for bit against the reference, every other rank's output
 * untouched (a reduce writes the root's only, as the flat one does), no send buffer changed,
 * no guard damaged. 0 when all is well. */
static int lead_rooted_one(struct hccl_comm *c, const struct layout *lo, struct groups *g,
                           uint32_t members, HcclDataType dt, int op, uint64_t count,
                           bool inplace, uint32_t root, int pair, uint32_t salt) {
  size_t es = cc_dtype_size(dt), bytes = count * es;
  uint32_t rank = c->rank, first = 0;
  struct hccl_lead_root where = {0};
  for (uint32_t s = 0; s < lo->servers; first += lo->count[s], s++) {
    bool has_root = root >= first && root < first + lo->count[s];
    if (has_root) where.server = s, where.local = root - first;
    if (rank >= first && rank < first + lo->count[s]) where.home = has_root;
  }
  HcclReduceOp rop = op < 0 ? HCCL_REDUCE_SUM : (HcclReduceOp)op;
  void *want = malloc(bytes + 1), *in = malloc(bytes + 1);
  if (op < 0)
    cc_fill_input(want, dt, rop, salt, (int)root, 0, count);
  else
    cc_reduce_expect(want, dt, rop, salt, (int)members, 0, count);
  cc_fill_input(in, dt, rop, salt, (int)rank, 0, count);
  cc_buf sb, rb = {0};
  cc_buf_alloc(&sb, bytes);
  if (op >= 0 || rank == root) memcpy(sb.p, in, bytes);
  if (op >= 0 && !inplace) cc_buf_alloc(&rb, bytes);
  void *out = op < 0 || inplace ? sb.p : rb.p;
  struct hccl_wait w = hccl__comm_wait(c, "rooted collective through leaders", NULL);
  struct hccl_red red;
  struct hccl_prim p;
  RANK_CHECK(make_prim(&p, &w, &red, dt, rop, members), "no kernel");
  enum hccl_algo_kind inside = pair & 1 ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
  enum hccl_algo_kind between = pair & 2 ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
  HcclResult r = op < 0 ? hccl__lead_broadcast(&g->local, &g->cross, inside, between, &p, out,
                                               count, &where)
                        : hccl__lead_reduce(&g->local, &g->cross, inside, between, &p, sb.p, out,
                                            count, &where);
  const char *what = op < 0 ? "broadcast" : cc_op_name(rop);
  RANK_CHECK(r == HCCL_SUCCESS, "%u servers, %s %s count %llu root %u: %s", lo->servers,
             cc_dtype_name(dt), what, (unsigned long long)count, root,
             HcclGetLastErrorMessage());
  bool written = op < 0 || rank == root;
  int64_t bad = written ? cc_first_mismatch(out, want, dt, count)
                        : cc_first_non_sentinel(rb.p ? rb.p : NULL, rb.p ? bytes : 0);
  if (!written && inplace && memcmp(sb.p, in, bytes) != 0) bad = 0;
  RANK_CHECK(bad < 0,
             "%u servers, %s %s, count %llu, %s, root %u, %s inside, %s between: element %lld "
             "%s",
             lo->servers, cc_dtype_name(dt), what, (unsigned long long)count,
             inplace ? "in place" : "out of place", root, inside ? "tree" : "chain",
             between ? "tree" : "chain", (long long)bad, written ? "wrong" : "written");
  bool send_kept = op < 0 || memcmp(sb.p, in, bytes) == 0 || (inplace && rank == root);
  RANK_CHECK(send_kept && cc_buf_guard_damage(&sb) == 0 && (!rb.p || cc_buf_guard_damage(&rb) == 0),
             "%s root %u: send buffer changed or a guard damaged", what, root);
  cc_buf_free(&sb);
  if (rb.p) cc_buf_free(&rb);
  free(want);
  free(in);
  return 0;
}

/* Broadcast and reduce through leaders (hccl__lead_broadcast, hccl__lead_reduce) on layout lo
 * from every root: every dtype; for the reduce sum, prod, max, min; the counts 0, 1, 7 and
 * three slots plus an odd tail, in place and not, and the four pairs of chain or tree inside
 * and between servers, in turn over roots, dtypes and ops (each root meets every count and
 * pair); bit for bit against the reference. Ranks outside lo only keep *salt in step. */
static int lead_rooted_layout(struct hccl_comm *c, const struct layout *lo, struct groups *g,
                              uint32_t members, uint32_t *salt, int *checks) {
  for (uint32_t root = 0; root < members; root++)
    for (size_t di = 0; di < sizeof(ALL_DT) / sizeof(ALL_DT[0]); di++)
      for (int op = -1; op < 4; op++) {
        size_t es = cc_dtype_size(ALL_DT[di]);
        uint64_t counts[] = {0, 1, 7, 3 * 4096 / es + 5};
        size_t turn = root + di + (size_t)(op + 1);
        ++*salt;
        if (c->rank >= members) continue;
        RANK_CHECK(lead_rooted_one(c, lo, g, members, ALL_DT[di], op < 0 ? -1 : (int)OP[op],
                                   counts[turn % 4], (turn / 4) % 2 == 1, root,
                                   (int)((turn + root / 2) % 4), *salt) == 0,
                   "case failed");
        ++*checks;
      }
  return 0;
}

/* The form through leaders (hccl__lead_allreduce) on layouts 2 + 1, 4 + 2 + 1 (rank 7 sits
 * the second out) and 3 + 2 (no power of two on the first server): every dtype x sum, prod, max, min, counts 0, 1, 7 and three slots plus an
 * odd tail, in place and not; the chain or the tree inside and the ring or halving-doubling
 * between servers, all four pairs in turn over the dtypes. Bit for bit against the
 * reference. Then each layout's broadcasts and reduces (lead_rooted_layout). */
static int lead_body(int rank, int nranks, void *arg) {
  (void)arg;
  (void)nranks;
  setenv("HCCL_BUFFSIZE", "1", 1);
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  HcclComm comm;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  struct hccl_comm *c = comm;
  static const struct layout layouts[] = {{2, {2, 1}}, {3, {4, 2, 1}}, {2, {3, 2}}};
  double t0 = cc_now();
  uint32_t salt = 1000000;
  int checks = 0;
  for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++) {
    const struct layout *lo = &layouts[li];
    uint32_t members = 0;
    for (uint32_t i = 0; i < lo->servers; i++)
      members += lo->count[i];
    struct groups g;
    if ((uint32_t)rank < members) make_uneven(c, lo, &g);
    for (size_t di = 0; di < sizeof(ALL_DT) / sizeof(ALL_DT[0]); di++)
      for (size_t oi = 0; oi < 4; oi++) {
        HcclDataType dt = ALL_DT[di];
        size_t es = cc_dtype_size(dt);
        uint64_t counts[] = {0, 1, 7, 3 * 4096 / es + 5};
        for (size_t ci = 0; ci < 4; ci++)
          for (int inplace = 0; inplace < 2; inplace++) {
            salt++;
            if ((uint32_t)rank >= members) continue;
            int pair = (int)((di + oi + ci) % 4);
            enum hccl_algo_kind inside = pair & 1 ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
            enum hccl_algo_kind between = pair & 2 ? HCCL_ALGO_KIND_HD : HCCL_ALGO_KIND_RING;
            uint64_t count = counts[ci];
            size_t bytes = count * es;
            void *want = malloc(bytes + 1), *in = malloc(bytes + 1);
            cc_reduce_expect(want, dt, OP[oi], salt, (int)members, 0, count);
            cc_fill_input(in, dt, OP[oi], salt, rank, 0, count);
            cc_buf sb, rb = {0};
            cc_buf_alloc(&sb, bytes);
            memcpy(sb.p, in, bytes);
            if (!inplace) cc_buf_alloc(&rb, bytes);
            void *out = inplace ? sb.p : rb.p;
            struct hccl_wait w = hccl__comm_wait(c, "allreduce through leaders", NULL);
            struct hccl_red red;
            struct hccl_prim p;
            RANK_CHECK(make_prim(&p, &w, &red, dt, OP[oi], members), "no kernel");
            HcclResult r =
                hccl__lead_allreduce(&g.local, &g.cross, inside, between, &p, sb.p, out, count);
            RANK_CHECK(r == HCCL_SUCCESS, "layout %zu %s %s count %llu: %s", li, cc_dtype_name(dt),
                       cc_op_name(OP[oi]), (unsigned long long)count, HcclGetLastErrorMessage());
            int64_t bad = cc_first_mismatch(out, want, dt, count);
            RANK_CHECK(bad < 0,
                       "layout %zu (%u servers), %s %s, count %llu, %s, %s inside, %s between: "
                       "element %lld wrong",
                       li, lo->servers, cc_dtype_name(dt), cc_op_name(OP[oi]),
                       (unsigned long long)count, inplace ? "in place" : "out of place",
                       inside ? "tree" : "chain", between ? "halving-doubling" : "ring",
                       (long long)bad);
            RANK_CHECK(bufs_done(&sb, inplace ? NULL : &rb, in, want, false) == 0,
                       "layout %zu: send buffer changed or a guard damaged", li);
            checks++;
          }
      }
    RANK_CHECK(lead_rooted_layout(c, lo, &g, members, &salt, &checks) == 0, "rooted cases");
    RANK_CHECK(HcclBarrier(comm, NULL) == HCCL_SUCCESS, "barrier: %s", HcclGetLastErrorMessage());
  }
  printf("rank %d: %d allreduces, broadcasts and reduces through leaders checked in %.1f s\n",
         rank, checks,
         cc_now() - t0);
  RANK_CHECK(checks > 0 || rank == NRANKS - 1, "no case ran"); /* rank 7 is on no layout */
  HcclCommDestroy(comm);
  return 0;
}

static void test_lead_layouts(void **st) {
  (void)st;
  assert_int_equal(harness_run_ranks(NRANKS, 60, lead_body, NULL), 0);
}

static void test_hier_shapes(void **st) {
  (void)st;
  assert_int_equal(harness_run_ranks(NRANKS, TIMEOUT_S, hier_body, NULL), 0);
}

/* The groups the communicator builds for itself on one server: local = every rank in the
 * world ring's order, cross = this rank alone; the plan stays flat. */
static int groups_body(int rank, int nranks, void *arg) {
  (void)arg;
  HcclComm comm;
  RANK_CHECK(HcclCommInitFromEnv(&comm) == HCCL_SUCCESS, "init: %s", HcclGetLastErrorMessage());
  struct hccl_comm *c = comm;
  RANK_CHECK(c->local.n == (uint32_t)nranks && c->cross.n == 1, "local %u cross %u", c->local.n,
             c->cross.n);
  RANK_CHECK(c->local.rank[c->local.me] == (uint32_t)rank, "local me");
  RANK_CHECK(c->cross.rank[0] == (uint32_t)rank, "cross member");
  for (uint32_t i = 0; i < c->local.n; i++)
    RANK_CHECK(c->local.rank[c->local.ring[i]] == c->world.ring[i], "local ring %u", i);
  RANK_CHECK(c->local.alpha_ns > 0 || nranks == 1, "local cost unset");
  const char *name = HcclAllReduceAlgoName(comm, 64u << 20);
  RANK_CHECK(strncmp(name, "hier", 4) != 0, "one server chose %s", name);
  HcclCommDestroy(comm);
  return 0;
}

static void test_groups_one_server(void **st) {
  (void)st;
  assert_int_equal(harness_run_ranks(4, 60, groups_body, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_groups_one_server),
      cmocka_unit_test(test_hier_shapes),
      cmocka_unit_test(test_lead_layouts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
