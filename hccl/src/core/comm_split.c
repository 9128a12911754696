/*
 * comm_split.c - HcclCommSplit: communicators made from a parent by colour and key (NCCL's
 * ncclCommSplit), with no store. One parent allgather carries every rank's (colour, key) and
 * its "info" record (what comm.c's first bootstrap round would send: host, pid, device,
 * settings, the run), from which each rank finds its new group's members in order and has
 * their info at once. The new communicator's two other bootstrap rounds ("conn", "ready") then
 * run among the group's members only: Bruck's allgather (log2 n steps) of a fixed-size record
 * over the parent's collective links, on the calling thread (c->round_fn), instead of a parent
 * allgather that crosses every server. A member whose bootstrap failed still takes part in
 * its group's rounds with its records marked failed, so its members get an error, not a wait;
 * a NOCOLOR rank and a one-rank group take part in none.
 *
 *   parent ranks:   0    1    2    3          colour 0: {0, 2}, colour 1: {1, 3}
 *   parent round:   allgather (colour, key, split number, bad input?, info)
 *   "conn", "ready": {0, 2} and {1, 3} each exchange [hdr | record] among themselves
 *   then each group's links connect among its members, as any communicator's do.
 *
 * Why (bench/split.sh, 3D layout at 64 pretend servers, 1 rank each): a parent allgather
 * there is latency-bound across every server, and the layout's 3 splits ran 4 each. Running
 * the members' rounds over the parent's point-to-point sends instead was measured too and lost:
 * every step is a hand-off to p2p.c's engine thread, and the group's partners needed new
 * connections on the p2p channel, where the collective channel has the links to the ranks
 * 2^k away since init (a stride-s group's partners are s 2^k away).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "comm.h"
#include "comm_wait.h"
#include "hash.h"
#include "log.h"
#include "peer.h"
#include "transport.h"
#include "wait.h"

/* The bootstrap rounds after "info" that a communicator of more than one rank runs (comm.c). */
#define SPLIT_ROUNDS 2

/* What each parent rank says in the split's one parent allgather. */
struct split_ask {
  int32_t color, key;
  uint32_t seq;  /* the parent's splits before this one on that rank */
  uint32_t bad;  /* its own input was refused (it logged why): 1 key, 2 config */
  struct hccl_peer_info info; /* its "info" record (hccl__peer_self) */
};

/* The header of each member round's record. */
struct split_hdr {
  uint32_t round;  /* 1..SPLIT_ROUNDS */
  uint32_t failed; /* this rank's group bootstrap failed before this round */
};

#define SPLIT_REC (sizeof(struct split_hdr) + sizeof(struct hccl_peer_info))

struct split_ctx {
  struct hccl_comm *parent;
  const struct hccl_log_ctx *log; /* the new communicator's, bound again after each round */
  const struct split_ask *ask;    /* every parent rank's */
  const uint32_t *members;        /* parent ranks in the new communicator's order */
  uint32_t n, me;
  uint32_t done;  /* member rounds run so far */
  uint32_t steps; /* Bruck steps of each member round */
  uint8_t *all;   /* [n * SPLIT_REC] the round's records in member order */
  uint32_t *order; /* [n] 0..n-1: the view's ring and positions */
  struct hccl_group view; /* the members over the parent's links */
  uint8_t rec[SPLIT_REC];
};

/* Bruck's allgather of this rank's record (x->rec) among the group's members, on the calling
 * thread over the parent's collective links (the group view x->view: member k is parent rank
 * members[k]): ceil(log2 n) steps, each one message each way with the members 2^k away.
 * Every earlier call on the parent has finished (the parent allgather before it was
 * blocking), so nothing else uses those links meanwhile. A link the parent does not have yet
 * (members 2^k apart are not always the parent's partners at that distance) is made first.
 * Each wait has the parent's deadline (HCCL_EXEC_TIMEOUT); a failure breaks the parent, as a
 * failed collective does, and its abort reaches the other members. */
