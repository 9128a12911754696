/*
 * rdma.c - links between ranks on different servers over RDMA (RoCE v2 or InfiniBand through
 * libibverbs, loaded at run time): one RC queue pair per (peer, channel), as gloo's ibverbs pair.
 *
 * Chosen (can_connect) between ranks of different servers when both published an active port
 * (HCCL_NET=auto), always between servers with HCCL_NET=rdma, never with HCCL_NET=tcp; TCP,
 * after this transport in the priority table, carries the rest. A rank with HCCL_NET=rdma and
 * no usable port fails its setup naming what it found; with auto it says so at INFO and
 * publishes no blob, so its peers pick TCP too.
 *
 * Setup opens the device (rdma_dev.c), makes the communicator's one completion queue and its
 * control queue pair (UD), and publishes that QP's address (GID, QP number, MTU, LID) as the
 * conn blob. Connect: the rank that needs a link first makes its RC queue pair (INIT, receives
 * posted, its slots registered) and sends a HELLO {QP number, PSN, MTU, receive slots' address
 * and rkey} to the peer's control QP; the peer's thread makes its own queue pair if it has none,
 * moves it to RTR/RTS with what the hello says (the MTU the smaller of the two) and answers with
 * its own HELLO, marked have_yours. A side is ready once its QP is at RTS and the peer said it
 * is at RTR with it (have_yours), so nothing is ever written to a queue pair not yet able to
 * take it. Hellos not answered within RDMA_HELLO_RESEND_MS are sent again (datagrams can be
 * lost); HCCL_CONNECT_TIMEOUT bounds the wait. Neither side waits for the other's algorithm
 * threads, so links asked for in any order, on first use as TCP's, never deadlock.
 *
 * Data path: rdma_data.c (slots, send by reference, receives posted in place). Failure: a work
 * request that fails (retry count exceeded: a cut cable or a dead host; a queue pair in error; an
 * async event saying the port went down) marks its peer down with the reason, naming both servers,
 * and wakes every waiter on its links (rdma_io_thread.c). abort() sends ABORT {origin, code,
 * reason} to every linked peer's control QP; the first one a rank hears goes on to its own linked
 * peers. Teardown waits (at most 1 s) for its last work requests, sends BYE, stops the thread and
 * destroys every QP, MR, CQ and the rest (rdma resource show is as before).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "rdma.h"
#include "thread.h"
#include "transport.h"
#include "wait.h"

static bool remote_rank(const struct hccl_tctx *tx, uint32_t peer) {
  return tx->peers[peer].host_hash != tx->peers[tx->rank].host_hash;
}

static HcclResult rdma_check_abort(struct hccl_tctx *tx, const char *what) {
  struct rdma_state *st = hccl__rdma_state_of(tx);
  if (!st) return HCCL_SUCCESS;
  return hccl__abort_mark_check(tx, what, &st->abort_origin, &st->abort_ready, st->abort_reason);
}

/* ---- setup ---- */

static void state_free(struct rdma_state *st) {
  int n = atomic_load(&st->nlinks);
  for (int i = 0; i < n; i++) {
    hccl__rdma_qp_free(st, st->all[i]);
    free(st->all[i]);
  }
  if (st->reg_inited) {
    hccl__rdma_reg_free(st);
    pthread_mutex_destroy(&st->reg_lock);
  }
  hccl__rdma_dev_close(st);
  if (st->evfd >= 0) close(st->evfd);
  free(st->peers);
  free(st->all);
  pthread_mutex_destroy(&st->lock);
  pthread_mutex_destroy(&st->ctl_lock);
  free(st);
}

/* Registers and frees one link's slots: where the locked-memory limit is too low for them
 * (ulimit -l: 64 KiB for a user by default), RDMA is refused now, so that HCCL_NET=auto falls
 * back to TCP instead of failing at the first link. */
