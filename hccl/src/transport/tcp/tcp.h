/*
 * tcp.h - what the TCP transport's files share: the socket steps, the acceptor, a link, a peer
 * and the transport's state, and the functions the files call each other by. Private to this
 * room (transport/tcp/, and its tests): the rest of the library sees the transport through its
 * ops table (transport.h) only. The pure steps on the bytes a peer sends (the hello, the frames)
 * are tcp_wire.h, which this header includes.
 * tcp.c is setup, connect, abort, the peer questions, teardown and the ops table; tcp_data.c the
 * algorithm's side of the data path (the ops tcp.c's table names); tcp_io_thread.c the I/O
 * thread, which drives every link's socket through tcp_write.c (frames out), tcp_read.c (frames
 * in) and tcp_pump.c (the framing state, failures seen on sockets), also called by the
 * algorithm's threads (hccl__tcp_write_now, hccl__tcp_read_now; tcp_pump.h is what those four
 * share); tcp_dial.c dialling a peer and the thread's turn at the listener; tcp_sock.c the socket
 * steps (choosing the address, listening, connecting, the acceptor that reads hellos);
 * tcp_wire.c the pure steps on the bytes a peer controls (reading and checking a hello,
 * decoding the frame stream), which tests/fuzz/fuzz_tcp_handshake.c feeds.
 * Who calls whom: tcp.c -> tcp_data.c, tcp_io_thread.c, tcp_pump.c, tcp_dial.c, tcp_sock.c;
 * tcp_data.c -> tcp_read.c, tcp_write.c; tcp_io_thread.c -> tcp_read.c, tcp_write.c,
 * tcp_dial.c; tcp_read.c -> tcp_write.c, tcp_pump.c, tcp_wire.c; tcp_write.c -> tcp_pump.c;
 * tcp_dial.c -> tcp_sock.c; never back.
 *
 * System calls on the transport's sockets go through the table of tcp_sys.h (a test seam).
 */
#ifndef HCCL_TCP_H
#define HCCL_TCP_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <pthread.h>

#include "credits.h"
#include "hccl.h"
#include "transport.h"
#include "tcp_wire.h"

struct hccl_settings;

/* One interface address, as getifaddrs gives it. */
struct hccl_tcp_if {
  char name[IF_NAMESIZE];
  bool up, loopback;
  struct sockaddr_storage addr; /* AF_INET or AF_INET6 */
};

/* Whether interface `name` passes `spec`, an HCCL_SOCKET_IFNAME value in NCCL's syntax: a
 * comma-separated list of name prefixes ("eth,ib"); a leading '^' turns the list into
 * exclusions ("^docker,lo"); a leading '=' (after '^' if any) makes the entries exact names
 * ("=eth0", "^=docker0"). An empty spec passes every name. */
bool hccl__tcp_if_match(const char *spec, const char *name);

/* Which of ifs[0..n) a rank listens on: with spec "" the first that is up, not loopback and
 * not docker*, else the first up loopback; with a spec the first up interface it passes. IPv4
 * addresses are preferred to IPv6 ones (a second pass), and IPv6 link-local ones are skipped
 * (they need a scope). Returns the index, or -1 when none fits. */
int hccl__tcp_if_pick(const struct hccl_tcp_if *ifs, int n, const char *spec);

/* The address the listener binds (port 0): HCCL_IF_IP when set, else the interface
 * hccl__tcp_if_pick chooses from this host's. *why names where it came from, for messages.
 * HCCL_E_PARA / HCCL_E_NOT_FOUND (logged) when the setting is not an address or nothing
 * fits. */
HcclResult hccl__tcp_local_addr(const struct hccl_settings *cfg, struct sockaddr_storage *out,
                                char *why, size_t why_len);

/* "10.0.0.2:4321" or "[fe80::1]:4321". */
void hccl__tcp_addr_str(const struct sockaddr_storage *a, char *buf, size_t len);

/* A non-blocking, close-on-exec listener on addr (its port filled in on return). */
HcclResult hccl__tcp_listen(struct sockaddr_storage *addr, int backlog, int *fd_out);

/* A non-blocking, close-on-exec, TCP_NODELAY socket connected to `to` by deadline_ns
 * (CLOCK_MONOTONIC); a refused or timed-out attempt is retried until then. On failure returns
 * HCCL_E_TCP_CONNECT with the last errno in *err, not logged: the caller names the peer. */
HcclResult hccl__tcp_connect(const struct sockaddr_storage *to, int64_t deadline_ns, int *fd_out,
                             int *err);

/* Writes all len bytes to non-blocking fd by deadline_ns. HCCL_E_TCP_TRANSFER on error or
 * timeout (not logged: the caller names the peer). */
