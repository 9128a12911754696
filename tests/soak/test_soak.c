/*
 * test_soak.c - a bounded stress run: thousands of random calls over 8 ranks, every result
 * checked against the independent reference of coll_check.h.
 *
 * Every rank draws the same sequence from one seed: the communicator (three live at once: the
 * cost model's choice, HCCL_ALGO=ring and HCCL_ALGO=tree), the call (allreduce, broadcast,
 * allgather, reduce-scatter, reduce, barrier, gather, scatter, alltoall, alltoallv, and a
 * send/recv exchange between rank pairs), the data type (int8, int32, float16, float32; the
 * data-moving calls also int64 and float64), the reduction, the root, the count (0, 1, small,
 * odd, up to 2^18 elements), in place or not, and blocking or queued (up to four calls in
 * flight, waited in posting or reverse order). Receive buffers carry guard bytes. A wrong
 * element fails the run with the seed, the step and the call, so it can be replayed.
 *
 *   test_soak                         the short form ctest runs (8 ranks, 3000 calls, about 6 s)
 *   test_soak --calls 100000 --seed 7 --ranks 8     the long form (docs/reliability.md)
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
#include "harness.h"
#include "hccl.h"

enum kind {
  ALLREDUCE,
  BROADCAST,
  ALLGATHER,
  REDUCE_SCATTER,
  REDUCE,
  BARRIER,
  GATHER,
  SCATTER,
  ALLTOALL,
  ALLTOALLV,
  SENDRECV,
  NKINDS
};
static const char *const kind_names[NKINDS] = {
    "allreduce", "broadcast", "allgather", "reduce-scatter", "reduce",  "barrier",
    "gather",    "scatter",   "alltoall",  "alltoallv",      "sendrecv"};

#define NCOMMS 3
#define MAX_PENDING 4
#define V_STRIDE (1ull << 24) /* alltoallv: rank b's block is indexed from b * V_STRIDE */

static struct {
  int ranks;
  long calls;
  uint64_t seed;
  char ports[NCOMMS][16];
} g = {8, 3000, 20261122, {{0}}};

/* splitmix64: the same stream on every rank. */
static uint64_t next_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct call {
  long step;
  enum kind kind;
  int comm;
  HcclDataType dt;
  HcclReduceOp op;
  uint32_t root, salt;
  uint64_t count;
  int inplace, queued;
  void *send;
  cc_buf recv;
  uint64_t v[4 * 64]; /* alltoallv: sendCounts, sdispls, recvCounts, rdispls */
  HcclRequest req[2];
};

static uint64_t draw_count(uint64_t *s) {
  uint64_t r = next_rand(s) % 100;
  if (r < 5) return 0;
  if (r < 15) return 1;
  if (r < 50) return 2 + next_rand(s) % 99;
  if (r < 88) return 101 + next_rand(s) % 5000;
  return 5101 + next_rand(s) % (1u << 18);
}

static int reduces(enum kind k) {
  return k == ALLREDUCE || k == REDUCE_SCATTER || k == REDUCE;
}

static void draw(struct call *c, long step, int n) {
  uint64_t s = g.seed * 1000003ull + (uint64_t)step;
  memset(c, 0, sizeof(*c));
  c->step = step;
  c->kind = (enum kind)(next_rand(&s) % NKINDS);
  if (c->kind == SENDRECV && n % 2) c->kind = ALLREDUCE;
  c->comm = (int)(next_rand(&s) % NCOMMS);
  static const HcclDataType red[4] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT32,
                                      HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32};
  static const HcclDataType mov[6] = {HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_INT32,
                                      HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_FP32,
                                      HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_FP64};
  c->dt = reduces(c->kind) ? red[next_rand(&s) % 4] : mov[next_rand(&s) % 6];
  c->op = reduces(c->kind) ? (HcclReduceOp)(next_rand(&s) % 4) : HCCL_REDUCE_SUM;
  c->root = (uint32_t)(next_rand(&s) % (uint64_t)n);
  c->count = c->kind == BARRIER ? 0 : draw_count(&s);
  /* Calls that multiply the count by the group size stay smaller. */
  if (c->kind != ALLREDUCE && c->kind != BROADCAST && c->kind != REDUCE && c->kind != SENDRECV)
    c->count /= (uint64_t)n / 2 + 1;
  c->inplace = (int)(next_rand(&s) % 2);
  c->queued = (int)(next_rand(&s) % 5 < 2);
  c->salt = (uint32_t)next_rand(&s);
}

/* alltoallv: elements rank a sends rank b (some zero). */
static uint64_t v_count(const struct call *c, int a, int b) {
  uint64_t h = cc_hash(c->salt, a, (uint64_t)b);
  return h % 4 == 0 ? 0 : h % (c->count + 1);
}

