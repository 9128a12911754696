/*
 * test_mem_region.c - HcclMemAlloc regions across fork (hccl/src/base/mem_region.c): a forked
 * child gets copy-on-write copies, as with malloc, not the parent's shared pages.
 *
 *   private     the child's writes to an inherited region do not reach the parent; in the
 *               child the region is no longer a zero-copy window, in the parent it still is
 *   child new   the child's own new regions are windows; it can free inherited and new ones
 *   grandchild  a child that forks again passes on its own writes (a private region is not
 *               remapped from the memfd a second time)
 *   shows       the documented difference from malloc: a page the child has not written
 *               shows the parent's later writes
 *   threads     fork while another thread holds the regions' lock most of the time (it asks
 *               about a pointer in none of 400 regions, in a loop): the child can still
 *               allocate (the lock was not inherited held)
 *   watch       HcclMemFree tells a watcher (a registration cache) the region's serial before
 *               it unmaps it, and nothing once the watch is gone
 * Every child runs under an alarm; the whole program under another.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hccl.h"
#include "mem_region.h"

#define BYTES (3u << 20)
#define CHILD_ALARM_S 20

static int is_window(const void *p, size_t bytes) {
  struct hccl_window w;
  return hccl__mem_window(p, bytes, &w);
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

/* Runs fn in a forked child under an alarm; returns its exit status (0: every check held). */
static int in_child(int (*fn)(void *), void *arg) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(CHILD_ALARM_S);
    _exit(fn(arg));
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int child_writes(void *arg) {
  unsigned char *r = arg;
  if (!all_bytes(r, BYTES, 'A')) return 1;
  if (is_window(r, BYTES)) return 2;
  memset(r, 'B', BYTES);
  return all_bytes(r, BYTES, 'B') ? 0 : 3;
}

/* A region filled with 'A' goes to `child` in a forked child, which must return 0; the
 * parent's region is then still all 'A' and still a window. */
static void parent_keeps_region(int (*child)(void *)) {
  unsigned char *r;
  assert_int_equal(HcclMemAlloc((void **)&r, BYTES), HCCL_SUCCESS);
  memset(r, 'A', BYTES);
  assert_int_equal(in_child(child, r), 0);
  assert_true(all_bytes(r, BYTES, 'A'));
  assert_true(is_window(r + 100, 1000));
  assert_int_equal(HcclMemFree(r), HCCL_SUCCESS);
}

static void test_private(void **state) {
  (void)state;
  parent_keeps_region(child_writes);
}

static int child_allocates(void *arg) {
  unsigned char *n;
  if (HcclMemAlloc((void **)&n, BYTES) != HCCL_SUCCESS) return 1;
  if (!is_window(n, BYTES)) return 2;
  memset(n, 'C', BYTES);
  if (HcclMemFree(arg) != HCCL_SUCCESS) return 3;
  return HcclMemFree(n) == HCCL_SUCCESS ? 0 : 4;
}

static void test_child_new(void **state) {
  (void)state;
  parent_keeps_region(child_allocates);
}

static int grandchild_reads(void *arg) {
  unsigned char *r = arg;
  return all_bytes(r, BYTES / 2, 'D') && all_bytes(r + BYTES / 2, BYTES / 2, 'A') ? 0 : 1;
}

static int child_forks(void *arg) {
  unsigned char *r = arg;
  memset(r, 'D', BYTES / 2);
  if (in_child(grandchild_reads, r) != 0) return 1;
  return all_bytes(r, BYTES / 2, 'D') ? 0 : 2;
}

static void test_grandchild(void **state) {
  (void)state;
  parent_keeps_region(child_forks);
}

static void test_shows(void **state) {
  (void)state;
  long page = sysconf(_SC_PAGESIZE);
  unsigned char *r;
  assert_int_equal(HcclMemAlloc((void **)&r, BYTES), HCCL_SUCCESS);
  memset(r, 'A', BYTES);
  int go[2], done[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(done), 0);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(CHILD_ALARM_S);
    char c;
    r[0] = 'W'; /* page 0 is the child's own copy from here on */
    if (write(done[1], "r", 1) != 1 || read(go[0], &c, 1) != 1) _exit(1);
    /* The parent has now written 'P' over pages 0 and 1. */
    _exit(r[0] == 'W' && r[1] == 'A' && r[page] == 'P' ? 0 : 2);
  }
  char c;
  assert_int_equal(read(done[0], &c, 1), 1);
  memset(r, 'P', 2 * (size_t)page);
  assert_int_equal(write(go[1], "g", 1), 1);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int i = 0; i < 2; i++)
    close(go[i]), close(done[i]);
  assert_int_equal(HcclMemFree(r), HCCL_SUCCESS);
}

