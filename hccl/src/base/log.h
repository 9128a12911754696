/*
 * log.h - logging and the one way failures are reported.
 *
 * The function that first sees a failure calls hccl__fail(): it formats one message naming the
 * value and the rule, logs it once at ERROR, keeps it for HcclGetLastErrorMessage(), and
 * returns the code so the caller can write `return hccl__fail(HCCL_E_PARA, "...")`. Callers
 * above it pass the code up without logging again.
 */
#ifndef HCCL_LOG_H
#define HCCL_LOG_H

#include "hccl.h"

enum hccl_log_level {
  HCCL_LOG_DEBUG = 0,
  HCCL_LOG_INFO = 1,
  HCCL_LOG_WARN = 2,
  HCCL_LOG_ERROR = 3
};

/* Level from HCCL_LOG_LEVEL; set once by the settings loader. */
void hccl__log_set_level(enum hccl_log_level level);
/* Who a log line speaks for: a communicator's rank and name. Each communicator owns one, and
 * every entry point binds it to the calling thread (a copy, so a destroyed communicator leaves
 * nothing dangling), so two communicators in one process log as themselves. */
struct hccl_log_ctx {
  int rank;      /* -1: no communicator */
  char name[64]; /* "" = unnamed */
};

/* The calling thread's lines say ctx from now on (NULL = no communicator). */
void hccl__log_bind(const struct hccl_log_ctx *ctx);

void hccl__log(enum hccl_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Logs fmt at ERROR, stores it as this thread's last error message, returns code. */
HcclResult hccl__fail(HcclResult code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* While quiet (a counter, per thread), failures are neither logged nor made the last error:
 * for probes whose failure is expected and handled (a stale store, a store that already
 * closed). The last quiet failure's message is hccl__quiet_error(). */
void hccl__log_quiet(int on);
const char *hccl__quiet_error(void);

/* Sets this thread's last error message without logging (a failure another thread logged). */
void hccl__set_last_error(const char *msg);

#define HCCL_DEBUG(...) hccl__log(HCCL_LOG_DEBUG, __VA_ARGS__)
#define HCCL_INFO(...) hccl__log(HCCL_LOG_INFO, __VA_ARGS__)
#define HCCL_WARN(...) hccl__log(HCCL_LOG_WARN, __VA_ARGS__)

/* Passes a non-success result up. */
#define HCCL_TRY(expr)                                                                             \
  do {                                                                                             \
    HcclResult hccl__r = (expr);                                                                   \
    if (hccl__r != HCCL_SUCCESS) return hccl__r;                                                   \
  } while (0)

#endif
