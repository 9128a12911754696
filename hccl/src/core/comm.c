/*
 * comm.c - making and destroying communicators: the root-info, environment, rank-table and
 * caller's-store entry points, and the order of the bootstrap: the rounds through the store
 * (bootstrap/rounds.c), the settings every rank must share, the placement on servers, devices
 * and the ring (topo/place.c), the groups (algo/group.c) and the links (transport/links.c).
 * Each check runs on the same data on every rank, so a bad job fails on every rank, never hangs.
 *
 * Bootstrap rounds, each an allgather through the store (keys "<prefix>/<round>/<rank>"):
 *   info  - rank, size, pid, server identity, device, settings that must agree; rank 0's
 *           record also brings every rank the job's run (id and start time);
 *   conn  - what the transports made in setup (each its own opaque blob in the peer info);
 *   ready - every link is connected; transports may drop what peers needed to connect.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "comm.h"
#include "comm_wait.h"
#include "dtype.h"
#include "flight.h"
#include "log.h"
#include "p2p.h"
#include "place.h"
#include "progress.h"
#include "ranktable.h"
#include "rounds.h"
#include "store.h"
#include "topo.h"
#include "trace.h"
#include "trust.h"
#include "wait.h"

#define ROOT_MAGIC 0x68636c6c726f6f74ULL

struct root_blob {
  uint64_t magic;
  uint64_t job;
  uint16_t port;
  char host[256];
};

/* Servers started by HcclGetRootInfo in this process, adopted by its rank-0 communicator. */
static struct pending_server {
  uint64_t job;
  struct hccl_store_server *server;
} g_pending[16];
static pthread_mutex_t g_pending_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned g_env_generation;

/* The run of this process's live communicators: the first one's, while any is live. */
static struct {
  pthread_mutex_t lock;
  uint64_t id;
  int64_t start_us;
  int live;
} g_run = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* Rank 0's proposal for a new communicator's run: the run of a communicator live in this
 * process (a job's later groups join its run), else a new one: 64 random bits (getrandom,
 * never blocking) mixed with the time and pid, so two starts never share one even when the
 * kernel has no entropy yet. */
static void run_propose(uint64_t *id, int64_t *start_us) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
  pthread_mutex_lock(&g_run.lock);
  *id = g_run.id;
  *start_us = g_run.start_us;
  bool live = g_run.live > 0;
  pthread_mutex_unlock(&g_run.lock);
  if (live) return;
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) r = 0;
  r ^= mix64((uint64_t)hccl__now_ns() ^ (uint64_t)now_us << 20 ^ (uint64_t)getpid() << 44);
  *id = r ? r : 1;
  *start_us = now_us;
}

/* c takes rank 0's run (in c->peers[0]) and counts among the process's live communicators;
 * comm_free uncounts it. */
static void run_adopt(struct hccl_comm *c) {
  c->run = c->peers[0].run;
  c->run_start_us = c->peers[0].run_start_us;
  pthread_mutex_lock(&g_run.lock);
  if (g_run.live++ == 0) {
    g_run.id = c->run;
    g_run.start_us = c->run_start_us;
  }
  pthread_mutex_unlock(&g_run.lock);
  c->run_counted = true;
}

/* Checks every rank makes on the same data: the settings that must agree, then the placement
 * (topo/place.c), which fills local ranks, devices and the ring; then the groups. */
