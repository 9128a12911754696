/*
 * thread.c - starting a thread with every signal blocked (why: thread.h). The caller's mask is
 * set to "all" around pthread_create, which the new thread inherits, and put back after.
 */
#include "thread.h"

#include <signal.h>

int hccl__thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(t, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}
