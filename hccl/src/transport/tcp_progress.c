/*
 * tcp_progress.c - the TCP transport's progress thread, one per communicator: every socket call
 * after the handshake but the algorithm's threads' own writes of their DATA frames
 * (hccl__tcp_write_now, the same link_write under the link's out_lock) and their own reads while
 * they wait for a small message (hccl__tcp_read_now, the same link_read under the link's
 * in_lock). See tcp.c for the protocol and tcp.h for the shared structures.
 *
 * Each pass writes what every link has due (with one sendmsg per link: the rest of a partly
 * written DATA frame, the queued control frames, then every committed DATA frame) and reads
 * what epoll reports readable: frame headers and small payloads through a staging buffer,
 * large payloads straight into their receive slot; inside a large payload the socket's
 * SO_RCVLOWAT keeps epoll from waking the thread before TCP_LOWAT bytes of it (or its rest) are
 * there, instead of at each segment (set_lowat). The decoding itself (which slot, the
 * protocol's rules) is tcp_wire.c's; this file does what it reports. Nothing moved: it polls
 * for the spin budget, then sleeps in epoll_wait after raising `sleeping`, which tells the
 * algorithm's threads to write the eventfd after a commit or a release (a Dekker pair: one of
 * the two sees the other).
 *
 * At teardown it writes what is queued, a BYE on every link, shuts each socket for writing,
 * then reads until every peer has closed or LINGER_MS has passed (FLUSH_MS bounds the writing).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "tcp.h"
#include "tcp_sys.h"
#include "wait.h"

#define FLUSH_MS 2000 /* teardown: time to write what is queued, then BYE */
#define LINGER_MS 500 /* teardown: time to wait for the peers to close */
#define READ_SLICE_NS 1000000 /* read_now: its checks of the link and the abort mark this often */
#define SERVE_MS 250  /* the listener's turn at least this often (silent connections' deadline) */

/* The framing state of one link's socket. Output (out_lock): a partly written DATA frame, then
 * the control queue, then the next DATA frames; a control frame starts only between DATA
 * frames. Input (in_lock): staging for what the socket gives, in[in_off..in_len) not yet
 * decoded, and the decoder it goes through (rx.bye: the peer said BYE). */