static void fill(void *p, const struct call *c, int rank, uint64_t first, uint64_t count) {
  cc_fill_input(p, c->dt, c->op, c->salt, rank, first, count);
}

/* Posts (or runs) call c on this rank. */
static HcclResult post(struct call *c, HcclComm comm, int rank, int n) {
  size_t es = cc_dtype_size(c->dt);
  uint64_t cnt = c->count, nc = (uint64_t)n * cnt;
  HcclRequest *rq = c->queued ? &c->req[0] : NULL;
  switch (c->kind) {
  case ALLREDUCE:
    cc_buf_alloc(&c->recv, cnt * es);
    c->send = c->inplace ? c->recv.p : malloc(cnt * es + 1);
    fill(c->send, c, rank, 0, cnt);
    return HcclAllReduce(c->send, c->recv.p, cnt, c->dt, c->op, comm, rq);
  case BROADCAST:
    cc_buf_alloc(&c->recv, cnt * es);
    if ((uint32_t)rank == c->root) fill(c->recv.p, c, rank, 0, cnt);
    return HcclBroadcast(c->recv.p, cnt, c->dt, c->root, comm, rq);
  case ALLGATHER:
    cc_buf_alloc(&c->recv, nc * es);
    c->send = c->inplace ? (char *)c->recv.p + (size_t)rank * cnt * es : malloc(cnt * es + 1);
    fill(c->send, c, rank, 0, cnt);
    return HcclAllGather(c->send, c->recv.p, cnt, c->dt, comm, rq);
  case REDUCE_SCATTER:
    c->send = malloc(nc * es + 1);
    fill(c->send, c, rank, 0, nc);
    if (c->inplace) {
      c->recv.p = (unsigned char *)c->send + (size_t)rank * cnt * es;
      return HcclReduceScatter(c->send, c->recv.p, cnt, c->dt, c->op, comm, rq);
    }
    cc_buf_alloc(&c->recv, cnt * es);
    return HcclReduceScatter(c->send, c->recv.p, cnt, c->dt, c->op, comm, rq);
  case REDUCE:
    cc_buf_alloc(&c->recv, cnt * es);
    c->send = c->inplace ? c->recv.p : malloc(cnt * es + 1);
    fill(c->send, c, rank, 0, cnt);
    return HcclReduce(c->send, c->recv.p, cnt, c->dt, c->op, c->root, comm, rq);
  case BARRIER:
    return HcclBarrier(comm, rq);
  case GATHER:
    cc_buf_alloc(&c->recv, nc * es);
    c->send = malloc(cnt * es + 1);
    fill(c->send, c, rank, 0, cnt);
    return HcclGather(c->send, (uint32_t)rank == c->root ? c->recv.p : NULL, cnt, c->dt, c->root,
                      comm, rq);
  case SCATTER:
    cc_buf_alloc(&c->recv, cnt * es);
    c->send = malloc(nc * es + 1);
    if ((uint32_t)rank == c->root) fill(c->send, c, rank, 0, nc);
    return HcclScatter((uint32_t)rank == c->root ? c->send : NULL, c->recv.p, cnt, c->dt, c->root,
                       comm, rq);
  case ALLTOALL:
    cc_buf_alloc(&c->recv, nc * es);
    c->send = malloc(nc * es + 1);
    fill(c->send, c, rank, 0, nc);
    return HcclAlltoAll(c->send, cnt, c->dt, c->recv.p, cnt, c->dt, comm, rq);
  case ALLTOALLV: {
    uint64_t *sc = c->v, *sd = c->v + n, *rc = c->v + 2 * n, *rd = c->v + 3 * n, st = 0, rt = 0;
    for (int b = 0; b < n; b++) {
      sc[b] = v_count(c, rank, b), sd[b] = st, st += sc[b];
      rc[b] = v_count(c, b, rank), rd[b] = rt, rt += rc[b];
    }
    c->send = malloc(st * es + 1);
    for (int b = 0; b < n; b++)
      fill((char *)c->send + sd[b] * es, c, rank, (uint64_t)b * V_STRIDE, sc[b]);
    cc_buf_alloc(&c->recv, rt * es);
    return HcclAlltoAllV(c->send, sc, sd, c->dt, c->recv.p, rc, rd, c->dt, comm, rq);
  }
  case SENDRECV: {
    uint32_t peer = (uint32_t)(rank ^ 1);
    cc_buf_alloc(&c->recv, cnt * es);
    c->send = malloc(cnt * es + 1);
    fill(c->send, c, rank, 0, cnt);
    if (c->queued) {
      HcclResult r = HcclSend(c->send, cnt, c->dt, peer, comm, &c->req[0]);
      if (r == HCCL_SUCCESS) r = HcclRecv(c->recv.p, cnt, c->dt, peer, comm, &c->req[1]);
      return r;
    }
    if (rank % 2 == 0) {
      HcclResult r = HcclSend(c->send, cnt, c->dt, peer, comm, NULL);
      return r == HCCL_SUCCESS ? HcclRecv(c->recv.p, cnt, c->dt, peer, comm, NULL) : r;
    }
    HcclResult r = HcclRecv(c->recv.p, cnt, c->dt, peer, comm, NULL);
    return r == HCCL_SUCCESS ? HcclSend(c->send, cnt, c->dt, peer, comm, NULL) : r;
  }
  default:
    return HCCL_E_INTERNAL;
  }
}