static HcclResult exchange(struct split_ctx *x) {
  struct hccl_comm *p = x->parent;
  uint32_t n = x->n, me = x->me;
  HcclResult r = HCCL_SUCCESS;
  struct hccl_link *l;
  for (uint32_t d = 1; d < n && r == HCCL_SUCCESS; d <<= 1) {
    r = hccl__link_get(&p->tx, HCCL_CHANNEL_COLL, x->members[(me + d) % n], HCCL_CONNECT_WAIT,
                       &l);
    if (r == HCCL_SUCCESS)
      r = hccl__link_get(&p->tx, HCCL_CHANNEL_COLL, x->members[(me + n - d) % n],
                         HCCL_CONNECT_WAIT, &l);
  }
  if (r == HCCL_SUCCESS) {
    struct hccl_wait w = hccl__comm_wait(p, "HcclCommSplit", NULL);
    struct hccl_prim pr = {.w = &w, .esz = 1};
    r = hccl__bruck_allgather(&x->view, &pr, x->rec, x->all, SPLIT_REC);
  }
  if (r != HCCL_SUCCESS) hccl__comm_fail(p, r);
  hccl__log_bind(x->log);
  x->done++;
  return r;
}

/* comm.c's rounds for a split group: "info" from the parent round's records (no message),
 * "conn" and "ready" a member exchange each. Fills all[] with the members' records in order. */
static HcclResult split_round(void *arg, const char *round, const void *mine, size_t len,
                              void *all) {
  struct split_ctx *x = arg;
  if (!strcmp(round, "info") && len == sizeof(struct hccl_peer_info)) {
    for (uint32_t i = 0; i < x->n; i++) {
      struct hccl_peer_info *p = (struct hccl_peer_info *)all + i;
      *p = x->ask[x->members[i]].info;
      p->rank = i;
      p->nranks = x->n;
    }
    return HCCL_SUCCESS;
  }
  if (len > sizeof(struct hccl_peer_info) || x->done >= SPLIT_ROUNDS)
    return hccl__fail(HCCL_E_INTERNAL, "split round '%s' (%zu bytes, round %u) does not fit",
                      round, len, x->done + 1);
  memset(x->rec, 0, sizeof(x->rec));
  struct split_hdr h = {.round = x->done + 1};
  memcpy(x->rec, &h, sizeof(h));
  memcpy(x->rec + sizeof(h), mine, len);
  HCCL_TRY(exchange(x));
  for (uint32_t i = 0; i < x->n; i++) {
    const uint8_t *rec = x->all + (size_t)i * SPLIT_REC;
    memcpy(&h, rec, sizeof(h));
    if (h.failed || h.round != x->done)
      return hccl__fail(HCCL_E_REMOTE,
                        "HcclCommSplit: rank %u of the new communicator (rank %u of the parent) "
                        "failed its bootstrap before round '%s'; its log says why",
                        i, x->members[i], round);
    memcpy((char *)all + (size_t)i * len, rec + sizeof(h), len);
  }
  return HCCL_SUCCESS;
}

/* Runs the member rounds this rank's group did not, so its members' exchanges complete. */
static HcclResult pad_rounds(struct split_ctx *x, bool failed) {
  HcclResult res = HCCL_SUCCESS;
  while (x->n > 1 && x->done < SPLIT_ROUNDS) {
    memset(x->rec, 0, sizeof(x->rec));
    struct split_hdr h = {.round = x->done + 1, .failed = failed};
    memcpy(x->rec, &h, sizeof(h));
    HcclResult r = exchange(x);
    if (res == HCCL_SUCCESS) res = r;
  }
  return res;
}

/* This rank's input, checked before anything is exchanged; the code goes to every rank. */
static uint32_t check_input(const struct hccl_comm *p, int32_t key, const HcclCommConfig *config,
                            struct hccl_settings *cfg) {
  if (key < 0) {
    hccl__fail(HCCL_E_PARA,
               "HcclCommSplit on rank %u: key %d is not valid; a key must be 0 or more (it "
               "orders the new communicator's ranks)",
               p->rank, (int)key);
    return 1;
  }
  if (config && hccl__comm_config_apply(config, cfg) != HCCL_SUCCESS) return 2;
  return 0;
}

