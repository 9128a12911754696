/*
 * tcp.c - links between ranks on different servers: one TCP socket per (peer, channel).
 *
 * Setup: a rank with peers on other servers listens on one socket (address from tcp_sock.c:
 * HCCL_IF_IP, HCCL_SOCKET_IFNAME, or the first plain interface that is up; port 0) and
 * publishes {family, port, address} as its conn blob. Connect: the lower rank of a pair
 * dials the higher rank's listener and sends a hello {magic, version, the communicator's
 * identity, its rank, the channel, a hash of HCCL_JOB_TOKEN, the slot size}. The I/O
 * thread owns the listener for the communicator's whole life: it accepts, reads hellos, keeps a
 * checked socket as pending until its link is asked for, and turns away (closes, one WARN
 * naming the address) a hello of another job or none at all. A dial never waits for the other
 * side's threads (the kernel completes it, the I/O thread reads the hello), so links asked
 * for in any order never deadlock.
 *
 * links.c asks at init only for the links the algorithms use (O(log n) across servers); any
 * other is made on first use. When the higher rank of a pair needs it first, it dials the lower
 * rank's listener with a callback hello (channel + HCCL_TCP_CALLBACK) and closes; the lower
 * rank's I/O thread dials back, unless the link exists or is being made, and the higher
 * rank waits for that socket. Both sides are bounded by HCCL_CONNECT_TIMEOUT.
 *
 * Data path: tcp_data.c (the algorithm's side of a link's 8 slots each way, and which thread
 * writes and reads the sockets).
 *
 * Failure: EOF, a reset or any error on a socket whose peer did not say BYE marks that peer dead
 * and wakes every waiter on its links, whose check fails naming it; a silent peer is the wait's
 * deadline. abort() sends ABORT {origin, code, reason} to every TCP peer linked, whose waits and
 * check_abort then fail with HCCL_E_REMOTE; the first ABORT a rank hears goes on to its own linked
 * peers (the links are not a full mesh, but they join every server). From the I/O thread's
 * pass after the abort's mark, which abort() waits for, no payload is written to a receive posted
 * in place (the rest of one under way goes to its slot): a failed call's buffers are the caller's
 * again when it returns. teardown sends BYE on every link after whatever is still queued (an ACK a
 * sender may be draining on), shuts the sockets for writing and reads until the peers close (at
 * most LINGER_MS), so that no unread byte turns the close into a reset that could destroy frames
 * the peer has not read yet.
 *
 * Frames are in host byte order; the hello's magic reads differently in the other order, so
 * servers of different byte order are refused at connect, never misread.
 *
 * This file is setup, connect, abort, the peer questions (ask_progress, quiet, ask_reach),
 * teardown and the ops table; the data path's ops are tcp_data.c, the I/O thread
 * tcp_io_thread.c, a link's socket written tcp_write.c and read tcp_read.c, its framing state and
 * its failure tcp_pump.c, dialling a peer and the I/O thread's turn at the listener tcp_dial.c,
 * the socket steps and the acceptor tcp_sock.c, the hello's checks and the frame decoder (pure,
 * fuzzed) tcp_wire.c (tcp_wire.h), the structures they share tcp.h, the system-call table tests
 * replace tcp_sys.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "tcp.h"
#include "thread.h"
#include "transport.h"
#include "trust.h"
#include "wait.h"

#define TCP_SLOT_MAX (512u << 10)
#define TCP_SLOT_MIN 4096u

static bool tcp_can_connect(const struct hccl_tctx *tx, uint32_t peer) {
  return tx->peers[peer].host_hash != tx->peers[tx->rank].host_hash;
}

/* ---- failures ---- */

static HcclResult tcp_check_abort(struct hccl_tctx *tx, const char *what) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  if (!st) return HCCL_SUCCESS;
  return hccl__abort_mark_check(tx, what, &st->abort_origin, &st->abort_ready, st->abort_reason);
}



/* ---- setup and connect ---- */

static void link_free(struct tcp_link *l) {
  if (!l) return;
  if (l->fd >= 0) close(l->fd);
  free(l->sbuf);
  free(l->rbuf);
  hccl__tcp_pump_free(l->pump);
  pthread_mutex_destroy(&l->post_lock);
  free(l);
}

