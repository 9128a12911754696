/*
 * progress_record.c - naming the call a progress record says. See progress_record.h.
 */
#include "progress_record.h"

#include <stdatomic.h>
#include <stdio.h>

#include "coll_kind.h"

void hccl__progress_call_name(const struct hccl_progress *pg, uint64_t call, char *buf,
                              size_t len) {
  uint32_t root = atomic_load_explicit(&pg->root, memory_order_relaxed);
  const char *kind = hccl__coll_kind_name((unsigned)(call & 0xff));
  if (root == UINT32_MAX)
    snprintf(buf, len, "call %llu (%s)", (unsigned long long)(call >> 8), kind);
  else
    snprintf(buf, len, "call %llu (%s, root %u)", (unsigned long long)(call >> 8), kind, root);
}
