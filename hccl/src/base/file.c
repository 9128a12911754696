/*
 * file.c - a small file read whole (file.h), for the parsers of the rank table
 * (bootstrap/ranktable.c), the whitelist (bootstrap/trust.c) and the topologies (topo/topo.c).
 */
#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static HcclResult say(char *err, size_t errlen, HcclResult code, const char *what,
                      const char *path, const char *why) {
  if (err && errlen > 0) snprintf(err, errlen, "%s %s %s", what, path, why);
  return code;
}

HcclResult hccl__file_read(const char *path, size_t max, const char *what, char **text, char *err,
                           size_t errlen) {
  char why[160];
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(why, sizeof(why), "cannot be opened: %s", strerror(errno));
    return say(err, errlen, HCCL_E_OPEN_FILE_FAILURE, what, path, why);
  }
  char *buf = malloc(max + 1);
  if (!buf) {
    fclose(f);
    return say(err, errlen, HCCL_E_MEMORY, what, path, "cannot be read: out of memory");
  }
  size_t n = fread(buf, 1, max + 1, f);
  int failed = ferror(f);
  fclose(f);
  if (failed || n > max) {
    free(buf);
    if (failed) return say(err, errlen, HCCL_E_OPEN_FILE_FAILURE, what, path, "cannot be read");
    snprintf(why, sizeof(why), "is larger than %zu bytes", max);
    return say(err, errlen, HCCL_E_PARA, what, path, why);
  }
  buf[n] = '\0';
  *text = buf;
  return HCCL_SUCCESS;
}
