/*
 * tcp_pump.h - a TCP link's framing state (struct tcp_pump), shared by the four files that
 * drive it and by no other: tcp_pump.c (made, freed, failed), tcp_write.c (the output side),
 * tcp_read.c (the input side) and tcp_io_thread.c (the thread that drives both for every link).
 * tcp.c and the rest of the transport see only the opaque `struct tcp_pump *` of tcp.h.
 * Who calls whom: tcp_io_thread.c -> tcp_read.c, tcp_write.c; tcp_read.c -> tcp_write.c,
 * tcp_pump.c; tcp_write.c -> tcp_pump.c; never back.
 */
#ifndef HCCL_TCP_PUMP_H
#define HCCL_TCP_PUMP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tcp.h"

/* The framing state of one link's socket. Output (out_lock): a partly written DATA frame, then
 * the control queue, then the next DATA frames; a control frame starts only between DATA
 * frames. Input (in_lock): staging for what the socket gives, in[in_off..in_len) not yet
 * decoded, and the decoder it goes through (rx.bye: the peer said BYE). */
struct tcp_pump {
  /* Guards the output side (written to out_blocked): the I/O thread's passes, and the
   * algorithm's thread when it writes its frames at once (hccl__tcp_write_now). */
  pthread_mutex_t out_lock;
  uint32_t written;  /* DATA frames wholly written */
  size_t data_off;   /* bytes of DATA frame `written` written so far */
  uint32_t ack_sent; /* released count of the last ACK queued */
  char ctl[TCP_CTL_BYTES];
  size_t ctl_head, ctl_tail;
  bool out_blocked; /* the socket is full: waiting for EPOLLOUT */
  /* Guards the input side (lowat, post_gen, in, rx): the I/O thread's reads (read_turn),
   * and the algorithm's thread when it reads its own socket while it waits (read_now). */
  pthread_mutex_t in_lock;
  /* The I/O thread found the socket readable and in_lock taken: it dropped EPOLLIN from
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

/* ---- tcp_pump.c ---- */

/* Stops using l's socket (its reader or writer). err 0: EOF; else the socket's error; why: a
 * protocol error's text. Shut down both ways, so the peer learns of it too. */
void hccl__tcp_link_fail(struct tcp_link *l, int err, const char *why);
/* The peer is gone (found by one of its links' readers): records why once, wakes everyone
 * waiting on its links. */
void hccl__tcp_peer_down(struct tcp_state *st, uint32_t peer, const char *why);

/* ---- tcp_write.c ---- */

/* Sets l's epoll interest from its pump (under out_lock): EPOLLOUT while a write waits for
 * room, EPOLLIN unless the input side is parked. */
void hccl__tcp_arm(struct tcp_link *l);
/* Queues a control frame (an answer, an abort, a question) on l under out_lock, unless the link
 * can no longer write; it goes out at the link's next write. */
void hccl__tcp_ctl_queue(struct tcp_link *l, const struct tcp_frame *f, const void *payload);
/* Whether l has something to write (under out_lock): frames, an ACK due, or (teardown) the BYE
 * and the shutdown. */
bool hccl__tcp_link_has_output(struct tcp_link *l);
/* Writes what l has due in one sendmsg, under out_lock. Returns whether anything moved. mine:
 * the caller is the I/O thread, which alone fails the link on a socket error. */
bool hccl__tcp_link_write(struct tcp_link *l, bool mine);

/* ---- tcp_read.c ---- */

/* The I/O thread's read of l, unless the algorithm's thread is reading it
 * (hccl__tcp_read_now): then l's input side is parked until it lets go. Returns whether
 * anything moved. */
bool hccl__tcp_read_turn(struct tcp_link *l);

#endif
