/*
 * rdma_fail.c - the RDMA transport's failures and wake-ups: a peer marked down once, with its
 * reason (a failed work request named as a fault: retry count exceeded is a network fault
 * between the two servers, as TCP names one; any failure while this server's own port is down is
 * that port going down, in the words of the port's async event), every waiter on its links
 * woken; every link's
 * waiters woken (an abort); the completion thread woken. The floor of the room's calls: called
 * by rdma.c, rdma_conn.c, rdma_data.c and rdma_io_thread.c, calling none of them.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "credits.h"
#include "log.h"
#include "rdma.h"
#include "settings.h"
#include "wait.h"

void hccl__rdma_poke(struct rdma_state *st, bool always) {
  if (st->evfd < 0) return;
  if (!always && !(atomic_load(&st->sleeping) && atomic_exchange(&st->sleeping, 0))) return;
  uint64_t one = 1;
  ssize_t k = write(st->evfd, &one, sizeof(one));
  (void)k; /* EAGAIN: the counter is already non-zero, so the thread will wake */
}

static void wake_link(struct rdma_link *l) {
  hccl__credits_wake_all(&l->cr);
}

void hccl__rdma_wake_all(struct rdma_state *st) {
  int n = atomic_load_explicit(&st->nlinks, memory_order_acquire);
  for (int i = 0; i < n; i++)
    wake_link(st->all[i]);
}

void hccl__rdma_peer_down(struct rdma_state *st, uint32_t peer, const char *why) {
  struct rdma_peer *p = &st->peers[peer];
  if (atomic_exchange(&p->downing, 1)) return;
  snprintf(p->reason, sizeof(p->reason), "%s", why);
  atomic_store_explicit(&p->dead, 1, memory_order_release);
  HCCL_INFO("RDMA rank %u: %s", st->tx->rank, why);
  for (int c = 0; c < HCCL_NCHANNELS; c++) {
    struct rdma_link *l = atomic_load(&p->link[c]);
    if (l) wake_link(l);
  }
}

void hccl__rdma_port_why(const struct rdma_state *st, uint32_t peer, const char *what, char *why,
                         size_t len) {
  const struct hccl_tctx *tx = st->tx;
  const char *me = tx->peers[tx->rank].host;
  snprintf(why, len, "network fault between server %s and server %s (rank %u): %s port %d of "
           "server %s %s", me, tx->peers[peer].host, peer, st->dev_name, st->port, me, what);
}

/* Whether this server's port is down now. A work request that fails while it is (on rxe: a
 * local QP operation error, as the route through the netdev under it is gone) is named as the
 * port going down, whichever of the two the completion thread reads first: it reads the async
 * event only when idle, and the failed completion, queued at the same moment, comes first. */
static bool port_is_down(struct rdma_state *st) {
  if (atomic_load(&st->port_down)) return true;
  struct ibv_port_attr pa;
  return st->v->query_port(st->ctx, (uint8_t)st->port, &pa) == 0 && pa.state != IBV_PORT_ACTIVE;
}

/* A work request of l failed: the peer is down, with the fault named. */
void hccl__rdma_link_fail(struct rdma_state *st, struct rdma_link *l, enum ibv_wc_status status) {
  struct hccl_tctx *tx = st->tx;
  const struct hccl_settings *cfg = tx->cfg;
  uint32_t peer = l->base.peer;
  const char *me = tx->peers[tx->rank].host, *them = tx->peers[peer].host;
  char why[400];
  atomic_store(&l->failed, 1);
  if (port_is_down(st)) {
    hccl__rdma_port_why(st, peer, "went down", why, sizeof(why));
    size_t n = strlen(why);
    snprintf(why + n, sizeof(why) - n, " (a work request failed: %s)",
             st->v->wc_status_str(status));
  } else if (status == IBV_WC_RETRY_EXC_ERR)
    snprintf(why, sizeof(why),
             "network fault between server %s and server %s (rank %u): RDMA retry count "
             "exceeded, no acknowledgement after %d tries of %.1f ms (HCCL_RDMA_RETRY_CNT, "
             "HCCL_RDMA_TIMEOUT): a cut cable, a port down, a dead host or a process ended",
             me, them, peer, cfg->rdma_retry_cnt + 1, 4.096e-3 * (double)(1u << cfg->rdma_timeout));
  else if (status == IBV_WC_RNR_RETRY_EXC_ERR)
    snprintf(why, sizeof(why), "rank %u (server %s) posted no receive for this rank's RDMA "
             "messages (receiver not ready, retries exceeded)", peer, them);
  else if (status == IBV_WC_REM_ACCESS_ERR || status == IBV_WC_REM_INV_REQ_ERR ||
           status == IBV_WC_REM_OP_ERR)
    snprintf(why, sizeof(why), "rank %u (server %s)'s RDMA queue pair refused this rank's "
             "write (%s): the peer's queue pair is in error or was destroyed", peer, them,
             st->v->wc_status_str(status));
  else
    snprintf(why, sizeof(why), "the RDMA queue pair between server %s and rank %u (server %s) "
             "failed: %s", me, peer, them, st->v->wc_status_str(status));
  hccl__rdma_peer_down(st, peer, why);
}
