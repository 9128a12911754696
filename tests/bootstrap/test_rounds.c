/*
 * test_rounds.c - hccl/src/bootstrap/rounds.c: the bootstrap's allgather over its tree of
 * sockets, run by n threads (one per rank) over one in-memory store wrapped in a counter of
 * requests and of the bytes its GETs return. Every rank must get every rank's record in two
 * rounds for n = 1 to 37 and 64; the store must serve at most 4n requests in all, rounds and
 * finish (every rank reading every record served n^2 + n a round: 4160 at 64, against 256
 * allowed here), and its bytes must grow linearly: at most 256 a rank, and 32 ranks at most
 * 2.2x 16 ranks' (every rank reading the whole table, as before, made it 4x); a rank that
 * never joins must be named, on the ranks waiting in its subtree and on the others alike,
 * within the connect timeout. After a bootstrap that failed
 * over the caller's store, rank 0 returns only once every rank has read what it needs, so rank
 * 0's process may end (and take torch's TCPStore with it) without another rank losing the store.
 * Over a kept tree (HcclCommSplit's parent round), a rank that ends is named as the rank that
 * failed by every other rank, not only by its tree neighbours, within seconds; a kept tree's
 * sockets have TCP keepalive on with rounds.c's schedule.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "rounds.h"
#include "store.h"
#include "wait.h"

/* A store that counts the requests it forwards to an in-memory one. */
struct counting {
  struct hccl_store base;
  struct hccl_store *inner;
  _Atomic long requests, bytes;
};

static HcclResult c_set(struct hccl_store *s, const char *k, const void *v, size_t n) {
  struct counting *c = (struct counting *)s;
  c->requests++;
  return hccl__store_set(c->inner, k, v, n);
}
static HcclResult c_get(struct hccl_store *s, const char *k, void **v, size_t *n, int64_t ms) {
  struct counting *c = (struct counting *)s;
  c->requests++;
  HcclResult r = hccl__store_get(c->inner, k, v, n, ms);
  if (r == HCCL_SUCCESS) c->bytes += (long)*n;
  return r;
}
static HcclResult c_add(struct hccl_store *s, const char *k, int64_t d, int64_t *r) {
  struct counting *c = (struct counting *)s;
  c->requests++;
  return c->inner->ops->add(c->inner, k, d, r);
}
static void c_close(struct hccl_store *s) {
  (void)s;
}
static const struct hccl_store_ops counting_ops = {"counting", c_set, c_get, c_add, c_close};

#define MAXN 64
struct record {
  uint32_t rank, check;
  char pad[40];
};

struct rank_arg {
  struct hccl_rounds rd;
  char key_prefix[16];
  struct record all[MAXN], all2[MAXN];
  bool two_rounds; /* then the finish too (the test of the caller's store runs its own) */
  HcclResult result;
  char msg[1024];
  double seconds;
};

static void *rank_main(void *p) {
  struct rank_arg *a = p;
  struct record mine = {a->rd.rank, a->rd.rank * 2654435761u, {0}};
  double t0 = hccl__now_ns() / 1e9;
  a->result = hccl__round_allgather(&a->rd, "info", &mine, sizeof(mine), a->all);
  if (a->result == HCCL_SUCCESS && a->two_rounds) {
    /* A second round over the same tree, as the bootstrap's "conn" */
    mine.check = ~mine.check;
    a->result = hccl__round_allgather(&a->rd, "conn", &mine, sizeof(mine), a->all2);
  }
  if (a->two_rounds) hccl__round_finish(&a->rd, a->result == HCCL_SUCCESS, false);
  a->seconds = hccl__now_ns() / 1e9 - t0;
  snprintf(a->msg, sizeof(a->msg), "%s", a->result ? HcclGetLastErrorMessage() : "");
  return NULL;
}

/* Runs ranks 0..n-1 except `absent` (or none: n), two rounds and the finish each; returns
 * the store's request count, and the bytes its GETs returned in *bytes. */