HcclResult hccl__tcp_write_all(int fd, const void *buf, size_t len, int64_t deadline_ns);

/* ---- the acceptor ---- */

#define HCCL_TCP_GREET_MAX 64 /* accepted sockets whose hello is still being read */

/* The accepting side of one communicator's links: the listener, the sockets whose hello is
 * being read, those whose hello came before their link was asked for, and the callbacks asked
 * of this rank. Driven by the I/O thread (hccl__tcp_acceptor_step) under the transport's
 * lock; the listener and the sockets being read are in its epoll set (epfd, tagged ep_tag). */
struct hccl_tcp_acceptor {
  int listen_fd;
  struct hccl_tcp_hello expect; /* magic, version, ids and slot size; rank = this rank */
  uint32_t nranks;
  bool *may_connect; /* [nranks]: ranks on other servers; filled by the caller */
  int *pending;      /* [nranks][2] a socket ready to be the link, not yet taken; -1 = none */
  bool *taken;       /* [nranks][2] handed out */
  bool *callback;    /* [nranks][2] a higher rank asked this one to dial it */
  uint32_t ncallback;
  int epfd; /* -1: not in an epoll set */
  void *ep_tag;
  int64_t greet_timeout_ns;
  const char *greet_timeout_name; /* the setting it came from, as the user set it */
  /* HCCL's whitelist (HCCL_WHITELIST_DISABLE=0), owned; NULL = every address may connect. */
  struct hccl_whitelist *whitelist;
  struct hccl_tcp_greet greet[HCCL_TCP_GREET_MAX];
  int ngreet;
};

/* Allocates the tables for nranks (listen_fd -1). HCCL_E_MEMORY, logged. */
HcclResult hccl__tcp_acceptor_init(struct hccl_tcp_acceptor *a, uint32_t nranks);

/* Without waiting: accepts what the listener has and reads what the sockets being read have,
 * keeping a whole hello's socket as pending (or, for a callback, noting it and closing the
 * socket) and refusing (closing, one WARN naming the address and why) a hello of another
 * protocol, job or communicator, a rank that does not connect here, a duplicate, and a
 * connection that says nothing within greet_timeout_ns. */
void hccl__tcp_acceptor_step(struct hccl_tcp_acceptor *a);
/* The pending socket of (peer, channel), now taken, or -1. */
int hccl__tcp_acceptor_take(struct hccl_tcp_acceptor *a, uint32_t peer, uint32_t channel);

/* Closes the listener and every socket not handed out (a WARN for a checked one: a link
 * nobody asked for). The tables stay until hccl__tcp_acceptor_free. */
void hccl__tcp_acceptor_close(struct hccl_tcp_acceptor *a);
void hccl__tcp_acceptor_free(struct hccl_tcp_acceptor *a);

/* ---- links and the I/O thread ---- */

struct tcp_state;
struct tcp_pump;

struct tcp_link {
  struct hccl_link base;
  struct tcp_state *st;
  int fd;
  int channel;
  /* Send side, the algorithm's thread: message m's frame header in shdr[m % 8], its payload
   * at spay[m % 8]: slot m % 8 of sbuf, or the caller's buffer (send_ref). */
  char *sbuf;
  struct tcp_frame shdr[TCP_NSLOTS];
  const char *spay[TCP_NSLOTS];
  /* Messages sent and received, the peer's released count (`acked`, from its ACKs) and the
   * messages landed (`arrived`), published by the I/O thread; waits sleep on those two; and
   * the DATA frames wholly written (`written`, send_flush's) (transport/credits.h). */
  struct hccl_credits cr;
  _Atomic uint32_t committed; /* = cr.sent, published to the I/O thread */
  /* Receive side, the algorithm's thread: message m at rat[m % 8] (rbuf's slot m % 8, or its
   * place in a receive posted in place), its header in rhdr[m % 8] (both written by the
   * I/O thread before it publishes arrived). */
  char *rbuf;
  const struct tcp_frame *rhdr;
  char *const *rat;
  uint32_t last_size; /* the last message's size: a small one is read by this thread (tcp.c) */
  _Atomic uint32_t released; /* = cr.received, published to the I/O thread */
  /* The receive posted in place (recv_post), set by the algorithm's thread under post_lock,
   * which then counts post_gen up; the I/O thread copies it into its decoder under the
   * lock before a read when post_gen moved. */
  pthread_mutex_t post_lock;
  struct hccl_tcp_post post;
  _Atomic uint32_t post_gen;
  /* The I/O thread's own: the framing state of both directions (tcp_pump.h). */
  struct tcp_pump *pump;
};