struct tcp_pump {
  /* Guards the output side (written to out_blocked): the progress thread's passes, and the
   * algorithm's thread when it writes its frames at once (hccl__tcp_write_now). */
  pthread_mutex_t out_lock;
  uint32_t written;  /* DATA frames wholly written */
  size_t data_off;   /* bytes of DATA frame `written` written so far */
  uint32_t ack_sent; /* released count of the last ACK queued */
  char ctl[TCP_CTL_BYTES];
  size_t ctl_head, ctl_tail;
  bool out_blocked; /* the socket is full: waiting for EPOLLOUT */
  /* Guards the input side (lowat, post_gen, in, rx): the progress thread's reads (read_turn),
   * and the algorithm's thread when it reads its own socket while it waits (read_now). */
  pthread_mutex_t in_lock;
  /* The progress thread found the socket readable and in_lock taken: it dropped EPOLLIN from
   * the socket's interest (arm) until the holder lets go, which then pokes it. */
  _Atomic bool in_parked;
  int lowat; /* the socket's SO_RCVLOWAT as last set (set_lowat) */
  uint32_t post_gen; /* the link's post_gen when the decoder last took its post (post_sync) */
  char in[TCP_INBUF];
  size_t in_off, in_len;
  struct hccl_tcp_rx rx;
  bool bye_sent, wr_shut;
  /* rx.bye, for readers without in_lock (another channel's reader, the writer's link_fail). */
  _Atomic bool bye_heard;
  _Atomic bool down;
};

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
  hccl__wake_all(&l->arrived);
  hccl__wake_all(&l->acked);
  hccl__wake_all(&l->written);
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
static void peer_down(struct tcp_state *st, uint32_t peer, const char *why) {
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
static void link_fail(struct tcp_link *l, int err, const char *why) {
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
  peer_down(st, l->base.peer, text);
}

/* ---- output ---- */

/* The socket's epoll interest (under out_lock): EPOLLOUT while a write waits for room,
 * EPOLLIN unless the input side is parked. */
static void arm(struct tcp_link *l) {
  struct epoll_event ev = {.events = (atomic_load(&l->pump->in_parked) ? 0u : EPOLLIN) |
                                     (l->pump->out_blocked ? EPOLLOUT : 0u),
                           .data.ptr = l};
  epoll_ctl(l->st->epfd, EPOLL_CTL_MOD, l->fd, &ev);
}

static bool ctl_push(struct tcp_link *l, const struct tcp_frame *f, const void *payload) {
  struct tcp_pump *pump = l->pump;
  size_t need = sizeof(*f) + f->size;
  if (pump->ctl_head > 0 && pump->ctl_tail + need > sizeof(pump->ctl)) {
    memmove(pump->ctl, pump->ctl + pump->ctl_head, pump->ctl_tail - pump->ctl_head);
    pump->ctl_tail -= pump->ctl_head;
    pump->ctl_head = 0;
  }
  if (pump->ctl_tail + need > sizeof(pump->ctl)) return false;
  memcpy(pump->ctl + pump->ctl_tail, f, sizeof(*f));
  if (f->size) memcpy(pump->ctl + pump->ctl_tail + sizeof(*f), payload, f->size);
  pump->ctl_tail += need;
  return true;
}

/* A control frame from outside link_write (an answer, an abort, a question): queued under
 * out_lock, unless the link can no longer write. */
static void ctl_queue(struct tcp_link *l, const struct tcp_frame *f, const void *payload) {
  struct tcp_pump *pump = l->pump;
  pthread_mutex_lock(&pump->out_lock);
  if (!pump->down && !pump->wr_shut) ctl_push(l, f, payload);
  pthread_mutex_unlock(&pump->out_lock);
}

static size_t data_frame_len(const struct tcp_link *l, uint32_t m) {
  return sizeof(struct tcp_frame) + l->shdr[m % TCP_NSLOTS].size;
}

/* Whether link_write has something to do: frames to write, an ACK due, or (teardown) the BYE
 * and the shutdown. */
static bool link_has_output(struct tcp_link *l) {
  struct tcp_pump *pump = l->pump;
  if (pump->down || pump->wr_shut) return false;
  return pump->ctl_head != pump->ctl_tail || pump->data_off > 0 ||
         pump->written != atomic_load(&l->committed) ||
         pump->ack_sent != atomic_load(&l->released) ||
         l->st->stopping;
}

/* Tells a send_flush waiter how many DATA frames are wholly written (their payloads read). */
static void publish_written(struct tcp_link *l) {
  if (atomic_load_explicit(&l->written, memory_order_relaxed) != l->pump->written)
    hccl__post(&l->written, &l->flush_waiting, l->pump->written);
}

/* What the rest of a DATA frame is written from once the communicator is aborted. */
static const char zeros[TCP_INBUF];

/* Queues what is due and writes as much as the socket takes in one sendmsg, under out_lock.
 * Returns whether anything moved. `mine`: the progress thread; the algorithm's thread
 * (hccl__tcp_write_now) leaves a failed socket to it. Once the communicator is aborted no
 * byte of a DATA payload is read any more (a payload sent by reference is the caller's buffer,
 * and the failed call has returned or is returning: tcp.c's tcp_abort waits for a pass): the
 * frame under way is finished with zeros, to keep the stream's framing, and the frames not
 * begun are dropped; the peers fail on the ABORT that follows. */
static bool link_write(struct tcp_link *l, bool mine) {
  struct tcp_pump *pump = l->pump;
  uint32_t rel = atomic_load_explicit(&l->released, memory_order_acquire);
  uint32_t committed = atomic_load_explicit(&l->committed, memory_order_acquire);
  bool aborted = atomic_load_explicit(&l->st->abort_origin, memory_order_relaxed) != 0;
  if (aborted && pump->data_off == 0 && pump->written != committed) {
    pump->written = committed;
    publish_written(l);
  }
  if (rel != pump->ack_sent) {
    struct tcp_frame f = {.type = FRAME_ACK, .arg = rel};
    if (ctl_push(l, &f, NULL)) pump->ack_sent = rel;
  }
  if (l->st->stopping && !pump->bye_sent && pump->data_off == 0 && pump->written == committed &&
      pump->ack_sent == rel) {
    struct tcp_frame f = {.type = FRAME_BYE};
    if (ctl_push(l, &f, NULL)) pump->bye_sent = true;
  }
  struct iovec iov[4 + 2 * TCP_NSLOTS];
  int n = 0;
  bool cut = false;
  uint32_t m = pump->written;
  if (pump->data_off > 0) {
    size_t off = pump->data_off, hl = sizeof(struct tcp_frame);
    if (off < hl) iov[n++] = (struct iovec){(char *)&l->shdr[m % TCP_NSLOTS] + off, hl - off};
    size_t poff = off > hl ? off - hl : 0, size = l->shdr[m % TCP_NSLOTS].size;
    if (poff < size && aborted) {
      /* At most the zeros there are; nothing may follow a part of the rest in this call. */
      cut = size - poff > sizeof(zeros);
      iov[n++] = (struct iovec){(char *)zeros, cut ? sizeof(zeros) : size - poff};
    } else if (poff < size) {
      iov[n++] = (struct iovec){(char *)l->spay[m % TCP_NSLOTS] + poff, size - poff};
    }
    m++;
  }
  if (pump->ctl_head != pump->ctl_tail && !cut)
    iov[n++] = (struct iovec){pump->ctl + pump->ctl_head, pump->ctl_tail - pump->ctl_head};
  for (; m != committed && !aborted; m++) {
    iov[n++] = (struct iovec){&l->shdr[m % TCP_NSLOTS], sizeof(struct tcp_frame)};
    if (l->shdr[m % TCP_NSLOTS].size)
      iov[n++] = (struct iovec){(char *)l->spay[m % TCP_NSLOTS], l->shdr[m % TCP_NSLOTS].size};
  }
  if (n == 0) {
    if (pump->bye_sent && !pump->wr_shut) {
      shutdown(l->fd, SHUT_WR);
      pump->wr_shut = true;
    }
    return false;
  }
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
  ssize_t k = hccl__tcp_sys.sendmsg(l->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k < 0) {
    if (errno == EINTR) return true;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pump->out_blocked = true;
      arm(l);
      return false;
    }
    if (mine) link_fail(l, errno, NULL);
    return mine;
  }
  /* Account for k bytes in the order of the iovecs. */
  size_t left = (size_t)k;
  if (pump->data_off > 0) {
    size_t rest = data_frame_len(l, pump->written) - pump->data_off;
    if (left < rest) {
      pump->data_off += left;
      return true;
    }
    left -= rest;
    pump->data_off = 0;
    pump->written++;
    publish_written(l);
  }
  size_t c = pump->ctl_tail - pump->ctl_head;
  if (c > 0) {
    size_t take = left < c ? left : c;
    pump->ctl_head += take;
    left -= take;
    if (pump->ctl_head == pump->ctl_tail) pump->ctl_head = pump->ctl_tail = 0;
    if (take < c) return true;
  }
  while (left > 0) {
    size_t len = data_frame_len(l, pump->written);
    if (left < len) {
      pump->data_off = left;
      break;
    }
    left -= len;
    pump->written++;
  }
  publish_written(l);
  return true;
}