static HcclResult try_register(struct rdma_state *st, char *why, size_t len) {
  size_t bytes = hccl__rdma_region_bytes(st->slot_bytes);
  void *mem = NULL;
  if (posix_memalign(&mem, 4096, bytes) != 0) {
    snprintf(why, len, "out of memory for one link's slots (%zu bytes)", bytes);
    return HCCL_E_MEMORY;
  }
  memset(mem, 0, bytes);
  struct ibv_mr *mr =
      st->v->reg_mr(st->pd, mem, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  int e = errno;
  if (mr) st->v->dereg_mr(mr);
  free(mem);
  if (mr) return HCCL_SUCCESS;
  snprintf(why, len, "%s cannot register one link's slots (%zu bytes): %s; raise the locked-memory "
           "limit (ulimit -l, memlock in /etc/security/limits.conf) or lower HCCL_BUFFSIZE",
           st->dev_name, bytes, strerror(e));
  return HCCL_E_ROCE_CONNECT;
}

static HcclResult rdma_setup(struct hccl_tctx *tx, struct hccl_peer_info *self) {
  const struct hccl_settings *cfg = tx->cfg;
  memset(self->conn[HCCL_TRANSPORT_RDMA], 0, HCCL_CONN_BYTES);
  uint32_t nremote = 0;
  for (uint32_t r = 0; r < tx->nranks; r++)
    nremote += remote_rank(tx, r);
  if (cfg->net == HCCL_NET_TCP || nremote == 0) return HCCL_SUCCESS;

  struct rdma_state *st = calloc(1, sizeof(*st));
  if (!st) return hccl__fail(HCCL_E_MEMORY, "out of memory for the RDMA transport");
  st->tx = tx;
  st->ops = &hccl__transport_rdma;
  st->evfd = -1;
  st->reg_watch = -1;
  pthread_mutex_init(&st->lock, NULL);
  pthread_mutex_init(&st->ctl_lock, NULL);
  st->slot_bytes = hccl__rdma_slot_bytes(cfg->buffsize, nremote);
  st->cqe_want = (int)(2 * nremote * (RDMA_RECV_WR + RDMA_SEND_WR)) + RDMA_NCTL_RECV +
                 RDMA_NCTL_SEND;
  /* Every rank derives the same identity, as TCP's: the store's key prefix and rank 0's
   * process. */
  uint64_t id = hccl__fnv1a(HCCL_FNV1A_SEED, tx->key, strlen(tx->key));
  id = hccl__fnv1a(id, &tx->peers[0].host_hash, sizeof(tx->peers[0].host_hash));
  st->comm_id = hccl__fnv1a(id, &tx->peers[0].pid, sizeof(tx->peers[0].pid));
  st->spin_ns = hccl__wait_spin_budget(2 * (int)tx->local_nranks, cfg->spin).poll_ns;

  char why[400] = "";
  HcclResult r = hccl__rdma_dev_open(st, cfg, RDMA_SONAME, why, sizeof(why));
  if (r == HCCL_SUCCESS) {
    st->peers = calloc(tx->nranks, sizeof(*st->peers));
    st->all = calloc(2 * (size_t)tx->nranks, sizeof(*st->all));
    st->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!st->peers || !st->all || st->evfd < 0)
      r = hccl__fail(HCCL_E_MEMORY, "out of memory for the RDMA transport");
  }
  if (r == HCCL_SUCCESS) r = hccl__rdma_ctl_init(st);
  if (r == HCCL_SUCCESS) r = try_register(st, why, sizeof(why));
  if (r == HCCL_SUCCESS) {
    hccl__rdma_reg_init(st);
    st->reg_inited = true;
  }
  if (r != HCCL_SUCCESS) {
    if (!why[0]) snprintf(why, sizeof(why), "%s", HcclGetLastErrorMessage());
    state_free(st);
    if (cfg->net == HCCL_NET_RDMA)
      return hccl__fail(r == HCCL_E_NOT_FOUND ? HCCL_E_NOT_FOUND : HCCL_E_ROCE_CONNECT,
                        "rank %u (server %s) cannot use RDMA, which HCCL_NET=rdma asks for: %s",
                        tx->rank, tx->peers[tx->rank].host, why);
    HCCL_INFO("RDMA transport: rank %u (server %s) does not use RDMA (%s); TCP carries its "
              "links to other servers",
              tx->rank, tx->peers[tx->rank].host, why);
    return HCCL_SUCCESS;
  }
  tx->state[HCCL_TRANSPORT_RDMA] = st;
  struct rdma_blob blob = {.magic = RDMA_BLOB_MAGIC,
                           .version = RDMA_VERSION,
                           .active = 1,
                           .mtu = (uint8_t)st->mtu,
                           .port = (uint8_t)st->port,
                           .ud_qpn = st->ud->qp_num,
                           .lid = st->lid};
  memcpy(blob.gid, st->gid.raw, 16);
  hccl__rdma_blob_encode(&blob, self->conn[HCCL_TRANSPORT_RDMA]);
  if (hccl__thread_start(&st->thread, hccl__rdma_io_main, st) != 0)
    return hccl__fail(HCCL_E_SYSCALL, "rank %u cannot start the RDMA completion thread",
                      tx->rank);
  st->thread_started = true;
  HCCL_INFO("RDMA transport: rank %u uses %s port %d, GID %d (%s), MTU %u, %u remote ranks, "
            "slots of %zu bytes",
            tx->rank, st->dev_name, st->port, st->gid_index, st->gid_str,
            hccl__rdma_mtu_bytes(st->mtu), nremote, st->slot_bytes);
  return HCCL_SUCCESS;
}

