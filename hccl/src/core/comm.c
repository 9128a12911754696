/*
 * comm.c - a communicator's life: made (hccl__comm_alloc), bootstrapped, aborted, destroyed, and
 * its getters (a transport's counters too). The entry points that make one (root info, environment,
 * rank table, the caller's store) are comm_init.c's. The order of the bootstrap: the rounds through
 * the store (bootstrap/rounds.c), the settings every rank must share, the placement on servers,
 * devices and the ring (topo/place.c), the groups (algo/group.c) and the links (transport/links.c).
 * Each check runs on the same data on every rank, so a bad job fails on every rank, never hangs.
 *
 * Bootstrap rounds, each an allgather over the tree of sockets the store introduces (rounds.h):
 *   info  - rank, size, pid, server identity, device, settings that must agree; rank 0's
 *           record also brings every rank the job's run (id and start time);
 *   conn  - what the transports made in setup (each its own opaque blob in the peer info);
 *   ready - every link is connected; transports may drop what peers needed to connect.
 * A split group whose members are each on a server of their own (c->boot.conn_known: comm_split.c)
 * runs neither: its blobs came with the parent's round, it makes no link at creation (each is
 * made on its first use, bounded by HCCL_CONNECT_TIMEOUT, as NCCL's runtime connect) and its
 * groups' figures are its transport's (links_figures), the same on every member.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "coll_run.h"
#include "comm.h"
#include "comm_wait.h"
#include "fail.h"
#include "flight.h"
#include "group_open.h"
#include "links.h"
#include "log.h"
#include "mem_region.h"
#include "p2p.h"
#include "place.h"
#include "progress.h"
#include "rounds.h"
#include "store.h"
#include "topo.h"
#include "trace.h"
#include "wait.h"

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
 * hccl__comm_free uncounts it. */
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
  uint32_t *server_of = c->server_of = calloc(c->nranks, sizeof(uint32_t));
  uint32_t *on_server = calloc(c->nranks, sizeof(uint32_t)); /* each server's rank count */
  HcclResult res = HCCL_E_MEMORY;
  if (!pr || !server_of || !on_server) {
    hccl__fail(res, "out of memory placing %u ranks", c->nranks);
    goto out;
  }
  for (uint32_t r = 0; r < c->nranks; r++) {
    P[r].host[sizeof(P[r].host) - 1] = P[r].device_src[sizeof(P[r].device_src) - 1] = '\0';
    pr[r] = (struct hccl_place_rank){P[r].host_hash, P[r].device, P[r].host, P[r].device_src};
  }
  struct hccl_place pl = {
      .server_of = server_of,
      .local_index = c->local_index,
      .ring = c->world.ring,
      .any_count = c->boot.shrunk};
  res = hccl__place(pr, c->nranks, c->cfg.topo_file[0] ? &topo : NULL, &pl, err, sizeof(err));
  if (res != HCCL_SUCCESS) {
    hccl__fail(res, "%s", err);
    goto out;
  }
  for (uint32_t r = 0; r < c->nranks; r++)
    P[r].device = pr[r].device;
  c->nservers = pl.nservers;
  c->uneven = pl.uneven;
  c->local_rank = c->local_index[c->rank];
  for (uint32_t r = 0; r < c->nranks; r++)
    on_server[server_of[r]]++;
  for (uint32_t s = 0; s < c->nservers; s++)
    if (on_server[s] > c->max_local_nranks) c->max_local_nranks = on_server[s];
  c->local_nranks = on_server[server_of[c->rank]];
  c->tx.local_nranks = c->local_nranks;
  c->own_cores = (long)c->local_nranks <= hccl__online_cpus();
  c->device = P[c->rank].device;
  for (uint32_t i = 0; i < c->nranks; i++)
    c->world.pos[c->world.ring[i]] = i;
  res = hccl__groups_make(&c->tx, c->nservers, c->uneven, server_of, &c->world, &c->local,
                          &c->cross);
