/*
 * fuzz.h - what the libFuzzer targets share: a check that aborts with a message (libFuzzer
 * keeps the input as a crash), the input as NUL-terminated text, and silent logs.
 */
#ifndef HCCL_FUZZ_H
#define HCCL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Aborts when cond is false: an invariant of the code under test does not hold. */
#define FUZZ_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* The input as a NUL-terminated string (the parsers read text); free() it. */
static inline char *fuzz_text(const uint8_t *data, size_t size) {
  char *t = malloc(size + 1);
  if (!t) abort();
  if (size) memcpy(t, data, size);
  t[size] = '\0';
  return t;
}

/* Failures are still kept for HcclGetLastErrorMessage, but not printed for every input. */
static inline void fuzz_quiet_logs(void) {
  hccl__log_set_level((enum hccl_log_level)(HCCL_LOG_ERROR + 1));
}

/* Whether msg contains any of the words (a NULL-terminated list). */
static inline int fuzz_has_any(const char *msg, const char *const *words) {
  for (; *words; words++)
    if (strstr(msg, *words)) return 1;
  return 0;
}

#endif