bool hccl__tcp_write_now(struct tcp_link *l) {
  struct tcp_pump *pump = l->pump;
  if (pthread_mutex_trylock(&pump->out_lock) != 0) return false;
  bool done = false;
  if (!pump->out_blocked && !atomic_load(&pump->down) && !atomic_load(&l->st->stop)) {
    link_write(l, false);
    done = !link_has_output(l);
  }
  pthread_mutex_unlock(&pump->out_lock);
  return done;
}

/* ---- input ---- */

/* Acts on what the decoder (tcp_wire.c) reported for l. Returns false when the link failed. */
static bool rx_act(struct tcp_link *l, enum hccl_tcp_rx_event ev) {
  struct tcp_pump *pump = l->pump;
  struct tcp_state *st = l->st;
  switch (ev) {
  case HCCL_TCP_RX_DATA:
    hccl__post(&l->arrived, &l->recv_waiting, pump->rx.arrived);
    break;
  case HCCL_TCP_RX_ACK:
    hccl__post(&l->acked, &l->send_waiting, pump->rx.acked);
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
    ctl_queue(l, &f, text);
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
    ctl_queue(l, &f, NULL);
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
    if (all && !st->stopping) peer_down(st, l->base.peer, "destroyed its communicator");
    break;
  }
  case HCCL_TCP_RX_ERROR:
    link_fail(l, 0, pump->rx.why);
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
      link_fail(l, 0, NULL);
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    link_fail(l, errno, NULL);
    return true;
  }
  set_lowat(l);
  return moved;
}