static HcclResult check_and_place(struct hccl_comm *c) {
  struct hccl_peer_info *P = c->peers;
  for (uint32_t r = 0; r < c->nranks; r++) {
    if (P[r].nranks != c->nranks)
      return hccl__fail(HCCL_E_PARA,
                        "rank %u was started for %u ranks but rank %u for %u; every rank must "
                        "be given the same world size",
                        r, P[r].nranks, c->rank, c->nranks);
    if (P[r].buffsize != P[0].buffsize)
      return hccl__fail(HCCL_E_PARA,
                        "HCCL_BUFFSIZE differs: rank %u has %llu MB, rank 0 has %llu MB; every "
                        "rank must use the same value",
                        r, (unsigned long long)(P[r].buffsize >> 20),
                        (unsigned long long)(P[0].buffsize >> 20));
    if (P[r].algo != P[0].algo)
      return hccl__fail(HCCL_E_PARA,
                        "HCCL_ALGO differs between rank %u and rank 0; every rank must use the "
                        "same value",
                        r);
  }
  struct hccl_topo topo;
  char err[512];
  if (c->cfg.topo_file[0] &&
      hccl__topo_load(c->cfg.topo_file, NULL, &topo, err, sizeof(err)) != HCCL_SUCCESS)
    return hccl__fail(HCCL_E_PARA, "HCCL_TOPO_FILE='%s': %s", c->cfg.topo_file, err);
  struct hccl_place_rank *pr = calloc(c->nranks, sizeof(*pr));
  uint32_t *server_of = calloc(c->nranks, sizeof(uint32_t));
  HcclResult res = HCCL_E_MEMORY;
  if (!pr || !server_of) {
    hccl__fail(res, "out of memory placing %u ranks", c->nranks);
    goto out;
  }
  for (uint32_t r = 0; r < c->nranks; r++) {
    P[r].host[sizeof(P[r].host) - 1] = P[r].device_src[sizeof(P[r].device_src) - 1] = '\0';
    pr[r] = (struct hccl_place_rank){P[r].host_hash, P[r].device, P[r].host, P[r].device_src};
  }
  struct hccl_place pl = {
      .server_of = server_of, .local_index = c->local_index, .ring = c->world.ring};
  res = hccl__place(pr, c->nranks, c->cfg.topo_file[0] ? &topo : NULL, &pl, err, sizeof(err));
  if (res != HCCL_SUCCESS) {
    hccl__fail(res, "%s", err);
    goto out;
  }
  for (uint32_t r = 0; r < c->nranks; r++)
    P[r].device = pr[r].device;
  c->nservers = pl.nservers;
  c->local_rank = c->local_index[c->rank];
  c->local_nranks = c->tx.local_nranks = pl.per_server;
  c->device = P[c->rank].device;
  for (uint32_t i = 0; i < c->nranks; i++)
    c->world.pos[c->world.ring[i]] = i;
  res = hccl__groups_make(&c->tx, c->nservers, server_of, &c->world, &c->local, &c->cross);
out:
  free(pr);
  free(server_of);
  return res;
}

/* After the links exist: each group's chunk and cost, and the scratch they share. */
static HcclResult measure_groups(struct hccl_comm *c) {
  struct hccl_algo_state *s = &c->astate;
  hccl__group_measure(s, &c->world);
  hccl__group_measure(s, &c->local);
  hccl__group_measure(s, &c->cross);
  size_t scratch = c->world.chunk_bytes;
  if (c->local.chunk_bytes > scratch) scratch = c->local.chunk_bytes;
  if (c->cross.chunk_bytes > scratch) scratch = c->cross.chunk_bytes;
  s->scratch = malloc(scratch);
  if (!s->scratch)
    return hccl__fail(HCCL_E_MEMORY, "out of memory for %zu bytes of scratch", scratch);
  c->world.scratch = c->local.scratch = c->cross.scratch = s->scratch;
  return HCCL_SUCCESS;
}

/* The transports' way to this rank's own account (tcp: a peer's progress query). */
static void progress_report(void *arg, uint32_t seq, char *buf, size_t len, uint32_t *next) {
  hccl__progress_report(arg, seq, buf, len, next);
}

