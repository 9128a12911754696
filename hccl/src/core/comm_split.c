/*
 * comm_split.c - HcclCommSplit: communicators made from a parent by colour and key (NCCL's
 * ncclCommSplit), with no store. The parent's allgather carries everything the store would:
 * first every rank's (colour, key), from which each rank finds its new group's members in
 * order; then the new communicator's own bootstrap rounds (comm.c's "info", "conn", "ready"),
 * each one parent allgather of a fixed-size record per parent rank, of which each rank reads
 * its members' (c->round_fn). Every parent rank takes part in every round, whatever its colour
 * and however its own group's bootstrap went: a rank whose group needs fewer rounds (one rank,
 * NOCOLOR) or failed pads up to SPLIT_ROUNDS, marking its records failed, so the parent's
 * calls stay in step and a failure reaches the group's other ranks as an error, not a wait.
 *
 *   parent ranks:   0    1    2    3          colour 0: {0, 2}, colour 1: {1, 3}
 *   round "split":  allgather (colour, key, split number, bad input?)
 *   round 1..3:     allgather [hdr | peer record]  -> each group reads its members' records
 *   then each group's links connect among its members, as any communicator's do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "hash.h"
#include "log.h"
#include "peer.h"

/* The bootstrap rounds a communicator of more than one rank runs (comm.c). */
#define SPLIT_ROUNDS 3

/* What each parent rank says first. */
struct split_ask {
  int32_t color, key;
  uint32_t seq;  /* the parent's splits before this one on that rank */
  uint32_t bad;  /* its own input was refused (it logged why): 1 key, 2 config */
};

/* The header of each round's record. */
struct split_hdr {
  uint32_t round;  /* 1..SPLIT_ROUNDS */
  uint32_t failed; /* this rank's group bootstrap failed before this round */
};

#define SPLIT_REC (sizeof(struct split_hdr) + sizeof(struct hccl_peer_info))

struct split_ctx {
  struct hccl_comm *parent;
  const struct hccl_log_ctx *log; /* the new communicator's, bound again after each round */
  const uint32_t *members;        /* parent ranks in the new communicator's order */
  uint32_t n;
  uint32_t done;        /* rounds run so far */
  uint8_t *all;         /* [parent->nranks * SPLIT_REC] */
  uint8_t rec[SPLIT_REC];
};

/* One parent allgather of this rank's record (ctx->rec). */
static HcclResult exchange(struct split_ctx *x) {
  HcclResult r = HcclAllGather(x->rec, x->all, SPLIT_REC, HCCL_DATA_TYPE_UINT8, x->parent, NULL);
  hccl__log_bind(x->log);
  x->done++;
  return r;
}

/* comm.c's round over the parent: the members' records of this round, in their order. */
static HcclResult split_round(void *arg, const char *round, const void *mine, size_t len,
                              void *all) {
  struct split_ctx *x = arg;
  if (len > sizeof(struct hccl_peer_info) || x->done >= SPLIT_ROUNDS)
    return hccl__fail(HCCL_E_INTERNAL, "split round '%s' (%zu bytes, round %u) does not fit",
                      round, len, x->done + 1);
  memset(x->rec, 0, sizeof(x->rec));
  struct split_hdr h = {.round = x->done + 1};
  memcpy(x->rec, &h, sizeof(h));
  memcpy(x->rec + sizeof(h), mine, len);
  HCCL_TRY(exchange(x));
  for (uint32_t i = 0; i < x->n; i++) {
    const uint8_t *rec = x->all + (size_t)x->members[i] * SPLIT_REC;
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

/* Runs the rounds this rank's group did not, so the parent's calls stay in step. */
static HcclResult pad_rounds(struct split_ctx *x, bool failed) {
  HcclResult res = HCCL_SUCCESS;
  while (x->done < SPLIT_ROUNDS) {
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
  struct hccl_settings cfg = comm->cfg;
  struct split_ask mine = {color, key, comm->splits, 0};
  mine.bad = check_input(comm, key, config, &cfg);
  comm->splits++;
  struct split_ask *ask = calloc(comm->nranks, sizeof(*ask));
  uint32_t *members = calloc(comm->nranks, sizeof(uint32_t));
  struct split_ctx x = {.parent = comm, .log = &comm->log, .members = members};
  x.all = calloc(comm->nranks, SPLIT_REC);
  /* Every rank joins the first exchange even with bad input, so all fail alike, at once. */
  HcclResult r = HcclAllGather(&mine, ask, sizeof(mine), HCCL_DATA_TYPE_UINT8, comm, NULL);
  if (r == HCCL_SUCCESS && (!ask || !members || !x.all))
    r = hccl__fail(HCCL_E_MEMORY, "out of memory splitting %u ranks", comm->nranks);
  if (r == HCCL_SUCCESS) r = check_asks(comm, ask);
  if (r != HCCL_SUCCESS) goto out; /* the same outcome on every rank: no rounds follow */
  uint32_t me = 0;
  if (color != HCCL_SPLIT_NOCOLOR) {
    x.n = members_of(comm, ask, color, members, &me);
    cfg.have_rank = true;
    cfg.rank = me;
    cfg.world_size = x.n;
    cfg.device_id = comm->device; /* a rank keeps its device */
    cfg.device_src = "the parent communicator";
    r = make_child(&x, &cfg, me, mine.seq, color, config, newcomm);
  }
  HcclResult pr = pad_rounds(&x, r != HCCL_SUCCESS);
  hccl__log_bind(&comm->log);
  if (r == HCCL_SUCCESS && pr != HCCL_SUCCESS) {
    HcclCommDestroy(*newcomm);
    *newcomm = NULL;
    r = pr;
  }
out:
  free(ask);
  free(members);
  free(x.all);
  return r;
}
