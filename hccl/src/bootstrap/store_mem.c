/*
 * store_mem.c - an in-process store (struct hccl_store) for tests and single-process use.
 *
 * Same behaviour as the TCP store: same key and value limits (wire.h), GET waits for
 * the key until its deadline, ADD keeps its counter as decimal text. Entries live in a linked
 * list under one mutex; a condition variable on CLOCK_MONOTONIC (so a wall-clock jump cannot
 * stretch or cut a deadline) is broadcast on every SET and ADD. Any number of threads may use
 * one store at once; close must come after every other call has returned.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "store.h"
#include "wire.h"

struct mem_entry {
  struct mem_entry *next;
  char *key;
  void *val;
  size_t len;
};

struct mem_store {
  struct hccl_store base; /* first, so a struct hccl_store * is a struct mem_store * */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct mem_entry *head;
};

static HcclResult check_key(const char *key) {
  if (key == NULL) return hccl__fail(HCCL_E_PTR, "store key is NULL");
  size_t n = strnlen(key, HCCL_STORE_MAX_KEY_LEN + 1);
  if (n == 0)
    return hccl__fail(HCCL_E_PARA, "store key is empty; keys need 1 to %u bytes",
                      HCCL_STORE_MAX_KEY_LEN);
  if (n > HCCL_STORE_MAX_KEY_LEN)
    return hccl__fail(HCCL_E_PARA, "store key '%.40s...' is longer than the %u-byte limit", key,
                      HCCL_STORE_MAX_KEY_LEN);
  return HCCL_SUCCESS;
}

static struct mem_entry *find(struct mem_store *m, const char *key) {
  for (struct mem_entry *e = m->head; e; e = e->next)
    if (strcmp(e->key, key) == 0) return e;
  return NULL;
}

/* Stores a copy of val (plus a NUL after it, so text values read as strings). Called with the
 * mutex held. */
static HcclResult put(struct mem_store *m, const char *key, const void *val, size_t len) {
  void *copy = malloc(len + 1);
  if (!copy)
    return hccl__fail(HCCL_E_MEMORY, "no memory for a %zu-byte value of key '%s'", len, key);
  if (len) memcpy(copy, val, len);
  ((char *)copy)[len] = '\0';
  struct mem_entry *e = find(m, key);
  if (!e) {
    e = calloc(1, sizeof(*e));
    char *k = strdup(key);
    if (!e || !k) {
      free(e);
      free(k);
      free(copy);
      return hccl__fail(HCCL_E_MEMORY, "no memory for store key '%s'", key);
    }
    e->key = k;
    e->next = m->head;
    m->head = e;
  }
  free(e->val);
  e->val = copy;
  e->len = len;
  pthread_cond_broadcast(&m->cv);
  return HCCL_SUCCESS;
}

static HcclResult mem_set(struct hccl_store *s, const char *key, const void *val, size_t len) {
  struct mem_store *m = (struct mem_store *)s;
  HCCL_TRY(check_key(key));
  if (len > HCCL_STORE_MAX_VALUE_LEN)
    return hccl__fail(HCCL_E_PARA, "value of store key '%s' is %zu bytes; the limit is %u", key,
                      len, HCCL_STORE_MAX_VALUE_LEN);
  if (len && !val) return hccl__fail(HCCL_E_PTR, "value of store key '%s' is NULL", key);
  pthread_mutex_lock(&m->mu);
  HcclResult r = put(m, key, val, len);
  pthread_mutex_unlock(&m->mu);
  return r;
}

static void deadline_after(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static HcclResult mem_get(struct hccl_store *s, const char *key, void **val, size_t *len,
                          int64_t timeout_ms) {
  struct mem_store *m = (struct mem_store *)s;
  HCCL_TRY(check_key(key));
  if (!val || !len) return hccl__fail(HCCL_E_PTR, "get of store key '%s': output is NULL", key);
  if (timeout_ms < 0)
    return hccl__fail(HCCL_E_PARA,
                      "get of store key '%s': timeout %lld ms is negative; every "
                      "wait needs a deadline",
                      key, (long long)timeout_ms);
  struct timespec deadline;
  deadline_after(&deadline, timeout_ms);
  pthread_mutex_lock(&m->mu);
  struct mem_entry *e;
  int rc = 0;
  while ((e = find(m, key)) == NULL && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&m->cv, &m->mu, &deadline);
  if (!e) {
    pthread_mutex_unlock(&m->mu);
    return hccl__fail(HCCL_E_TIMEOUT, "store key '%s' was not set within %lld ms (in-memory store)",
                      key, (long long)timeout_ms);
  }
  void *copy = malloc(e->len + 1);
  if (copy) memcpy(copy, e->val, e->len + 1);
  size_t n = e->len;
  pthread_mutex_unlock(&m->mu);
  if (!copy) return hccl__fail(HCCL_E_MEMORY, "no memory for a %zu-byte value of key '%s'", n, key);
  *val = copy;
  *len = n;
  return HCCL_SUCCESS;
}

static HcclResult mem_add(struct hccl_store *s, const char *key, int64_t delta, int64_t *result) {
  struct mem_store *m = (struct mem_store *)s;
  HCCL_TRY(check_key(key));
  if (!result) return hccl__fail(HCCL_E_PTR, "add to store key '%s': result is NULL", key);
  pthread_mutex_lock(&m->mu);
  struct mem_entry *e = find(m, key);
  int64_t base = 0, sum = 0;
  HcclResult r = HCCL_SUCCESS;
  if (hccl__store_parse_int(e ? e->val : NULL, e ? e->len : 0, &base) != 0)
    r = hccl__fail(HCCL_E_PARA, "add to store key '%s': its value is not a decimal integer", key);
  else if (hccl__store_add_checked(base, delta, &sum) != 0)
    r = hccl__fail(HCCL_E_PARA, "add of %lld to store key '%s' (now %lld) overflows int64",
                   (long long)delta, key, (long long)base);
  if (r == HCCL_SUCCESS) {
    char text[HCCL_STORE_INT_TEXT_LEN + 2];
    int n = snprintf(text, sizeof(text), "%lld", (long long)sum);
    r = put(m, key, text, (size_t)n);
  }
  pthread_mutex_unlock(&m->mu);
  if (r == HCCL_SUCCESS) *result = sum;
  return r;
}

static void mem_close(struct hccl_store *s) {
  struct mem_store *m = (struct mem_store *)s;
  for (struct mem_entry *e = m->head, *next; e; e = next) {
    next = e->next;
    free(e->key);
    free(e->val);
    free(e);
  }
  pthread_cond_destroy(&m->cv);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static const struct hccl_store_ops mem_ops = {
    .name = "mem",
    .set = mem_set,
    .get = mem_get,
    .add = mem_add,
    .close = mem_close,
};

/* See store.h. *out is set only on success; free it with hccl__store_close. */
HcclResult hccl__store_mem_new(struct hccl_store **out) {
  if (!out) return hccl__fail(HCCL_E_PTR, "hccl__store_mem_new: out is NULL");
  struct mem_store *m = calloc(1, sizeof(*m));
  if (!m) return hccl__fail(HCCL_E_MEMORY, "no memory for an in-memory store");
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&m->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0) {
    free(m);
    return hccl__fail(HCCL_E_SYSCALL, "pthread_cond_init for an in-memory store: %s", strerror(rc));
  }
  pthread_mutex_init(&m->mu, NULL);
  m->base.ops = &mem_ops;
  *out = &m->base;
  return HCCL_SUCCESS;
}