/* Takes l's socket out of the progress thread's epoll (on) or puts it back. */
static void park(struct tcp_link *l, bool on) {
  pthread_mutex_lock(&l->pump->out_lock);
  atomic_store(&l->pump->in_parked, on);
  if (!atomic_load(&l->pump->down)) arm(l);
  pthread_mutex_unlock(&l->pump->out_lock);
}

/* The progress thread's read of l, unless the algorithm's thread is reading it (read_now):
 * then the input side is parked, so that epoll, level-triggered, does not report the socket
 * at every pass until that thread has read it, and taken back at the first pass after the
 * holder let go. */
static bool read_turn(struct tcp_link *l) {
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
    if (atomic_load_explicit(&l->arrived, memory_order_acquire) != l->received) break;
    int64_t left = end - hccl__now_ns();
    if (left <= 0) break;
    if (left > READ_SLICE_NS) left = READ_SLICE_NS;
    if (!parked) {
      /* Before sleeping on the socket: out of the progress thread's epoll, so that what comes
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
  bool due = !atomic_load(&pump->down) && link_has_output(l);
  pthread_mutex_unlock(&pump->out_lock);
  return due;
}

/* ---- the thread ---- */

static void queue_aborts(struct tcp_state *st) {
  struct tcp_frame f = {.type = FRAME_ABORT,
                        .arg = atomic_load(&st->abort_origin) - 1,
                        .code = atomic_load(&st->abort_code),
                        .size = (uint32_t)strlen(st->abort_reason) + 1};
  int n = atomic_load_explicit(&st->nlinks, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (st->all[i]->base.peer != f.arg) ctl_queue(st->all[i], &f, st->abort_reason);
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
    if (ask) ctl_queue(l, &f, NULL);
    struct tcp_frame q = {.type = FRAME_REACHQ, .arg = reach - 1};
    if (reach) ctl_queue(l, &q, NULL);
  }
}

static bool any_output(struct tcp_state *st, int n) {
  bool any = false;
  for (int i = 0; i < n && !any; i++) {
    struct tcp_pump *pump = st->all[i]->pump;
    pthread_mutex_lock(&pump->out_lock);
    any = !pump->out_blocked && link_has_output(st->all[i]);
    pthread_mutex_unlock(&pump->out_lock);
  }
  return any;
}

void *hccl__tcp_progress_main(void *arg) {
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
      if (atomic_load(&l->pump->in_parked)) moved |= read_turn(l);
      pthread_mutex_lock(&l->pump->out_lock);
      if (!l->pump->out_blocked && link_has_output(l)) moved |= link_write(l, true);
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
        arm(l);
      }
      pthread_mutex_unlock(&l->pump->out_lock);
      if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) moved |= read_turn(l);
    }
    if (serve && !st->stopping) hccl__tcp_serve(st);
    if (got > 0) idle_since = 0;
    atomic_fetch_add_explicit(&st->passes, 1, memory_order_release);
  }
  return NULL;
}