static int report(const struct call *c, int rank, const char *what, uint64_t at, const void *got,
                  const void *want) {
  char a[96] = "", b[96] = "";
  if (got) cc_elem_str(c->dt, got, 0, a, sizeof(a));
  if (want) cc_elem_str(c->dt, want, 0, b, sizeof(b));
  fprintf(stderr,
          "soak: rank %d, seed %llu step %ld: %s on comm %d, %s, %s, count %llu, root %u, %s, "
          "%s: %s",
          rank, (unsigned long long)g.seed, c->step, kind_names[c->kind], c->comm,
          cc_dtype_name(c->dt), cc_op_name(c->op), (unsigned long long)c->count, c->root,
          c->inplace ? "in place" : "out of place", c->queued ? "queued" : "blocking", what);
  if (got) fprintf(stderr, " at element %llu: got %s, want %s", (unsigned long long)at, a, b);
  fprintf(stderr, "\n");
  return 1;
}

/* Compares count elements at got with want (already computed); returns 1 on a difference. */
static int compare(const struct call *c, int rank, const void *got, const void *want,
                   uint64_t count, uint64_t base) {
  int64_t i = cc_first_mismatch(got, want, c->dt, count);
  if (i < 0) return 0;
  size_t es = cc_dtype_size(c->dt);
  return report(c, rank, "wrong value", base + (uint64_t)i, (const char *)got + (size_t)i * es,
                (const char *)want + (size_t)i * es);
}

/* Checks call c's result on this rank; frees its buffers. */
static int verify(struct call *c, int rank, int n) {
  size_t es = cc_dtype_size(c->dt);
  uint64_t cnt = c->count;
  int bad = 0;
  void *want = malloc((size_t)n * (cnt + 1) * es + 64);
  char *got = (char *)c->recv.p;
  switch (c->kind) {
  case ALLREDUCE:
    cc_reduce_expect(want, c->dt, c->op, c->salt, n, 0, cnt);
    bad = compare(c, rank, got, want, cnt, 0);
    break;
  case BROADCAST:
    fill(want, c, (int)c->root, 0, cnt);
    bad = compare(c, rank, got, want, cnt, 0);
    break;
  case ALLGATHER:
  case GATHER:
    if (c->kind == GATHER && (uint32_t)rank != c->root) {
      if (cnt && cc_first_non_sentinel(got, (size_t)n * cnt * es) >= 0)
        bad = report(c, rank, "non-root receive buffer written", 0, NULL, NULL);
      break;
    }
    for (int r = 0; r < n && !bad; r++) {
      fill(want, c, r, 0, cnt);
      bad = compare(c, rank, got + (size_t)r * cnt * es, want, cnt, (uint64_t)r * cnt);
    }
    break;
  case REDUCE_SCATTER:
    cc_reduce_expect(want, c->dt, c->op, c->salt, n, (uint64_t)rank * cnt, cnt);
    bad = compare(c, rank, got, want, cnt, 0);
    break;
  case REDUCE:
    if ((uint32_t)rank == c->root) {
      cc_reduce_expect(want, c->dt, c->op, c->salt, n, 0, cnt);
      bad = compare(c, rank, got, want, cnt, 0);
    }
    break;
  case SCATTER:
    fill(want, c, (int)c->root, (uint64_t)rank * cnt, cnt);
    bad = compare(c, rank, got, want, cnt, 0);
    break;
  case ALLTOALL:
    for (int r = 0; r < n && !bad; r++) {
      fill(want, c, r, (uint64_t)rank * cnt, cnt);
      bad = compare(c, rank, got + (size_t)r * cnt * es, want, cnt, (uint64_t)r * cnt);
    }
    break;
  case ALLTOALLV:
    for (int r = 0; r < n && !bad; r++) {
      uint64_t k = c->v[2 * n + r];
      fill(want, c, r, (uint64_t)rank * V_STRIDE, k);
      bad = compare(c, rank, got + c->v[3 * n + r] * es, want, k, c->v[3 * n + r]);
    }
    break;
  case SENDRECV:
    fill(want, c, rank ^ 1, 0, cnt);
    bad = compare(c, rank, got, want, cnt, 0);
    break;
  default:
    break;
  }
  int in_send = c->kind == REDUCE_SCATTER && c->inplace;
  if (!bad && c->recv.mem && !in_send && cc_buf_guard_damage(&c->recv))
    bad = report(c, rank, "guard bytes damaged", 0, NULL, NULL);
  free(want);
  if (!in_send && c->recv.mem) cc_buf_free(&c->recv);
  int send_is_recv =
      (c->kind == ALLREDUCE || c->kind == REDUCE || c->kind == ALLGATHER) && c->inplace;
  if (!send_is_recv) free(c->send);
  return bad;
}

