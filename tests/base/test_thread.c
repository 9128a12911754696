/*
 * test_thread.c - hccl/src/base/thread.c: a thread the library starts blocks every signal from
 * its first instruction, the caller's mask is left as it was, and such a thread cannot swallow
 * a SIGCHLD that the program reads from a signalfd (npu-launch's watcher thread did: a rank's
 * exit went unnoticed for 100 s). Also: nothing in the library, npu-launch or ddp starts a
 * thread any other way.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "thread.h"

static sigset_t g_seen;
static _Atomic int g_stop;

static void *record_mask(void *arg) {
  (void)arg;
  pthread_sigmask(SIG_BLOCK, NULL, &g_seen);
  return NULL;
}

static void test_born_blocked(void **state) {
  (void)state;
  sigset_t none, before, after;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, &before);
  pthread_t t;
  assert_int_equal(hccl__thread_start(&t, record_mask, NULL), 0);
  pthread_join(t, NULL);
  const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    assert_true(sigismember(&g_seen, sigs[i]));
  pthread_sigmask(SIG_SETMASK, &before, &after);
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    assert_false(sigismember(&after, sigs[i])); /* the caller's own mask came back */
}

static void *idle(void *arg) {
  (void)arg;
  while (!g_stop)
    usleep(1000);
  return NULL;
}

/* npu-launch's order: the helper thread first, then SIGCHLD blocked and read from a signalfd,
 * then a child that exits. The signal must reach the signalfd, not the idle thread. */
static void test_sigchld_reaches_signalfd(void **state) {
  (void)state;
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_UNBLOCK, &chld, &old);
  g_stop = 0;
  pthread_t t;
  assert_int_equal(hccl__thread_start(&t, idle, NULL), 0);
  usleep(20000); /* the thread is running (and would take the signal if it could) */
  pthread_sigmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
  assert_true(sfd >= 0);
  for (int round = 0; round < 20; round++) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    struct pollfd p = {.fd = sfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1); /* a swallowed signal: 0 after 5 s */
    struct signalfd_siginfo si;
    assert_int_equal(read(sfd, &si, sizeof(si)), sizeof(si));
    assert_int_equal(si.ssi_signo, SIGCHLD);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
  }
  close(sfd);
  g_stop = 1;
  pthread_join(t, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Counts "pthread_create(" in the .c files below dir, except base/thread.c. */
static int count_creates(const char *dir, char *where, size_t len) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char path[4096];
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    size_t l = strlen(e->d_name);
    if (e->d_type == DT_DIR) {
      n += count_creates(path, where, len);
    } else if (l > 2 && strcmp(e->d_name + l - 2, ".c") == 0 &&
               !strstr(path, "hccl/src/base/thread.c")) {
      FILE *f = fopen(path, "r");
      char line[1024];
      while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "pthread_create(")) {
          n++;
          snprintf(where, len, "%s", path);
        }
      if (f) fclose(f);
    }
  }
  closedir(d);
  return n;
}

static void test_one_way_to_start(void **state) {
  (void)state;
  const char *dirs[] = {"hccl/src", "launcher", "ddp"};
  for (size_t i = 0; i < 3; i++) {
    char dir[4096], where[4096] = "";
    snprintf(dir, sizeof(dir), "%s/%s", HCCL_SOURCE_DIR, dirs[i]);
    int n = count_creates(dir, where, sizeof(where));
    if (n) fprintf(stderr, "%s calls pthread_create: use hccl__thread_start (thread.h)\n", where);
    assert_int_equal(n, 0);
  }
}

int main(void) {
  alarm(60);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_born_blocked),
      cmocka_unit_test(test_sigchld_reaches_signalfd),
      cmocka_unit_test(test_one_way_to_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