out:
  free(pr);
  free(on_server);
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

struct hccl_comm *hccl__comm_alloc(const struct hccl_settings *cfg, uint32_t rank,
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
                           .report_arg = c,
                           .listen_fd = -1};
  for (int ch = 0; ch < HCCL_NCHANNELS; ch++)
    tx->links[ch] = calloc(nranks, sizeof(struct hccl_link *));
  c->astate.tx = tx;
  hccl__queue_init(&c->queue);
  hccl__progress_part_init(&c->progress);
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

void hccl__comm_free(struct hccl_comm *c) {
  if (c->run_counted) {
    pthread_mutex_lock(&g_run.lock);
    g_run.live--;
    pthread_mutex_unlock(&g_run.lock);
  }
  hccl__progress_part_close(&c->progress);
  hccl__trace_close(&c->trace);
  hccl__fr_close(c);
  hccl__tree_close(c->boot.tree);
  /* p2p links first: a transport's channel-0 link may stand for its peer until the last. */
  for (int ch = HCCL_NCHANNELS - 1; ch >= 0; ch--)
    for (uint32_t r = 0; r < c->nranks; r++)
      if (c->tx.links[ch][r]) c->tx.links[ch][r]->ops->close(c->tx.links[ch][r]);
  HCCL_FOR_EACH_TRANSPORT_WITH(t, teardown) t->teardown(&c->tx);
  if (c->tx.listen_fd >= 0) close(c->tx.listen_fd);
  hccl__store_close(c->boot.store);
  hccl__store_server_stop(c->boot.server);
  hccl__queue_destroy(&c->queue);
  hccl__progress_part_destroy(&c->progress);
  free(c->astate.scratch);
  free(c->astate.temp);
  hccl__mem_free(c->astate.stage);
  hccl__oneshot_free(&c->astate);
  free(c->peers);
  free(c->same_core);
  free(c->premul);
  free(c->local_index);
  free(c->server_of);
  for (int ch = 0; ch < HCCL_NCHANNELS; ch++)
    free(c->tx.links[ch]);
  hccl__group_free(&c->world);
  hccl__group_free(&c->local);
  hccl__group_free(&c->cross);
  free(c);
}

/* What the bootstrap's rounds are given of c (bootstrap/rounds.h): only what they read, and
 * where this rank's bootstrap listener binds: the address its links between servers will use
 * (the first transport's local_addr op: TCP's). */
static struct hccl_rounds rounds_of(const struct hccl_comm *c) {
  struct sockaddr_storage bind = {0};
  char why[64];
  hccl__log_quiet(1); /* the transport's setup reports a bad address itself */
  HCCL_FOR_EACH_TRANSPORT_WITH(t, local_addr) {
    if (c->nranks > 1 && t->local_addr(&c->cfg, &bind, why, sizeof(why)) != HCCL_SUCCESS)
      memset(&bind, 0, sizeof(bind));
    break;
  }
  hccl__log_quiet(0);
  return (struct hccl_rounds){.store = c->boot.store,
                              .server = c->boot.server,
                              .store_external = c->boot.store_external,
                              .key_prefix = c->key_prefix,
                              .rank = c->rank,
                              .nranks = c->nranks,
                              .connect_timeout_ms = c->cfg.connect_timeout_ms,
                              .timeout_name = c->cfg.connect_timeout_src,
                              .bind = bind};
}

/* One round of the bootstrap: through the store, or the parent's collectives for a
 * communicator split from one (c->boot.round_fn). */
static HcclResult round_allgather(const struct hccl_comm *c, struct hccl_rounds *rd,
                                  const char *round, const void *mine, size_t len, void *all) {
  if (c->boot.round_fn) return c->boot.round_fn(c->boot.round_arg, round, mine, len, all);
  return hccl__round_allgather(rd, round, mine, len, all);
}