static void state_free(struct tcp_state *st) {
  int n = atomic_load(&st->nlinks);
  for (int i = 0; i < n; i++)
    link_free(st->all[i]);
  hccl__tcp_acceptor_free(&st->acc);
  if (st->epfd >= 0) close(st->epfd);
  if (st->evfd >= 0) close(st->evfd);
  free(st->peers);
  free(st->all);
  free(st->dial);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

/* The blob peers dial: the listener's address (port included). */
static void blob_of(const struct sockaddr_storage *addr, uint8_t conn[HCCL_CONN_BYTES]) {
  struct tcp_blob blob = {.family = addr->ss_family};
  if (addr->ss_family == AF_INET) {
    blob.port = ((const struct sockaddr_in *)addr)->sin_port;
    memcpy(blob.addr, &((const struct sockaddr_in *)addr)->sin_addr, 4);
  } else {
    blob.port = ((const struct sockaddr_in6 *)addr)->sin6_port;
    memcpy(blob.addr, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
  }
  memcpy(conn, &blob, sizeof(blob));
}

/* The op listen_early: a split group's listener, opened before its parent round so that its
 * blob (what peers dial) rides there (core/comm_split.c). */
static HcclResult tcp_listen_early(const struct hccl_settings *cfg, uint32_t max_peers,
                                   uint8_t conn[HCCL_CONN_BYTES], int *fd_out) {
  struct sockaddr_storage addr;
  char why[64];
  HcclResult r = hccl__tcp_local_addr(cfg, &addr, why, sizeof(why));
  if (r == HCCL_SUCCESS) r = hccl__tcp_listen(&addr, 2 * (int)max_peers + 16, fd_out);
  if (r == HCCL_SUCCESS) blob_of(&addr, conn);
  return r;
}

static HcclResult tcp_setup(struct hccl_tctx *tx, struct hccl_peer_info *self) {
  struct tcp_blob blob = {0};
  memcpy(self->conn[HCCL_TRANSPORT_TCP], &blob, sizeof(blob));
  uint32_t nremote = 0;
  for (uint32_t r = 0; r < tx->nranks; r++)
    if (tcp_can_connect(tx, r)) nremote++;
  if (nremote == 0) return HCCL_SUCCESS; /* one server: no state at all */

  int64_t t0 = hccl__now_ns();
  struct tcp_state *st = calloc(1, sizeof(*st));
  if (!st) return hccl__fail(HCCL_E_MEMORY, "out of memory for the TCP transport");
  st->tx = tx;
  st->epfd = st->evfd = -1;
  pthread_mutex_init(&st->lock, NULL);
  tx->state[HCCL_TRANSPORT_TCP] = st;
  HCCL_TRY(hccl__tcp_acceptor_init(&st->acc, tx->nranks));
  st->peers = calloc(tx->nranks, sizeof(*st->peers));
  st->all = calloc(2 * (size_t)tx->nranks, sizeof(*st->all));
  st->dial = calloc(2 * (size_t)tx->nranks, sizeof(*st->dial));
  if (!st->peers || !st->all || !st->dial)
    return hccl__fail(HCCL_E_MEMORY, "out of memory for the TCP transport");

  size_t slot = tx->cfg->buffsize / ((size_t)HCCL_NCHANNELS * nremote * TCP_NSLOTS);
  if (slot > TCP_SLOT_MAX) slot = TCP_SLOT_MAX;
  slot = slot / 4096 * 4096;
  if (slot < TCP_SLOT_MIN) slot = TCP_SLOT_MIN;
  st->slot_bytes = slot;
  /* Every rank derives the same identity: the store's key prefix and rank 0's process. */
  uint64_t id = hccl__fnv1a(HCCL_FNV1A_SEED, tx->key, strlen(tx->key));
  id = hccl__fnv1a(id, &tx->peers[0].host_hash, sizeof(tx->peers[0].host_hash));
  struct hccl_tcp_acceptor *acc = &st->acc;
  acc->expect = (struct hccl_tcp_hello){
      .magic = HCCL_TCP_MAGIC,
      .version = HCCL_TCP_VERSION,
      .rank = tx->rank,
      .slot_bytes = (uint32_t)slot,
      .comm_id = hccl__fnv1a(id, &tx->peers[0].pid, sizeof(tx->peers[0].pid)),
      .token_hash =
          hccl__fnv1a(0x84222325cbf29ce4ULL, tx->cfg->job_token, strlen(tx->cfg->job_token))};
  acc->greet_timeout_ns = tx->cfg->connect_timeout_ms * 1000000LL;
  acc->greet_timeout_name = tx->cfg->connect_timeout_src;
  if (tx->cfg->whitelist_on)
    HCCL_TRY(hccl__whitelist_load(tx->cfg->whitelist_file, &acc->whitelist));
  for (uint32_t r = 0; r < tx->nranks; r++)
    acc->may_connect[r] = tcp_can_connect(tx, r);
  st->spin_ns = hccl__wait_spin_budget(2 * (int)tx->local_nranks, tx->cfg->spin).poll_ns;

  struct sockaddr_storage addr;
  socklen_t alen = sizeof(addr);
  char why[64] = "opened before the split's parent round", where[80];
  if (tx->listen_fd >= 0) { /* tcp_listen_early's: its address is already published */
    acc->listen_fd = tx->listen_fd;
    tx->listen_fd = -1;
    if (getsockname(acc->listen_fd, (struct sockaddr *)&addr, &alen) != 0)
      return hccl__fail(HCCL_E_SYSCALL, "getsockname of the TCP listener: %s", strerror(errno));
  } else {
    HCCL_TRY(hccl__tcp_local_addr(tx->cfg, &addr, why, sizeof(why)));
    HCCL_TRY(hccl__tcp_listen(&addr, 2 * (int)nremote + 16, &acc->listen_fd));
  }
  hccl__tcp_addr_str(&addr, where, sizeof(where));
  HCCL_INFO("TCP transport: rank %u listens on %s (%s), %u remote ranks, slots of %zu bytes",
            tx->rank, where, why, nremote, slot);
  blob_of(&addr, self->conn[HCCL_TRANSPORT_TCP]);

  st->epfd = epoll_create1(EPOLL_CLOEXEC);
  st->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (st->epfd < 0 || st->evfd < 0)
    return hccl__fail(HCCL_E_SYSCALL, "epoll/eventfd for the TCP transport: %s", strerror(errno));
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &st->acc};
  if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->evfd, &ev) != 0 ||
      epoll_ctl(st->epfd, EPOLL_CTL_ADD, acc->listen_fd, &lev) != 0)
    return hccl__fail(HCCL_E_SYSCALL, "epoll_ctl: %s", strerror(errno));
  acc->epfd = st->epfd;
  acc->ep_tag = &st->acc;
  if (hccl__thread_start(&st->thread, hccl__tcp_io_main, st) != 0)
    return hccl__fail(HCCL_E_SYSCALL, "rank %u cannot start the TCP progress thread", tx->rank);
  st->thread_started = true;
  st->setup_ns = hccl__now_ns() - t0;
  return HCCL_SUCCESS;
}