/* Every rank's ask, checked alike on every rank: the same error everywhere. */
static HcclResult check_asks(const struct hccl_comm *p, const struct split_ask *ask) {
  for (uint32_t r = 0; r < p->nranks; r++) {
    if (ask[r].bad == 1)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommSplit: rank %u of the parent passed key %d; a key must be 0 or "
                        "more",
                        r, (int)ask[r].key);
    if (ask[r].bad)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommSplit: rank %u of the parent passed an invalid HcclCommConfig "
                        "(its log names the field)",
                        r);
    if (ask[r].seq != ask[0].seq)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommSplit: rank %u of the parent is at its split %u of this "
                        "communicator, rank 0 at its split %u; every rank must call it the "
                        "same number of times, in the same order as its other calls",
                        r, ask[r].seq + 1, ask[0].seq + 1);
  }
  return HCCL_SUCCESS;
}

/* The members of colour `color` in key order, ties by parent rank; *me is this rank's index. */
static uint32_t members_of(const struct hccl_comm *p, const struct split_ask *ask, int32_t color,
                           uint32_t *members, uint32_t *me) {
  uint32_t n = 0;
  for (uint32_t r = 0; r < p->nranks; r++) {
    if (ask[r].color != color) continue;
    uint32_t i = n++; /* insertion: r is above every rank placed so far */
    while (i > 0 && ask[members[i - 1]].key > ask[r].key) {
      members[i] = members[i - 1];
      i--;
    }
    members[i] = r;
  }
  for (uint32_t i = 0; i < n; i++)
    if (members[i] == p->rank) *me = i;
  return n;
}

/* Makes this rank's new communicator from members (rank me of n) with settings cfg. */
static HcclResult make_child(struct split_ctx *x, const struct hccl_settings *cfg, uint32_t me,
                             uint32_t seq, int32_t color, const HcclCommConfig *config,
                             HcclComm *out) {
  struct hccl_comm *p = x->parent;
  struct hccl_comm *c = hccl__comm_alloc(cfg, me, x->n);
  if (!c) return hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
  if (config && config->commName[0])
    snprintf(c->log.name, sizeof(c->log.name), "%.63s", config->commName);
  else
    snprintf(c->log.name, sizeof(c->log.name), "%.40s%ssplit%u.%d", p->log.name,
             p->log.name[0] ? "/" : "", seq, (int)color);
  hccl__log_bind(&c->log);
  x->log = &c->log;
  /* Unique per new communicator among the parent's (the TCP transport's identity). */
  uint64_t id = hccl__fnv1a(HCCL_FNV1A_SEED, p->key_prefix, strlen(p->key_prefix));
  id = hccl__fnv1a(id, &p->run, sizeof(p->run));
  snprintf(c->key_prefix, sizeof(c->key_prefix), "split%016llx/%u/%d", (unsigned long long)id,
           seq, (int)color);
  c->round_fn = split_round;
  c->round_arg = x;
  HcclResult r = hccl__comm_bootstrap(c);
  c->round_fn = NULL;
  c->round_arg = NULL;
  if (r != HCCL_SUCCESS) {
    x->log = &p->log; /* pad_rounds logs on after c (and its log context) is gone */
    hccl__log_bind(x->log);
    hccl__comm_free(c);
    return r;
  }
  *out = c;
  return HCCL_SUCCESS;
}