static HcclResult rdma_connect(struct hccl_tctx *tx, uint32_t peer, int channel, int mode,
                               struct hccl_link **out) {
  struct rdma_state *st = hccl__rdma_state_of(tx);
  struct rdma_peer *p = &st->peers[peer];
  *out = NULL;
  pthread_mutex_lock(&st->lock);
  struct rdma_link *l = atomic_load(&p->link[channel]);
  if (!l && mode == HCCL_CONNECT_OFFERED) {
    pthread_mutex_unlock(&st->lock);
    return HCCL_SUCCESS;
  }
  if (!l) {
    HcclResult r = hccl__rdma_link_new(st, peer, channel, &l);
    if (r != HCCL_SUCCESS) {
      pthread_mutex_unlock(&st->lock);
      return r;
    }
    hccl__rdma_send_hello(st, l);
    hccl__rdma_poke(st, true); /* it resends the hello until answered */
  }
  pthread_mutex_unlock(&st->lock);
  int64_t deadline = l->since_ns + tx->cfg->connect_timeout_ms * 1000000LL;
  while (!atomic_load_explicit(&l->ready, memory_order_acquire)) {
    if (mode == HCCL_CONNECT_TRY || mode == HCCL_CONNECT_OFFERED) return HCCL_SUCCESS;
    if (atomic_load(&p->dead))
      return hccl__fail(HCCL_E_ROCE_CONNECT, "rank %u cannot link to rank %u over RDMA: %s",
                        tx->rank, peer, p->reason);
    HCCL_TRY(rdma_check_abort(tx, "connecting over RDMA"));
    if (hccl__now_ns() >= deadline)
      return hccl__fail(HCCL_E_TIMEOUT,
                        "rank %u waited %lld s (%s) for rank %u (server %s) to "
                        "answer its RDMA hello (%s port %d, GID %s to the peer's control queue "
                        "pair %u); check that rank %u runs and that the two servers' RDMA ports "
                        "reach each other (HCCL_RDMA_DEVICE, HCCL_RDMA_GID_INDEX choose them; "
                        "HCCL_NET=tcp avoids RDMA)",
                        tx->rank, (long long)(tx->cfg->connect_timeout_ms / 1000),
                        tx->cfg->connect_timeout_src, peer, tx->peers[peer].host, st->dev_name, st->port, st->gid_str,
                        p->blob.ud_qpn, peer);
    usleep(200);
  }
  *out = &l->base;
  return HCCL_SUCCESS;
}

/* ---- abort and teardown ---- */

static void rdma_abort(struct hccl_tctx *tx, uint32_t origin, HcclResult code) {
  struct rdma_state *st = hccl__rdma_state_of(tx);
  if (!st) return;
  /* Marked already when the abort came from a peer (the thread passed it on). */
  const char *reason = HcclGetLastErrorMessage();
  if (atomic_load(&st->abort_origin) == 0 &&
      hccl__rdma_mark_abort(st, origin, code,
                            reason && *reason ? reason : HcclGetErrorString(code))) {
    hccl__rdma_send_aborts(st);
    hccl__rdma_wake_all(st);
  }
  /* The failed call's buffers are the caller's again when this returns: every queue pair goes
   * to the error state, so the adapter reads no more of a send_ref's source (the peers learn
   * of the abort from the ABORT datagrams above). */
  int n = atomic_load_explicit(&st->nlinks, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    atomic_store(&st->all[i]->failed, 1);
    st->v->modify_qp(st->all[i]->qp, &a, IBV_QP_STATE);
  }
}

static size_t rdma_slot_bytes(const struct hccl_tctx *tx) {
  struct rdma_state *st = hccl__rdma_state_of(tx);
  return st ? st->slot_bytes : 0;
}

static void rdma_connected(struct hccl_tctx *tx) {
  struct rdma_state *st = hccl__rdma_state_of(tx);
  if (st)
    HCCL_INFO("RDMA transport: rank %u made %d links at init", tx->rank,
              atomic_load(&st->nlinks));
}