static int wait_call(struct call *c) {
  HcclResult r = HCCL_SUCCESS;
  for (int i = 0; i < 2; i++) {
    if (!c->req[i]) continue;
    HcclResult ri = HcclRequestWait(c->req[i]);
    if (r == HCCL_SUCCESS) r = ri;
    c->req[i] = NULL;
  }
  return r;
}

static int soak_body(int rank, int n, void *arg) {
  (void)arg;
  setenv("HCCL_BUFFSIZE", "1", 1); /* small slots: large calls wrap the FIFOs many times */
  setenv("HCCL_EXEC_TIMEOUT", "60", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "60", 1);
  static const char *const algos[NCOMMS] = {NULL, "ring", "tree"};
  HcclComm comms[NCOMMS];
  for (int i = 0; i < NCOMMS; i++) {
    if (algos[i])
      setenv("HCCL_ALGO", algos[i], 1);
    else
      unsetenv("HCCL_ALGO");
    if (i) setenv("MASTER_PORT", g.ports[i], 1);
    RANK_CHECK(HcclCommInitFromEnv(&comms[i]) == HCCL_SUCCESS, "init %d: %s", i,
               HcclGetLastErrorMessage());
  }
  struct call *pend = calloc(MAX_PENDING, sizeof(*pend));
  int npend = 0, bad = 0;
  long kinds[NKINDS] = {0};
  double t0 = cc_now();
  for (long step = 0; step < g.calls && !bad; step++) {
    struct call *c = &pend[npend];
    draw(c, step, n);
    kinds[c->kind]++;
    HcclResult r = post(c, comms[c->comm], rank, n);
    if (r != HCCL_SUCCESS) {
      report(c, rank, HcclGetLastErrorMessage(), 0, NULL, NULL);
      return 1;
    }
    npend++;
    /* A blocking call, a full window, or now and then: finish what is in flight. */
    if (!c->queued || npend == MAX_PENDING || step % 7 == 0 || step == g.calls - 1) {
      int reverse = step % 3 == 0;
      for (int k = 0; k < npend; k++) {
        struct call *d = &pend[reverse ? npend - 1 - k : k];
        if (wait_call(d) != HCCL_SUCCESS) {
          report(d, rank, HcclGetLastErrorMessage(), 0, NULL, NULL);
          return 1;
        }
      }
      for (int k = 0; k < npend && !bad; k++)
        bad = verify(&pend[k], rank, n);
      npend = 0;
    }
  }
  if (rank == 0) {
    printf("  soak: %d ranks, %ld calls (seed %llu) in %.1f s:", n, g.calls,
           (unsigned long long)g.seed, cc_now() - t0);
    for (int k = 0; k < NKINDS; k++)
      printf(" %s %ld", kind_names[k], kinds[k]);
    printf("\n");
  }
  for (int i = 0; i < NCOMMS; i++)
    RANK_CHECK(HcclCommDestroy(comms[i]) == HCCL_SUCCESS, "destroy %d", i);
  free(pend);
  return bad;
}

static void test_soak(void **st) {
  (void)st;
  for (int i = 1; i < NCOMMS; i++)
    snprintf(g.ports[i], sizeof(g.ports[i]), "%u", harness_free_port());
  int timeout = (int)(120 + g.calls / 10);
  assert_int_equal(harness_run_ranks(g.ranks, timeout, soak_body, NULL), 0);
}

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--calls"))
      g.calls = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed"))
      g.seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--ranks"))
      g.ranks = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: test_soak [--calls N] [--seed S] [--ranks 1|2|4|8]\n");
      return 2;
    }
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_soak)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
