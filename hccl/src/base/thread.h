/*
 * thread.h - the one way the library (and npu-launch) starts a thread: born with every signal
 * blocked, so signals stay with the application's threads. A library thread that could take a
 * signal would run the program's handler in the middle of our work, or, for a signal left at a
 * default of "ignore" such as SIGCHLD, swallow it before a signalfd the program reads saw it
 * (npu-launch lost a rank's exit that way). Blocking inside the thread's own function is too
 * late: the thread may not run before the signal comes.
 */
#ifndef HCCL_THREAD_H
#define HCCL_THREAD_H

#include <pthread.h>

/* pthread_create with every signal blocked in the new thread; returns pthread_create's code. */
int hccl__thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
