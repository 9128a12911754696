/*
 * rdma.h - what the RDMA transport's files share: the transport's state, a peer, a link, and the
 * calls between the files. Private to this room (transport/rdma/, and its tests): the rest of
 * the library sees the transport through its ops table (hccl__transport_rdma, transport.h) only.
 *
 * The model is gloo's ibverbs pair and NCCL's net_ib: one RC queue pair per link (peer and
 * channel), its slots registered once when the link is made, RDMA WRITE with immediate so the
 * receiver learns which slot filled, and one thread per communicator waiting on the device's
 * completion channel. What a link's queue pair needs of the peer's (its number, PSN, the
 * receive slots' address and rkey, the MTU) is sent in a hello over a control queue pair (UD,
 * one per communicator), whose address (GID, QP number, MTU) is the conn blob every rank
 * publishes at bootstrap: links are made on first use, as TCP's, without a store round.
 *
 * rdma.c is setup, connect, abort and teardown, and the ops table; rdma_conn.c the hellos that
 * make a link and the aborts that travel; rdma_data.c the algorithm's side of the data path;
 * rdma_io_thread.c the thread that reaps completions, hands it datagrams and watches the port;
 * rdma_fail.c a peer marked down and the wake-ups; rdma_dev.c the device, its port and GID, the
 * control queue pair and each link's queue pair; rdma_verbs.c libibverbs loaded at run time;
 * rdma_wire.c the pure steps (blob, messages, immediates, slot arithmetic, choices).
 * rdma_reg.c is the registration cache of HcclMemAlloc regions, which send_ref writes from and
 * recv_post has the peer write into.
 * Who calls whom: rdma.c -> rdma_conn.c, rdma_data.c, rdma_io_thread.c, rdma_fail.c,
 * rdma_reg.c, rdma_dev.c; rdma_io_thread.c -> rdma_conn.c, rdma_fail.c, rdma_dev.c;
 * rdma_conn.c -> rdma_fail.c, rdma_dev.c; rdma_data.c -> rdma_fail.c, rdma_reg.c; rdma_dev.c
 * -> rdma_verbs.c; all -> rdma_wire.c; never back.
 */
#ifndef HCCL_RDMA_H
#define HCCL_RDMA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "credits.h"
#include "hccl.h"
#include "rdma_verbs.h"
#include "rdma_wire.h"
#include "transport.h"

#define RDMA_SONAME "libibverbs.so.1"
#define RDMA_QKEY 0x4843434cu    /* the control QPs' Q_Key ("HCCL") */
#define RDMA_NCTL_RECV 64        /* control datagrams posted for receiving */
#define RDMA_NCTL_SEND 128       /* control datagrams in flight */
#define RDMA_GRH 40              /* what a UD receive buffer holds before the datagram */
/* Per link: 8 messages, 8 credits, 16 posted receives, and slack. */
#define RDMA_RECV_WR (2 * RDMA_NSLOTS + RDMA_NPOSTS + 4)
/* Per link: messages (two writes each into a posted receive), credits and posted receives in
 * flight. */
#define RDMA_SEND_WR (4 * RDMA_NSLOTS + RDMA_NPOSTS)
#define RDMA_HELLO_RESEND_MS 200
/* How long a message waits for the receiver's posted receive where the last one was covered by
 * one (rdma_data.c's wait_post): 8 times what such waits took lately (the entry's trip across,
 * and the receiver starting its call later), from 1 ms to 100 ms (emulated hosts lag tens of
 * milliseconds); 10 ms before any such wait. A receiver that stopped posting (another
 * algorithm's steps, other memory) costs its sender this once. */
#define RDMA_POST_WAIT_MIN_NS 1000000LL
#define RDMA_POST_WAIT_FIRST_NS 10000000LL
#define RDMA_POST_WAIT_NS 100000000LL
#define RDMA_REG_MAX 64 /* registrations of HcclMemAlloc regions at once (rdma_reg.c) */
/* A registration covers the region's pages around a buffer in steps of this many bytes (the
 * whole region when it is smaller): torch_hccl's arenas are regions of 1 GiB and more, mostly
 * untouched, which registering whole would pin (rdma_reg.c). */
#define RDMA_REG_GRAIN ((size_t)64 << 20)

/* wr_id tags (the low 4 bits; a link's address is 64-byte aligned, rdma_conn.c allocates it so):
 * a link's receive (the link's address), a link's send (| RDMA_TAG_DATA for a message's payload,
 * whose completion means its source was read; | RDMA_TAG_POST for a posted receive's entry,
 * whose completion frees its source), a control receive (its index << 3), a control send. The
 * kind is the low 2 bits. */
