/*
 * server_int.h - what the store server's files share (the server's outside is store.h). Internal
 * to bootstrap/. server.c starts the server, runs its loop thread and stops it; server_conn.c
 * serves the connections on that thread (reading requests, running them, replying, and the
 * limits against clients that are not ranks); server_keys.c is the key table they run on.
 * Who calls whom: server.c -> server_conn.c, server_keys.c; server_conn.c -> server_keys.c;
 * never back. Everything here is the loop thread's, except while server.c starts or stops it.
 */
#ifndef HCCL_SERVER_INT_H
#define HCCL_SERVER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "trust.h"
#include "wire.h"

struct conn; /* a client's connection: server_conn.c's own */

struct entry {
  struct entry *next;          /* hash chain */
  struct hccl_store_blob *val; /* NULL while the key only has waiters */
  struct conn *waiters;        /* held GETs, linked through conn->wnext */
  uint32_t key_len;
  char key[];
};

/* The key table (server_keys.c). */
struct hccl_store_keys {
  struct entry **buckets;
  size_t nbuckets, nentries;
};

struct hccl_store_server {
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop_async;
  pthread_t thread;
  struct hccl_store_keys keys;
  struct conn *conns;
  struct conn *unproven, *unproven_tail; /* oldest first */
  unsigned nunproven;
  uv_timer_t sweep; /* request deadlines; runs while a connection has one */
  unsigned long evicted;
  /* What the server sent, headers and values (the loop thread's own): the bootstrap's bytes
   * at rank 0, O(n) for n ranks (docs/scaling.md); logged at INFO when it stops. */
  unsigned long long served_bytes, replies;
  char where[300];
  struct hccl_store_trust trust;
};

/* ---- server_keys.c ---- */

/* Makes an empty table. Returns 0, or -1 when out of memory (k is then empty). */
int hccl__store_keys_init(struct hccl_store_keys *k);

/* Frees every entry (dropping its value's reference) and the buckets; once no connection is
 * left to wait on an entry. */
void hccl__store_keys_free(struct hccl_store_keys *k);

/* The entry of key, created (without a value) when absent; NULL when out of memory. */
struct entry *hccl__store_entry_get(struct hccl_store_keys *k, const char *key, uint32_t len);

/* Drops an entry that has neither a value nor waiters (a held GET whose client left). */
void hccl__store_entry_drop_if_empty(struct hccl_store_keys *k, struct entry *e);

/* ---- server_conn.c ---- */

/* The listener's connection callback (uv_listen): accepts a client and serves it. */
void hccl__store_on_connection(uv_stream_t *listener, int status);

/* Closes every connection of s; their memory goes once the loop has run their closes. */
void hccl__store_conns_close(struct hccl_store_server *s);

#endif
