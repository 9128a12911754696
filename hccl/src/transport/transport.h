/*
 * transport.h - how data moves between two ranks: a transport is one ops table; algorithms and
 * primitives (prims.c) call only these ops, never a socket or a shared-memory pointer of their
 * own, so adding a transport touches no algorithm and the reverse.
 *
 * A link is one peer seen from this rank, both directions. Messages are bounded by the link's
 * slot_bytes: a sender acquires a slot (waiting for room), fills it, commits it with its byte
 * count; a receiver acquires the next message (waiting for it), reads it, releases it. Messages
 * on one link arrive in the order they were committed. Waits honour the deadline in *w and
 * fail, naming the peer, on timeout, on the peer's death, or when any rank aborts.
 *
 * Each pair of ranks has two channels, each a link of its own with its own slots: channel 0
 * (HCCL_CHANNEL_COLL) carries collectives, channel 1 (HCCL_CHANNEL_P2P) point-to-point
 * messages, so the two never mix and a send is never queued behind a collective's data.
 *
 * Each message carries a stamp of 16 bytes beside its data (struct hccl_stamp): the sender's
 * fingerprint of the collective it belongs to. Transports carry it unread; the receiver
 * compares it with its own (core/fingerprint.h), so ranks that called different collectives
 * fail before any data is mixed.
 *
 * Transports are tried in priority order (hccl__transports) and the first whose can_connect
 * accepts a peer carries it, as in NCCL.
 *
 * What a transport needs to connect stays opaque to the core, as NCCL's ncclConnect: each peer
 * info (base/peer.h) holds one blob of HCCL_CONN_BYTES per transport (conn[index]), which only
 * that transport writes (setup, listen_early) and reads (connect); the core copies blobs whole
 * and never reads one. Its layout is in the transport's own headers, which only its room
 * (transport/shm/, transport/tcp/, transport/rdma/) includes: the core sees transports through
 * this header and links.h alone, and asks what it needs before a communicator exists (the
 * address a listener binds, a listener opened early) through ops too.
 *
 * A transport never sees the communicator: it is given a transport context (struct
 * hccl_tctx), as NCCL hands a transport its connector and UCX an endpoint: this rank, the
 * peers' infos, the settings, one state pointer per transport (state[index]) and the link
 * tables. The core embeds it in its communicator and fills it at init.
 */
#ifndef HCCL_TRANSPORT_H
#define HCCL_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "hccl.h"
#include "log.h"
#include "mem_region.h"
#include "peer.h"
#include "progress_record.h"
#include "settings.h"

struct hccl_wait;
struct sockaddr_storage;

enum hccl_transport_index {
  HCCL_TRANSPORT_SHM = 0,
  HCCL_TRANSPORT_TCP = 1,
  HCCL_TRANSPORT_RDMA = 2 /* built where <infiniband/verbs.h> was found (HCCL_HAVE_RDMA) */
};

/* The bytes of a conn blob an early listener writes (the op listen_early): a split's parent
 * round carries them for each split of every rank, so they are few; the rest of that blob is
 * zero. */
#define HCCL_EARLY_CONN_BYTES 24

/* The longest failure reason an abort passes to the peers (the library's messages fit). */
#define HCCL_REASON_MAX 512

enum hccl_channel { HCCL_CHANNEL_COLL = 0, HCCL_CHANNEL_P2P = 1, HCCL_NCHANNELS = 2 };

/* How a link is asked for (links.c). At init both ends of a pair ask for it (the algorithms'
 * partners are the same set seen from either end), so each waits for the other. On first use
 * only one end may ask: it must not depend on the other's thread, so a transport whose link is
 * made by one end (tcp: the lower rank dials) has the other end ask the peer's transport to
 * dial (a callback), and waits for that. */
enum hccl_connect_mode {
  HCCL_CONNECT_INIT = 0,    /* both ends ask, at init: wait for the link (the lower rank of
                               a pair never waits on the higher's threads: links.c asks for
                               the higher ranks first) */
  HCCL_CONNECT_WAIT = 1,    /* first use: make it or have it made, wait for it */
  HCCL_CONNECT_TRY = 2,     /* first use, never waiting: start it, *out NULL until it is there */
  HCCL_CONNECT_OFFERED = 3  /* only if the peer already made it (a receive from any rank) */
};

