/*
 * tcp_dial.c - reaching a peer's listener: its published address (the conn blob tcp.c's setup
 * writes), dialling it with a hello (a link's or a callback's), and the I/O thread's turn
 * at this rank's own listener (accepting, reading hellos, dialling back the callbacks asked of
 * it). Called by tcp.c (connect) and tcp_io_thread.c (each turn of the thread); calls neither,
 * only the socket steps of tcp_sock.c. See tcp.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "tcp.h"
#include "wait.h"

static void blob_addr(const struct tcp_blob *b, struct sockaddr_storage *a) {
  memset(a, 0, sizeof(*a));
  if (b->family == AF_INET6) {
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)a;
    s->sin6_family = AF_INET6;
    s->sin6_port = b->port;
    memcpy(&s->sin6_addr, b->addr, 16);
  } else if (b->family == AF_INET) {
    struct sockaddr_in *s = (struct sockaddr_in *)a;
    s->sin_family = AF_INET;
    s->sin_port = b->port;
    memcpy(&s->sin_addr, b->addr, 4);
  }
}

/* Fills p->addr (and this rank's own) for messages; false when the peer published none. */
bool hccl__tcp_peer_addr(struct tcp_state *st, uint32_t peer, struct sockaddr_storage *to) {
  struct hccl_tctx *tx = st->tx;
  struct tcp_blob blob;
  memcpy(&blob, tx->peers[peer].conn[HCCL_TRANSPORT_TCP], sizeof(blob));
  blob_addr(&blob, to);
  hccl__tcp_addr_str(to, st->peers[peer].addr, sizeof(st->peers[peer].addr));
  if (!st->peers[tx->rank].addr[0]) {
    struct tcp_blob mine;
    struct sockaddr_storage a;
    memcpy(&mine, tx->peers[tx->rank].conn[HCCL_TRANSPORT_TCP], sizeof(mine));
    blob_addr(&mine, &a);
    hccl__tcp_addr_str(&a, st->peers[tx->rank].addr, sizeof(st->peers[tx->rank].addr));
  }
  return blob.family != 0;
}

/* Dials peer's listener and says hello on `channel` (0, 1, or + HCCL_TCP_CALLBACK to ask the
 * peer to dial back), by HCCL_CONNECT_TIMEOUT. Any thread; logs and fails naming the pair. */
HcclResult hccl__tcp_dial(struct tcp_state *st, uint32_t peer, uint32_t channel, int *fd_out) {
  struct hccl_tctx *tx = st->tx;
  struct sockaddr_storage to;
  if (!hccl__tcp_peer_addr(st, peer, &to))
    return hccl__fail(HCCL_E_INTERNAL, "rank %u on server %s published no TCP address", peer,
                      tx->peers[peer].host);
  const char *addr = st->peers[peer].addr;
  int64_t deadline = hccl__now_ns() + tx->cfg->connect_timeout_ms * 1000000LL;
  int fd = -1, err = 0;
  if (hccl__tcp_connect(&to, deadline, &fd, &err) != HCCL_SUCCESS)
    return hccl__fail(HCCL_E_TCP_CONNECT,
                      "rank %u cannot connect to rank %u (host %s) at %s within %lld s "
                      "(%s): %s; check that the servers reach each other at "
                      "that address (HCCL_IF_IP / HCCL_SOCKET_IFNAME choose it)",
                      tx->rank, peer, tx->peers[peer].host, addr,
                      (long long)(tx->cfg->connect_timeout_ms / 1000),
                      tx->cfg->connect_timeout_src, strerror(err));
  struct hccl_tcp_hello h = st->acc.expect; /* the same ids, this rank, the channel */
  h.channel = channel;
  if (hccl__tcp_write_all(fd, &h, sizeof(h), deadline) != HCCL_SUCCESS) {
    int e = errno;
    close(fd);
    return hccl__fail(HCCL_E_TCP_CONNECT, "rank %u cannot send its hello to rank %u at %s: %s",
                      tx->rank, peer, addr, strerror(e));
  }
  atomic_fetch_add(channel >= HCCL_TCP_CALLBACK ? &st->n_callbacks : &st->n_dialled, 1);
  *fd_out = fd;
  return HCCL_SUCCESS;
}

/* The I/O thread's turn at the listener: new connections and hellos, then the callbacks
 * asked of this rank, each dialled unless its link exists or is being made. */
void hccl__tcp_serve(struct tcp_state *st) {
  struct hccl_tcp_acceptor *a = &st->acc;
  pthread_mutex_lock(&st->lock);
  st->served_ns = hccl__now_ns();
  hccl__tcp_acceptor_step(a);
  for (uint32_t k = 0; a->ncallback > 0 && k < 2 * a->nranks; k++) {
    if (!a->callback[k]) continue;
    a->callback[k] = false;
    a->ncallback--;
    struct tcp_dial *d = &st->dial[k];
    if (a->pending[k] >= 0 || a->taken[k] || d->state != DIAL_NONE ||
        atomic_load(&st->peers[k / 2].link[k % 2]))
      continue; /* made, being made, or waiting to be taken */
    d->state = DIAL_BUSY;
    pthread_mutex_unlock(&st->lock);
    int fd = -1;
    HcclResult r = hccl__tcp_dial(st, k / 2, k % 2, &fd);
    pthread_mutex_lock(&st->lock);
    d->state = DIAL_NONE;
    if (r == HCCL_SUCCESS) a->pending[k] = fd; /* taken when this rank uses the link */
  }
  pthread_mutex_unlock(&st->lock);
}