static struct hccl_comm *comm_alloc(const struct hccl_settings *cfg, uint32_t rank,
                                    uint32_t nranks) {
  struct hccl_comm *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->cfg = *cfg;
  c->rank = rank;
  c->nranks = nranks;
  c->log.rank = (int)rank;
  c->peers = calloc(nranks, sizeof(*c->peers));
  c->local_index = calloc(nranks, sizeof(uint32_t));
  struct hccl_tctx *tx = &c->tx;
  *tx = (struct hccl_tctx){.rank = rank,
                           .nranks = nranks,
                           .local_index = c->local_index,
                           .peers = c->peers,
                           .cfg = &c->cfg,
                           .key = c->key_prefix,
                           .log = &c->log,
                           .report = progress_report,
                           .report_arg = c};
  for (int ch = 0; ch < HCCL_NCHANNELS; ch++)
    tx->links[ch] = calloc(nranks, sizeof(struct hccl_link *));
  c->astate.tx = tx;
  pthread_mutex_init(&c->qlock, NULL);
  pthread_mutex_init(&c->report_lock, NULL);
  pthread_cond_init(&c->qcond, NULL);
  c->world.me = rank;
  c->world.links = tx->links[HCCL_CHANNEL_COLL];
  if (!c->peers || !c->local_index || !tx->links[HCCL_CHANNEL_COLL] ||
      !tx->links[HCCL_CHANNEL_P2P] || hccl__group_alloc(&c->world, nranks) != HCCL_SUCCESS) {
    free(c->peers);
    free(c->local_index);
    for (int ch = 0; ch < HCCL_NCHANNELS; ch++)
      free(tx->links[ch]);
    hccl__group_free(&c->world);
    free(c);
    return NULL;
  }
  for (uint32_t r = 0; r < nranks; r++)
    c->world.rank[r] = r;
  return c;
}

static void comm_free(struct hccl_comm *c) {
  if (c->run_counted) {
    pthread_mutex_lock(&g_run.lock);
    g_run.live--;
    pthread_mutex_unlock(&g_run.lock);
  }
  pthread_mutex_lock(&c->report_lock);
  c->closing = true;
  pthread_mutex_unlock(&c->report_lock);
  hccl__trace_close(c);
  hccl__fr_close(c);
  /* p2p links first: a transport's channel-0 link may stand for its peer until the last. */
  for (int ch = HCCL_NCHANNELS - 1; ch >= 0; ch--)
    for (uint32_t r = 0; r < c->nranks; r++)
      if (c->tx.links[ch][r]) c->tx.links[ch][r]->ops->close(c->tx.links[ch][r]);
  HCCL_FOR_EACH_TRANSPORT_WITH(t, teardown) t->teardown(&c->tx);
  hccl__store_close(c->store);
  hccl__store_server_stop(c->server);
  pthread_mutex_destroy(&c->qlock);
  pthread_mutex_destroy(&c->report_lock);
  pthread_cond_destroy(&c->qcond);
  free(c->astate.scratch);
  free(c->astate.temp);
  free(c->peers);
  free(c->local_index);
  for (int ch = 0; ch < HCCL_NCHANNELS; ch++)
    free(c->tx.links[ch]);
  hccl__group_free(&c->world);
  hccl__group_free(&c->local);
  hccl__group_free(&c->cross);
  free(c);
}

/* What the bootstrap's rounds are given of c (bootstrap/rounds.h): only what they read. */
static struct hccl_rounds rounds_of(const struct hccl_comm *c) {
  return (struct hccl_rounds){.store = c->store,
                              .server = c->server,
                              .store_external = c->store_external,
                              .key_prefix = c->key_prefix,
                              .rank = c->rank,
                              .nranks = c->nranks,
                              .connect_timeout_ms = c->cfg.connect_timeout_ms};
}

/* The rounds after "info": placement checks, transport setup, "conn", links, "ready". */
static HcclResult bootstrap_rest(struct hccl_comm *c, struct hccl_peer_info *self) {
  HCCL_TRY(check_and_place(c));
  self->device = c->device;
  HCCL_FOR_EACH_TRANSPORT_WITH(t, setup) HCCL_TRY(t->setup(&c->tx, self));
  if (c->nranks > 1) {
    const struct hccl_rounds rd = rounds_of(c);
    HCCL_TRY(hccl__round_allgather(&rd, "conn", self, sizeof(*self), c->peers));
    for (uint32_t r = 0; r < c->nranks; r++)
      if (c->peers[r].device < 0) c->peers[r].device = (int32_t)c->local_index[r];
  }
  bool *need = calloc(c->nranks, sizeof(bool));
  if (!need) return hccl__fail(HCCL_E_MEMORY, "out of memory in bootstrap");
  hccl__group_partners(&c->world, need);
  hccl__group_partners(&c->cross, need);
  HcclResult lr = hccl__links_connect(&c->tx, need);
  free(need);
  HCCL_TRY(lr);
  HCCL_TRY(measure_groups(c));
  if (c->nranks > 1) {
    uint32_t *ready = calloc(c->nranks, sizeof(uint32_t));
    if (!ready) return hccl__fail(HCCL_E_MEMORY, "out of memory in bootstrap");
    uint32_t one = 1;
    const struct hccl_rounds rd = rounds_of(c);
    HcclResult r = hccl__round_allgather(&rd, "ready", &one, sizeof(one), ready);
    free(ready);
    HCCL_TRY(r);
  }
  HCCL_FOR_EACH_TRANSPORT_WITH(t, connected) t->connected(&c->tx);
  return HCCL_SUCCESS;
}

