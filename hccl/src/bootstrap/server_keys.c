/*
 * server_keys.c - the store server's key table: a chained hash table of entries, each a key
 * with its value (a reference-counted blob, so a GET reply still being written keeps its value
 * alive even if a SET replaces it meanwhile) and the connections whose GET waits for it. An
 * entry is made by the first request that names its key and dropped when it has neither a
 * value nor a waiter. The table doubles its buckets when the chains grow past two entries a
 * bucket. Runs on the server's loop thread only (server_int.h); it never touches a connection.
 */
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "server_int.h"

#define FIRST_BUCKETS 256

static uint64_t hash_key(const char *key, uint32_t len) {
  return hccl__fnv1a(HCCL_FNV1A_SEED, key, len);
}

static struct entry **slot_of(struct hccl_store_keys *k, const char *key, uint32_t len) {
  struct entry **p = &k->buckets[hash_key(key, len) & (k->nbuckets - 1)];
  while (*p && !((*p)->key_len == len && memcmp((*p)->key, key, len) == 0))
    p = &(*p)->next;
  return p;
}

static void grow(struct hccl_store_keys *k) {
  size_t n = k->nbuckets * 2;
  struct entry **b = calloc(n, sizeof(*b));
  if (!b) return; /* longer chains, still correct */
  for (size_t i = 0; i < k->nbuckets; i++)
    for (struct entry *e = k->buckets[i], *next; e; e = next) {
      next = e->next;
      struct entry **head = &b[hash_key(e->key, e->key_len) & (n - 1)];
      e->next = *head;
      *head = e;
    }
  free(k->buckets);
  k->buckets = b;
  k->nbuckets = n;
}

/* See server_int.h. */
struct entry *hccl__store_entry_get(struct hccl_store_keys *k, const char *key, uint32_t len) {
  struct entry **p = slot_of(k, key, len);
  if (*p) return *p;
  struct entry *e = calloc(1, sizeof(*e) + len + 1);
  if (!e) return NULL;
  memcpy(e->key, key, len);
  e->key_len = len;
  *p = e;
  if (++k->nentries > 2 * k->nbuckets) grow(k);
  return e;
}

/* See server_int.h. */
void hccl__store_entry_drop_if_empty(struct hccl_store_keys *k, struct entry *e) {
  if (e->val || e->waiters) return;
  struct entry **p = slot_of(k, e->key, e->key_len);
  *p = e->next;
  k->nentries--;
  free(e);
}

/* See server_int.h. */
int hccl__store_keys_init(struct hccl_store_keys *k) {
  k->buckets = calloc(FIRST_BUCKETS, sizeof(*k->buckets));
  if (!k->buckets) return -1;
  k->nbuckets = FIRST_BUCKETS;
  k->nentries = 0;
  return 0;
}

/* See server_int.h. */
void hccl__store_keys_free(struct hccl_store_keys *k) {
  for (size_t i = 0; i < k->nbuckets; i++)
    for (struct entry *e = k->buckets[i], *next; e; e = next) {
      next = e->next;
      hccl__store_blob_unref(e->val);
      free(e);
    }
  free(k->buckets);
}
