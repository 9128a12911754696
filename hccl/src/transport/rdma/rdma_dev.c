/*
 * rdma_dev.c - the RDMA transport's verbs objects: the device and port chosen (HCCL_RDMA_DEVICE,
 * else the first active port), its GID (HCCL_RDMA_GID_INDEX, else RoCE v2 over IPv4, read from
 * sysfs's gid_attrs as NCCL does), the protection domain, the completion channel and the one
 * completion queue of a communicator; the control queue pair (UD) and its datagrams; each link's
 * RC queue pair with its registered slots, taken INIT -> RTR -> RTS with HCCL's timeout, retry
 * count, traffic class and service level. Every verbs call goes through rdma_verbs.h's table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "rdma.h"
#include "settings.h"
#include "wait.h"


static void gid_str(const uint8_t *g, char *buf, size_t len) {
  if (hccl__rdma_gid_ipv4(g))
    snprintf(buf, len, "::ffff:%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
  else
    snprintf(buf, len, "%02x%02x:%02x%02x:...:%02x%02x:%02x%02x", g[0], g[1], g[2], g[3], g[12],
             g[13], g[14], g[15]);
}

/* What each device's ports look like, for the choice and its message. */
static int describe(const struct hccl_ibv *v, struct ibv_device **list, int n,
                    struct rdma_dev_desc *d) {
  for (int i = 0; i < n; i++) {
    memset(&d[i], 0, sizeof(d[i]));
    snprintf(d[i].name, sizeof(d[i].name), "%s", v->get_device_name(list[i]));
    struct ibv_context *c = v->open_device(list[i]);
    struct ibv_device_attr da;
    if (!c) continue;
    if (v->query_device(c, &da) == 0) {
      d[i].nports = da.phys_port_cnt < RDMA_MAX_PORTS ? da.phys_port_cnt : RDMA_MAX_PORTS;
      for (int p = 0; p < d[i].nports; p++) {
        struct ibv_port_attr pa;
        memset(&pa, 0, sizeof(pa));
        d[i].active[p] = v->query_port(c, (uint8_t)(p + 1), &pa) == 0 &&
                         pa.state == IBV_PORT_ACTIVE;
      }
    }
    v->close_device(c);
  }
  return n;
}

/* The GID table of the chosen port with each entry's type (sysfs), and the index to use. */
static int pick_gid(struct rdma_state *st, struct ibv_device *dev, int tbl_len, bool eth,
                    int want, char *why, size_t len) {
  int n = tbl_len < 256 ? tbl_len : 256;
  struct rdma_gid_entry *g = calloc((size_t)(n > 0 ? n : 1), sizeof(*g));
  if (!g) {
    snprintf(why, len, "out of memory reading the GID table");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    union ibv_gid raw;
    if (st->v->query_gid(st->ctx, (uint8_t)st->port, i, &raw) != 0) continue;
    memcpy(g[i].raw, raw.raw, 16);
    char path[512], text[32] = "";
    snprintf(path, sizeof(path), "%s/ports/%d/gid_attrs/types/%d", dev->ibdev_path, st->port, i);
    FILE *f = fopen(path, "r");
    if (f) {
      if (!fgets(text, sizeof(text), f)) text[0] = '\0';
      fclose(f);
    }
    /* No sysfs type (an older kernel, InfiniBand): the entry counts as RoCE v1 / IB. */
    g[i].type = text[0] ? hccl__rdma_gid_type(text, eth) : (eth ? RDMA_GID_ROCE_V1 : RDMA_GID_IB);
  }
  int at = hccl__rdma_gid_pick(g, n, want, why, len);
  if (at >= 0) memcpy(st->gid.raw, g[at].raw, 16);
  free(g);
  return at;
}