/* Runs the bootstrap rounds on c (store, rank, size, prefix set). */
static HcclResult bootstrap(struct hccl_comm *c) {
  struct hccl_peer_info self = {0};
  self.rank = c->rank;
  self.nranks = c->nranks;
  self.pid = (int32_t)getpid();
  self.host_hash = hccl__host_identity(self.host, sizeof(self.host));
  self.device = c->cfg.device_id;
  snprintf(self.device_src, sizeof(self.device_src), "%s",
           c->cfg.device_src ? c->cfg.device_src : "its index on the server");
  self.buffsize = c->cfg.buffsize;
  self.algo = (int32_t)(c->cfg.algo.choice | c->cfg.algo.levels << 2 | c->cfg.algo.level[0] << 4 |
                        c->cfg.algo.level[1] << 6);
  if (c->rank == 0) run_propose(&self.run, &self.run_start_us);

  HcclResult r = HCCL_SUCCESS;
  struct hccl_rounds rd = rounds_of(c);
  if (c->nranks > 1)
    r = hccl__round_allgather(&rd, "info", &self, sizeof(self), c->peers);
  else
    c->peers[0] = self;
  bool all_joined = r == HCCL_SUCCESS;
  if (all_joined) run_adopt(c);
  if (all_joined) r = bootstrap_rest(c, &self);
  hccl__round_finish(&rd, all_joined); /* closes the store, stops rank 0's server */
  c->store = NULL;
  c->server = NULL;
  HCCL_TRY(r);
  HCCL_TRY(hccl__trace_open(c));
  HCCL_TRY(hccl__fr_open(c));
  hccl__comm_waiter_init(c);
  HCCL_INFO("communicator ready: rank %u of %u, device %d, %u per server, chunk %zu bytes", c->rank,
            c->nranks, c->device, c->local_nranks, c->world.chunk_bytes);
  return HCCL_SUCCESS;
}

/* What this job's store server checks (bootstrap/trust.h): token ("" = none), and the
 * whitelist when HCCL_WHITELIST_DISABLE=0. */
static HcclResult make_trust(const struct hccl_settings *cfg, const char *token,
                             struct hccl_store_trust *t) {
  memset(t, 0, sizeof(*t));
  snprintf(t->token, sizeof(t->token), "%s", token);
  if (cfg->whitelist_on) HCCL_TRY(hccl__whitelist_load(cfg->whitelist_file, &t->whitelist));
  return HCCL_SUCCESS;
}

/* A root info's job id is its job token: only holders of the root info get in. */
static void root_token(uint64_t job, char out[32]) {
  snprintf(out, 32, "root-%016llx", (unsigned long long)job);
}

HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) {
  if (!rootInfo) return hccl__fail(HCCL_E_PTR, "HcclGetRootInfo: rootInfo is NULL");
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_given(&cfg, 0, 1));
  struct root_blob blob = {.magic = ROOT_MAGIC};
  const char *addr = cfg.if_ip[0] ? cfg.if_ip : cfg.master_addr[0] ? cfg.master_addr : "127.0.0.1";
  snprintf(blob.host, sizeof(blob.host), "%s", addr);
  if (getrandom(&blob.job, sizeof(blob.job), 0) != sizeof(blob.job))
    blob.job = (uint64_t)hccl__now_ns() ^ ((uint64_t)getpid() << 32);
  struct hccl_store_server *server;
  struct hccl_store_trust trust;
  char token[32];
  root_token(blob.job, token);
  HCCL_TRY(make_trust(&cfg, token, &trust));
  HCCL_TRY(hccl__store_server_start_trusted(addr, 0, &trust, &server, &blob.port));
  pthread_mutex_lock(&g_pending_lock);
  int slot = -1;
  for (int i = 0; i < 16; i++)
    if (!g_pending[i].server) {
      slot = i;
      break;
    }
  if (slot >= 0) g_pending[slot] = (struct pending_server){blob.job, server};
  pthread_mutex_unlock(&g_pending_lock);
  if (slot < 0) {
    hccl__store_server_stop(server);
    return hccl__fail(HCCL_E_UNAVAIL,
                      "HcclGetRootInfo: 16 root infos are already waiting for their "
                      "communicators in this process");
  }
  memset(rootInfo, 0, sizeof(*rootInfo));
  memcpy(rootInfo->internal, &blob, sizeof(blob));
  return HCCL_SUCCESS;
}

static struct hccl_store_server *adopt_server(uint64_t job) {
  struct hccl_store_server *s = NULL;
  pthread_mutex_lock(&g_pending_lock);
  for (int i = 0; i < 16; i++)
    if (g_pending[i].server && g_pending[i].job == job) {
      s = g_pending[i].server;
      g_pending[i].server = NULL;
    }
  pthread_mutex_unlock(&g_pending_lock);
  return s;
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                HcclComm *comm) {
  if (!rootInfo || !comm)
    return hccl__fail(HCCL_E_PTR, "HcclCommInitRootInfo: %s is NULL",
                      rootInfo ? "comm" : "rootInfo");
  if (nRanks == 0 || rank >= nRanks)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommInitRootInfo: rank %u is not valid for nRanks %u; a rank must "
                      "be below nRanks and nRanks at least 1",
                      rank, nRanks);
  struct root_blob blob;
  memcpy(&blob, rootInfo->internal, sizeof(blob));
  if (blob.magic != ROOT_MAGIC)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommInitRootInfo: the root info is not one HcclGetRootInfo made "
                      "(bad magic); copy all %d bytes from rank 0",
                      HCCL_ROOT_INFO_BYTES);
  blob.host[sizeof(blob.host) - 1] = '\0';
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_given(&cfg, rank, nRanks));
  struct hccl_comm *c = comm_alloc(&cfg, rank, nRanks);
  if (!c) return hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
  hccl__log_bind(&c->log);
  snprintf(c->key_prefix, sizeof(c->key_prefix), "job%016llx", (unsigned long long)blob.job);
  if (rank == 0) c->server = adopt_server(blob.job);
  HcclResult r = HCCL_SUCCESS;
  char token[32];
  root_token(blob.job, token);
  if (nRanks > 1)
    r = hccl__store_tcp_connect(blob.host, blob.port, cfg.connect_timeout_ms, &c->store);
  if (r == HCCL_SUCCESS && c->store) r = hccl__store_tcp_hello(c->store, token);
  if (r == HCCL_SUCCESS) r = bootstrap(c);
  if (r != HCCL_SUCCESS) {
    comm_free(c);
    return r;
  }
  *comm = c;
  return HCCL_SUCCESS;
}

/* Connects to rank 0's store for generation `gen`: a store still serving the bootstrap of an
 * earlier communicator of the same job (rank 0 has not finished it yet) is left and retried. */