/* Makes the link over a socket whose hellos are done, publishes it to the I/O thread.
 * Called with st->lock held. */
static HcclResult link_make(struct tcp_state *st, uint32_t peer, int channel, int fd,
                            struct hccl_link **out) {
  struct hccl_tctx *tx = st->tx;
  struct tcp_link *l = calloc(1, sizeof(*l));
  if (!l) {
    close(fd);
    return hccl__fail(HCCL_E_MEMORY, "out of memory for a TCP link to rank %u", peer);
  }
  l->fd = fd;
  pthread_mutex_init(&l->post_lock, NULL);
  l->sbuf = malloc(TCP_NSLOTS * st->slot_bytes);
  l->rbuf = malloc(TCP_NSLOTS * st->slot_bytes);
  l->st = st;
  l->channel = channel;
  l->base.ops = &hccl__transport_tcp;
  l->base.tx = tx;
  l->base.peer = peer;
  l->base.slot_bytes = st->slot_bytes;
  if (!l->sbuf || !l->rbuf || hccl__tcp_pump_new(l) != HCCL_SUCCESS) {
    link_free(l);
    return hccl__fail(HCCL_E_MEMORY, "out of memory for a TCP link to rank %u (2 x %zu bytes)",
                      peer, TCP_NSLOTS * st->slot_bytes);
  }
  struct sockaddr_storage to;
  hccl__tcp_peer_addr(st, peer, &to); /* its address, for the messages of a failure */
  /* A keepalive probe after each idle second, so the kernel's view of whether the peer's host
   * answers (hccl__tcp_quiet_ms) is never more than about 2 s old; a cut cable then also ends
   * the link after 1 + 60 s of silence instead of the retransmissions' 15 minutes. Best effort. */
  int on = 1, idle = 1, intvl = 1, cnt = 60;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
  if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    int e = errno;
    link_free(l);
    return hccl__fail(HCCL_E_SYSCALL, "epoll_ctl for the link to rank %u: %s", peer, strerror(e));
  }
  st->peers[peer].link[channel] = l;
  int n = atomic_load(&st->nlinks);
  st->all[n] = l;
  atomic_store_explicit(&st->nlinks, n + 1, memory_order_release);
  hccl__tcp_poke(st);
  HCCL_DEBUG("TCP link: rank %u to rank %u (%s) channel %d, link %d of this rank", tx->rank,
             peer, st->peers[peer].addr, channel, n + 1);
  *out = &l->base;
  return HCCL_SUCCESS;
}

