/*
 * tcp_read.c - the input side of a TCP link's socket: reading what epoll reports readable,
 * frame headers and small payloads through a staging buffer, large payloads straight into
 * their receive slot or the receive posted in place; inside a large payload the socket's
 * SO_RCVLOWAT keeps epoll from waking the reader before TCP_LOWAT bytes of it (or its rest) are
 * there, instead of at each segment (set_lowat). The decoding itself (which slot, the
 * protocol's rules) is tcp_wire.c's; this file does what it reports (arrivals, ACKs, ABORT,
 * BYE, questions answered, a protocol error). Done by the I/O thread
 * (hccl__tcp_read_turn) or by an algorithm's thread that waits after a small message
 * (hccl__tcp_read_now, the same link_read under the link's in_lock), the other side then
 * parked out of the thread's epoll. See tcp.c for the protocol.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "credits.h"
#include "tcp.h"
#include "tcp_pump.h"
#include "tcp_sys.h"
#include "wait.h"

#define READ_SLICE_NS 1000000 /* read_now: its checks of the link and the abort mark this often */

/* ---- input ---- */

/* Acts on what the decoder (tcp_wire.c) reported for l. Returns false when the link failed. */
static bool rx_act(struct tcp_link *l, enum hccl_tcp_rx_event ev) {
  struct tcp_pump *pump = l->pump;
  struct tcp_state *st = l->st;
  switch (ev) {
  case HCCL_TCP_RX_DATA:
    hccl__credits_arrive(&l->cr, pump->rx.arrived);
    break;
  case HCCL_TCP_RX_ACK:
    hccl__credits_ack(&l->cr, pump->rx.acked);
    break;
  case HCCL_TCP_RX_ABORT:
    /* Links are not a full mesh: the first ABORT heard goes on to every other peer linked. */
    if (hccl__tcp_mark_abort(st, pump->rx.abort_origin, (HcclResult)pump->rx.abort_code,
                             pump->rx.abort_text))
      atomic_store(&st->abort_send, 1);
    hccl__tcp_wake_all(st);
    break;
  case HCCL_TCP_RX_PROGQ: {
    /* Answered here, so a rank whose threads are stopped does not answer. */
    struct tcp_frame f = {.type = FRAME_PROGA};
    char text[HCCL_REASON_MAX];
    uint32_t next;
    st->tx->report(st->tx->report_arg, pump->rx.progq_seq, text, sizeof(text), &next);
    f.arg = next == UINT32_MAX ? 0 : next + 1;
    f.size = (uint32_t)strlen(text) + 1;
    hccl__tcp_ctl_queue(l, &f, text);
    break;
  }
  case HCCL_TCP_RX_PROGA: {
    struct tcp_peer *p = &st->peers[l->base.peer];
    snprintf(p->report, sizeof(p->report), "%s", pump->rx.report);
    p->report_next = pump->rx.report_next ? pump->rx.report_next - 1 : UINT32_MAX;
    atomic_store_explicit(&p->answered, 1, memory_order_release);
    break;
  }
  case HCCL_TCP_RX_REACHQ: {
    int64_t q = hccl__tcp_quiet_ms(st, pump->rx.reach_rank, NULL);
    struct tcp_frame f = {.type = FRAME_REACHA,
                          .arg = pump->rx.reach_rank,
                          .code = (int32_t)(q > INT32_MAX ? INT32_MAX : q)};
    hccl__tcp_ctl_queue(l, &f, NULL);
    break;
  }
  case HCCL_TCP_RX_REACHA: {
    struct tcp_peer *p = &st->peers[l->base.peer];
    atomic_store(&p->reach_quiet_ms, pump->rx.reach_quiet_ms);
    atomic_store_explicit(&p->reach_answered, 1, memory_order_release);
    break;
  }
  case HCCL_TCP_RX_BYE: {
    struct tcp_peer *p = &st->peers[l->base.peer];
    atomic_store(&pump->bye_heard, true);
    bool all = true;
    for (int ch = 0; ch < HCCL_NCHANNELS; ch++)
      if (p->link[ch] && !atomic_load(&p->link[ch]->pump->bye_heard)) all = false;
    if (all && !st->stopping) hccl__tcp_peer_down(st, l->base.peer, "destroyed its communicator");
    break;
  }
  case HCCL_TCP_RX_ERROR:
    hccl__tcp_link_fail(l, 0, pump->rx.why);
    return false;
  case HCCL_TCP_RX_MORE:
    break;
  }
  return true;
}