/* The counters (rdma.h), for HcclGetCommTransportStats; zeros where RDMA is not used. */
static void rdma_stats(const struct hccl_tctx *tx, HcclTransportStats *out) {
  struct rdma_state *st = hccl__rdma_state_of(tx);
  if (!st) return;
  out->links = (uint32_t)atomic_load(&st->nlinks);
  out->bytesSent = atomic_load(&st->bytes_sent);
  out->bytesCopiedSend = atomic_load(&st->bytes_copied_send);
  out->bytesCopiedRecv = atomic_load(&st->bytes_copied_recv);
}

static void rdma_close(struct hccl_link *base) {
  (void)base; /* links live until teardown, which stops the thread first */
}

static void rdma_teardown(struct hccl_tctx *tx) {
  struct rdma_state *st = hccl__rdma_state_of(tx);
  if (!st) return;
  int n = atomic_load(&st->nlinks);
  /* The last credits reach the peers before the goodbye that would overtake them. */
  int64_t end = hccl__now_ns() + 1000000000LL;
  for (int i = 0; i < n; i++)
    while (atomic_load(&st->all[i]->sq_done) != atomic_load(&st->all[i]->sq_posted) &&
           !atomic_load(&st->all[i]->failed) && hccl__now_ns() < end)
      usleep(100);
  struct rdma_msg bye = {.type = RDMA_MSG_BYE};
  for (uint32_t r = 0; r < tx->nranks; r++)
    if (atomic_load(&st->peers[r].link[0]) || atomic_load(&st->peers[r].link[1]))
      hccl__rdma_ctl_send(st, r, &bye, NULL);
  if (st->thread_started) {
    atomic_store(&st->stop, 1);
    hccl__rdma_poke(st, true);
    pthread_join(st->thread, NULL);
  }
  uint64_t sent = atomic_load(&st->bytes_sent), cs = atomic_load(&st->bytes_copied_send),
           cr = atomic_load(&st->bytes_copied_recv);
  HCCL_INFO("RDMA transport: rank %u sent %llu bytes over %d links, %llu of them copied into a "
            "send slot, and took %llu bytes out of receive slots (%.2f copies per byte sent; "
            "the rest from and into %d registered parts of HcclMemAlloc regions, %u dropped on "
            "HcclMemFree)",
            tx->rank, (unsigned long long)sent, n, (unsigned long long)cs, (unsigned long long)cr,
            sent ? (double)(cs + cr) / (double)sent : 0.0, st->nreg,
            atomic_load(&st->reg_evicted));
  state_free(st);
  tx->state[HCCL_TRANSPORT_RDMA] = NULL;
}

const struct hccl_transport_ops hccl__transport_rdma = {
    .name = "rdma",
    .index = HCCL_TRANSPORT_RDMA,
    .can_connect = hccl__rdma_can_connect,
    .setup = rdma_setup,
    .connect = rdma_connect,
    .connected = rdma_connected,
    .slot_bytes = rdma_slot_bytes,
    /* The bootstrap's address and a split's early listener are TCP's. */
    .local_addr = NULL,
    .listen_early = NULL,
    .send_acquire = hccl__rdma_send_acquire,
    .send_commit = hccl__rdma_send_commit,
    .recv_acquire = hccl__rdma_recv_acquire,
    .recv_release = hccl__rdma_recv_release,
    /* send_ref writes from an HcclMemAlloc region without a copy (rdma_reg.c), from other
     * memory through a slot; recv_post has the sender write straight into an HcclMemAlloc
     * region, other memory receives through slots. */
    .send_ref = hccl__rdma_send_ref,
    .send_flush = hccl__rdma_send_flush,
    .recv_post = hccl__rdma_recv_post,
    .send_ready = hccl__rdma_send_ready,
    .recv_ready = hccl__rdma_recv_ready,
    .send_drained = hccl__rdma_send_drained,
    .send_drain = hccl__rdma_send_drain,
    .abort = rdma_abort,
    .check_abort = rdma_check_abort,
    .progress = NULL,
    .ask_progress = NULL,
    .quiet = NULL,
    .ask_reach = NULL,
    .map_window = NULL,
    .wait_check = hccl__rdma_wait_check,
    .close = rdma_close,
    .teardown = rdma_teardown,
    .stats = rdma_stats,
    /* A model, not a measurement (no RDMA NIC here): a few microseconds a hop and 100 Gb/s. */
    .alpha_ns = 5000.0,
    .beta_ns = 0.08,
};
