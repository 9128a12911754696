/*
 * error.c - how the DDP layer reports a failure: the function that first sees it formats one
 * line naming the value and the rule, prints it once to stderr and keeps it (per thread) for
 * ddp_last_error(); callers pass the code up. A failed libhccl call was already logged by
 * libhccl; the layer keeps, without logging again, a line that says both what it was doing
 * and libhccl's reason.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ddp_int.h"

static _Thread_local char g_last[512];

HcclResult ddp__fail(HcclResult code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last, sizeof(g_last), fmt, ap);
  va_end(ap);
  fprintf(stderr, "ddp: error: %s\n", g_last);
  return code;
}

HcclResult ddp__fail_hccl(HcclResult code, const char *what) {
  /* libhccl logged the failure where it saw it; this keeps the combined line, silently. */
  const char *m = HcclGetLastErrorMessage();
  snprintf(g_last, sizeof(g_last), "%s: %s (%s)", what, m && *m ? m : HcclGetErrorString(code),
           HcclGetErrorString(code));
  return code;
}

const char *ddp_last_error(void) {
  return g_last;
}

double ddp__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
