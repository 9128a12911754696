/*
 * hostlist.c - the first host of a Slurm host list. See hostlist.h.
 */
#include "hostlist.h"

#include <stdio.h>
#include <string.h>

/* Copies the first comma-separated entry, brackets included ("node[01-04,07],gpu3" gives
 * "node[01-04,07]"). */
static void first_entry(const char *p, char *out, size_t len) {
  size_t n = 0;
  int depth = 0;
  for (; *p && (depth || *p != ','); p++) {
    depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
    if (n + 1 < len) out[n++] = *p;
  }
  out[n] = '\0';
}

int hccl__hostlist_first(const char *list, char *out, size_t len) {
  char entry[256];
  if (!list || !*list) return -1;
  first_entry(list, entry, sizeof(entry));
  if (!entry[0]) return -1;
  char *br = strchr(entry, '[');
  if (!br) {
    snprintf(out, len, "%s", entry);
    return 0;
  }
  /* prefix[a-b,c...]suffix: prefix + the first number, as written, + suffix. */
  char *close = strchr(br, ']');
  size_t digits = strspn(br + 1, "0123456789");
  if (!close || digits == 0) return -1;
  snprintf(out, len, "%.*s%.*s%s", (int)(br - entry), entry, (int)digits, br + 1, close + 1);
  return 0;
}