/* Opaque to transports: written by send_commit's caller, returned by recv_acquire. */
struct hccl_stamp {
  uint64_t w[2];
};

/* What the transports see of a communicator (the core fills it at init; read-only to them
 * except state[] and links[]). */
struct hccl_tctx {
  uint32_t rank, nranks;
  uint32_t local_nranks;              /* ranks on this server */
  const uint32_t *local_index;        /* [nranks]: a rank's index among its server's ranks */
  const struct hccl_peer_info *peers; /* [nranks]: what each rank published (base/peer.h) */
  const struct hccl_settings *cfg;
  const char *key;                    /* the communicator's store key prefix: unique in the job */
  struct hccl_log_ctx *log;           /* what a transport's own thread binds (hccl__log_bind) */
  void *state[HCCL_MAX_TRANSPORTS];   /* each transport's state, by its index */
  /* The links, per channel, indexed by global rank; NULL for self and for links not made
   * yet (links.c makes them). */
  struct hccl_link **links[HCCL_NCHANNELS];
  /* This rank's own account of where it is, for a peer's progress query (the core's): its
   * text in buf, and in *next the rank on another server its chain of waits leads to. */
  void (*report)(void *arg, uint32_t seq, char *buf, size_t len, uint32_t *next);
  void *report_arg;
  /* -1, or a listener opened before the peer infos were exchanged (the op listen_early: TCP's),
   * whose address this rank's info already carries (a split group's: core/comm_split.c): that
   * transport's setup takes it (and sets -1); the core closes it if no setup did. */
  int listen_fd;
};

struct hccl_link {
  const struct hccl_transport_ops *ops;
  struct hccl_tctx *tx; /* whose link this is */
  uint32_t peer;     /* global rank of the other end */
  size_t slot_bytes; /* largest message */
};

struct hccl_transport_ops {
  const char *name;
  int index; /* enum hccl_transport_index: its conn blob and its tstate slot */
  /* Whether this transport can join this rank to `peer` (peer infos are known). */
  bool (*can_connect)(const struct hccl_tctx *tx, uint32_t peer);
  /* Before the peer infos are exchanged: make local resources (state in tx->state[index])
   * and describe them in self->conn[index]. */
  HcclResult (*setup)(struct hccl_tctx *tx, struct hccl_peer_info *self);
  /* After the exchange: make the link to `peer` on `channel` (enum hccl_channel), as `mode`
   * says (enum hccl_connect_mode). *out stays NULL when the mode does not wait and the link is
   * not there yet; the caller asks again. */
  HcclResult (*connect)(struct hccl_tctx *tx, uint32_t peer, int channel, int mode,
                        struct hccl_link **out);
  /* After every rank has made its links of init (a store barrier): drop what was only needed
   * for them (e.g. the descriptors peers opened). May be NULL. */
  void (*connected)(struct hccl_tctx *tx);
  /* After setup: the slot_bytes a link made now would have (a communicator that makes its
   * links on first use plans with it: algo/group.c). May be NULL (0: unknown). */
  size_t (*slot_bytes)(const struct hccl_tctx *tx);

  /* Before a communicator exists, given only its settings: the address this transport's
   * listener would bind on this host, and in why[why_len] where it came from (for messages).
   * The bootstrap's own listener binds it too, so the rounds run over the network the links
   * will use (core/comm.c). Fails (logged) when the settings name no usable address. May be
   * NULL (the first transport that has it answers). */
  HcclResult (*local_addr)(const struct hccl_settings *cfg, struct sockaddr_storage *out,
                           char *why, size_t why_len);
  /* Before the peer infos are exchanged and before the communicator exists (a split group's,
   * core/comm_split.c): opens this transport's listener, for up to max_peers remote peers, on
   * the address setup would bind, and writes what peers dial into conn, whose first
   * HCCL_EARLY_CONN_BYTES only it writes (the rest zero), opaque to the caller, which puts them
   * in the peer info's conn[index]. The caller hands *fd_out to the new communicator's context
   * (tx->listen_fd), whose setup takes it. A failure is logged. May be NULL; one transport
   * at most has it (the context has one listen_fd). */
  HcclResult (*listen_early)(const struct hccl_settings *cfg, uint32_t max_peers,
                             uint8_t conn[HCCL_CONN_BYTES], int *fd_out);

