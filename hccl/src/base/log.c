/*
 * log.c - the log sink (stderr, one line per message, prefixed with the rank) and the
 * per-thread last-error message. See log.h.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum hccl_log_level g_level = HCCL_LOG_WARN;
static _Thread_local struct hccl_log_ctx t_ctx = {.rank = -1};
static _Thread_local char t_last_error[1024];
static _Thread_local int t_quiet;
/* A quiet failure goes here, so it never hides the failure the caller will report. */
static _Thread_local char t_quiet_error[1024];

const char *hccl__quiet_error(void) {
  return t_quiet_error;
}

void hccl__log_quiet(int on) {
  t_quiet += on ? 1 : -1;
}

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void hccl__log_set_level(enum hccl_log_level level) {
  g_level = level;
}
void hccl__log_bind(const struct hccl_log_ctx *ctx) {
  if (!ctx) {
    t_ctx.rank = -1;
    t_ctx.name[0] = '\0';
  } else if (ctx->rank != t_ctx.rank || strcmp(ctx->name, t_ctx.name) != 0) {
    t_ctx = *ctx;
  }
}

static void emit(enum hccl_log_level level, const char *msg) {
  char line[1200];
  int n;
  if (t_ctx.rank >= 0 && t_ctx.name[0])
    n = snprintf(line, sizeof(line), "hccl %s rank %d pid %d %s: %s\n", t_ctx.name, t_ctx.rank,
                 (int)getpid(), level_names[level], msg);
  else if (t_ctx.rank >= 0)
    n = snprintf(line, sizeof(line), "hccl rank %d pid %d %s: %s\n", t_ctx.rank, (int)getpid(),
                 level_names[level], msg);
  else
    n = snprintf(line, sizeof(line), "hccl pid %d %s: %s\n", (int)getpid(), level_names[level],
                 msg);
  if (n > (int)sizeof(line) - 1) n = sizeof(line) - 1;
  /* One write per line so the lines of several ranks do not interleave. */
  ssize_t w = write(STDERR_FILENO, line, (size_t)n);
  (void)w;
}

void hccl__log(enum hccl_log_level level, const char *fmt, ...) {
  if (level < g_level) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  emit(level, msg);
}

HcclResult hccl__fail(HcclResult code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_quiet > 0 ? t_quiet_error : t_last_error, sizeof(t_last_error), fmt, ap);
  va_end(ap);
  if (HCCL_LOG_ERROR >= g_level && t_quiet <= 0) emit(HCCL_LOG_ERROR, t_last_error);
  return code;
}

void hccl__set_last_error(const char *msg) {
  snprintf(t_last_error, sizeof(t_last_error), "%s", msg);
}

const char *HcclGetLastErrorMessage(void) {
  return t_last_error;
}

const char *HcclGetErrorString(HcclResult code) {
  switch (code) {
#define HCCL__RESULT_CASE(name, num, msg)                                                          \
  case name:                                                                                       \
    return msg;
    HCCL_RESULT_MAP(HCCL__RESULT_CASE)
#undef HCCL__RESULT_CASE
  default:
    return "unknown result code";
  }
}