/* What each rank tells the others in the "ready" round: its world, local and cross groups'
 * figures (group.h; chunk 0 for a group of one), and a hash of its kernel's boot id. */
struct ready_note {
  double alpha_ns[3], beta_ns[3];
  uint64_t chunk_bytes[3];
  uint64_t boot;
};

/* On servers of different counts the planner's choice between the flat allreduce and the one
 * through leaders (plan.c) reads the groups' figures, which each rank measured on its own
 * links: a rank alone on its server has no local link, one that is not its server's leader
 * no cross link, and a rank in the middle of a large server may have no link to another. So
 * every rank takes every rank's worst (the slowest alpha and beta, the smallest chunk of the
 * groups with links) and all plan alike. (Servers of equal counts keep their own: every
 * rank's groups there have the same kinds of link.) */
static void uniform_figures(struct hccl_group **g, const struct ready_note *all, uint32_t n) {
  for (int i = 0; i < 3; i++) {
    uint64_t chunk = 0;
    for (uint32_t r = 0; r < n; r++) {
      if (all[r].alpha_ns[i] > g[i]->alpha_ns) g[i]->alpha_ns = all[r].alpha_ns[i];
      if (all[r].beta_ns[i] > g[i]->beta_ns) g[i]->beta_ns = all[r].beta_ns[i];
      if (all[r].chunk_bytes[i] && (!chunk || all[r].chunk_bytes[i] < chunk))
        chunk = all[r].chunk_bytes[i];
    }
    if (chunk) g[i]->chunk_bytes = (size_t)chunk;
  }
}

/* Whether every rank's note carries the same known boot id: all ranks share one kernel. */
static bool one_kernel(const struct ready_note *all, uint32_t n) {
  for (uint32_t r = 0; r < n; r++)
    if (!all[r].boot || all[r].boot != all[0].boot) return false;
  return true;
}

/* The end of the bootstrap of a split group with c->boot.conn_known (comm_split.c): no link made,
 * no "ready" round. Its members are each alone on their server, so the servers are even and
 * no rank needs another's figures (uniform_figures); each group's figures are those of the
 * links it will make (hccl__group_measure_lazy), which every member derives alike.
 * (c->one_kernel, which the planner reads on uneven servers only, stays false.) */
static HcclResult lazy_rest(struct hccl_comm *c, int64_t *ph_ns) {
  c->astate.lazy = true; /* group.h: a missing partner link is made quietly on first use */
  HCCL_TRY(measure_groups(c));
  ph_ns[3] = ph_ns[4] = hccl__now_ns();
  HCCL_FOR_EACH_TRANSPORT_WITH(t, connected) t->connected(&c->tx);
  return HCCL_SUCCESS;
}

/* The rounds after "info": placement checks, transport setup, "conn", links, "ready". */
/* The bootstrap's phases end at ph_ns[1] (placement, setup, "conn"), [2] (links), [3]
 * ("ready"); [0] is the start of "info", [1] its end until the phase ends. */