enum {
  RDMA_TAG_RECV = 0,
  RDMA_TAG_SEND = 1,
  RDMA_TAG_CTL_RECV = 2,
  RDMA_TAG_CTL_SEND = 3,
  RDMA_TAG_DATA = 4,
  RDMA_TAG_POST = 8,
  RDMA_TAG_MASK = 15
};

/* Part of one HcclMemAlloc region registered (rdma_reg.c): bytes [off, off + len) of it. */
struct rdma_reg {
  uint64_t serial;
  uint64_t off, len;
  struct ibv_mr *mr;
};
struct rdma_state;

struct rdma_link {
  struct hccl_link base;
  struct rdma_state *st;
  int channel;
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  /* Send slots, then receive slots (RDMA_NSLOTS strides each), then the posted receives the
   * peer writes here, then the ones this side writes from (RDMA_NPOSTS entries each):
   * hccl__rdma_region_bytes. */
  char *mem;
  size_t half; /* bytes of the send slots, and of the receive slots */
  uint32_t psn;
  /* The peer's queue pair, from its hello (under st->lock). */
  uint32_t rqpn, rkey;
  uint64_t raddr;
  int mtu; /* agreed */
  /* The handshake (under st->lock): have_theirs = this QP is at RTS with the peer's; peer_has_mine
   * = the peer said it is at RTR with this one. ready = both: the link may write. */
  bool have_theirs, peer_has_mine;
  int64_t since_ns, hello_ns;
  _Atomic int ready;
  _Atomic int failed; /* its queue pair failed; the peer's reason says why */
  /* Messages sent and received, the peer's released count (`acked`, from its credits) and the
   * messages landed (`arrived`), published by the thread; waits sleep on those two; and the
   * messages whose write completed (`written`: its source read; send_flush's)
   * (transport/credits.h). */
  struct hccl_credits cr;
  /* Send side (the algorithm's thread). */
  _Atomic uint32_t sq_posted, sq_done; /* work requests posted / completed on the send queue */
  /* The peer's posted receives: entries its writes completed (published by the thread), those
   * read (the algorithm's thread), and the read ones with messages still to send (`live`,
   * nlive of them: a ring's receiver has one per block live at once). */
  _Atomic uint32_t posts_arrived;
  uint32_t posts_seen;
  uint32_t nlive;
  struct rdma_post live[RDMA_NPOSTS];
  /* The last message with bytes (last_seq, while have_last) was covered by a posted receive
   * (last_covered: it went into one, or an entry read later covered it): the receiver has been
   * posting, so a message no entry covers waits a little for one (rdma_data.c's wait_post)
   * rather than land in a slot the receiver would copy out of. */
  bool have_last, last_covered;
  uint32_t last_seq;
  int64_t post_wait_ns; /* how long such waits took lately (0: none yet) */
  uint32_t wait_seq;    /* the message whose wait began at wait_since (0: none) */
  int64_t wait_since;
  /* Receive side: message m in receive slot m % RDMA_NSLOTS, its header first. */
  uint32_t held_copied; /* the taken message's bytes when it is in its slot (counted at release) */
  /* This side's posted receives (recv_post): entries written to the peer, their writes
   * completed (the thread's count: an entry's source is free again), the entries the peer
   * said it had read (its messages' headers), and the last RDMA_NPOSTS posted (entry id in
   * mine[id % RDMA_NPOSTS]; their addr is this process's pointer), which a header's post
   * names. */
  uint32_t posts_made;
  _Atomic uint32_t posts_done;
  uint32_t peer_seen;
  struct rdma_post mine[RDMA_NPOSTS];
};

struct rdma_peer {
  struct rdma_link *_Atomic link[HCCL_NCHANNELS];
  struct rdma_blob blob;
  _Atomic int blob_state; /* 0 not read yet, 1 an RDMA peer, 2 not (hccl__rdma_can_connect) */
  struct ibv_ah *ah; /* to its control QP, made on first use (under st->ctl_lock) */
  _Atomic int downing, dead;
  char reason[400]; /* "is unreachable: retry count exceeded ...", written before dead */
};