static atomic_int stop;

static void *churn(void *arg) {
  (void)arg;
  int outside;
  while (!atomic_load(&stop))
    is_window(&outside, sizeof(outside)); /* walks every region under the lock */
  return NULL;
}

static int child_allocates_once(void *arg) {
  (void)arg;
  void *p;
  if (HcclMemAlloc(&p, 4096) != HCCL_SUCCESS) return 1;
  return HcclMemFree(p) == HCCL_SUCCESS ? 0 : 2;
}

#define MANY 400

static void test_threads(void **state) {
  (void)state;
  void *many[MANY];
  for (int i = 0; i < MANY; i++)
    assert_int_equal(HcclMemAlloc(&many[i], 1), HCCL_SUCCESS);
  pthread_t t;
  atomic_store(&stop, 0);
  assert_int_equal(pthread_create(&t, NULL, churn, NULL), 0);
  for (int i = 0; i < 50; i++)
    assert_int_equal(in_child(child_allocates_once, NULL), 0);
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  for (int i = 0; i < MANY; i++)
    assert_int_equal(HcclMemFree(many[i]), HCCL_SUCCESS);
}

/* HcclMemFree tells each watcher the region's serial and whole size before it unmaps it (a
 * transport's registration cache drops it then), HcclMemDiscard the whole pages it gives back,
 * and nothing after hccl__mem_unwatch. */
static uint64_t g_seen[4], g_off[4], g_len[4];
static int g_nseen;
static void seen(void *arg, uint64_t serial, uint64_t off, uint64_t len) {
  (void)arg;
  if (g_nseen < 4) {
    g_seen[g_nseen] = serial;
    g_off[g_nseen] = off;
    g_len[g_nseen++] = len;
  }
}

static void test_watch(void **state) {
  (void)state;
  void *a, *b;
  struct hccl_window w;
  assert_int_equal(HcclMemAlloc(&a, 4096), HCCL_SUCCESS);
  assert_int_equal(HcclMemAlloc(&b, 4096), HCCL_SUCCESS);
  assert_true(hccl__mem_window(a, 1, &w));
  uint64_t serial_a = w.serial;
  g_nseen = 0;
  int id = hccl__mem_watch(seen, NULL);
  assert_true(id >= 0);
  assert_int_equal(HcclMemFree(a), HCCL_SUCCESS);
  assert_int_equal(g_nseen, 1);
  assert_int_equal(g_seen[0], serial_a);
  assert_int_equal(g_off[0], 0);
  assert_int_equal(g_len[0], w.region_bytes);
  hccl__mem_unwatch(id);
  assert_int_equal(HcclMemFree(b), HCCL_SUCCESS);
  assert_int_equal(g_nseen, 1);

  /* HcclMemDiscard: the whole pages inside the range, told first, then zeros. */
  long page = sysconf(_SC_PAGESIZE);
  char *c;
  assert_int_equal(HcclMemAlloc((void **)&c, 4 * (size_t)page), HCCL_SUCCESS);
  memset(c, 7, 4 * (size_t)page);
  assert_true(hccl__mem_window(c, 1, &w));
  g_nseen = 0;
  id = hccl__mem_watch(seen, NULL);
  assert_int_equal(HcclMemDiscard(c + 10, 3 * (size_t)page), HCCL_SUCCESS);
  assert_int_equal(g_nseen, 1);
  assert_int_equal(g_seen[0], w.serial);
  assert_int_equal(g_off[0], page);
  assert_int_equal(g_len[0], 2 * page);
  assert_int_equal(c[0], 7);
  assert_int_equal(c[page], 0);
  assert_int_equal(c[3 * page - 1], 0);
  assert_int_equal(c[3 * page], 7);
  assert_int_equal(HcclMemDiscard(c + 10, 100), HCCL_SUCCESS); /* no whole page: nothing */
  assert_int_equal(g_nseen, 1);
  assert_int_equal(HcclMemDiscard(c, 5 * (size_t)page), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "HcclMemDiscard"));
  hccl__mem_unwatch(id);
  assert_int_equal(HcclMemFree(c), HCCL_SUCCESS);
}

int main(void) {
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_private),    cmocka_unit_test(test_child_new),
      cmocka_unit_test(test_grandchild), cmocka_unit_test(test_shows),
      cmocka_unit_test(test_threads),    cmocka_unit_test(test_watch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