struct tcp_peer {
  struct tcp_link *_Atomic link[HCCL_NCHANNELS]; /* written at connect, read by the thread */
  /* A progress query to this peer: ask = the asker's call number + 1 until the thread sent it;
   * answered = 1 once report and report_next hold the peer's answer. */
  _Atomic uint64_t ask;
  _Atomic int answered;
  uint32_t report_next;
  char report[HCCL_REASON_MAX];
  /* A reach query through this peer: reach_ask = the rank asked about + 1 until the thread
   * sent it; reach_answered = 1 once reach_quiet_ms holds the answer. */
  _Atomic uint32_t reach_ask;
  _Atomic int reach_answered;
  _Atomic int32_t reach_quiet_ms;
  _Atomic int downing;                           /* claimed by the one who writes reason */
  _Atomic int dead;                              /* set after reason is written */
  char reason[160];                              /* "closed the connection", ... */
  char addr[80];                                 /* its listener, for messages */
};

/* Where a (peer, channel) link stands before it exists (tcp.c). */
enum {
  DIAL_NONE = 0,
  DIAL_BUSY = 1, /* a thread is dialling it */
  DIAL_ASKED = 2 /* callback sent */
};
struct tcp_dial {
  uint8_t state;
  int64_t since_ns; /* first asked for: HCCL_CONNECT_TIMEOUT runs from here */
};

struct tcp_state {
  struct hccl_tctx *tx;
  size_t slot_bytes;
  /* Guards acc, dial[], the appending of links to all[] and peers[].link[]: the I/O thread
   * accepts and dials callbacks while the collective and point-to-point threads make links on
   * first use. */
  pthread_mutex_t lock;
  struct tcp_dial *dial; /* [nranks][2] */
  int64_t served_ns;     /* the I/O thread's last acceptor step */
  struct tcp_peer *peers; /* [nranks] */
  struct hccl_tcp_acceptor acc;

  int epfd, evfd;
  pthread_t thread;
  bool thread_started;
  int64_t spin_ns;
  struct tcp_link **all; /* [2 nranks]; the first nlinks are published */
  _Atomic int nlinks;
  _Atomic int sleeping;   /* the thread may be in epoll_wait: write the eventfd */
  _Atomic int stop;       /* teardown asked */
  _Atomic int abort_send; /* abort() asked for ABORT frames */
  _Atomic int ask_send;   /* a peer's `ask` is set */
  bool stopping;          /* I/O thread: BYE and linger under way */
  _Atomic uint64_t passes; /* the I/O thread's passes so far (tcp_abort waits on it) */

  /* What making this communicator's links cost, for the debug log (tcp_connected): sockets
   * this rank dialled for links and for callbacks, links made over an accepted socket, and the
   * setup's time (listener, epoll, I/O thread). */
  _Atomic uint32_t n_dialled, n_callbacks, n_accepted;
  int64_t setup_ns;

  _Atomic uint32_t abort_origin; /* origin + 1; 0 = no abort */
  _Atomic int32_t abort_code;
  _Atomic uint32_t abort_ready; /* abort_reason written */
  char abort_reason[HCCL_REASON_MAX];
};

static inline struct tcp_state *hccl__tcp_state_of(const struct hccl_tctx *tx) {
  return tx->state[HCCL_TRANSPORT_TCP];
}

/* ---- waking the I/O thread ---- */

static inline void hccl__tcp_poke_always(struct tcp_state *st) {
  uint64_t one = 1;
  ssize_t k = write(st->evfd, &one, sizeof(one));
  (void)k; /* EAGAIN: the counter is already non-zero, so the thread will wake */
}

/* After a commit or a release: a system call only when the thread may be asleep. */
static inline void hccl__tcp_poke(struct tcp_state *st) {
  if (atomic_load(&st->sleeping) && atomic_exchange(&st->sleeping, 0)) hccl__tcp_poke_always(st);
}

/* ---- the data path, the algorithm's side (tcp_data.c): the ops tcp.c's table names ---- */

/* The check each sleep slice of a wait on a TCP link makes (the op wait_check; arg is the
 * link), after the wait has read every transport's abort mark: the peer's departure, as
 * HCCL_E_REMOTE naming it. */
HcclResult hccl__tcp_wait_check(void *arg, const struct hccl_wait *w, uint32_t peer);
/* The ops of the same names (transport.h gives their contracts). */
HcclResult hccl__tcp_send_acquire(struct hccl_link *base, void **buf, const struct hccl_wait *w);
void hccl__tcp_send_commit(struct hccl_link *base, size_t bytes, const struct hccl_stamp *stamp);
HcclResult hccl__tcp_send_ref(struct hccl_link *base, const void *buf, size_t bytes,
                              const struct hccl_stamp *stamp, const struct hccl_wait *w);