struct rdma_state {
  struct hccl_tctx *tx;
  const struct hccl_transport_ops *ops; /* hccl__transport_rdma, for the links it makes */
  const struct hccl_ibv *v;
  size_t slot_bytes;
  uint64_t comm_id;
  /* The device (rdma_dev.c). */
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *chan;
  struct ibv_cq *cq;
  int port, gid_index, mtu;
  uint16_t lid;
  int cqe_want; /* entries the queue should have (the device's maximum caps it) */
  union ibv_gid gid;
  char dev_name[64], gid_str[64];
  /* The control QP and its datagrams. */
  struct ibv_qp *ud;
  struct ibv_mr *ctl_mr;
  char *ctl_mem; /* RDMA_NCTL_RECV x (RDMA_GRH + RDMA_CTL_MAX), then RDMA_NCTL_SEND x RDMA_CTL_MAX */
  uint32_t ctl_max;
  pthread_mutex_t ctl_lock;
  uint32_t ctl_posted;
  _Atomic uint32_t ctl_done;
  /* Links and peers: lock guards making links, the handshake and appending to all[]. */
  pthread_mutex_t lock;
  struct rdma_peer *peers; /* [nranks] */
  struct rdma_link **all;  /* [2 nranks]; the first nlinks are published */
  _Atomic int nlinks;
  /* The thread (rdma_io_thread.c). */
  int evfd;
  pthread_t thread;
  bool thread_started;
  _Atomic int stop, sleeping;
  int64_t spin_ns;
  _Atomic int port_down;
  /* The counters HcclGetCommTransportStats reads: payload bytes sent; of those, staged in a send
   * slot (the caller's copy or reduction wrote them there: not send_ref from registered memory);
   * payload bytes received into a receive slot (not into a posted receive), which the caller
   * copies or reduces from. */
  _Atomic uint64_t bytes_sent, bytes_copied_send, bytes_copied_recv;
  /* The registration cache (rdma_reg.c), under reg_lock. */
  pthread_mutex_t reg_lock;
  struct rdma_reg reg[RDMA_REG_MAX];
  int nreg, reg_watch;
  bool reg_warned, reg_inited;
  _Atomic uint32_t reg_evicted;
  /* The abort mark. */
  _Atomic uint32_t abort_origin; /* origin + 1; 0 = none */
  _Atomic int32_t abort_code;
  _Atomic uint32_t abort_ready;
  char abort_reason[HCCL_REASON_MAX];
};

static inline struct rdma_state *hccl__rdma_state_of(const struct hccl_tctx *tx) {
  return tx->state[HCCL_TRANSPORT_RDMA];
}

/* ---- rdma_dev.c ---- */

/* Opens the device HCCL_RDMA_DEVICE names (else the first with an active port) through the
 * libibverbs named soname, picks its GID (HCCL_RDMA_GID_INDEX, else RoCE v2 over IPv4), and
 * makes the protection domain, completion channel and queue. HCCL_E_NOT_FOUND, not logged,
 * with why[len] naming what was found, when there is nothing to open. */
HcclResult hccl__rdma_dev_open(struct rdma_state *st, const struct hccl_settings *cfg,
                               const char *soname, char *why, size_t len);
/* The control QP: made, at RTS, its receives posted. Logged on failure. */
HcclResult hccl__rdma_ctl_init(struct rdma_state *st);
/* Sends m (and an abort's text) to peer's control QP. Any thread; drops it (false) when the
 * send ring is full on the thread itself or the peer cannot be addressed. */
bool hccl__rdma_ctl_send(struct rdma_state *st, uint32_t peer, const struct rdma_msg *m,
                         const char *text);
/* Posts control receive buffer i again. */
void hccl__rdma_ctl_repost(struct rdma_state *st, uint32_t i);
/* Makes l's queue pair (INIT, receives posted) and registers its slots. Logged on failure. */
HcclResult hccl__rdma_qp_new(struct rdma_state *st, struct rdma_link *l);
/* Moves l's queue pair to RTR and RTS with the peer's (l->rqpn, psn, mtu). Logged. */
HcclResult hccl__rdma_qp_connect(struct rdma_state *st, struct rdma_link *l, uint32_t rpsn);
/* Posts one receive work request on l (a message or a credit to come). */
int hccl__rdma_post_recv(struct rdma_link *l);
/* Frees what hccl__rdma_qp_new made (the QP first). */
void hccl__rdma_qp_free(struct rdma_state *st, struct rdma_link *l);
/* Frees the control QP, the address handles, the queue, the channel, the domain, the device. */
void hccl__rdma_dev_close(struct rdma_state *st);

/* ---- rdma_reg.c ---- */

