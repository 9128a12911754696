/*
 * tcp_io_thread.c - the TCP transport's I/O thread, one per communicator: every socket call
 * after the handshake but the algorithm's threads' own writes of their DATA frames
 * (hccl__tcp_write_now) and their own reads while they wait for a small message
 * (hccl__tcp_read_now). Each pass queues the ABORTs and questions asked of it, writes what
 * every link has due (tcp_write.c) and reads what epoll reports readable (tcp_read.c), and gives
 * the listener its turn (tcp_dial.c). Nothing moved: it polls for the spin budget, then sleeps
 * in epoll_wait after raising `sleeping`, which tells the algorithm's threads to write the
 * eventfd after a commit or a release (a Dekker pair: one of the two sees the other). See tcp.c
 * for the protocol and tcp.h for the shared structures. (An I/O thread, not "progress": in this
 * library progress is a rank's published account of where it is, core/progress.c.)
 *
 * At teardown it writes what is queued, a BYE on every link, shuts each socket for writing,
 * then reads until every peer has closed or LINGER_MS has passed (FLUSH_MS bounds the writing).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"
#include "tcp.h"
#include "tcp_pump.h"
#include "wait.h"

#define FLUSH_MS 2000 /* teardown: time to write what is queued, then BYE */
#define LINGER_MS 500 /* teardown: time to wait for the peers to close */
#define SERVE_MS 250  /* the listener's turn at least this often (silent connections' deadline) */

/* ---- the thread ---- */

static void queue_aborts(struct tcp_state *st) {
  struct tcp_frame f = {.type = FRAME_ABORT,
                        .arg = atomic_load(&st->abort_origin) - 1,
                        .code = atomic_load(&st->abort_code),
                        .size = (uint32_t)strlen(st->abort_reason) + 1};
  int n = atomic_load_explicit(&st->nlinks, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (st->all[i]->base.peer != f.arg) hccl__tcp_ctl_queue(st->all[i], &f, st->abort_reason);
}

/* Queries the algorithm's threads asked for, on the peer's first link: a PROGQ (progress),
 * a REACHQ (how the peer's links to a third rank are). */
static void queue_asks(struct tcp_state *st) {
  for (uint32_t r = 0; r < st->tx->nranks; r++) {
    uint64_t ask = atomic_exchange(&st->peers[r].ask, 0);
    uint32_t reach = atomic_exchange(&st->peers[r].reach_ask, 0);
    if (!ask && !reach) continue;
    struct tcp_link *l = atomic_load(&st->peers[r].link[HCCL_CHANNEL_COLL]);
    if (!l) l = atomic_load(&st->peers[r].link[HCCL_CHANNEL_P2P]);
    if (!l) continue;
    struct tcp_frame f = {.type = FRAME_PROGQ, .arg = (uint32_t)(ask - 1)};
    if (ask) hccl__tcp_ctl_queue(l, &f, NULL);
    struct tcp_frame q = {.type = FRAME_REACHQ, .arg = reach - 1};
    if (reach) hccl__tcp_ctl_queue(l, &q, NULL);
  }
}

static bool any_output(struct tcp_state *st, int n) {
  bool any = false;
  for (int i = 0; i < n && !any; i++) {
    struct tcp_pump *pump = st->all[i]->pump;
    pthread_mutex_lock(&pump->out_lock);
    any = !pump->out_blocked && hccl__tcp_link_has_output(st->all[i]);
    pthread_mutex_unlock(&pump->out_lock);
  }
  return any;
}

void *hccl__tcp_io_main(void *arg) {
  struct tcp_state *st = arg;
  hccl__log_bind(st->tx->log);
  struct epoll_event ev[32];
  int64_t idle_since = 0, flush_end = 0, linger_end = 0;
  for (;;) {
    bool moved = false;
    int n = atomic_load_explicit(&st->nlinks, memory_order_acquire);
    int64_t now = hccl__now_ns();
    if (atomic_exchange(&st->abort_send, 0) && atomic_load(&st->abort_ready)) queue_aborts(st);
    if (atomic_exchange(&st->ask_send, 0)) queue_asks(st);
    if (atomic_load(&st->stop) && !st->stopping) {
      st->stopping = true;
      flush_end = now + FLUSH_MS * 1000000LL;
    }
    for (int i = 0; i < n; i++) {
      struct tcp_link *l = st->all[i];
      if (atomic_load(&l->pump->in_parked)) moved |= hccl__tcp_read_turn(l);
      pthread_mutex_lock(&l->pump->out_lock);
      if (!l->pump->out_blocked && hccl__tcp_link_has_output(l))
        moved |= hccl__tcp_link_write(l, true);
      pthread_mutex_unlock(&l->pump->out_lock);
    }
    if (st->stopping) {
      bool flushed = true, closed = true;
      for (int i = 0; i < n; i++) {
        struct tcp_link *l = st->all[i];
        if (!l->pump->down && !l->pump->wr_shut) flushed = false;
        if (!l->pump->down) closed = false;
      }
      if (flushed && !linger_end) linger_end = now + LINGER_MS * 1000000LL;
      if (closed || (linger_end && now >= linger_end) || (!flushed && now >= flush_end)) break;
    }
    int timeout = 0;
    if (moved) {
      idle_since = 0;
    } else if (!idle_since) {
      idle_since = now;
    } else if (now - idle_since >= st->spin_ns) {
      timeout = st->stopping ? 10 : 1000;
      atomic_store(&st->sleeping, 1);
      if (any_output(st, n) || atomic_load(&st->abort_send) || atomic_load(&st->ask_send) ||
          atomic_load(&st->stop) != st->stopping ||
          atomic_load_explicit(&st->nlinks, memory_order_acquire) != n) {
        atomic_store(&st->sleeping, 0);
        timeout = 0;
      }
    }
    int got = epoll_wait(st->epfd, ev, 32, timeout);
    atomic_store(&st->sleeping, 0);
    bool serve = now - st->served_ns > SERVE_MS * 1000000LL;
    for (int i = 0; i < got; i++) {
      struct tcp_link *l = ev[i].data.ptr;
      if ((void *)l == (void *)&st->acc) {
        serve = true;
        continue;
      }
      if (!l) {
        uint64_t v;
        ssize_t k = read(st->evfd, &v, sizeof(v));
        (void)k;
        continue;
      }
      pthread_mutex_lock(&l->pump->out_lock);
      if ((ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && l->pump->out_blocked &&
          !l->pump->down) {
        l->pump->out_blocked = false;
        hccl__tcp_arm(l);
      }
      pthread_mutex_unlock(&l->pump->out_lock);
      if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) moved |= hccl__tcp_read_turn(l);
    }
    if (serve && !st->stopping) hccl__tcp_serve(st);
    if (got > 0) idle_since = 0;
    atomic_fetch_add_explicit(&st->passes, 1, memory_order_release);
  }
  return NULL;
}