/* What the decoder checks a frame against, as the algorithm's thread and the output side
 * have them now. */
static void rx_sync(struct tcp_link *l) {
  struct tcp_pump *pump = l->pump;
  pump->rx.released = atomic_load_explicit(&l->released, memory_order_acquire);
  pthread_mutex_lock(&pump->out_lock);
  pump->rx.written = pump->written;
  pthread_mutex_unlock(&pump->out_lock);
}

/* Decodes the staged bytes. Returns false when the link failed. */
static bool parse(struct tcp_link *l) {
  struct tcp_pump *pump = l->pump;
  while (pump->in_off < pump->in_len) {
    size_t used;
    rx_sync(l);
    enum hccl_tcp_rx_event ev =
        hccl__tcp_rx_feed(&pump->rx, pump->in + pump->in_off, pump->in_len - pump->in_off, &used);
    pump->in_off += used;
    if (!rx_act(l, ev)) return false;
  }
  return true;
}

/* Has the kernel report the socket readable only once the reader can use that much
 * (hccl__tcp_rx_lowat). Over veth a 64 MiB transfer lands in 64 KiB segments, and a wake-up of
 * this thread for each took 40% off a 2 x 1 allreduce's rate (docs/multi-server.md). The rest
 * of a payload always comes (a sender finishes every DATA frame it starts, with zeros after an
 * abort), the kernel grows the receive buffer to hold it, and EOF and errors wake the reader
 * whatever the mark. A failed setsockopt leaves the default (1): slower, not wrong. */