static HcclResult env_connect(struct hccl_comm *c, unsigned gen) {
  int64_t deadline = hccl__now_ns() + c->cfg.connect_timeout_ms * 1000000LL;
  for (;;) {
    int64_t left_ms = (deadline - hccl__now_ns()) / 1000000;
    if (left_ms <= 0) break;
    struct hccl_store *s;
    HCCL_TRY(hccl__store_tcp_connect(c->cfg.master_addr, c->cfg.master_port, left_ms, &s));
    HcclResult hr = hccl__store_tcp_hello(s, c->cfg.job_token);
    if (hr != HCCL_SUCCESS) {
      hccl__store_close(s); /* another job's store: waiting will not help */
      return hr;
    }
    void *val = NULL;
    size_t n = 0;
    hccl__log_quiet(1); /* a store of an earlier communicator may close under us */
    HcclResult r = hccl__store_get(s, "generation", &val, &n, left_ms < 2000 ? left_ms : 2000);
    hccl__log_quiet(0);
    if (r == HCCL_SUCCESS && n == sizeof(unsigned) && memcmp(val, &gen, n) == 0) {
      free(val);
      c->store = s;
      return HCCL_SUCCESS;
    }
    free(val);
    hccl__store_close(s);
    if (r != HCCL_SUCCESS && r != HCCL_E_TIMEOUT && r != HCCL_E_TCP_TRANSFER) return r;
    usleep(50000);
  }
  return hccl__fail(HCCL_E_TIMEOUT,
                    "rank %u could not join communicator %u at MASTER_ADDR=%s MASTER_PORT=%u "
                    "within %lld s (HCCL_CONNECT_TIMEOUT): rank 0 never served it",
                    c->rank, gen, c->cfg.master_addr, c->cfg.master_port,
                    (long long)(c->cfg.connect_timeout_ms / 1000));
}

/* Whether host names this machine: one of its interface addresses, or its host name. */
static bool is_this_host(const char *host) {
  struct in6_addr a6;
  struct in_addr a4;
  int fam = inet_pton(AF_INET, host, &a4) == 1    ? AF_INET
            : inet_pton(AF_INET6, host, &a6) == 1 ? AF_INET6
                                                  : 0;
  if (!fam) {
    char me[256] = "";
    gethostname(me, sizeof(me) - 1);
    return strcmp(me, host) == 0 || strcmp(host, "localhost") == 0;
  }
  struct ifaddrs *ifs, *i;
  if (getifaddrs(&ifs) != 0) return true; /* cannot tell: do not refuse */
  bool found = false;
  for (i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != fam) continue;
    found = fam == AF_INET
                ? memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, &a4, sizeof(a4)) == 0
                : memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, &a6, sizeof(a6)) == 0;
  }
  freeifaddrs(ifs);
  return found;
}

/* Fills the rank fields of cfg from rank table `path` for `rank` (HCCL's RANK_TABLE_FILE). */
static HcclResult settings_from_table(const char *path, uint32_t rank, struct hccl_settings *cfg) {
  struct hccl_ranktable *t;
  HCCL_TRY(hccl__ranktable_load(path, &t));
  HcclResult r = HCCL_SUCCESS;
  if (rank >= t->nranks) {
    r = hccl__fail(HCCL_E_PARA, "rank %u is not in rank table %s, which has rank_id 0-%u", rank,
                   path, t->nranks - 1);
  } else if (!is_this_host(t->rank[rank].server_id)) {
    char me[256] = "?";
    gethostname(me, sizeof(me) - 1);
    r = hccl__fail(HCCL_E_PARA,
                   "rank table %s: server_list[%u].server_id: \"%s\" holds rank %u, but that "
                   "rank runs on %s, which has no such address",
                   path, t->rank[rank].server, t->rank[rank].server_id, rank, me);
  } else {
    const struct hccl_ranktable_rank *rk = &t->rank[rank];
    cfg->have_rank = true;
    cfg->rank = rank;
    cfg->world_size = t->nranks;
    cfg->local_rank = (int32_t)rk->local_rank;
    cfg->local_world_size = (int32_t)t->per_server;
    if (cfg->device_src && strcmp(cfg->device_src, "HcclSetDevice") == 0 &&
        cfg->device_id != rk->device) {
      r = hccl__fail(HCCL_E_PARA,
                     "rank table %s gives rank %u device_id %d, but this process set device %d "
                     "(HcclSetDevice / torch_hccl.set_device); they must agree",
                     path, rank, rk->device, cfg->device_id);
      goto out;
    }
    cfg->device_id = rk->device;
    cfg->device_src = "the rank table";
    /* Rank 0 serves the bootstrap store on its server's address. */
    snprintf(cfg->master_addr, sizeof(cfg->master_addr), "%s", t->rank[0].server_id);
    if (!getenv("MASTER_PORT") || !*getenv("MASTER_PORT")) cfg->master_port = cfg->base_port;
  }
out:
  free(t);
  return r;
}