/* The lower rank of a pair dials its link; the higher one waits for it. At init both ask for
 * it, so the higher one only waits. On first use the higher one asks the lower one's I/O
 * thread to dial (a callback) and waits for that, so it never depends on the lower rank's own
 * threads reaching the same call: a send to a rank that receives from any rank, a gather's
 * root, and an all-to-all all connect without deadlock. */
static HcclResult tcp_connect(struct hccl_tctx *tx, uint32_t peer, int channel, int mode,
                              struct hccl_link **out) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  struct tcp_dial *d = &st->dial[peer * 2 + channel];
  HcclResult r = HCCL_SUCCESS;
  *out = NULL;
  pthread_mutex_lock(&st->lock);
  int fd = hccl__tcp_acceptor_take(&st->acc, peer, (uint32_t)channel);
  bool dialled = false;
  if (fd < 0 && mode == HCCL_CONNECT_OFFERED) goto out;
  if (!d->since_ns) d->since_ns = hccl__now_ns();
  if (fd < 0 && tx->rank < peer && d->state == DIAL_NONE) {
    d->state = DIAL_BUSY;
    pthread_mutex_unlock(&st->lock);
    r = hccl__tcp_dial(st, peer, (uint32_t)channel, &fd);
    pthread_mutex_lock(&st->lock);
    d->state = DIAL_NONE;
    if (r != HCCL_SUCCESS) goto out;
    dialled = true;
  } else if (fd < 0 && tx->rank > peer && mode != HCCL_CONNECT_INIT && d->state == DIAL_NONE) {
    d->state = DIAL_ASKED;
    pthread_mutex_unlock(&st->lock);
    int ask = -1;
    r = hccl__tcp_dial(st, peer, (uint32_t)channel + HCCL_TCP_CALLBACK, &ask);
    if (ask >= 0) close(ask);
    pthread_mutex_lock(&st->lock);
    if (r != HCCL_SUCCESS) goto out;
  }
  int64_t deadline = d->since_ns + tx->cfg->connect_timeout_ms * 1000000LL;
  while (fd < 0 && mode != HCCL_CONNECT_TRY && hccl__now_ns() < deadline) {
    pthread_mutex_unlock(&st->lock);
    usleep(500);
    pthread_mutex_lock(&st->lock);
    fd = hccl__tcp_acceptor_take(&st->acc, peer, (uint32_t)channel);
  }
  if (fd >= 0) {
    if (!dialled) atomic_fetch_add(&st->n_accepted, 1);
    r = link_make(st, peer, channel, fd, out);
  } else if (hccl__now_ns() >= deadline) {
    hccl__tcp_peer_addr(st, peer, &(struct sockaddr_storage){0});
    r = hccl__fail(HCCL_E_TIMEOUT,
                   "rank %u waited %lld s (%s) for rank %u (host %s) to "
                   "connect to %s; check that rank %u runs and that its server reaches this "
                   "address (HCCL_IF_IP / HCCL_SOCKET_IFNAME choose it)",
                   tx->rank, (long long)(tx->cfg->connect_timeout_ms / 1000),
                   tx->cfg->connect_timeout_src, peer,
                   tx->peers[peer].host, st->peers[tx->rank].addr, peer);
  }
