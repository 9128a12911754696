/*
 * comm_split.c - HcclCommSplit: communicators made from a parent by colour and key (NCCL's
 * ncclCommSplit), with no store. One parent round (parent_round: over the parent's kept
 * bootstrap tree, or an allgather on a split's child) carries every rank's (colour, key) and
 * its "info" record (comm.c's first round: host, pid, device, settings, the run), from which
 * each rank finds its group's members in order. On more than one server each rank opens its new
 * TCP listener before that round (the ops table's listen_early) and its address rides there,
 * bytes opaque to this file. A group whose members each have a server of their own (conn_known)
 * then runs no member round and makes each link on its first use (comm.c's lazy_rest); any other
 * runs comm.c's "conn" and "ready" rounds among its members (c->boot.round_fn: Bruck's
 * allgather over the parent's collective links, on the calling thread) and connects at creation.
 *
 * Contract: every parent rank calls it, at the same split number (else HCCL_E_PARA on every
 * rank); a NOCOLOR rank and a one-rank group take part in no member round; a member whose
 * bootstrap failed still takes part with its records marked failed, so its group gets an
 * error, not a wait. Inside HcclGroupStart/End a split only records its request (g_group);
 * HcclGroupEnd runs one parent round for all of them (up to HCCL_GROUP_MAX_SPLITS) and makes
 * them in call order.
 *
 *   parent ranks:   0    1    2    3          colour 0: {0, 2}, colour 1: {1, 3}
 *   parent round:   bootstrap tree (split number, count, bad input?, [colour, key, TCP blob]
 *                   x k, info)
 *   servers of their own: nothing more; links on first use
 *   else "conn", "ready": {0, 2} and {1, 3} each exchange [hdr | record] among themselves,
 *                    then each group's links connect among its members at creation.
 *
 * Why one parent round (and grouped splits), why over the tree, and why the member rounds use
 * the collective links rather than point-to-point sends: the figures are in docs/starting.md
 * ("Groups from a communicator") and docs/performance.md ("Measurements behind the code").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo.h"
#include "coll_run.h"
#include "comm.h"
#include "comm_wait.h"
#include "fail.h"
#include "group_open.h"
#include "hash.h"
#include "links.h"
#include "log.h"
#include "peer.h"
#include "rounds.h"
#include "transport.h"
#include "wait.h"

/* The bootstrap rounds after "info" that a communicator of more than one rank runs (comm.c),
 * unless the parent round brought its members' TCP blobs (conn_known: none). */
#define SPLIT_ROUNDS 2

/* What each parent rank says in the one parent allgather of a split or of a group of splits
 * (HcclGroupStart/End): the same size for any number of splits, so a rank that asked for a
 * different number still completes the round, and every rank sees the mismatch. */
struct split_ask {
  uint32_t seq;     /* the parent's splits before this round's first on that rank */
  uint32_t nsplits; /* the splits of this round (1 outside a group) */
  uint32_t bad;     /* its own input was refused (it logged why): 1 key, 2 config, 3 other,
                     * 4 its new communicator's TCP listener could not be opened */
  uint32_t bad_at;  /* which of its splits */
  uint32_t listening; /* bit i: conn[i] is the listener opened for split i (listen_early) */
  int32_t color[HCCL_GROUP_MAX_SPLITS], key[HCCL_GROUP_MAX_SPLITS];
  uint64_t buffsize[HCCL_GROUP_MAX_SPLITS]; /* each split's HCCL_BUFFSIZE (its config's) */
  /* Each split's early listener's blob (what its peers dial), bytes only its transport reads. */
  uint8_t conn[HCCL_GROUP_MAX_SPLITS][HCCL_EARLY_CONN_BYTES];
  struct hccl_peer_info info; /* its "info" record (hccl__peer_self), once for every split */
};

