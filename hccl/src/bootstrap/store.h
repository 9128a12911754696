/*
 * store.h - the rendezvous key-value store ranks meet through during bootstrap.
 *
 * A store is a tiny interface (set, get-with-wait, add) as in Gloo and torch's c10d, so the
 * bootstrap never knows which one it talks to: the TCP client of the server rank 0 runs
 * (MASTER_ADDR:MASTER_PORT, or the root info's address), an in-memory store for tests, or
 * (later) a store handed in by PyTorch. Only small bootstrap records go through it; data never
 * does.
 *
 * The server runs a libuv loop on its own thread inside the process that started it.
 */
#ifndef HCCL_STORE_H
#define HCCL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "hccl.h"

struct hccl_store;

struct hccl_store_ops {
  const char *name;
  /* Sets key to a copy of val[0..len). Overwrites. */
  HcclResult (*set)(struct hccl_store *s, const char *key, const void *val, size_t len);
  /* Waits until key exists (at most timeout_ms), then returns a malloc'd copy of its value in
   * *val (caller frees) and its length in *len. HCCL_E_TIMEOUT names the key on expiry. */
  HcclResult (*get)(struct hccl_store *s, const char *key, void **val, size_t *len,
                    int64_t timeout_ms);
  /* Adds delta to the integer at key (absent = 0) and returns the new value. */
  HcclResult (*add)(struct hccl_store *s, const char *key, int64_t delta, int64_t *result);
  /* Frees the client (not the server). */
  void (*close)(struct hccl_store *s);
};

struct hccl_store {
  const struct hccl_store_ops *ops;
};

/* Connects to a store server at host:port, retrying refused connections until timeout_ms.
 * host is a numeric address or a name resolved to IPv4 first. Errors name host and port:
 * HCCL_E_NOT_FOUND (name does not resolve), HCCL_E_TIMEOUT (nothing accepted in time). */
HcclResult hccl__store_tcp_connect(const char *host, uint16_t port, int64_t timeout_ms,
                                   struct hccl_store **out);

/* An in-process, thread-safe store (tests). */
HcclResult hccl__store_mem_new(struct hccl_store **out);

/* The caller's store (HcclStore, copied) behind the ops table; close frees only the adapter. */
HcclResult hccl__store_ext_new(const HcclStore *user, struct hccl_store **out);

struct hccl_store_server;

/* Starts a server on bind_addr:port (port 0 = ephemeral) on a thread of its own. The port it
 * got is stored in *bound_port. HCCL_E_UNAVAIL with "address already in use" when the port is
 * taken. */
HcclResult hccl__store_server_start(const char *bind_addr, uint16_t port,
                                    struct hccl_store_server **out, uint16_t *bound_port);
/* The same, checking every connection against trust (trust.h; NULL = no checks): the
 * whitelist at accept, the job token as the first request. The server takes over
 * trust->whitelist (freed when it stops, or at once if it cannot start). */
struct hccl_store_trust;
HcclResult hccl__store_server_start_trusted(const char *bind_addr, uint16_t port,
                                            const struct hccl_store_trust *trust,
                                            struct hccl_store_server **out, uint16_t *bound_port);
/* Presents the job token on a connection from hccl__store_tcp_connect, before any other
 * request. Fails with HCCL_E_PARA, naming the store, when the server refuses it (another job's
 * store, or a store that expects a token when token is ""). */
HcclResult hccl__store_tcp_hello(struct hccl_store *s, const char *token);

/* Stops the thread, closes every connection, frees the server. NULL is accepted. */
void hccl__store_server_stop(struct hccl_store_server *server);

/* Convenience wrappers over s->ops. */
static inline HcclResult hccl__store_set(struct hccl_store *s, const char *key, const void *val,
                                         size_t len) {
  return s->ops->set(s, key, val, len);
}
static inline HcclResult hccl__store_get(struct hccl_store *s, const char *key, void **val,
                                         size_t *len, int64_t timeout_ms) {
  return s->ops->get(s, key, val, len, timeout_ms);
}
static inline HcclResult hccl__store_add(struct hccl_store *s, const char *key, int64_t delta,
                                         int64_t *result) {
  return s->ops->add(s, key, delta, result);
}
static inline void hccl__store_close(struct hccl_store *s) {
  if (s) s->ops->close(s);
}

#endif
