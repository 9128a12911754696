/*
 * test_wait.c - hccl/src/base/wait.c: a wait ends when the word changes (a post from another
 * thread wakes it), fails at its deadline naming the peer, fails when the peer check fails, and
 * succeeds when the peer posted its last word just before it left (the check sees the
 * departure after the waiter's read of the word: CI saw a barrier fail that way at 8 ranks);
 * a wait for a peer pinned to this rank's CPU sleeps without polling, one for another peer
 * polls; hccl__wait_pinned_cpu names the one CPU of a pinned thread; hccl__online_cpus counts
 * the CPUs the kernel lists online.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "wait.h"

static _Atomic uint32_t g_word, g_waiting;
static int g_checks;

static HcclResult no_abort(void *arg, const char *what) {
  (void)arg;
  (void)what;
  return HCCL_SUCCESS;
}

static void explain(void *arg, uint32_t peer, char *buf, size_t len) {
  (void)arg;
  snprintf(buf, len, "rank %u is behind", peer);
}

static const struct hccl_waiter g_waiter = {
    .spin = {0, 0}, .aborted = no_abort, .explain = explain, .timeout_ms = 50,
    .timeout_src = "test"};

static struct hccl_wait wait_for(int64_t ms) {
  return (struct hccl_wait){.waiter = &g_waiter, .rank = 0, .what = "barrier",
                            .deadline_ns = hccl__now_ns() + ms * 1000000};
}

/* The peer's last post lands between the waiter's read and its check of the peer. */
static HcclResult posts_then_leaves(void *arg, const struct hccl_wait *w, uint32_t peer) {
  (void)arg;
  g_checks++;
  atomic_store(&g_word, 1);
  return hccl__fail(HCCL_E_REMOTE, "%s: rank %u destroyed its communicator", w->what, peer);
}

static HcclResult leaves(void *arg, const struct hccl_wait *w, uint32_t peer) {
  (void)arg;
  g_checks++;
  return hccl__fail(HCCL_E_REMOTE, "%s: rank %u destroyed its communicator", w->what, peer);
}

static void test_post_before_leaving(void **state) {
  (void)state;
  atomic_store(&g_word, 0);
  g_checks = 0;
  hccl__set_last_error("");
  struct hccl_wait w = wait_for(5000);
  assert_int_equal(hccl__wait_change(&g_word, &g_waiting, 0, 3, &w, posts_then_leaves, NULL),
                   HCCL_SUCCESS);
  assert_int_equal(g_checks, 1);
  /* Not a failure: nothing made the last error. */
  assert_string_equal(HcclGetLastErrorMessage(), "");
}

static void test_leaves(void **state) {
  (void)state;
  atomic_store(&g_word, 0);
  g_checks = 0;
  struct hccl_wait w = wait_for(5000);
  assert_int_equal(hccl__wait_change(&g_word, &g_waiting, 0, 3, &w, leaves, NULL), HCCL_E_REMOTE);
  assert_int_equal(g_checks, 1);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "rank 3 destroyed its communicator"));
}

/* A quiet caller (the p2p engine's sliced waits) still gets the reason, as its quiet error. */
static void test_leaves_quiet(void **state) {
  (void)state;
  atomic_store(&g_word, 0);
  struct hccl_wait w = wait_for(5000);
  hccl__log_quiet(1);
  HcclResult r = hccl__wait_change(&g_word, &g_waiting, 0, 4, &w, leaves, NULL);
  hccl__log_quiet(0);
  assert_int_equal(r, HCCL_E_REMOTE);
  assert_non_null(strstr(hccl__quiet_error(), "rank 4 destroyed its communicator"));
}

static void test_deadline(void **state) {
  (void)state;
  atomic_store(&g_word, 0);
  struct hccl_wait w = wait_for(30);
  int64_t t0 = hccl__now_ns();
  assert_int_equal(hccl__wait_change(&g_word, &g_waiting, 0, 5, &w, NULL, NULL), HCCL_E_TIMEOUT);
  assert_true(hccl__now_ns() - t0 >= 30000000);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "waiting for rank 5"));
  assert_non_null(strstr(HcclGetLastErrorMessage(), "rank 5 is behind"));
}

