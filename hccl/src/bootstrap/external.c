/*
 * external.c - a store the caller owns (HcclStore: torch's c10d store, a scheduler's key-value
 * store) behind the internal store ops table, so the bootstrap talks to it exactly as to the
 * TCP store. Closing the adapter frees the adapter only: the caller keeps its store.
 */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "store.h"

struct ext_store {
  struct hccl_store base;
  HcclStore user;
};

static HcclResult ext_set(struct hccl_store *s, const char *key, const void *val, size_t len) {
  struct ext_store *e = (struct ext_store *)s;
  HcclResult r = e->user.set(e->user.ctx, key, val, len);
  if (r != HCCL_SUCCESS)
    return hccl__fail(r, "the caller's store failed to set key '%s' (%zu bytes): %s", key, len,
                      HcclGetErrorString(r));
  return HCCL_SUCCESS;
}

static HcclResult ext_get(struct hccl_store *s, const char *key, void **val, size_t *len,
                          int64_t timeout_ms) {
  struct ext_store *e = (struct ext_store *)s;
  void *v = NULL;
  size_t n = 0;
  HcclResult r = e->user.get(e->user.ctx, key, &v, &n, timeout_ms);
  if (r == HCCL_E_TIMEOUT)
    return hccl__fail(r, "key '%s' did not appear in the caller's store within %lld ms", key,
                      (long long)timeout_ms);
  if (r != HCCL_SUCCESS)
    return hccl__fail(r, "the caller's store failed to get key '%s': %s", key,
                      HcclGetErrorString(r));
  *val = v;
  *len = n;
  return HCCL_SUCCESS;
}

static HcclResult ext_add(struct hccl_store *s, const char *key, int64_t delta, int64_t *result) {
  return hccl__fail(HCCL_E_NOT_SUPPORT, "the caller's store has no add (key '%s')", key);
}

static void ext_close(struct hccl_store *s) {
  free(s);
}

static const struct hccl_store_ops ext_ops = {
    .name = "caller", .set = ext_set, .get = ext_get, .add = ext_add, .close = ext_close};

HcclResult hccl__store_ext_new(const HcclStore *user, struct hccl_store **out) {
  struct ext_store *e = calloc(1, sizeof(*e));
  if (!e) return hccl__fail(HCCL_E_MEMORY, "out of memory for a store adapter");
  e->base.ops = &ext_ops;
  e->user = *user;
  *out = &e->base;
  return HCCL_SUCCESS;
}