  HcclResult (*send_acquire)(struct hccl_link *l, void **buf, const struct hccl_wait *w);
  void (*send_commit)(struct hccl_link *l, size_t bytes, const struct hccl_stamp *stamp);
  HcclResult (*recv_acquire)(struct hccl_link *l, const void **buf, size_t *bytes,
                             struct hccl_stamp *stamp, const struct hccl_wait *w);
  void (*recv_release)(struct hccl_link *l);

  /* Sending by reference, where the transport copies anyway (TCP: the kernel copies what
   * sendmsg is given): send_ref queues `bytes` (at most slot_bytes) of buf as one message, as
   * send_acquire + a copy + send_commit would, but reads buf later, in place; the caller keeps
   * buf unchanged until send_flush returns, which waits until the transport has read every
   * message queued so far. Fails like the other waits. Both NULL where a copy into the slot
   * is the transfer itself (shm): the algorithms then copy. */
  HcclResult (*send_ref)(struct hccl_link *l, const void *buf, size_t bytes,
                         const struct hccl_stamp *stamp, const struct hccl_wait *w);
  HcclResult (*send_flush)(struct hccl_link *l, const struct hccl_wait *w);

  /* Receiving in place, where the transport copies anyway (TCP: the kernel copies into what
   * recv is given) or can place the bytes itself (RDMA): of the messages this side will take
   * next, number skip, skip + step, skip + 2 step, ... (counting from 0), `chunk` bytes each
   * and `bytes` in all, may land at buf + k * chunk instead of a slot (those already arrived
   * stay in theirs); recv_acquire then returns that place, and the caller's copy to it is no
   * copy. Skip 0, step 1 is the next messages in a row; a larger step picks one block's out
   * of a ring's rounds, and several such posts may be live at once. buf is the transport's
   * until every one of them was taken or the communicator failed (abort returns once nothing
   * more is written to it). buf is never NULL nor chunk, bytes or step 0 (callers go through
   * hccl__prim_post, prims.h). A transport may take only some posts (TCP: skip 0, step 1).
   * NULL where the slot is the transfer itself (shm). */
  void (*recv_post)(struct hccl_link *l, void *buf, size_t chunk, size_t bytes, uint32_t skip,
                    uint32_t step);

  /* Non-blocking readiness, for an engine that progresses several links at once: whether
   * send_acquire would return without waiting (a slot is free), whether recv_acquire would (a
   * message is waiting), and whether the peer has released every message committed so far. */
  bool (*send_ready)(struct hccl_link *l);
  bool (*recv_ready)(struct hccl_link *l);
  bool (*send_drained)(struct hccl_link *l);
  /* Waits until the peer has released every message committed on l: a sender learns that its
   * messages were accepted (a receiver that finds a wrong size never releases, and aborts).
   * Fails like the other waits (deadline, dead peer, abort). */
  HcclResult (*send_drain)(struct hccl_link *l, const struct hccl_wait *w);