static HcclResult bootstrap_rest(struct hccl_comm *c, struct hccl_rounds *rd,
                                 struct hccl_peer_info *self, int64_t *ph_ns) {
  ph_ns[1] = hccl__now_ns();
  HCCL_TRY(check_and_place(c));
  self->device = c->device;
  HCCL_FOR_EACH_TRANSPORT_WITH(t, setup) HCCL_TRY(t->setup(&c->tx, self));
  /* A split group whose members' blobs came with the parent round skips "conn" (conn_known). */
  if (c->nranks > 1 && c->boot.conn_known)
    memcpy(c->peers[c->rank].conn, self->conn, sizeof(self->conn));
  else if (c->nranks > 1)
    HCCL_TRY(round_allgather(c, rd, "conn", self, sizeof(*self), c->peers));
  for (uint32_t r = 0; c->nranks > 1 && r < c->nranks; r++)
    if (c->peers[r].device < 0) c->peers[r].device = (int32_t)c->local_index[r];
  ph_ns[2] = hccl__now_ns();
  if (c->boot.conn_known) return lazy_rest(c, ph_ns);
  bool *need = calloc(c->nranks, sizeof(bool));
  if (!need) return hccl__fail(HCCL_E_MEMORY, "out of memory in bootstrap");
  hccl__group_partners(&c->world, need);
  hccl__group_partners(&c->cross, need);
  if (c->uneven) hccl__group_partners(&c->local, need); /* hier.c's chain and tree inside */
  HcclResult lr = hccl__links_connect(&c->tx, need);
  free(need);
  HCCL_TRY(lr);
  HCCL_TRY(measure_groups(c));
  ph_ns[3] = hccl__now_ns();
  if (c->nranks > 1) {
    struct ready_note *ready = calloc(c->nranks, sizeof(*ready)), mine;
    if (!ready) return hccl__fail(HCCL_E_MEMORY, "out of memory in bootstrap");
    struct hccl_group *g[3] = {&c->world, &c->local, &c->cross};
    memset(&mine, 0, sizeof(mine));
    for (int i = 0; i < 3; i++)
      mine.alpha_ns[i] = g[i]->alpha_ns, mine.beta_ns[i] = g[i]->beta_ns,
      mine.chunk_bytes[i] = g[i]->n > 1 ? g[i]->chunk_bytes : 0;
    /* Pretend servers (tests/multi/netns.sh) are namespaces of one kernel, where every byte
     * over TCP costs the same cores as every other: the planner prices them so (plan.c,
     * v->one_kernel). Only uneven servers read it. */
    if (c->uneven) mine.boot = hccl__boot_id_hash();
    /* Only uneven servers read the figures: elsewhere a rank's record is its first byte, as
     * before them (every rank places alike, so every record of a round is the same size). */
    HcclResult r = round_allgather(c, rd, "ready", &mine, c->uneven ? sizeof(mine) : 1, ready);
    if (r == HCCL_SUCCESS && c->uneven) {
      uniform_figures(g, ready, c->nranks);
      c->one_kernel = one_kernel(ready, c->nranks);
      c->crowded = c->one_kernel && (long)c->nranks > hccl__online_cpus();
    }
    free(ready);
    HCCL_TRY(r);
  }
  HCCL_FOR_EACH_TRANSPORT_WITH(t, connected) t->connected(&c->tx);
  ph_ns[4] = hccl__now_ns();
  return HCCL_SUCCESS;
}

void hccl__peer_self(const struct hccl_settings *cfg, uint32_t rank, uint32_t nranks,
                     struct hccl_peer_info *self) {
  memset(self, 0, sizeof(*self));
  self->rank = rank;
  self->nranks = nranks;
  self->pid = (int32_t)getpid();
  self->cpu = hccl__wait_pinned_cpu();
  self->host_hash = hccl__host_identity(self->host, sizeof(self->host));
  self->device = cfg->device_id;
  snprintf(self->device_src, sizeof(self->device_src), "%s",
           cfg->device_src ? cfg->device_src : "its index on the server");
  self->buffsize = cfg->buffsize;
  self->algo = (int32_t)(cfg->algo.choice | cfg->algo.levels << 2 | cfg->algo.level[0] << 4 |
                         cfg->algo.level[1] << 6);
  if (rank == 0) run_propose(&self->run, &self->run_start_us);
}