static void *post_later(void *arg) {
  (void)arg;
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
  hccl__post(&g_word, &g_waiting, 7);
  return NULL;
}

static void test_post_wakes(void **state) {
  (void)state;
  atomic_store(&g_word, 0);
  struct hccl_wait w = wait_for(5000);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, post_later, NULL), 0);
  assert_int_equal(hccl__wait_change(&g_word, &g_waiting, 0, 1, &w, NULL, NULL), HCCL_SUCCESS);
  assert_int_equal(atomic_load(&g_word), 7);
  pthread_join(t, NULL);
}

static int g_slept;

static void count_sleep(void *arg, int64_t from_ns, int64_t to_ns, uint32_t peer,
                        const char *what) {
  (void)arg, (void)from_ns, (void)to_ns, (void)peer, (void)what;
  g_slept++;
}

/* Polling budget of 2 s, peer 1 on this rank's CPU, peer 0 not: a post 20 ms later ends both
 * waits; the wait for peer 0 saw it polling, the wait for peer 1 asleep. */
static void test_same_core(void **state) {
  (void)state;
  static const uint8_t same[2] = {0, 1};
  struct hccl_waiter wt = g_waiter;
  wt.spin = (struct hccl_spin){2000000000LL, 0};
  wt.same_core = same;
  wt.slept = count_sleep;
  for (uint32_t peer = 0; peer < 2; peer++) {
    atomic_store(&g_word, 0);
    g_slept = 0;
    struct hccl_wait w = wait_for(5000);
    w.waiter = &wt;
    pthread_t t;
    int64_t t0 = hccl__now_ns();
    assert_int_equal(pthread_create(&t, NULL, post_later, NULL), 0);
    assert_int_equal(hccl__wait_change(&g_word, &g_waiting, 0, peer, &w, NULL, NULL),
                     HCCL_SUCCESS);
    pthread_join(t, NULL);
    assert_true(hccl__now_ns() - t0 < 1000000000LL);
    assert_int_equal(g_slept, (int)peer);
  }
}

static void *pinned_cpu(void *arg) {
  int *out = arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(out[0], &set);
  out[1] = sched_setaffinity(0, sizeof(set), &set) == 0 ? hccl__wait_pinned_cpu() : -2;
  return NULL;
}

/* Pinned to one CPU (the last this process may use): that CPU; with more than one: -1. */
static void test_pinned_cpu(void **state) {
  (void)state;
  cpu_set_t set;
  assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
  int last = -1;
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (CPU_ISSET(i, &set)) last = i;
  assert_int_equal(hccl__wait_pinned_cpu(), CPU_COUNT(&set) == 1 ? last : -1);
  int io[2] = {last, -3};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pinned_cpu, io), 0);
  pthread_join(t, NULL);
  assert_int_equal(io[1], last);
}

/* hccl__online_cpus against the kernel's own list of online CPUs ("0-1,4"). */
static void test_online_cpus(void **state) {
  (void)state;
  FILE *f = fopen("/sys/devices/system/cpu/online", "r");
  if (!f) skip();
  long n = 0, a, b;
  char sep;
  while (fscanf(f, "%ld", &a) == 1) {
    b = a;
    if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%ld%c", &b, &sep) < 1) break;
    n += b - a + 1;
    if (sep != ',') break;
  }
  fclose(f);
  assert_true(n >= 1);
  assert_int_equal(hccl__online_cpus(), n);
}

int main(void) {
  alarm(60);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_post_before_leaving),
      cmocka_unit_test(test_online_cpus),
      cmocka_unit_test(test_leaves),
      cmocka_unit_test(test_leaves_quiet),
      cmocka_unit_test(test_deadline),
      cmocka_unit_test(test_post_wakes),
      cmocka_unit_test(test_same_core),
      cmocka_unit_test(test_pinned_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