  /* Tells every peer this transport reaches that rank `origin` failed with `code`, so that
   * their waits end with HCCL_E_REMOTE instead of running into their deadline. */
  void (*abort)(struct hccl_tctx *tx, uint32_t origin, HcclResult code);
  /* Whether a peer has aborted; returns HCCL_E_REMOTE (logged, naming the origin and its
   * reason) if so. Called at the start and end of every collective, so a rank that never has
   * to wait still learns of a failure. May be NULL. */
  HcclResult (*check_abort)(struct hccl_tctx *tx, const char *what);
  /* The progress record of `rank` as this transport shares it: this rank's own (to write) or
   * a peer's (to read); NULL when the transport has none for that rank. May be NULL. */
  struct hccl_progress *(*progress)(struct hccl_tctx *tx, uint32_t rank);
  /* Asks `peer`'s side of this transport for the peer's own account of where it is, for the
   * message of a timeout (core/progress.c): its text in buf, and in *next the rank on another
   * server its chain of waits leads to (UINT32_MAX: none). Waits up to wait_ms. Returns 1
   * answered, 2 a failure heard meanwhile answers for it (an abort, its link's end: the text
   * is not the peer's own), 0 no answer in time (the peer's process does not run), -1 not
   * reachable this way (no link). May be NULL. */
  int (*ask_progress)(struct hccl_tctx *tx, uint32_t peer, uint32_t seq, int64_t wait_ms,
                      char *buf, size_t len, uint32_t *next);
  /* How long since `peer`'s host last acknowledged anything on this rank's links to it, in ms
   * (the host of a stopped process still does; a cut cable or a dead host does not), in
   * *data_ms since bytes last came from it, and in addr the address its links use (also for
   * peer = this rank). Returns -1 (data_ms untouched) when there is no link. Never waits. May
   * be NULL. */
  int64_t (*quiet)(struct hccl_tctx *tx, uint32_t peer, int64_t *data_ms, char *addr,
                   size_t addr_len);
  /* Asks `via` (linked to this rank) how long `target`'s host has been quiet on via's links
   * (its quiet, in ms); -1 via has no link to it, -2 no answer within wait_ms. May be NULL. */
  int64_t (*ask_reach)(struct hccl_tctx *tx, uint32_t via, uint32_t target, int64_t wait_ms);
  /* Maps the peer's window w into this process and returns where its buffer starts; the
   * mapping is kept (a few per link) for the peer's next calls. NULL where the transport
   * cannot share memory (tcp). */
  HcclResult (*map_window)(struct hccl_link *l, const struct hccl_window *w, void **ptr);
  /* The check the transport's own waits on l make each sleep slice (hccl__wait_change's
   * `check`, with l as its arg): the peer's abort mark, its departure or death, as an error
   * naming it. For a wait on a word that is no link's (algo/oneshot.c's arrival). */
  HcclResult (*wait_check)(void *l, const struct hccl_wait *w, uint32_t peer);
  void (*close)(struct hccl_link *l);
  /* Frees what setup made. Called once, after every link was closed. */
  void (*teardown)(struct hccl_tctx *tx);
  /* The transport's counters so far (HcclGetCommTransportStats, hccl.h, says what each
   * counts), into *out, which the caller zeroed; left zero where the transport has no state.
   * Never waits. May be NULL: the transport counts nothing. */
  void (*stats)(const struct hccl_tctx *tx, HcclTransportStats *out);

  /* The transport's cost, for the cost model (algo/plan.c), as UCX's iface_query answers
   * it: nanoseconds per message hop (alpha) and per byte (beta). */
  double alpha_ns, beta_ns;
};

/* The table, highest priority first, NULL-terminated. */
extern const struct hccl_transport_ops *const hccl__transports[];

/* Runs the statement after it for each transport of the table that fills op `op` (a member of
 * struct hccl_transport_ops), highest priority first, with `t` the transport's ops:
 *   HCCL_FOR_EACH_TRANSPORT_WITH(t, teardown) t->teardown(c);
 * `break` leaves the loop. (The else form keeps a following `else` from binding to it.) */
#define HCCL_FOR_EACH_TRANSPORT_WITH(t, op)                                                      \
  for (const struct hccl_transport_ops *const *t##_at = hccl__transports, *t;                    \
       (t = *t##_at) != NULL; t##_at++)                                                          \
    if (!t->op) {                                                                                \
    } else
extern const struct hccl_transport_ops hccl__transport_shm;
extern const struct hccl_transport_ops hccl__transport_tcp;
extern const struct hccl_transport_ops hccl__transport_rdma;

/* The body of every transport's check_abort, over its abort mark: origin (the failed rank + 1;
 * 0: none), ready (reason written) and reason. Returns HCCL_SUCCESS when no abort is marked;
 * else HCCL_E_REMOTE, logged with the origin and its reason, after waiting up to 10 ms for the
 * reason (the origin is set first, and the reason may still be on its way). */
static inline HcclResult hccl__abort_mark_check(const struct hccl_tctx *tx, const char *what,
                                                _Atomic uint32_t *origin, _Atomic uint32_t *ready,
                                                const char *reason) {
  uint32_t o = atomic_load(origin);
  if (o == 0) return HCCL_SUCCESS;
  for (int i = 0; i < 100 && !atomic_load(ready); i++)
    usleep(100);
  return hccl__fail(HCCL_E_REMOTE, "%s on rank %u stopped: rank %u failed: %s", what, tx->rank,
                    o - 1, reason);
}

#endif