HcclResult HcclCommSplit(HcclComm comm, int32_t color, int32_t key, HcclComm *newcomm,
                         const HcclCommConfig *config) {
  if (!comm || !newcomm)
    return hccl__fail(HCCL_E_PTR, "HcclCommSplit: %s is NULL", comm ? "newcomm" : "comm");
  hccl__log_bind(&comm->log);
  *newcomm = NULL;
  if (atomic_load(&comm->broken))
    return hccl__fail(HCCL_E_REMOTE,
                      "HcclCommSplit on rank %u: the parent communicator is broken (%s); make "
                      "new communicators from a live one",
                      comm->rank, comm->broken_msg);
  if (color < 0) color = HCCL_SPLIT_NOCOLOR;
  int64_t t0 = hccl__now_ns();
  struct hccl_settings cfg = comm->cfg;
  cfg.device_id = comm->device; /* a rank keeps its device */
  cfg.device_src = "the parent communicator";
  struct split_ask mine = {color, key, comm->splits, 0, {0}};
  mine.bad = check_input(comm, key, config, &cfg);
  hccl__peer_self(&cfg, 0, 0, &mine.info); /* rank 0's fields too: the run, whoever is first */
  comm->splits++;
  struct split_ask *ask = calloc(comm->nranks, sizeof(*ask));
  uint32_t *members = calloc(comm->nranks, sizeof(uint32_t));
  struct split_ctx x = {.parent = comm, .log = &comm->log, .ask = ask, .members = members};
  HcclResult r = HCCL_SUCCESS;
  if (!ask || !members)
    r = hccl__fail(HCCL_E_MEMORY, "out of memory splitting %u ranks", comm->nranks);
  /* Every rank joins the one parent exchange even with bad input, so all fail alike, at once. */
  if (r == HCCL_SUCCESS)
    r = HcclAllGather(&mine, ask, sizeof(mine), HCCL_DATA_TYPE_UINT8, comm, NULL);
  hccl__log_bind(&comm->log);
  if (r == HCCL_SUCCESS) r = check_asks(comm, ask);
  if (r != HCCL_SUCCESS) goto out; /* the same outcome on every rank: no rounds follow */
  int64_t t1 = hccl__now_ns();
  if (color != HCCL_SPLIT_NOCOLOR) {
    x.n = members_of(comm, ask, color, members, &x.me);
    for (uint32_t d = 1; d < x.n; d <<= 1)
      x.steps++;
    x.all = malloc((size_t)x.n * SPLIT_REC);
    x.order = malloc((size_t)x.n * sizeof(uint32_t));
    for (uint32_t i = 0; x.order && i < x.n; i++)
      x.order[i] = i;
    x.view = (struct hccl_group){.n = x.n,
                                 .me = x.me,
                                 .rank = members,
                                 .ring = x.order,
                                 .pos = x.order,
                                 .links = comm->tx.links[HCCL_CHANNEL_COLL],
                                 .chunk_bytes = comm->world.chunk_bytes,
                                 .state = &comm->astate};
    cfg.have_rank = true;
    cfg.rank = x.me;
    cfg.world_size = x.n;
    if (!x.all || !x.order)
      r = hccl__fail(HCCL_E_MEMORY, "out of memory splitting %u ranks", comm->nranks);
    else
      r = make_child(&x, &cfg, x.me, mine.seq, color, config, newcomm);
  }
  HcclResult pr = x.all && x.order ? pad_rounds(&x, r != HCCL_SUCCESS) : HCCL_SUCCESS;
  hccl__log_bind(&comm->log);
  if (r == HCCL_SUCCESS && pr != HCCL_SUCCESS) {
    HcclCommDestroy(*newcomm);
    *newcomm = NULL;
    r = pr;
  }
  /* bench/split.sh's runs read this line: where a split's time goes. */
  HCCL_INFO("HcclCommSplit %u: colour %d, %u ranks of %u; 1 parent allgather %.2f ms, group "
            "bootstrap %.2f ms (%u member rounds of %u steps)",
            mine.seq, (int)color, x.n, comm->nranks, (t1 - t0) / 1e6,
            (hccl__now_ns() - t1) / 1e6, x.done, x.steps);
out:
  free(ask);
  free(members);
  free(x.all);
  free(x.order);
  return r;
}