HcclResult hccl__tcp_send_flush(struct hccl_link *base, const struct hccl_wait *w);
HcclResult hccl__tcp_recv_acquire(struct hccl_link *base, const void **buf, size_t *bytes,
                                  struct hccl_stamp *stamp, const struct hccl_wait *w);
void hccl__tcp_recv_release(struct hccl_link *base);
void hccl__tcp_recv_post(struct hccl_link *base, void *buf, size_t chunk, size_t bytes,
                         uint32_t skip, uint32_t step);
bool hccl__tcp_send_ready(struct hccl_link *base);
bool hccl__tcp_recv_ready(struct hccl_link *base);
bool hccl__tcp_send_drained(struct hccl_link *base);
HcclResult hccl__tcp_send_drain(struct hccl_link *base, const struct hccl_wait *w);

/* The framing state of l's socket, made with the link (before it is published to the thread)
 * and freed with it: the decoder over l->rbuf, whose headers l->rhdr then points at. */
HcclResult hccl__tcp_pump_new(struct tcp_link *l);
void hccl__tcp_pump_free(struct tcp_pump *p);
/* The algorithm's thread writes what l has due itself, at once, unless the I/O thread
 * is writing it or the socket is full (then the thread goes on with it): the kernel's send
 * path runs on this thread while the I/O thread receives. Returns whether nothing is
 * left to write (false: poke the thread). */
bool hccl__tcp_write_now(struct tcp_link *l);
/* The algorithm's thread, waiting for a message on l, reads l's socket itself (sleeping in
 * poll on it, in 1 ms slices) until the message is there or budget_ns passed, unless the
 * I/O thread is reading it: one wake-up per message instead of two (the I/O
 * thread's, then this thread's). Stops early at an abort, a failed link or teardown, which the
 * wait that follows reports. Returns whether the I/O thread needs a poke (it parked the
 * socket meanwhile, an ABORT read here is to be passed on, or a control frame is due). */
bool hccl__tcp_read_now(struct tcp_link *l, int64_t budget_ns);
/* The I/O thread's body (tcp_io_thread.c); arg is the struct tcp_state. */
void *hccl__tcp_io_main(void *arg);
/* Records the first abort (origin, code, reason) seen by this rank; later ones are ignored.
 * Returns whether this one was the first. */
bool hccl__tcp_mark_abort(struct tcp_state *st, uint32_t origin, HcclResult code,
                          const char *reason);
/* ---- dialling (tcp_dial.c) ---- */

/* This transport's conn blob: where the rank listens; family 0 = it does not. Bytes to the rest
 * of the library (peer.h's conn[HCCL_TRANSPORT_TCP]); small enough for an early listener's
 * (HCCL_EARLY_CONN_BYTES, transport.h). */
struct tcp_blob {
  uint16_t family;
  uint16_t port; /* network order */
  uint32_t pad;
  uint8_t addr[16];
};
_Static_assert(sizeof(struct tcp_blob) <= HCCL_EARLY_CONN_BYTES, "tcp blob too large");

/* Fills st->peers[peer].addr (and this rank's own) for messages, and *to; false when the peer
 * published no address. */
bool hccl__tcp_peer_addr(struct tcp_state *st, uint32_t peer, struct sockaddr_storage *to);
/* Dials peer's listener and says hello on `channel` (0, 1, or + HCCL_TCP_CALLBACK to ask the
 * peer to dial back), by HCCL_CONNECT_TIMEOUT. Any thread, without st->lock; logs and fails
 * naming the pair. */
HcclResult hccl__tcp_dial(struct tcp_state *st, uint32_t peer, uint32_t channel, int *fd_out);
/* The I/O thread's turn at the listener: an acceptor step, then the callbacks it found
 * asked of this rank, each dialled unless its link exists or is being made. */
void hccl__tcp_serve(struct tcp_state *st);
/* How long since peer's host last acknowledged anything on this rank's links to it, in ms
 * (the kernel's view, TCP_INFO: the host of a stopped process still acknowledges, a cut cable
 * or a dead host does not; keepalive probes every second keep an idle link's view fresh), and
 * in *data_ms (may be NULL) since bytes last came from it; -1 when there is no link. Any
 * thread. (tcp_pump.c) */
int64_t hccl__tcp_quiet_ms(struct tcp_state *st, uint32_t peer, int64_t *data_ms);
/* Wakes every waiter on every link (an abort). */
void hccl__tcp_wake_all(struct tcp_state *st);

#endif