HcclResult hccl__rdma_dev_open(struct rdma_state *st, const struct hccl_settings *cfg,
                               const char *soname, char *why, size_t len) {
  st->v = hccl__rdma_verbs(soname, why, len);
  if (!st->v) return HCCL_E_NOT_FOUND;
  const struct hccl_ibv *v = st->v;
  int n = 0;
  struct ibv_device **list = v->get_device_list(&n);
  if (!list) n = 0; /* ENOSYS: no kernel support, i.e. no device */
  struct rdma_dev_desc *d = calloc((size_t)(n > 0 ? n : 1), sizeof(*d));
  if (!d) {
    if (list) v->free_device_list(list);
    snprintf(why, len, "out of memory listing RDMA devices");
    return HCCL_E_MEMORY;
  }
  describe(v, list, n, d);
  int at = hccl__rdma_device_pick(d, n, cfg->rdma_device, &st->port, why, len);
  HcclResult r = HCCL_E_NOT_FOUND;
  struct ibv_port_attr pa;
  memset(&pa, 0, sizeof(pa));
  if (at < 0) goto out;
  snprintf(st->dev_name, sizeof(st->dev_name), "%s", d[at].name);
  st->ctx = v->open_device(list[at]);
  if (!st->ctx || v->query_port(st->ctx, (uint8_t)st->port, &pa) != 0) {
    snprintf(why, len, "cannot open RDMA device %s port %d: %s", st->dev_name, st->port,
             strerror(errno));
    goto out;
  }
  st->mtu = pa.active_mtu;
  bool eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  st->gid_index = pick_gid(st, list[at], pa.gid_tbl_len, eth, cfg->rdma_gid_index, why, len);
  if (st->gid_index < 0) {
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "RDMA device %s port %d: %s", st->dev_name, st->port, why);
    snprintf(why, len, "%s", tmp);
    goto out;
  }
  gid_str(st->gid.raw, st->gid_str, sizeof(st->gid_str));
  st->lid = pa.lid;
  struct ibv_device_attr da;
  int cqe = st->cqe_want;
  if (v->query_device(st->ctx, &da) == 0 && cqe > da.max_cqe) cqe = da.max_cqe;
  st->pd = v->alloc_pd(st->ctx);
  st->chan = st->pd ? v->create_comp_channel(st->ctx) : NULL;
  st->cq = st->chan ? v->create_cq(st->ctx, cqe, st, st->chan, 0) : NULL;
  if (!st->cq) {
    snprintf(why, len, "RDMA device %s: cannot make its protection domain, completion channel "
             "or queue of %d entries: %s", st->dev_name, cqe, strerror(errno));
    r = HCCL_E_ROCE_CONNECT;
    goto out;
  }
  int fl = fcntl(st->chan->fd, F_GETFL);
  (void)fcntl(st->chan->fd, F_SETFL, fl | O_NONBLOCK);
  fl = fcntl(st->ctx->async_fd, F_GETFL);
  (void)fcntl(st->ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
  r = HCCL_SUCCESS;
out:
  free(d);
  if (list) v->free_device_list(list);
  return r;
}

static struct ibv_ah_attr ah_attr(struct rdma_state *st, const struct rdma_blob *b) {
  const struct hccl_settings *cfg = st->tx->cfg;
  struct ibv_ah_attr a;
  memset(&a, 0, sizeof(a));
  a.is_global = 1;
  memcpy(a.grh.dgid.raw, b->gid, 16);
  a.grh.sgid_index = (uint8_t)st->gid_index;
  a.grh.hop_limit = 64;
  a.grh.traffic_class = (uint8_t)cfg->rdma_tc;
  a.sl = (uint8_t)cfg->rdma_sl;
  a.dlid = b->lid;
  a.port_num = (uint8_t)st->port;
  return a;
}