HcclResult hccl__comm_bootstrap(struct hccl_comm *c) {
  struct hccl_peer_info self;
  hccl__peer_self(&c->cfg, c->rank, c->nranks, &self);

  HcclResult r = HCCL_SUCCESS;
  struct hccl_rounds rd = rounds_of(c);
  int64_t ph[5] = {hccl__now_ns(), 0, 0, 0, 0};
  if (c->nranks > 1)
    r = round_allgather(c, &rd, "info", &self, sizeof(self), c->peers);
  else
    c->peers[0] = self;
  bool all_joined = r == HCCL_SUCCESS;
  if (all_joined) run_adopt(c);
  if (all_joined) r = bootstrap_rest(c, &rd, &self, ph);
  /* Its tree outlives the store's part: a split's parent round runs over it (comm_split.c). */
  if (r == HCCL_SUCCESS && !c->boot.round_fn) c->boot.tree = hccl__round_keep_tree(&rd);
  /* closes the store, stops rank 0's server */
  hccl__round_finish(&rd, all_joined, all_joined && r != HCCL_SUCCESS);
  c->boot.store = NULL;
  c->boot.server = NULL;
  HCCL_TRY(r);
  HCCL_TRY(hccl__trace_open(c->cfg.trace_file, c->rank, c->nranks, c->device, &c->trace));
  HCCL_TRY(hccl__fr_open(c));
  hccl__progress_bind(c);
  hccl__comm_waiter_init(c);
  /* bench/scale.sh reads this line: where init's time goes as n grows. */
  HCCL_INFO("bootstrap phases ms: info %.2f conn %.2f links %.2f ready %.2f", (ph[1] - ph[0]) / 1e6,
            (ph[2] - ph[1]) / 1e6, (ph[3] - ph[2]) / 1e6, (ph[4] - ph[3]) / 1e6);
  HCCL_INFO("communicator ready: rank %u of %u, device %d, %u per server, chunk %zu bytes", c->rank,
            c->nranks, c->device, c->local_nranks, c->world.chunk_bytes);
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
  HCCL_TRY(hccl__group_refuse_call("HcclCommDestroy"));
  hccl__coll_shutdown(&comm->queue);
  hccl__p2p_shutdown(comm);
  hccl__comm_free(comm);
  return HCCL_SUCCESS;
}

#define GETTER(fn, type, expr)                                                                     \
  HcclResult fn(HcclComm comm, type *out) {                                                        \
    if (!comm || !out) return hccl__fail(HCCL_E_PTR, #fn ": %s is NULL", comm ? "out" : "comm");   \
    *out = (type)(expr);                                                                           \
    return HCCL_SUCCESS;                                                                           \
  }
GETTER(HcclGetCommAsyncError, HcclResult, atomic_load(&comm->broken))
GETTER(HcclGetRankSize, uint32_t, comm->nranks)
GETTER(HcclGetRankId, uint32_t, comm->rank)
GETTER(HcclGetDeviceId, int32_t, comm->device)
GETTER(HcclGetLocalRankSize, uint32_t, comm->local_nranks)
GETTER(HcclGetLocalRankId, uint32_t, comm->local_rank)

/* The transport of that name in the priority table (hccl__transports) answers; rdma, where it
 * was not built, is a transport this communicator does not use: zeros. */
HcclResult HcclGetCommTransportStats(HcclComm comm, const char *transport,
                                     HcclTransportStats *stats) {
  if (!comm || !transport || !stats)
    return hccl__fail(HCCL_E_PTR, "HcclGetCommTransportStats: %s is NULL",
                      !comm ? "comm" : !transport ? "transport" : "stats");
  if (strcmp(transport, "shm") != 0 && strcmp(transport, "tcp") != 0 &&
      strcmp(transport, "rdma") != 0)
    return hccl__fail(HCCL_E_PARA, "HcclGetCommTransportStats: no transport is called '%s': "
                      "use rdma, tcp or shm", transport);
  HcclTransportStats s = {0};
  for (const struct hccl_transport_ops *const *t = hccl__transports; *t; t++) {
    if (strcmp((*t)->name, transport) != 0) continue;
    if (!(*t)->stats)
      return hccl__fail(HCCL_E_NOT_SUPPORT,
                        "HcclGetCommTransportStats: the %s transport keeps no counters",
                        transport);
    (*t)->stats(&comm->tx, &s);
  }
  *stats = s;
  return HCCL_SUCCESS;
}