static HcclResult init_env(struct hccl_settings cfg, HcclComm *comm);

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
  if (!clusterInfo || !comm)
    return hccl__fail(HCCL_E_PTR, "HcclCommInitClusterInfo: %s is NULL",
                      clusterInfo ? "comm" : "clusterInfo");
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_given(&cfg, rank, 0)); /* the table gives the size */
  HCCL_TRY(settings_from_table(clusterInfo, rank, &cfg));
  return init_env(cfg, comm);
}

HcclResult HcclCommInitFromEnv(HcclComm *comm) {
  if (!comm) return hccl__fail(HCCL_E_PTR, "HcclCommInitFromEnv: comm is NULL");
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_no_master(&cfg));
  if (cfg.rank_table[0]) {
    if (!cfg.have_rank)
      return hccl__fail(HCCL_E_PARA,
                        "RANK_TABLE_FILE=%s is set but no rank is: set RANK_ID (or RANK) to this "
                        "process's rank_id in it",
                        cfg.rank_table);
    HCCL_TRY(settings_from_table(cfg.rank_table, cfg.rank, &cfg));
  } else {
    HCCL_TRY(hccl__settings_load(&cfg));
  }
  return init_env(cfg, comm);
}

/* Makes the communicator the rank fields of cfg describe, meeting at its master address. */
static HcclResult init_env(struct hccl_settings cfg, HcclComm *comm) {
  uint32_t rank = cfg.have_rank ? cfg.rank : 0, size = cfg.have_rank ? cfg.world_size : 1;
  unsigned gen = atomic_fetch_add(&g_env_generation, 1) + 1;
  struct hccl_comm *c = comm_alloc(&cfg, rank, size);
  if (!c) return hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
  hccl__log_bind(&c->log);
  snprintf(c->key_prefix, sizeof(c->key_prefix), "env%u", gen);
  HcclResult r = HCCL_SUCCESS;
  if (size > 1) {
    if (rank == 0) {
      uint16_t port;
      struct hccl_store_trust trust;
      r = make_trust(&cfg, cfg.job_token, &trust);
      if (r == HCCL_SUCCESS)
        r = hccl__store_server_start_trusted(cfg.master_addr, cfg.master_port, &trust, &c->server,
                                             &port);
      struct hccl_store *s = NULL;
      if (r == HCCL_SUCCESS)
        r = hccl__store_tcp_connect(cfg.master_addr, cfg.master_port, cfg.connect_timeout_ms, &s);
      if (r == HCCL_SUCCESS) {
        c->store = s;
        r = hccl__store_tcp_hello(s, cfg.job_token);
      }
      if (r == HCCL_SUCCESS) r = hccl__store_set(s, "generation", &gen, sizeof(gen));
    } else {
      r = env_connect(c, gen);
    }
  }
  if (r == HCCL_SUCCESS) r = bootstrap(c);
  if (r != HCCL_SUCCESS) {
    comm_free(c);
    return r;
  }
  *comm = c;
  return HCCL_SUCCESS;
}

void HcclCommConfigInit(HcclCommConfig *config) {
  if (!config) return;
  memset(config, 0, sizeof(*config));
  config->size = sizeof(*config);
}

/* A config's non-zero fields replace the environment's values in *cfg. */
static HcclResult apply_config(const HcclCommConfig *cf, struct hccl_settings *cfg) {
  if (cf->size != sizeof(*cf))
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommConfig.size is %zu, expected %zu: fill the config with "
                      "HcclCommConfigInit first",
                      cf->size, sizeof(*cf));
  if (cf->bufferSizeMB > 65536)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommConfig.bufferSizeMB=%u is not valid: it must be from 1 to 65536 "
                      "(0 = HCCL_BUFFSIZE)",
                      cf->bufferSizeMB);
  if (cf->connectTimeoutMs < 0 || cf->execTimeoutMs < 0)
    return hccl__fail(
        HCCL_E_PARA,
        "HcclCommConfig.%s=%lld is not valid: a timeout is a positive number of "
        "milliseconds (0 = from the environment)",
        cf->connectTimeoutMs < 0 ? "connectTimeoutMs" : "execTimeoutMs",
        (long long)(cf->connectTimeoutMs < 0 ? cf->connectTimeoutMs : cf->execTimeoutMs));
  if (cf->bufferSizeMB) cfg->buffsize = (size_t)cf->bufferSizeMB << 20;
  if (cf->connectTimeoutMs) cfg->connect_timeout_ms = cf->connectTimeoutMs;
  if (cf->execTimeoutMs) {
    cfg->exec_timeout_ms = cf->execTimeoutMs;
    cfg->exec_timeout_src = "HcclCommConfig.execTimeoutMs";
  }
  return HCCL_SUCCESS;
}