static void set_lowat(struct tcp_link *l) {
  struct tcp_pump *pump = l->pump;
  int v = (int)hccl__tcp_rx_lowat(&pump->rx, TCP_LOWAT);
  if (v != pump->lowat && setsockopt(l->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
    pump->lowat = v;
}

/* Before a read: the decoder takes the receive posted in place if a new one was (post_gen
 * moved), or none once the communicator is aborted (the rest of a payload under way in the
 * caller's buffer then goes to its slot): from the pass after the abort's mark nothing is
 * written to a failed call's buffer, which tcp_abort waits for. The post's memory is the
 * caller's until it has taken the post's last message (which lands before it is published) or
 * the call failed; the decoder drops a post once its last message has landed. */
static void post_sync(struct tcp_link *l) {
  struct hccl_tcp_rx *rx = &l->pump->rx;
  if (atomic_load_explicit(&l->st->abort_origin, memory_order_relaxed) != 0) {
    if (rx->post.dst) hccl__tcp_rx_unpost(rx);
    return;
  }
  uint32_t gen = atomic_load_explicit(&l->post_gen, memory_order_acquire);
  if (gen == l->pump->post_gen) return;
  pthread_mutex_lock(&l->post_lock);
  rx->post = l->post;
  pthread_mutex_unlock(&l->post_lock);
  l->pump->post_gen = gen;
}

/* Reads what the socket has (a bounded number of calls; a short read means it is drained, and
 * epoll is level-triggered), then sets the mark for what comes next. Returns whether anything
 * moved. */
static bool link_read(struct tcp_link *l) {
  struct tcp_pump *pump = l->pump;
  bool moved = false;
  post_sync(l);
  for (int round = 0; round < 16 && !pump->down; round++) {
    ssize_t k;
    size_t want;
    char *direct = hccl__tcp_rx_direct(&pump->rx, &want);
    if (direct && want >= TCP_DIRECT) {
      /* A large payload: straight into its slot, exactly to its end (the staging is empty:
       * parse stops only there or at an error). */
      k = hccl__tcp_sys.recv(l->fd, direct, want, MSG_DONTWAIT);
      if (k > 0) {
        moved = true;
        rx_act(l, hccl__tcp_rx_direct_got(&pump->rx, (size_t)k));
        if ((size_t)k < want) break; /* drained: epoll says when more comes */
        continue;
      }
    } else {
      if (pump->in_off == pump->in_len) {
        pump->in_off = pump->in_len = 0;
      } else if (pump->in_off > 0) {
        memmove(pump->in, pump->in + pump->in_off, pump->in_len - pump->in_off);
        pump->in_len -= pump->in_off;
        pump->in_off = 0;
      }
      size_t room = TCP_INBUF - pump->in_len;
      k = hccl__tcp_sys.recv(l->fd, pump->in + pump->in_len, room, MSG_DONTWAIT);
      if (k > 0) {
        moved = true;
        pump->in_len += (size_t)k;
        if (!parse(l)) return true;
        if ((size_t)k < room) break;
        continue;
      }
    }
    if (k == 0) {
      hccl__tcp_link_fail(l, 0, NULL);
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    hccl__tcp_link_fail(l, errno, NULL);
    return true;
  }
  set_lowat(l);
  return moved;
}

/* Takes l's socket out of the I/O thread's epoll (on) or puts it back. */
static void park(struct tcp_link *l, bool on) {
  pthread_mutex_lock(&l->pump->out_lock);
  atomic_store(&l->pump->in_parked, on);
  if (!atomic_load(&l->pump->down)) hccl__tcp_arm(l);
  pthread_mutex_unlock(&l->pump->out_lock);
}

/* The I/O thread's read of l, unless the algorithm's thread is reading it (read_now):
 * then the input side is parked, so that epoll, level-triggered, does not report the socket
 * at every pass until that thread has read it, and taken back at the first pass after the
 * holder let go. */
bool hccl__tcp_read_turn(struct tcp_link *l) {
  struct tcp_pump *pump = l->pump;
  if (pthread_mutex_trylock(&pump->in_lock) != 0) {
    if (!atomic_load(&pump->in_parked)) park(l, true);
    /* A Dekker pair with read_now's unlock: either this try finds the lock free, or the
     * holder sees in_parked and pokes. */
    atomic_thread_fence(memory_order_seq_cst);
    if (pthread_mutex_trylock(&pump->in_lock) != 0) return false;
  }
  if (atomic_load(&pump->in_parked)) park(l, false);
  bool moved = !atomic_load(&pump->down) && link_read(l);
  pthread_mutex_unlock(&pump->in_lock);
  return moved;
}

bool hccl__tcp_read_now(struct tcp_link *l, int64_t budget_ns) {
  struct tcp_pump *pump = l->pump;
  struct tcp_state *st = l->st;
  if (pthread_mutex_trylock(&pump->in_lock) != 0) return false;
  int64_t end = hccl__now_ns() + budget_ns;
  bool parked = false;
  for (;;) {
    if (atomic_load(&pump->down) || atomic_load(&st->stop) ||
        atomic_load_explicit(&st->abort_origin, memory_order_relaxed) != 0)
      break;
    link_read(l);
    if (hccl__credits_recv_ready(&l->cr)) break;
    int64_t left = end - hccl__now_ns();
    if (left <= 0) break;
    if (left > READ_SLICE_NS) left = READ_SLICE_NS;
    if (!parked) {
      /* Before sleeping on the socket: out of the I/O thread's epoll, so that what comes
       * wakes this thread alone. */
      parked = true;
      park(l, true);
    }
    struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
    struct timespec ts = {.tv_sec = 0, .tv_nsec = left};
    ppoll(&pfd, 1, &ts, NULL);
  }
  if (parked) park(l, false);
  pthread_mutex_unlock(&pump->in_lock);
  atomic_thread_fence(memory_order_seq_cst);
  /* Parked by the thread meanwhile, or an ABORT read here that it must pass on. */
  if (atomic_load(&pump->in_parked) || atomic_load(&st->abort_send)) return true;
  pthread_mutex_lock(&pump->out_lock);
  bool due = !atomic_load(&pump->down) && hccl__tcp_link_has_output(l);
  pthread_mutex_unlock(&pump->out_lock);
  return due;
}