/* Starts the cache and its watch of HcclMemFree. */
void hccl__rdma_reg_init(struct rdma_state *st);
/* Whether [buf, buf + bytes) lies in an HcclMemAlloc region, registered now (for local and
 * remote writes) if that part of it was not; its keys in *lkey and *rkey. false: the bytes go
 * through a slot. Any thread. */
bool hccl__rdma_reg_find(struct rdma_state *st, const void *buf, size_t bytes, uint32_t *lkey,
                         uint32_t *rkey);
/* Stops the watch and drops every registration (teardown). */
void hccl__rdma_reg_free(struct rdma_state *st);

/* ---- rdma_conn.c ---- */

/* Whether this transport joins this rank to peer: another server's rank, both with an active
 * port (their blobs), and HCCL_NET not tcp. Takes st->lock the first time for a peer. */
bool hccl__rdma_can_connect(const struct hccl_tctx *tx, uint32_t peer);
/* Makes the link to (peer, channel), its queue pair at INIT, and publishes it. Under st->lock;
 * logged on failure. */
HcclResult hccl__rdma_link_new(struct rdma_state *st, uint32_t peer, int channel,
                               struct rdma_link **out);
/* Sends l's hello (have_yours: l's QP is at RTS with the peer's). Under st->lock. */
void hccl__rdma_send_hello(struct rdma_state *st, struct rdma_link *l);
/* A control message from a peer (the thread): a hello makes or completes a link, an abort is
 * marked and passed on, a goodbye marks the peer gone. */
void hccl__rdma_on_msg(struct rdma_state *st, const struct rdma_msg *m, const char *text);
/* Records the first abort seen by this rank; later ones are ignored. Returns whether first. */
bool hccl__rdma_mark_abort(struct rdma_state *st, uint32_t origin, HcclResult code,
                           const char *reason);
/* Sends again the hellos of links not ready for RDMA_HELLO_RESEND_MS; whether any link is
 * still being made. The thread's. */
bool hccl__rdma_resend_hellos(struct rdma_state *st, int64_t now);
/* Sends the marked abort to every linked peer but its origin. */
void hccl__rdma_send_aborts(struct rdma_state *st);

/* ---- rdma_io_thread.c ---- */

void *hccl__rdma_io_main(void *arg);

/* ---- rdma_fail.c ---- */

/* A work request of l failed with status: l failed, its peer down with the fault named. */
void hccl__rdma_link_fail(struct rdma_state *st, struct rdma_link *l, enum ibv_wc_status status);
/* why = "network fault between server <this> and server <peer's> (rank <peer>): <dev> port <p>
 * of server <this> <what>": a peer lost because this server's own port went down or failed. */
void hccl__rdma_port_why(const struct rdma_state *st, uint32_t peer, const char *what, char *why,
                         size_t len);
/* The peer is gone or unreachable: records why once, wakes every waiter on its links. */
void hccl__rdma_peer_down(struct rdma_state *st, uint32_t peer, const char *why);
/* Wakes every waiter on every link (an abort). */
void hccl__rdma_wake_all(struct rdma_state *st);
/* Wakes the thread (a system call only when it may be asleep unless `always`). */
void hccl__rdma_poke(struct rdma_state *st, bool always);

/* ---- rdma_data.c: the ops of the same names (transport.h gives their contracts) ---- */

HcclResult hccl__rdma_wait_check(void *arg, const struct hccl_wait *w, uint32_t peer);
HcclResult hccl__rdma_send_ref(struct hccl_link *base, const void *buf, size_t bytes,
                               const struct hccl_stamp *stamp, const struct hccl_wait *w);
HcclResult hccl__rdma_send_flush(struct hccl_link *base, const struct hccl_wait *w);
HcclResult hccl__rdma_send_acquire(struct hccl_link *base, void **buf, const struct hccl_wait *w);
void hccl__rdma_send_commit(struct hccl_link *base, size_t bytes,
                            const struct hccl_stamp *stamp);
HcclResult hccl__rdma_recv_acquire(struct hccl_link *base, const void **buf, size_t *bytes,
                                   struct hccl_stamp *stamp, const struct hccl_wait *w);
void hccl__rdma_recv_release(struct hccl_link *base);
void hccl__rdma_recv_post(struct hccl_link *base, void *buf, size_t chunk, size_t bytes,
                          uint32_t skip, uint32_t step);
bool hccl__rdma_send_ready(struct hccl_link *base);
bool hccl__rdma_recv_ready(struct hccl_link *base);
bool hccl__rdma_send_drained(struct hccl_link *base);
HcclResult hccl__rdma_send_drain(struct hccl_link *base, const struct hccl_wait *w);

#endif
