/*
 * tcp_write.c - the output side of a TCP link's socket: control frames queued (ACKs, ABORT,
 * BYE, questions and answers), DATA frames committed by the algorithm's thread, and their
 * writing, with one sendmsg per link per turn (the rest of a partly written DATA frame, the
 * queued control frames, then every committed DATA frame), by the I/O thread
 * (hccl__tcp_link_write) or by the committing thread itself at once (hccl__tcp_write_now, the
 * same write under the link's out_lock). Once the communicator is aborted no payload byte is
 * read any more: a DATA frame under way is finished with zeros. At teardown the BYE follows
 * what is queued, then a shutdown for writing. See tcp.c for the protocol.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "tcp.h"
#include "tcp_pump.h"
#include "tcp_sys.h"
#include "wait.h"

/* ---- output ---- */

/* The socket's epoll interest (under out_lock): EPOLLOUT while a write waits for room,
 * EPOLLIN unless the input side is parked. */
void hccl__tcp_arm(struct tcp_link *l) {
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
void hccl__tcp_ctl_queue(struct tcp_link *l, const struct tcp_frame *f, const void *payload) {
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
bool hccl__tcp_link_has_output(struct tcp_link *l) {
  struct tcp_pump *pump = l->pump;
  if (pump->down || pump->wr_shut) return false;
  return pump->ctl_head != pump->ctl_tail || pump->data_off > 0 ||
         pump->written != atomic_load(&l->committed) ||
         pump->ack_sent != atomic_load(&l->released) ||
         l->st->stopping;
}

/* Tells a send_flush waiter how many DATA frames are wholly written (their payloads read). */
static void publish_written(struct tcp_link *l) {
  if (atomic_load_explicit(&l->cr.written, memory_order_relaxed) != l->pump->written)
    hccl__credits_written(&l->cr, l->pump->written);
}

/* What the rest of a DATA frame is written from once the communicator is aborted. */
static const char zeros[TCP_INBUF];

/* Queues what is due and writes as much as the socket takes in one sendmsg, under out_lock.
 * Returns whether anything moved. `mine`: the I/O thread; the algorithm's thread
 * (hccl__tcp_write_now) leaves a failed socket to it. Once the communicator is aborted no
 * byte of a DATA payload is read any more (a payload sent by reference is the caller's buffer,
 * and the failed call has returned or is returning: tcp.c's tcp_abort waits for a pass): the
 * frame under way is finished with zeros, to keep the stream's framing, and the frames not
 * begun are dropped; the peers fail on the ABORT that follows. */
bool hccl__tcp_link_write(struct tcp_link *l, bool mine) {
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
      hccl__tcp_arm(l);
      return false;
    }
    if (mine) hccl__tcp_link_fail(l, errno, NULL);
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
    hccl__tcp_link_write(l, false);
    done = !hccl__tcp_link_has_output(l);
  }
  pthread_mutex_unlock(&pump->out_lock);
  return done;
}