HcclResult HcclCommInitStore(const HcclStore *store, uint32_t nRanks, uint32_t rank,
                             const HcclCommConfig *config, HcclComm *comm) {
  if (!store || !comm || !store->set || !store->get)
    return hccl__fail(HCCL_E_PTR, "HcclCommInitStore: %s is NULL",
                      !store        ? "store"
                      : !comm       ? "comm"
                      : !store->set ? "store->set"
                                    : "store->get");
  if (nRanks == 0 || rank >= nRanks)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommInitStore: rank %u is not valid for nRanks %u; a rank must be "
                      "below nRanks and nRanks at least 1",
                      rank, nRanks);
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_given(&cfg, rank, nRanks));
  if (config) HCCL_TRY(apply_config(config, &cfg));
  struct hccl_comm *c = comm_alloc(&cfg, rank, nRanks);
  if (!c) return hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
  if (config) {
    memcpy(c->log.name, config->commName, sizeof(c->log.name));
    c->log.name[sizeof(c->log.name) - 1] = '\0';
  }
  hccl__log_bind(&c->log);
  /* The caller gives each communicator its own namespace (torch: a PrefixStore per group);
   * the name keeps two communicators over one store apart. */
  snprintf(c->key_prefix, sizeof(c->key_prefix), "hccl/%s", c->log.name);
  c->store_external = true;
  HcclResult r = hccl__store_ext_new(store, &c->store);
  if (r == HCCL_SUCCESS) r = bootstrap(c);
  if (r != HCCL_SUCCESS) {
    comm_free(c);
    return r;
  }
  *comm = c;
  return HCCL_SUCCESS;
}

HcclResult HcclCommAbort(HcclComm comm) {
  if (!comm) return hccl__fail(HCCL_E_PTR, "HcclCommAbort: comm is NULL");
  hccl__log_bind(&comm->log);
  char msg[128];
  snprintf(msg, sizeof(msg), "communicator aborted by HcclCommAbort on rank %u", comm->rank);
  HCCL_WARN("%s", msg);
  hccl__set_last_error(msg);
  /* Breaks the communicator and marks and wakes every peer and this rank's own waiters, whose
   * next check (at most one 10 ms sleep slice away) fails them with the reason. */
  hccl__comm_fail(comm, HCCL_E_REMOTE);
  return HCCL_SUCCESS;
}

HcclResult HcclCommDestroy(HcclComm comm) {
  if (!comm) return HCCL_SUCCESS;
  hccl__log_bind(&comm->log);
  hccl__coll_shutdown(comm);
  hccl__p2p_shutdown(comm);
  comm_free(comm);
  return HCCL_SUCCESS;
}

#define GETTER(fn, type, expr)                                                                     \
  HcclResult fn(HcclComm comm, type *out) {                                                        \
    if (!comm || !out) return hccl__fail(HCCL_E_PTR, #fn ": %s is NULL", comm ? "out" : "comm");   \
    *out = (type)(expr);                                                                           \
    return HCCL_SUCCESS;                                                                           \
  }
GETTER(HcclGetRankSize, uint32_t, comm->nranks)
GETTER(HcclGetRankId, uint32_t, comm->rank)
GETTER(HcclGetDeviceId, int32_t, comm->device)
GETTER(HcclGetLocalRankSize, uint32_t, comm->local_nranks)
GETTER(HcclGetLocalRankId, uint32_t, comm->local_rank)