HcclResult hccl__rdma_ctl_init(struct rdma_state *st) {
  const struct hccl_ibv *v = st->v;
  st->ctl_max = hccl__rdma_mtu_bytes(st->mtu) >= RDMA_CTL_MAX ? RDMA_CTL_MAX : RDMA_CTL_MIN_MTU;
  size_t bytes = (size_t)RDMA_NCTL_RECV * (RDMA_GRH + RDMA_CTL_MAX) +
                 (size_t)RDMA_NCTL_SEND * RDMA_CTL_MAX;
  if (posix_memalign((void **)&st->ctl_mem, 4096, bytes) != 0)
    return hccl__fail(HCCL_E_MEMORY, "out of memory for the RDMA control datagrams");
  memset(st->ctl_mem, 0, bytes);
  st->ctl_mr = v->reg_mr(st->pd, st->ctl_mem, bytes, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_qp_init_attr ia = {.send_cq = st->cq,
                                .recv_cq = st->cq,
                                .qp_type = IBV_QPT_UD,
                                .cap = {.max_send_wr = RDMA_NCTL_SEND,
                                        .max_recv_wr = RDMA_NCTL_RECV,
                                        .max_send_sge = 1,
                                        .max_recv_sge = 1}};
  st->ud = st->ctl_mr ? v->create_qp(st->pd, &ia) : NULL;
  if (!st->ud)
    return hccl__fail(HCCL_E_ROCE_CONNECT, "RDMA device %s: cannot make the control queue pair: %s",
                      st->dev_name, strerror(errno));
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = (uint8_t)st->port,
                          .qkey = RDMA_QKEY};
  int e = v->modify_qp(st->ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
  if (!e) e = v->modify_qp(st->ud, &a, IBV_QP_STATE);
  a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0};
  if (!e) e = v->modify_qp(st->ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (e)
    return hccl__fail(HCCL_E_ROCE_CONNECT,
                      "RDMA device %s: cannot bring the control queue pair up: %s", st->dev_name,
                      strerror(e));
  for (uint32_t i = 0; i < RDMA_NCTL_RECV; i++)
    hccl__rdma_ctl_repost(st, i);
  return HCCL_SUCCESS;
}

void hccl__rdma_ctl_repost(struct rdma_state *st, uint32_t i) {
  struct ibv_sge sge = {.addr = (uintptr_t)(st->ctl_mem + (size_t)i * (RDMA_GRH + RDMA_CTL_MAX)),
                        .length = RDMA_GRH + RDMA_CTL_MAX,
                        .lkey = st->ctl_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = ((uint64_t)i << 3) | RDMA_TAG_CTL_RECV, .sg_list = &sge,
                           .num_sge = 1},
                     *bad;
  if (ibv_post_recv(st->ud, &wr, &bad) != 0)
    HCCL_WARN("RDMA rank %u: cannot post a control receive", st->tx->rank);
}

bool hccl__rdma_ctl_send(struct rdma_state *st, uint32_t peer, const struct rdma_msg *m,
                         const char *text) {
  struct rdma_peer *p = &st->peers[peer];
  if (atomic_load_explicit(&p->blob_state, memory_order_acquire) != 1 || !st->ud) return false;
  bool mine = st->thread_started && pthread_equal(pthread_self(), st->thread);
  int64_t end = hccl__now_ns() + 1000000000LL;
  pthread_mutex_lock(&st->ctl_lock);
  while (st->ctl_posted - atomic_load(&st->ctl_done) >= RDMA_NCTL_SEND) {
    pthread_mutex_unlock(&st->ctl_lock);
    if (mine || hccl__now_ns() > end) return false; /* hellos are sent again; aborts best effort */
    usleep(100);
    pthread_mutex_lock(&st->ctl_lock);
  }
  if (!p->ah) {
    struct ibv_ah_attr a = ah_attr(st, &p->blob);
    p->ah = st->v->create_ah(st->pd, &a);
  }
  bool ok = false;
  if (p->ah) {
    char *buf = st->ctl_mem + (size_t)RDMA_NCTL_RECV * (RDMA_GRH + RDMA_CTL_MAX) +
                (size_t)(st->ctl_posted % RDMA_NCTL_SEND) * RDMA_CTL_MAX;
    struct rdma_msg h = *m;
    h.comm_id = st->comm_id;
    h.from = st->tx->rank;
    size_t n = hccl__rdma_msg_encode(&h, text, buf, st->ctl_max);
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = (uint32_t)n, .lkey = st->ctl_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = RDMA_TAG_CTL_SEND, .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.ud.ah = p->ah;
    wr.wr.ud.remote_qpn = p->blob.ud_qpn;
    wr.wr.ud.remote_qkey = RDMA_QKEY;
    ok = ibv_post_send(st->ud, &wr, &bad) == 0;
    if (ok) st->ctl_posted++;
  }
  pthread_mutex_unlock(&st->ctl_lock);
  return ok;
}

int hccl__rdma_post_recv(struct rdma_link *l) {
  struct ibv_recv_wr wr = {.wr_id = (uintptr_t)l | RDMA_TAG_RECV, .sg_list = NULL, .num_sge = 0}, *bad;
  return ibv_post_recv(l->qp, &wr, &bad);
}

HcclResult hccl__rdma_qp_new(struct rdma_state *st, struct rdma_link *l) {
  const struct hccl_ibv *v = st->v;
  uint32_t peer = l->base.peer;
  l->half = (size_t)RDMA_NSLOTS * hccl__rdma_stride(st->slot_bytes);
  size_t bytes = hccl__rdma_region_bytes(st->slot_bytes);
  if (posix_memalign((void **)&l->mem, 4096, bytes) != 0) {
    l->mem = NULL;
    return hccl__fail(HCCL_E_MEMORY, "out of memory for an RDMA link to rank %u (%zu bytes)",
                      peer, bytes);
  }
  memset(l->mem, 0, bytes);
  l->mr = v->reg_mr(st->pd, l->mem, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!l->mr)
    return hccl__fail(HCCL_E_ROCE_CONNECT,
                      "RDMA device %s: cannot register %zu bytes of slots for the link to rank %u: "
                      "%s (ulimit -l may be too low)",
                      st->dev_name, bytes, peer, strerror(errno));
  struct ibv_qp_init_attr ia = {.send_cq = st->cq,
                                .recv_cq = st->cq,
                                .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = RDMA_SEND_WR,
                                        .max_recv_wr = RDMA_RECV_WR,
                                        .max_send_sge = 2, /* a slot's header, the payload */
                                        .max_recv_sge = 1}};
  l->qp = v->create_qp(st->pd, &ia);
  if (!l->qp)
    return hccl__fail(HCCL_E_ROCE_CONNECT,
                      "RDMA device %s: cannot make a queue pair for the link to rank %u: %s",
                      st->dev_name, peer, strerror(errno));
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .pkey_index = 0,
                          .port_num = (uint8_t)st->port,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
  int e = v->modify_qp(l->qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  for (int i = 0; i < RDMA_RECV_WR && !e; i++)
    e = hccl__rdma_post_recv(l);
  if (e)
    return hccl__fail(HCCL_E_ROCE_CONNECT,
                      "RDMA device %s: cannot ready the queue pair to rank %u: %s", st->dev_name,
                      peer, strerror(e));
  l->psn = (uint32_t)(((uint64_t)hccl__now_ns() ^ ((uint64_t)l->qp->qp_num << 8)) & 0xffffff);
  return HCCL_SUCCESS;
}

HcclResult hccl__rdma_qp_connect(struct rdma_state *st, struct rdma_link *l, uint32_t rpsn) {
  const struct hccl_settings *cfg = st->tx->cfg;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (enum ibv_mtu)l->mtu;
  a.dest_qp_num = l->rqpn;
  a.rq_psn = rpsn & 0xffffff;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr = ah_attr(st, &st->peers[l->base.peer].blob);
  int e = st->v->modify_qp(l->qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (!e) {
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)cfg->rdma_timeout;
    a.retry_cnt = (uint8_t)cfg->rdma_retry_cnt;
    a.rnr_retry = 7; /* without end: a receive is always reposted */
    a.sq_psn = l->psn;
    a.max_rd_atomic = 1;
    e = st->v->modify_qp(l->qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }
  if (e)
    return hccl__fail(HCCL_E_ROCE_CONNECT,
                      "RDMA rank %u cannot connect its queue pair %u to rank %u's %u (server %s, "
                      "MTU %u): %s",
                      st->tx->rank, l->qp->qp_num, l->base.peer, l->rqpn,
                      st->tx->peers[l->base.peer].host, hccl__rdma_mtu_bytes(l->mtu), strerror(e));
  return HCCL_SUCCESS;
}

void hccl__rdma_qp_free(struct rdma_state *st, struct rdma_link *l) {
  if (l->qp) st->v->destroy_qp(l->qp);
  if (l->mr) st->v->dereg_mr(l->mr);
  free(l->mem);
  l->qp = NULL;
  l->mr = NULL;
  l->mem = NULL;
}

void hccl__rdma_dev_close(struct rdma_state *st) {
  const struct hccl_ibv *v = st->v;
  if (!v) return;
  if (st->ud) v->destroy_qp(st->ud);
  for (uint32_t r = 0; st->peers && r < st->tx->nranks; r++)
    if (st->peers[r].ah) v->destroy_ah(st->peers[r].ah);
  if (st->ctl_mr) v->dereg_mr(st->ctl_mr);
  free(st->ctl_mem);
  if (st->cq) v->destroy_cq(st->cq);
  if (st->chan) v->destroy_comp_channel(st->chan);
  if (st->pd) v->dealloc_pd(st->pd);
  if (st->ctx) v->close_device(st->ctx);
  st->ud = NULL;
  st->ctl_mr = NULL;
  st->ctl_mem = NULL;
  st->cq = NULL;
  st->chan = NULL;
  st->pd = NULL;
  st->ctx = NULL;
}