static long run(uint32_t n, uint32_t absent, int64_t timeout_ms, struct rank_arg *args,
                long *bytes) {
  struct counting store = {{&counting_ops}, NULL, 0, 0};
  assert_int_equal(hccl__store_mem_new(&store.inner), HCCL_SUCCESS);
  pthread_t th[MAXN];
  for (uint32_t r = 0; r < n; r++) {
    memset(&args[r], 0, sizeof(args[r]));
    snprintf(args[r].key_prefix, sizeof(args[r].key_prefix), "t%u", n);
    args[r].rd = (struct hccl_rounds){.store = &store.base,
                                      .key_prefix = args[r].key_prefix,
                                      .rank = r,
                                      .nranks = n,
                                      .connect_timeout_ms = timeout_ms};
    args[r].two_rounds = true;
    if (r != absent) assert_int_equal(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
  }
  for (uint32_t r = 0; r < n; r++)
    if (r != absent) pthread_join(th[r], NULL);
  store.inner->ops->close(store.inner);
  if (bytes) *bytes = store.bytes;
  return store.requests;
}

static void test_every_size(void **state) {
  (void)state;
  static struct rank_arg args[MAXN];
  long bytes_at[MAXN + 1] = {0};
  for (uint32_t n = 1; n <= MAXN; n = n < 37 ? n + 1 : MAXN) {
    long bytes;
    long requests = run(n, n, 10000, args, &bytes);
    for (uint32_t r = 0; r < n; r++) {
      if (args[r].result != HCCL_SUCCESS) fail_msg("n %u rank %u: %s", n, r, args[r].msg);
      for (uint32_t k = 0; k < n; k++) {
        assert_int_equal(args[r].all[k].rank, k);
        assert_int_equal(args[r].all[k].check, k * 2654435761u);
        assert_int_equal(args[r].all2[k].check, ~(k * 2654435761u));
      }
    }
    print_message("n %u: %ld store requests, %ld bytes served\n", n, requests, bytes);
    assert_true(requests <= 4L * n);
    assert_true(bytes <= 256L * n);
    bytes_at[n] = bytes;
    if (n == MAXN) break;
  }
  /* O(n): the bytes at 32 ranks are about twice 16 ranks' (n^2 would make them 4x). */
  print_message("bytes served: 16 ranks %ld, 32 ranks %ld (x%.2f)\n", bytes_at[16], bytes_at[32],
                (double)bytes_at[32] / bytes_at[16]);
  assert_true(bytes_at[32] * 10 <= bytes_at[16] * 22);
}

static void test_missing_rank_named(void **state) {
  (void)state;
  static struct rank_arg args[16];
  /* Rank 6 never joins: ranks 4 (its parent) and 0 (its subtree's root) wait for it in the
   * tree, the others for the whole; each names rank 6 after the 1 s timeout. */
  run(16, 6, 1000, args, NULL);
  for (uint32_t r = 0; r < 16; r++) {
    if (r == 6) continue;
    assert_int_equal(args[r].result, HCCL_E_TIMEOUT);
    assert_non_null(strstr(args[r].msg, "for rank 6 to join the communicator of 16 ranks"));
    assert_true(args[r].seconds >= 0.9 && args[r].seconds < 5.0);
  }
}

/* The caller's store, as rank `rank` reaches it: rank 1's read of its parent's record is slow
 * (a loaded machine), and the store is gone once `gone` is set (rank 0's process ended). */
struct caller_store {
  struct hccl_store base;
  struct hccl_store *inner;
  uint32_t rank;
  _Atomic int *gone;
};
static HcclResult cs_set(struct hccl_store *s, const char *k, const void *v, size_t n) {
  struct caller_store *c = (struct caller_store *)s;
  if (atomic_load(c->gone)) return hccl__fail(HCCL_E_NETWORK, "the store is gone");
  return hccl__store_set(c->inner, k, v, n);
}
static HcclResult cs_get(struct hccl_store *s, const char *k, void **v, size_t *n, int64_t ms) {
  struct caller_store *c = (struct caller_store *)s;
  size_t kl = strlen(k);
  if (c->rank == 1 && kl > 7 && strcmp(k + kl - 7, "/tree/0") == 0) usleep(300 * 1000);
  if (atomic_load(c->gone)) return hccl__fail(HCCL_E_NETWORK, "the store is gone");
  return hccl__store_get(c->inner, k, v, n, ms);
}
static HcclResult cs_add(struct hccl_store *s, const char *k, int64_t d, int64_t *r) {
  struct caller_store *c = (struct caller_store *)s;
  return c->inner->ops->add(c->inner, k, d, r);
}
static const struct hccl_store_ops caller_ops = {"caller", cs_set, cs_get, cs_add, c_close};

struct failing_arg {
  struct rank_arg a;
  struct caller_store store;
};

/* One rank of a bootstrap whose checks fail after "info" on every rank (as a device that two
 * ranks both drive): the round, then the finish; rank 0's process then ends. */
static void *failing_main(void *p) {
  struct failing_arg *f = p;
  rank_main(&f->a);
  hccl__round_finish(&f->a.rd, f->a.result == HCCL_SUCCESS, true);
  if (f->store.rank == 0) atomic_store(f->store.gone, 1);
  return NULL;
}

static void test_failed_bootstrap_keeps_callers_store(void **state) {
  (void)state;
  static struct failing_arg f[2];
  _Atomic int gone = 0;
  struct hccl_store *inner;
  assert_int_equal(hccl__store_mem_new(&inner), HCCL_SUCCESS);
  pthread_t th[2];
  for (uint32_t r = 0; r < 2; r++) {
    memset(&f[r], 0, sizeof(f[r]));
    f[r].store = (struct caller_store){{&caller_ops}, inner, r, &gone};
    snprintf(f[r].a.key_prefix, sizeof(f[r].a.key_prefix), "fail");
    f[r].a.rd = (struct hccl_rounds){.store = &f[r].store.base,
                                     .store_external = true,
                                     .key_prefix = f[r].a.key_prefix,
                                     .rank = r,
                                     .nranks = 2,
                                     .connect_timeout_ms = 10000};
    assert_int_equal(pthread_create(&th[r], NULL, failing_main, &f[r]), 0);
  }
  for (uint32_t r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  inner->ops->close(inner);
  /* Rank 1 read the whole round before rank 0 returned (and its store went). */
  for (uint32_t r = 0; r < 2; r++) {
    if (f[r].a.result != HCCL_SUCCESS) fail_msg("rank %u: %s", r, f[r].a.msg);
    assert_int_equal(f[r].a.all[1 - r].rank, 1 - r);
  }
}

/* A bootstrap whose tree is kept (as a communicator's, for HcclCommSplit's parent round), then
 * one round over it with no store: rank `dead` closes its tree instead (its process ended). */
struct kept_arg {
  struct rank_arg a;
  uint32_t dead;
  pthread_barrier_t *joined;
  struct hccl_rounds split; /* the round over the kept tree */
  int nfds;                 /* the kept tree's sockets */
  int ka[40][4];            /* each one's SO_KEEPALIVE, TCP_KEEPIDLE, _KEEPINTVL, _KEEPCNT */
};

static void *kept_main(void *p) {
  struct kept_arg *k = p;
  k->a.two_rounds = false;
  rank_main(&k->a);
  struct hccl_tree *t = k->a.result == HCCL_SUCCESS ? hccl__round_keep_tree(&k->a.rd) : NULL;
  hccl__round_finish(&k->a.rd, k->a.result == HCCL_SUCCESS, false);
  int fds[40];
  k->nfds = hccl__tree_fds(t, fds, 40);
  for (int i = 0; i < k->nfds; i++) {
    static const int opt[4][2] = {{SOL_SOCKET, SO_KEEPALIVE},
                                  {IPPROTO_TCP, TCP_KEEPIDLE},
                                  {IPPROTO_TCP, TCP_KEEPINTVL},
                                  {IPPROTO_TCP, TCP_KEEPCNT}};
    for (int o = 0; o < 4; o++) {
      socklen_t l = sizeof(int);
      if (getsockopt(fds[i], opt[o][0], opt[o][1], &k->ka[i][o], &l) != 0) k->ka[i][o] = -1;
    }
  }
  pthread_barrier_wait(k->joined);
  k->split = (struct hccl_rounds){.rank = k->a.rd.rank,
                                  .nranks = k->a.rd.nranks,
                                  .connect_timeout_ms = 10000,
                                  .tree = t,
                                  .timeout_name = "HCCL_EXEC_TIMEOUT"};
  if (k->a.result != HCCL_SUCCESS || k->a.rd.rank == k->dead) {
    hccl__tree_close(t);
    return NULL;
  }
  struct record mine = {k->a.rd.rank, 1, {0}};
  double t0 = hccl__now_ns() / 1e9;
  k->a.result = hccl__round_allgather(&k->split, "split", &mine, sizeof(mine), k->a.all2);
  k->a.seconds = hccl__now_ns() / 1e9 - t0;
  snprintf(k->a.msg, sizeof(k->a.msg), "%s", k->a.result ? HcclGetLastErrorMessage() : "");
  hccl__tree_close(k->split.tree);
  return NULL;
}

/* Runs n ranks through kept_main; rank dead (n: none) ends before the round over the tree. */
static void run_kept(uint32_t n, uint32_t dead, struct kept_arg *k) {
  struct counting store = {{&counting_ops}, NULL, 0, 0};
  assert_int_equal(hccl__store_mem_new(&store.inner), HCCL_SUCCESS);
  pthread_barrier_t joined;
  pthread_barrier_init(&joined, NULL, n);
  pthread_t th[MAXN];
  for (uint32_t r = 0; r < n; r++) {
    memset(&k[r], 0, sizeof(k[r]));
    snprintf(k[r].a.key_prefix, sizeof(k[r].a.key_prefix), "kept%u", n);
    k[r].a.rd = (struct hccl_rounds){.store = &store.base,
                                     .key_prefix = k[r].a.key_prefix,
                                     .rank = r,
                                     .nranks = n,
                                     .connect_timeout_ms = 10000};
    k[r].dead = dead;
    k[r].joined = &joined;
    assert_int_equal(pthread_create(&th[r], NULL, kept_main, &k[r]), 0);
  }
  for (uint32_t r = 0; r < n; r++)
    pthread_join(th[r], NULL);
  pthread_barrier_destroy(&joined);
  store.inner->ops->close(store.inner);
}

/* The kept tree's sockets have TCP keepalive on, with rounds.c's schedule (a probe after 10
 * idle seconds, failed after 12 unanswered 5 s apart), read back with getsockopt on each of
 * the 2(n - 1) ends of the tree's n - 1 connections; a round over the tree still works. The
 * probes themselves are the kernel's; no test here drops a path (this machine's kernel has no
 * netem, and the fixed schedule needs 70 s to fail one). */
static void test_kept_tree_keepalive(void **state) {
  (void)state;
  enum { N = 8 };
  static struct kept_arg k[N];
  run_kept(N, N, k);
  int ends = 0;
  for (uint32_t r = 0; r < N; r++) {
    if (k[r].a.result != HCCL_SUCCESS) fail_msg("rank %u: %s", r, k[r].a.msg);
    for (uint32_t q = 0; q < N; q++)
      assert_int_equal(k[r].a.all2[q].rank, q);
    for (int i = 0; i < k[r].nfds; i++) {
      assert_int_equal(k[r].ka[i][0], 1);
      assert_int_equal(k[r].ka[i][1], 10);
      assert_int_equal(k[r].ka[i][2], 5);
      assert_int_equal(k[r].ka[i][3], 12);
    }
    ends += k[r].nfds;
  }
  assert_int_equal(ends, 2 * (N - 1));
}

/* Rank 12 of 16 (rank 8's child, parent of 13 and 14) ends before a round over the kept tree:
 * its neighbours lose a socket, the others only hear of it through them, and every one names
 * rank 12 as the rank that failed (the message, and blame), within a second or so: none waits
 * out the round's 10 s. Before the failure record, rank 8's and 0's neighbours named rank 8 or
 * 0 ("lost its bootstrap peer rank 8"). */
static void test_dead_rank_named_by_every_rank(void **state) {
  (void)state;
  enum { N = 16, DEAD = 12 };
  static struct kept_arg k[N];
  run_kept(N, DEAD, k);
  for (uint32_t r = 0; r < N; r++) {
    if (r == DEAD) continue;
    print_message("rank %u: %s\n", r, k[r].a.msg);
    assert_int_equal(k[r].a.result, HCCL_E_REMOTE);
    assert_int_equal(k[r].split.blame, DEAD);
    assert_non_null(strstr(k[r].a.msg, "rank 12 failed"));
    for (uint32_t o = 0; o < N; o++) {
      char other[32];
      snprintf(other, sizeof(other), "rank %u failed", o);
      if (o != DEAD && strstr(k[r].a.msg, other)) fail_msg("rank %u names rank %u", r, o);
    }
    assert_true(k[r].a.seconds < 3.0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_size),
      cmocka_unit_test(test_missing_rank_named),
      cmocka_unit_test(test_failed_bootstrap_keeps_callers_store),
      cmocka_unit_test(test_kept_tree_keepalive),
      cmocka_unit_test(test_dead_rank_named_by_every_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
