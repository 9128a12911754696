/*
 * tcp_pump.c - the life of a TCP link's framing state (struct tcp_pump, tcp_pump.h): made with
 * the link, freed with it, and cut short when its socket fails. A failed socket (EOF, a reset,
 * a protocol error; hccl__tcp_link_fail) is shut both ways and its peer marked down once with
 * the reason (hccl__tcp_peer_down), waking every waiter on that peer's links, as an abort's mark
 * wakes every waiter on every link (hccl__tcp_mark_abort, hccl__tcp_wake_all). A failing wait
 * then asks the kernel whether the peer's host still answers (hccl__tcp_quiet_ms). The reading
 * and writing that find the failures are tcp_read.c's and tcp_write.c's.
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "credits.h"
#include "log.h"
#include "tcp.h"
#include "tcp_pump.h"
#include "wait.h"

HcclResult hccl__tcp_pump_new(struct tcp_link *l) {
  struct tcp_pump *p = calloc(1, sizeof(*p));
  if (!p) return HCCL_E_MEMORY;
  pthread_mutex_init(&p->out_lock, NULL);
  pthread_mutex_init(&p->in_lock, NULL);
  p->lowat = 1; /* the kernel's default */
  hccl__tcp_rx_init(&p->rx, l->rbuf, l->base.slot_bytes, l->base.tx->nranks);
  l->rhdr = p->rx.hdr;
  l->rat = p->rx.at;
  l->pump = p;
  return HCCL_SUCCESS;
}

void hccl__tcp_pump_free(struct tcp_pump *p) {
  if (!p) return;
  pthread_mutex_destroy(&p->out_lock);
  pthread_mutex_destroy(&p->in_lock);
  free(p);
}

/* ---- failures ---- */

static void wake_link(struct tcp_link *l) {
  hccl__credits_wake_all(&l->cr);
}

void hccl__tcp_wake_all(struct tcp_state *st) {
  int n = atomic_load_explicit(&st->nlinks, memory_order_acquire);
  for (int i = 0; i < n; i++)
    wake_link(st->all[i]);
}

bool hccl__tcp_mark_abort(struct tcp_state *st, uint32_t origin, HcclResult code,
                          const char *reason) {
  uint32_t expect = 0;
  if (!atomic_compare_exchange_strong(&st->abort_origin, &expect, origin + 1)) return false;
  atomic_store(&st->abort_code, (int32_t)code);
  snprintf(st->abort_reason, sizeof(st->abort_reason), "%s", reason);
  atomic_store(&st->abort_ready, 1);
  return true;
}

/* The peer of l is gone (found by the link's reader): record why, wake everyone waiting on it. */
void hccl__tcp_peer_down(struct tcp_state *st, uint32_t peer, const char *why) {
  struct tcp_peer *p = &st->peers[peer];
  /* Once: two channels' readers may find the peer gone at once. */
  if (!atomic_exchange(&p->downing, 1)) {
    snprintf(p->reason, sizeof(p->reason), "%s", why);
    atomic_store(&p->dead, 1);
    HCCL_INFO("TCP link to rank %u (%s): %s", peer, p->addr, why);
  }
  for (int ch = 0; ch < HCCL_NCHANNELS; ch++)
    if (p->link[ch]) wake_link(p->link[ch]);
}

/* Stops using l's socket (its reader or writer). err 0: EOF; else the socket's error; why: a
 * protocol error's text. Shut down both ways, so the peer learns of it too. */
void hccl__tcp_link_fail(struct tcp_link *l, int err, const char *why) {
  struct tcp_pump *pump = l->pump;
  struct tcp_state *st = l->st;
  if (atomic_exchange(&pump->down, true)) return;
  epoll_ctl(st->epfd, EPOLL_CTL_DEL, l->fd, NULL);
  shutdown(l->fd, SHUT_RDWR);
  if (st->stopping) return;
  char text[160];
  if (why)
    snprintf(text, sizeof(text), "%s", why);
  else if (atomic_load(&pump->bye_heard))
    snprintf(text, sizeof(text), "destroyed its communicator");
  else if (err == 0)
    snprintf(text, sizeof(text), "closed the connection");
  else
    snprintf(text, sizeof(text), "reset the connection (%s)", strerror(err));
  hccl__tcp_peer_down(st, l->base.peer, text);
}

int64_t hccl__tcp_quiet_ms(struct tcp_state *st, uint32_t peer, int64_t *data_ms) {
  int64_t quiet = -1, data = -1;
  for (int ch = 0; ch < HCCL_NCHANNELS; ch++) {
    struct tcp_link *l = atomic_load(&st->peers[peer].link[ch]);
    struct tcp_info ti;
    socklen_t tl = sizeof(ti);
    if (!l || getsockopt(l->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0) continue;
    if (quiet < 0 || ti.tcpi_last_ack_recv < quiet) quiet = ti.tcpi_last_ack_recv;
    if (data < 0 || ti.tcpi_last_data_recv < data) data = ti.tcpi_last_data_recv;
  }
  if (data_ms) *data_ms = data;
  return quiet;
}
