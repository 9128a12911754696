/*
 * server.c - the store server: a libuv loop on a thread of its own that answers the
 * requests of client.c clients (wire format in wire.h); here it starts, runs and stops.
 * Its connections are served in server_conn.c, on the key table of server_keys.c (server_int.h).
 *
 * Everything runs on the loop thread, except start (which binds and listens on the caller's
 * thread, so that "address in use" comes back as a result) and stop (which only signals the
 * loop through a uv_async and joins). Nothing is shared between the two threads while the
 * loop runs, so there are no locks.
 *
 * The loop thread blocks every signal: signals stay with the application's threads, and a
 * write to a peer that is gone fails with EPIPE instead of raising SIGPIPE.
 */
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "log.h"
#include "server_int.h"
#include "store.h"
#include "thread.h"
#include "trust.h"

#define LISTEN_BACKLOG 1024

static void on_stop(uv_async_t *a) {
  struct hccl_store_server *s = a->data;
  uv_close((uv_handle_t *)&s->listener, NULL);
  uv_close((uv_handle_t *)&s->stop_async, NULL);
  uv_close((uv_handle_t *)&s->sweep, NULL);
  hccl__store_conns_close(s);
}

static void *loop_main(void *arg) {
  struct hccl_store_server *s = arg;
  uv_run(&s->loop, UV_RUN_DEFAULT);
  return NULL;
}

static void free_all(struct hccl_store_server *s) {
  hccl__store_keys_free(&s->keys);
  hccl__whitelist_free(s->trust.whitelist);
  free(s);
}

/* Closes the listener of a server whose start failed and frees it. */
static void abandon(struct hccl_store_server *s) {
  uv_close((uv_handle_t *)&s->listener, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  free_all(s);
}

static HcclResult listen_error(struct hccl_store_server *s, int rc) {
  HcclResult r;
  if (rc == UV_EADDRINUSE)
    r = hccl__fail(HCCL_E_UNAVAIL,
                   "store server cannot listen on %s: address already in use; another job or "
                   "process holds this port (choose another MASTER_PORT or stop that process)",
                   s->where);
  else if (rc == UV_EADDRNOTAVAIL)
    r = hccl__fail(HCCL_E_UNAVAIL,
                   "store server cannot listen on %s: the address is not one of this host's; "
                   "check HCCL_IF_IP / MASTER_ADDR",
                   s->where);
  else if (rc == UV_EACCES)
    r = hccl__fail(HCCL_E_UNAVAIL,
                   "store server cannot listen on %s: permission denied (ports below 1024 need "
                   "privileges)",
                   s->where);
  else
    r = hccl__fail(HCCL_E_SYSCALL, "store server cannot listen on %s: %s", s->where,
                   uv_strerror(rc));
  abandon(s);
  return r;
}

/* See store.h. bind_addr is a numeric address or a host name (IPv4 first); NULL means every
 * IPv4 interface. On success *out and *bound_port are set and the loop thread runs; stop it
 * with hccl__store_server_stop. Errors: HCCL_E_NOT_FOUND (name does not resolve),
 * HCCL_E_UNAVAIL (address in use, not local, or privileged), HCCL_E_SYSCALL/MEMORY. */
HcclResult hccl__store_server_start(const char *bind_addr, uint16_t port,
                                    struct hccl_store_server **out, uint16_t *bound_port) {
  return hccl__store_server_start_trusted(bind_addr, port, NULL, out, bound_port);
}

HcclResult hccl__store_server_start_trusted(const char *bind_addr, uint16_t port,
                                            const struct hccl_store_trust *trust,
                                            struct hccl_store_server **out, uint16_t *bound_port) {
  struct hccl_whitelist *wl = trust ? trust->whitelist : NULL;
  if (!out || !bound_port) {
    hccl__whitelist_free(wl);
    return hccl__fail(HCCL_E_PTR, "hccl__store_server_start: out or bound_port is NULL");
  }
  if (!bind_addr) bind_addr = "0.0.0.0";
  struct addrinfo *ai;
  HcclResult r = hccl__store_resolve(bind_addr, port, 1, "store server", &ai);
  if (r != HCCL_SUCCESS) {
    hccl__whitelist_free(wl);
    return r;
  }
  struct hccl_store_server *s = calloc(1, sizeof(*s));
  if (!s || hccl__store_keys_init(&s->keys) != 0) {
    freeaddrinfo(ai);
    free(s);
    hccl__whitelist_free(wl);
    return hccl__fail(HCCL_E_MEMORY, "no memory for the store server");
  }
  if (trust) s->trust = *trust; /* the whitelist stays the caller's */
  snprintf(s->where, sizeof(s->where), ai->ai_family == AF_INET6 ? "[%s]:%u" : "%s:%u", bind_addr,
           port);
  int rc = uv_loop_init(&s->loop);
  if (rc < 0) {
    freeaddrinfo(ai);
    free_all(s);
    return hccl__fail(HCCL_E_SYSCALL, "store server: cannot create its event loop: %s",
                      uv_strerror(rc));
  }
  uv_tcp_init(&s->loop, &s->listener);
  s->listener.data = s;
  /* libuv sets SO_REUSEADDR, so a restarted job can rebind over TIME_WAIT connections; a
   * live listener still holds the port. EADDRINUSE may come from bind or from listen. */
  rc = uv_tcp_bind(&s->listener, ai->ai_addr, 0);
  freeaddrinfo(ai);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&s->listener, LISTEN_BACKLOG, hccl__store_on_connection);
  if (rc < 0) return listen_error(s, rc);
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
  if (rc < 0) return listen_error(s, rc);
  uint16_t got = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
  snprintf(s->where, sizeof(s->where), ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", bind_addr,
           got);
  uv_async_init(&s->loop, &s->stop_async, on_stop);
  s->stop_async.data = s;
  uv_timer_init(&s->loop, &s->sweep);
  s->sweep.data = s;

  rc = hccl__thread_start(&s->thread, loop_main, s);
  if (rc != 0) {
    uv_close((uv_handle_t *)&s->stop_async, NULL);
    uv_close((uv_handle_t *)&s->sweep, NULL);
    abandon(s);
    return hccl__fail(HCCL_E_SYSCALL, "store server: cannot start its thread: %s", strerror(rc));
  }
  HCCL_INFO("store server listening on %s", s->where);
  *bound_port = got;
  *out = s;
  return HCCL_SUCCESS;
}

/* See store.h. Blocks until the loop thread has closed every connection (clients blocked in
 * GET see the connection close at once) and exited. Not to be called from the loop thread. */
void hccl__store_server_stop(struct hccl_store_server *server) {
  if (!server) return;
  uv_async_send(&server->stop_async);
  pthread_join(server->thread, NULL);
  HCCL_INFO("store server %s served %llu bytes in %llu replies", server->where,
            server->served_bytes, server->replies);
  int rc = uv_loop_close(&server->loop);
  if (rc != 0)
    HCCL_WARN("store server %s: event loop still had handles at stop: %s", server->where,
              uv_strerror(rc));
  free_all(server);
}