out:
  pthread_mutex_unlock(&st->lock);
  return r;
}

/* ---- abort and teardown ---- */

/* The failed call's buffers are the caller's again when it returns: waits until the I/O
 * thread has begun a pass after the abort was marked and finished it (from that pass on it
 * reads no payload, tcp_write.c's link_write), at most QUIESCE_MS. Not from the thread
 * itself, and not once it is stopping. */
#define QUIESCE_MS 1000
static void quiesce(struct tcp_state *st) {
  if (!st->thread_started || atomic_load(&st->stop) || pthread_equal(pthread_self(), st->thread))
    return;
  uint64_t from = atomic_load_explicit(&st->passes, memory_order_acquire);
  int64_t end = hccl__now_ns() + QUIESCE_MS * 1000000LL;
  hccl__tcp_poke_always(st);
  while (atomic_load_explicit(&st->passes, memory_order_acquire) < from + 2 &&
         hccl__now_ns() < end)
    usleep(50);
}

static void tcp_abort(struct hccl_tctx *tx, uint32_t origin, HcclResult code) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  if (!st) return;
  /* A failure that came from another rank's abort: the I/O thread passed it on. */
  if (atomic_load(&st->abort_origin) == 0) {
    const char *reason = HcclGetLastErrorMessage();
    hccl__tcp_mark_abort(st, origin, code, reason && *reason ? reason : HcclGetErrorString(code));
    atomic_store(&st->abort_send, 1);
    hccl__tcp_poke_always(st);
    hccl__tcp_wake_all(st);
  }
  quiesce(st);
}

static int tcp_ask_progress(struct hccl_tctx *tx, uint32_t peer, uint32_t seq, int64_t wait_ms,
                            char *buf, size_t len, uint32_t *next) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  if (!st || peer >= tx->nranks) return -1;
  struct tcp_peer *p = &st->peers[peer];
  if (!atomic_load(&p->link[HCCL_CHANNEL_COLL]) && !atomic_load(&p->link[HCCL_CHANNEL_P2P]))
    return -1;
  if (atomic_load(&p->dead)) {
    snprintf(buf, len, "rank %u %s", peer, p->reason);
    *next = UINT32_MAX;
    return 2;
  }
  atomic_store(&p->answered, 0);
  atomic_store(&p->ask, (uint64_t)seq + 1);
  atomic_store(&st->ask_send, 1);
  hccl__tcp_poke_always(st);
  int64_t end = hccl__now_ns() + wait_ms * 1000000LL;
  while (!atomic_load_explicit(&p->answered, memory_order_acquire)) {
    /* A rank that timed out at the same moment fails, tells its peers why (ABORT) and may
     * destroy its communicator before it could answer: its reason is the answer. */
    uint32_t origin = atomic_load(&st->abort_origin);
    if (origin && atomic_load(&st->abort_ready)) {
      snprintf(buf, len, "rank %u failed: %s", origin - 1, st->abort_reason);
      *next = UINT32_MAX;
      return 2;
    }
    if (atomic_load(&p->dead)) {
      snprintf(buf, len, "rank %u %s", peer, p->reason);
      *next = UINT32_MAX;
      return 2;
    }
    if (hccl__now_ns() >= end) return 0;
    usleep(1000);
  }
  snprintf(buf, len, "%s", p->report);
  *next = p->report_next;
  return 1;
}

static int64_t tcp_quiet(struct hccl_tctx *tx, uint32_t peer, int64_t *data_ms, char *addr,
                         size_t addr_len) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  if (addr_len) addr[0] = '\0';
  if (!st || peer >= tx->nranks) return -1;
  /* The address without its port: the server's, as its links use it. */
  const char *a = st->peers[peer].addr, *colon = strrchr(a, ':');
  if (a[0] == '[')
    snprintf(addr, addr_len, "%.*s", (int)(strchr(a, ']') ? strchr(a, ']') - a - 1 : 0), a + 1);
  else
    snprintf(addr, addr_len, "%.*s", (int)(colon ? colon - a : (long)strlen(a)), a);
  return peer == tx->rank ? -1 : hccl__tcp_quiet_ms(st, peer, data_ms);
}