/* One split asked for: by HcclCommSplit at once, or recorded inside a group. */
struct split_req {
  HcclComm *out;
  int32_t color, key;
  struct hccl_settings cfg; /* the parent's, with config's fields applied */
  bool named;
  char name[64]; /* config's commName */
  int listen_fd; /* listen_early's for this split, or -1, until its child takes it */
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
  uint32_t which;                 /* the split of the round this context makes */
  const uint32_t *members;        /* parent ranks in the new communicator's order */
  uint32_t n, me;
  bool conn_known; /* the parent round brought every member's blobs: no member round */
  uint32_t rounds; /* member rounds this group runs: SPLIT_ROUNDS, or 0 with conn_known */
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
 * Every earlier call on the parent has finished (the parent round drained its queue or was a
 * blocking allgather), so nothing else uses those links meanwhile. A link the parent does not
 * have yet (members 2^k apart are not always the parent's partners at that distance) is made
 * first.
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

/* The transport whose listener a split opens before its parent round (the first in the table
 * with the op listen_early: TCP's), or NULL. */
static const struct hccl_transport_ops *early_transport(void) {
  HCCL_FOR_EACH_TRANSPORT_WITH(t, listen_early) return t;
  return NULL;
}

/* comm.c's rounds for a split group: "info" from the parent round's records (no message),
 * "conn" and "ready" a member exchange each. Fills all[] with the members' records in order. */
static HcclResult split_round(void *arg, const char *round, const void *mine, size_t len,
                              void *all) {
  struct split_ctx *x = arg;
  if (!strcmp(round, "info") && len == sizeof(struct hccl_peer_info)) {
    const struct hccl_transport_ops *early = early_transport();
    for (uint32_t i = 0; i < x->n; i++) {
      struct hccl_peer_info *p = (struct hccl_peer_info *)all + i;
      *p = x->ask[x->members[i]].info;
      p->buffsize = x->ask[x->members[i]].buffsize[x->which];
      if (early) memcpy(p->conn[early->index], x->ask[x->members[i]].conn[x->which],
                        HCCL_EARLY_CONN_BYTES);
      p->rank = i;
      p->nranks = x->n;
    }
    return HCCL_SUCCESS;
  }
  if (len > sizeof(struct hccl_peer_info) || x->done >= x->rounds)
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
  while (x->n > 1 && x->done < x->rounds) {
    memset(x->rec, 0, sizeof(x->rec));
    struct split_hdr h = {.round = x->done + 1, .failed = failed};
    memcpy(x->rec, &h, sizeof(h));
    HcclResult r = exchange(x);
    if (res == HCCL_SUCCESS) res = r;
  }
  return res;
}

/* This rank's input for one split, checked before anything is exchanged; the code goes to
 * every rank through the parent round. */
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

/* One split asked for on comm, its settings (the parent's, config's fields applied) in *q;
 * returns check_input's refusal (0 for none). */
static uint32_t req_fill(struct hccl_comm *comm, int32_t color, int32_t key, HcclComm *newcomm,
                         const HcclCommConfig *config, struct split_req *q) {
  *q = (struct split_req){.out = newcomm, .color = color < 0 ? HCCL_SPLIT_NOCOLOR : color,
                          .key = key, .cfg = comm->cfg, .listen_fd = -1};
  q->cfg.device_id = comm->device; /* a rank keeps its device */
  q->cfg.device_src = "the parent communicator";
  if (config && config->commName[0])
    q->named = true, snprintf(q->name, sizeof(q->name), "%s", config->commName);
  return check_input(comm, key, config, &q->cfg);
}

/* Every rank's ask, checked alike on every rank: the same error everywhere. */
static HcclResult check_asks(const struct hccl_comm *p, const struct split_ask *ask) {
  for (uint32_t r = 0; r < p->nranks; r++) {
    const struct split_ask *a = &ask[r];
    if (a->bad == 1)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommSplit: rank %u of the parent passed key %d; a key must be 0 or "
                        "more",
                        r, (int)a->key[a->bad_at]);
    if (a->bad == 2)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommSplit: rank %u of the parent passed an invalid HcclCommConfig "
                        "(its log names the field)",
                        r);
    if (a->bad == 4)
      return hccl__fail(HCCL_E_REMOTE,
                        "HcclCommSplit: rank %u of the parent could not open the TCP listener "
                        "of its new communicator (split %u of its round; its log says why); no "
                        "communicator of the round is made",
                        r, a->bad_at + 1);
    if (a->bad)
      return hccl__fail(HCCL_E_PARA,
                        "HcclGroupEnd: rank %u of the parent had a split of its group refused "
                        "(its log says why); no communicator of the group is made",
                        r);
    if (a->nsplits != ask[0].nsplits)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommSplit: rank %u of the parent asks for %u split%s in this round "
                        "(between HcclGroupStart and HcclGroupEnd, or 1 alone), rank 0 for %u; "
                        "every rank must make the same splits, grouped alike",
                        r, a->nsplits, a->nsplits == 1 ? "" : "s", ask[0].nsplits);
    if (a->seq != ask[0].seq)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommSplit: rank %u of the parent is at its split %u of this "
                        "communicator, rank 0 at its split %u; every rank must call it the "
                        "same number of times, in the same order as its other calls",
                        r, a->seq + 1, ask[0].seq + 1);
  }
  return HCCL_SUCCESS;
}

/* The members of colour `color` in split `which` in key order, ties by parent rank; *me is
 * this rank's index. */
static uint32_t members_of(const struct hccl_comm *p, const struct split_ask *ask, uint32_t which,
                           int32_t color, uint32_t *members, uint32_t *me) {
  uint32_t n = 0;
  for (uint32_t r = 0; r < p->nranks; r++) {
    if (ask[r].color[which] != color) continue;
    uint32_t i = n++; /* insertion: r is above every rank placed so far */
    while (i > 0 && ask[members[i - 1]].key[which] > ask[r].key[which]) {
      members[i] = members[i - 1];
      i--;
    }
    members[i] = r;
  }
  for (uint32_t i = 0; i < n; i++)
    if (members[i] == p->rank) *me = i;
  return n;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Whether the parent round brought everything the group's "conn" round would: every member
 * opened its listener for split `which` before it (its blob is in its ask) and no two
 * members share a server (so no shared-memory blob is needed, which only setup can make). The
 * same answer on every member: it reads only the parent round's records. */
static bool conn_known(const struct split_ask *ask, uint32_t which, const uint32_t *members,
                       uint32_t n, uint64_t *h /* [n] scratch */) {
  if (n < 2) return false;
  bool known = true;
  for (uint32_t i = 0; i < n; i++) {
    known = known && (ask[members[i]].listening >> which & 1);
    h[i] = ask[members[i]].info.host_hash;
  }
  qsort(h, n, sizeof(uint64_t), cmp_u64);
  for (uint32_t i = 1; known && i < n; i++)
    known = h[i] != h[i - 1];
  return known;
}

/* Makes this rank's new communicator from members (rank x->me of x->n) for request q, the
 * parent's split number seq. */
static HcclResult make_child(struct split_ctx *x, struct split_req *q, uint32_t seq,
                             HcclComm *out) {
  struct hccl_comm *p = x->parent;
  struct hccl_settings cfg = q->cfg;
  cfg.have_rank = true;
  cfg.rank = x->me;
  cfg.world_size = x->n;
  struct hccl_comm *c = hccl__comm_alloc(&cfg, x->me, x->n);
  if (!c) return hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
  if (q->named)
    snprintf(c->log.name, sizeof(c->log.name), "%.63s", q->name);
  else
    snprintf(c->log.name, sizeof(c->log.name), "%.40s%ssplit%u.%d", p->log.name,
             p->log.name[0] ? "/" : "", seq, (int)q->color);
  hccl__log_bind(&c->log);
  x->log = &c->log;
  /* Unique per new communicator among the parent's (the TCP transport's identity). */
  uint64_t id = hccl__fnv1a(HCCL_FNV1A_SEED, p->key_prefix, strlen(p->key_prefix));
  id = hccl__fnv1a(id, &p->run, sizeof(p->run));
  snprintf(c->key_prefix, sizeof(c->key_prefix), "split%016llx/%u/%d", (unsigned long long)id,
           seq, (int)q->color);
  c->boot.round_fn = split_round;
  c->boot.round_arg = x;
  c->boot.conn_known = x->conn_known;
  c->tx.listen_fd = q->listen_fd; /* c's now: its TCP setup takes it, or c's free closes it */
  q->listen_fd = -1;
  HcclResult r = hccl__comm_bootstrap(c);
  c->boot.round_fn = NULL;
  c->boot.round_arg = NULL;
  if (r != HCCL_SUCCESS) {
    x->log = &p->log; /* pad_rounds logs on after c (and its log context) is gone */
    hccl__log_bind(x->log);
    hccl__comm_free(c);
    return r;
  }
  *out = c;
  return HCCL_SUCCESS;
}

/* Split `which` of the round after the parent allgather (ask: every rank's): this rank's
 * communicator, or none (NOCOLOR); its group's member rounds always run to the end, so a
 * member that failed still lets the others finish (with an error). members: [nranks] scratch. */
static HcclResult make_one(struct hccl_comm *p, const struct split_ask *ask, uint32_t which,
                           struct split_req *q, uint32_t *members, double ag_ms) {
  int64_t t0 = hccl__now_ns();
  uint32_t seq = ask[p->rank].seq + which;
  struct split_ctx x = {
      .parent = p, .log = &p->log, .ask = ask, .which = which, .members = members};
  HcclResult r = HCCL_SUCCESS;
  if (q->color != HCCL_SPLIT_NOCOLOR) {
    x.n = members_of(p, ask, which, q->color, members, &x.me);
    for (uint32_t d = 1; d < x.n; d <<= 1)
      x.steps++;
    x.all = malloc((size_t)x.n * SPLIT_REC);
    /* x.all is scratch for the check until the rounds use it (a record is 8 bytes or more). */
    x.conn_known = x.all && conn_known(ask, which, members, x.n, (uint64_t *)(void *)x.all);
    x.rounds = x.conn_known ? 0 : SPLIT_ROUNDS;
    x.order = malloc((size_t)x.n * sizeof(uint32_t));
    for (uint32_t i = 0; x.order && i < x.n; i++)
      x.order[i] = i;
    x.view = (struct hccl_group){.n = x.n,
                                 .me = x.me,
                                 .rank = members,
                                 .ring = x.order,
                                 .pos = x.order,
                                 .links = p->tx.links[HCCL_CHANNEL_COLL],
                                 .chunk_bytes = p->world.chunk_bytes,
                                 .state = &p->astate};
    if (!x.all || !x.order)
      r = hccl__fail(HCCL_E_MEMORY, "out of memory splitting %u ranks", p->nranks);
    else
      r = make_child(&x, q, seq, q->out);
  }
  HcclResult pr = x.all && x.order ? pad_rounds(&x, r != HCCL_SUCCESS) : HCCL_SUCCESS;
  hccl__log_bind(&p->log);
  if (r == HCCL_SUCCESS && pr != HCCL_SUCCESS) {
    HcclCommDestroy(*q->out);
    *q->out = NULL;
    r = pr;
  }
  /* bench/split.sh's runs read this line: where a split's time goes. */
  HCCL_INFO("HcclCommSplit %u: colour %d, %u ranks of %u; 1 parent allgather %.2f ms (for %u "
            "split%s), group bootstrap %.2f ms (%u member rounds of %u steps%s)",
            seq, (int)q->color, x.n, p->nranks, ag_ms, ask[0].nsplits,
            ask[0].nsplits == 1 ? "" : "s", (hccl__now_ns() - t0) / 1e6, x.done, x.steps,
            x.conn_known ? "; links on first use" : "");
  free(x.all);
  free(x.order);
  return r;
}

/* The parent round's check over the tree: the parent is not broken and no peer aborted. */
static HcclResult parent_alive(void *arg) {
  struct hccl_comm *c = arg;
  if (atomic_load(&c->broken))
    return hccl__fail(HCCL_E_REMOTE,
                      "HcclCommSplit on rank %u: the parent communicator failed during the "
                      "split (%s)",
                      c->rank, c->broken_msg);
  return hccl__check_aborts(c, "HcclCommSplit");
}

/* The parent round: every parent rank's ask in ask[]. Over the parent's bootstrap tree when it
 * kept one (its init's; comm.c): a gather up the binomial tree and the whole table down, on
 * the calling thread over blocking sockets, so a rank wakes about twice, where Bruck's
 * allgather over the collective links wakes each rank's thread and its TCP I/O thread at
 * each of log2(n) steps (128 pretend servers, 1 rank each: 92-109 ms for the allgather, the
 * init's rounds over the tree 36-37 ms each). Earlier calls on the parent end first
 * (hccl__coll_drain), as they would before a blocking allgather: the member rounds use the
 * parent's links. Bounded by HCCL_EXEC_TIMEOUT and by the parent's abort; a failure breaks the
 * parent and closes the tree, so its neighbours fail at once too, every rank naming the rank
 * that failed (rounds.c's failure record, and the abort's origin). A parent without a tree (a
 * split's child) runs the allgather. */
static HcclResult parent_round(struct hccl_comm *c, struct split_ask *mine,
                               struct split_ask *ask) {
  if (!c->boot.tree)
    return HcclAllGather(mine, ask, sizeof(*mine), HCCL_DATA_TYPE_UINT8, c, NULL);
  hccl__coll_drain(&c->queue);
  struct hccl_rounds rd = {.rank = c->rank,
                           .nranks = c->nranks,
                           .connect_timeout_ms = c->cfg.exec_timeout_ms,
                           .tree = c->boot.tree,
                           .timeout_name = "HCCL_EXEC_TIMEOUT",
                           .check = parent_alive,
                           .check_arg = c};
  HcclResult r = hccl__round_allgather(&rd, "split", mine, sizeof(*mine), ask);
  c->boot.tree = rd.tree; /* NULL after a failure: the sockets are closed */
  /* The rank the tree named (a dead one, on every rank alike) is the one the abort names. */
  if (r != HCCL_SUCCESS)
    hccl__comm_fail_blame(c, r, rd.blame != UINT32_MAX ? rd.blame : c->rank);
  return r;
}

/* One parent allgather for the n splits of req (1 alone, or a group's), then every split's
 * communicator in order. bad/bad_at: this rank's own refusal (check_input's code, 3 other),
 * sent so every rank fails alike. Returns the first error; each failed split's *out is NULL,
 * the others are made. */
static HcclResult split_round_run(struct hccl_comm *comm, struct split_req *req, uint32_t n,
                                  uint32_t bad, uint32_t bad_at) {
  hccl__log_bind(&comm->log);
  for (uint32_t i = 0; i < n; i++)
    *req[i].out = NULL;
  if (atomic_load(&comm->broken))
    return hccl__fail(HCCL_E_REMOTE,
                      "HcclCommSplit on rank %u: the parent communicator is broken (%s); make "
                      "new communicators from a live one",
                      comm->rank, comm->broken_msg);
  int64_t t0 = hccl__now_ns();
  struct split_ask mine = {.seq = comm->boot.splits, .nsplits = n, .bad = bad, .bad_at = bad_at};
  for (uint32_t i = 0; i < n; i++)
    mine.color[i] = req[i].color, mine.key[i] = req[i].key, mine.buffsize[i] = req[i].cfg.buffsize;
  /* Each new communicator's TCP listener, opened now so its address rides on the parent round:
   * a group on servers of its own then runs no member round. One that cannot be opened fails
   * the round on every rank (bad 4), as its links could not be made later either. */
  const struct hccl_transport_ops *early = early_transport();
  for (uint32_t i = 0; i < n && !mine.bad && comm->nservers > 1 && early; i++) {
    if (req[i].color == HCCL_SPLIT_NOCOLOR) continue;
    uint8_t blob[HCCL_CONN_BYTES] = {0};
    if (early->listen_early(&req[i].cfg, comm->nranks, blob, &req[i].listen_fd) !=
        HCCL_SUCCESS) {
      mine.bad = 4, mine.bad_at = i;
      break;
    }
    memcpy(mine.conn[i], blob, sizeof(mine.conn[i]));
    mine.listening |= 1u << i;
  }
  hccl__peer_self(&comm->cfg, 0, 0, &mine.info); /* rank 0's fields too: the run */
  mine.info.device = comm->device;
  comm->boot.splits += n;
  struct split_ask *ask = calloc(comm->nranks, sizeof(*ask));
  uint32_t *members = calloc(comm->nranks, sizeof(uint32_t));
  HcclResult r = HCCL_SUCCESS;
  if (!ask || !members)
    r = hccl__fail(HCCL_E_MEMORY, "out of memory splitting %u ranks", comm->nranks);
  /* Every rank joins the one parent exchange even with bad input, so all fail alike, at once. */
  if (r == HCCL_SUCCESS)
    r = parent_round(comm, &mine, ask);
  hccl__log_bind(&comm->log);
  if (r == HCCL_SUCCESS) {
    /* Rank 0's count on every rank, so the next splits line up again after a mismatch. */
    comm->boot.splits = ask[0].seq + ask[0].nsplits;
    r = check_asks(comm, ask);
  }
  double ag_ms = (hccl__now_ns() - t0) / 1e6;
  /* The same outcome on every rank so far. A failed split does not stop the next ones: their
   * members on the other ranks run them too. */
  bool asked = r == HCCL_SUCCESS;
  for (uint32_t i = 0; asked && i < n; i++) {
    HcclResult ri = make_one(comm, ask, i, &req[i], members, ag_ms);
    if (r == HCCL_SUCCESS) r = ri;
  }
  free(ask);
  free(members);
  for (uint32_t i = 0; i < n; i++)
    if (req[i].listen_fd >= 0) close(req[i].listen_fd), req[i].listen_fd = -1; /* not taken */
  return r;
}

/* The splits this thread's open group has recorded (group_open.c says whether one is open). */
static _Thread_local struct {
  struct hccl_comm *parent; /* the first split's */
  uint32_t n;               /* splits recorded (at most HCCL_GROUP_MAX_SPLITS) */
  uint32_t bad, bad_at;     /* the first refused split's reason (check_input's, 3 other) */
  struct split_req req[HCCL_GROUP_MAX_SPLITS];
} g_group;

HcclResult HcclGroupStart(void) {
  if (hccl__group_is_open())
    return hccl__fail(HCCL_E_NOT_SUPPORT,
                      "HcclGroupStart inside a group: groups do not nest; call HcclGroupEnd "
                      "first");
  memset(&g_group, 0, sizeof(g_group));
  hccl__group_set_open(true);
  return HCCL_SUCCESS;
}

/* Inside a group: records the split; a refused one still counts, and fails the group on every
 * rank at HcclGroupEnd. */
static HcclResult group_record(struct hccl_comm *comm, int32_t color, int32_t key,
                               HcclComm *newcomm, const HcclCommConfig *config) {
  uint32_t bad = 0;
  HcclResult r = HCCL_SUCCESS;
  if (g_group.n >= HCCL_GROUP_MAX_SPLITS) {
    r = hccl__fail(HCCL_E_PARA,
                   "HcclCommSplit on rank %u: the group already holds %u splits, the most one "
                   "group may (HCCL_GROUP_MAX_SPLITS); end it and start another",
                   comm->rank, (unsigned)HCCL_GROUP_MAX_SPLITS);
    bad = 3;
  } else if (g_group.parent && comm != g_group.parent) {
    r = hccl__fail(HCCL_E_PARA,
                   "HcclCommSplit on rank %u: its parent is not the group's (the first "
                   "split's); every split of one group must have the same parent",
                   comm->rank);
    bad = 3;
  } else {
    bad = req_fill(comm, color, key, newcomm, config, &g_group.req[g_group.n]);
    g_group.parent = comm;
    g_group.n++;
    if (bad) r = HCCL_E_PARA;
  }
  if (bad && !g_group.bad) g_group.bad = bad, g_group.bad_at = g_group.n ? g_group.n - 1 : 0;
  return r;
}

HcclResult HcclGroupEnd(void) {
  if (!hccl__group_is_open())
    return hccl__fail(HCCL_E_PARA,
                      "HcclGroupEnd without HcclGroupStart: every HcclGroupEnd must close a "
                      "group this thread started");
  hccl__group_set_open(false);
  if (!g_group.parent) return HCCL_SUCCESS; /* an empty group */
  return split_round_run(g_group.parent, g_group.req, g_group.n, g_group.bad, g_group.bad_at);
}

HcclResult HcclCommSplit(HcclComm comm, int32_t color, int32_t key, HcclComm *newcomm,
                         const HcclCommConfig *config) {
  if (!comm || !newcomm)
    return hccl__fail(HCCL_E_PTR, "HcclCommSplit: %s is NULL", comm ? "newcomm" : "comm");
  hccl__log_bind(&comm->log);
  *newcomm = NULL;
  if (hccl__group_is_open()) return group_record(comm, color, key, newcomm, config);
  struct split_req q;
  uint32_t bad = req_fill(comm, color, key, newcomm, config, &q);
  return split_round_run(comm, &q, 1, bad, 0);
}