static int64_t tcp_ask_reach(struct hccl_tctx *tx, uint32_t via, uint32_t target,
                             int64_t wait_ms) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  if (!st || via >= tx->nranks || target >= tx->nranks) return -2;
  struct tcp_peer *p = &st->peers[via];
  if (atomic_load(&p->dead) ||
      (!atomic_load(&p->link[HCCL_CHANNEL_COLL]) && !atomic_load(&p->link[HCCL_CHANNEL_P2P])))
    return -2;
  atomic_store(&p->reach_answered, 0);
  atomic_store(&p->reach_ask, target + 1);
  atomic_store(&st->ask_send, 1);
  hccl__tcp_poke_always(st);
  int64_t end = hccl__now_ns() + wait_ms * 1000000LL;
  while (!atomic_load_explicit(&p->reach_answered, memory_order_acquire)) {
    if (atomic_load(&p->dead) || hccl__now_ns() >= end) return -2;
    usleep(1000);
  }
  return atomic_load(&p->reach_quiet_ms);
}

static size_t tcp_slot_bytes(const struct hccl_tctx *tx) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  return st ? st->slot_bytes : 0;
}

/* After init's links: what making them cost (bench/split.sh's runs read this line). The
 * listener stays: links are made on first use. */
static void tcp_connected(struct hccl_tctx *tx) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  if (!st) return;
  HCCL_INFO("TCP transport: rank %u made %d links at init: %u dialled, %u accepted, %u "
            "callbacks asked; setup %.2f ms",
            tx->rank, atomic_load(&st->nlinks), atomic_load(&st->n_dialled),
            atomic_load(&st->n_accepted), atomic_load(&st->n_callbacks), st->setup_ns / 1e6);
}

static void tcp_close(struct hccl_link *base) {
  /* The I/O thread may still be writing this link's last frames (ACKs, BYE): links live
   * until teardown, which stops the thread first. */
  (void)base;
}

static void tcp_teardown(struct hccl_tctx *tx) {
  struct tcp_state *st = hccl__tcp_state_of(tx);
  if (!st) return;
  if (st->thread_started) {
    atomic_store(&st->stop, 1);
    hccl__tcp_poke_always(st);
    pthread_join(st->thread, NULL);
  }
  state_free(st);
  tx->state[HCCL_TRANSPORT_TCP] = NULL;
}

const struct hccl_transport_ops hccl__transport_tcp = {
    .name = "tcp",
    .index = HCCL_TRANSPORT_TCP,
    .can_connect = tcp_can_connect,
    .setup = tcp_setup,
    .connect = tcp_connect,
    .connected = tcp_connected,
    .slot_bytes = tcp_slot_bytes,
    .local_addr = hccl__tcp_local_addr,
    .listen_early = tcp_listen_early,
    .send_acquire = hccl__tcp_send_acquire,
    .send_commit = hccl__tcp_send_commit,
    .send_ref = hccl__tcp_send_ref,
    .send_flush = hccl__tcp_send_flush,
    .recv_acquire = hccl__tcp_recv_acquire,
    .recv_release = hccl__tcp_recv_release,
    .recv_post = hccl__tcp_recv_post,
    .send_ready = hccl__tcp_send_ready,
    .recv_ready = hccl__tcp_recv_ready,
    .send_drained = hccl__tcp_send_drained,
    .send_drain = hccl__tcp_send_drain,
    .abort = tcp_abort,
    .check_abort = tcp_check_abort,
    /* No progress records cross servers: a timeout names the peer without following it
     * further (progress.c copes with NULL). */
    .progress = NULL,
    /* ... but a timed-out rank asks its peer on another server, whose I/O thread answers
     * with its own account (PROGQ / PROGA frames). */
    .ask_progress = tcp_ask_progress,
    /* ... and, when it does not answer, tells a network fault from a frozen process. */
    .quiet = tcp_quiet,
    .ask_reach = tcp_ask_reach,
    .wait_check = hccl__tcp_wait_check,
    .close = tcp_close,
    .teardown = tcp_teardown,
    /* Measured over a veth pair between network namespaces on the 2-core machine: an 8-byte
     * allreduce of 2 ranks takes about 45 us (two thread hand-offs and a socket each way),
     * a 64 MiB one moves about 0.5 GB/s per direction. */
    .alpha_ns = 25000.0,
    .beta_ns = 2.0,
};
