/*
 * test_plan.c - one plan per call (algo/plan.c), without processes: the planner reads only
 * the view it is given, so made-up server shapes with the transports' own costs (shm inside a
 * server, TCP between) stand in for communicators. A table of (collective, bytes, servers x
 * ranks per server, HCCL_ALGO) gives the algorithm, the name the trace and the flight recorder
 * print, HcclAllReduceAlgoName's word, and whether zero-copy is offered; then the zero-copy
 * back-off as the view's offers hold it, where zero-copy starts (with and without a core for
 * each rank), where the staged allreduce runs, and where the one-shot one does; on servers of
 * different counts (a shrink's survivors), the same plan on every rank, flat or through
 * leaders. A plan is a list of candidates in the order to try (zero-copy, one-shot or staged,
 * then the model's choice, each with its name): the order for a few calls, and that running a
 * plan (hccl__plan_run, algo/plan_run.c, on one rank) leaves it as it was and says which
 * candidate ran. That the trace records, for a real call, the name that agrees with
 * HcclAllReduceAlgoName is tests/core/test_trace.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "plan_run.h"

/* The transports' figures (transport/shm/shm.c, transport/tcp/tcp.c) and the default slot. */
#define SHM_ALPHA 3700.0
#define SHM_BETA 0.5
#define TCP_ALPHA 25000.0
#define TCP_BETA 2.0
#define CHUNK (512u << 10)
#define SHM_CHUNK (128u << 10)

struct shape {
  struct hccl_group world, local, cross;
  struct hccl_algo_setting algo;
  struct hccl_zcopy_offers offers[HCCL_ZCOPY_NKINDS];
  struct hccl_plan_view v;
};

/* S servers of L ranks, HCCL_ALGO = algo (NULL: unset); the groups' slowest links as
 * group.c measures them: the world's and the cross group's are TCP once there are servers. */
static void make_shape(struct shape *s, uint32_t S, uint32_t L, const char *algo) {
  memset(s, 0, sizeof(*s));
  bool tcp = S > 1;
  s->world = (struct hccl_group){.n = S * L,
                                 .chunk_bytes = CHUNK,
                                 .alpha_ns = tcp ? TCP_ALPHA : SHM_ALPHA,
                                 .beta_ns = tcp ? TCP_BETA : SHM_BETA};
  s->local = (struct hccl_group){
      .n = L, .chunk_bytes = CHUNK, .alpha_ns = SHM_ALPHA, .beta_ns = SHM_BETA};
  s->cross = (struct hccl_group){
      .n = S, .chunk_bytes = CHUNK, .alpha_ns = TCP_ALPHA, .beta_ns = TCP_BETA};
  if (algo) assert_int_equal(hccl__settings_parse_algo(algo, &s->algo), HCCL_SUCCESS);
  s->v = (struct hccl_plan_view){.nranks = S * L,
                                 .nservers = S,
                                 .local_nranks = L,
                                 .world = &s->world,
                                 .local = &s->local,
                                 .cross = &s->cross,
                                 .algo = &s->algo,
                                 .offers = s->offers};
}

#define K 1024u
#define M (1024u * 1024u)

/* A call of count elements of esz bytes, its size computed once as core/coll.c does. */
#define CALL(kind_, count_, esz_)                                                              \
  ((struct hccl_call){                                                                        \
      .kind = (kind_), .count = (count_), .esz = (esz_), .bytes = (size_t)(count_) * (esz_)})

/* A plan read the old way: its model's choice (the last candidate) and its name, and whether
 * it lists zero-copy (first), one-shot or staged before that. */
static enum hccl_plan_algo algo_of(struct hccl_plan p) {
  return hccl__plan_last(&p)->algo;
}
static const char *name_of(struct hccl_plan p) {
  return hccl__plan_last(&p)->name;
}
static bool lists(struct hccl_plan p, enum hccl_plan_algo a) {
  for (uint32_t i = 0; i < p.ncand; i++)
    if (p.cand[i].algo == a) return true;
  return false;
}
static bool offers_zcopy(struct hccl_plan p) {
  enum hccl_plan_algo a = p.cand[0].algo;
  return p.ncand > 1 && (a == HCCL_PLAN_ZERO_COPY || a == HCCL_PLAN_HIER_ZCOPY_RING ||
                         a == HCCL_PLAN_HIER_ZCOPY_HD);
}
static bool tries_staged(struct hccl_plan p) {
  return lists(p, HCCL_PLAN_STAGED) || lists(p, HCCL_PLAN_HIER_STAGED_RING) ||
         lists(p, HCCL_PLAN_HIER_STAGED_HD);
}
static bool tries_oneshot(struct hccl_plan p) {
  return lists(p, HCCL_PLAN_ONESHOT);
}

static const struct row {
  enum hccl_coll_kind kind;
  size_t bytes; /* a rank's block for allgather, reduce-scatter, gather, scatter */
  uint32_t servers, per_server;
  const char *algo_env;
  enum hccl_plan_algo algo;
  const char *name, *word;
  bool zcopy;
} ROWS[] = {
    /* one rank: a copy, whatever the model says (its allreduce word stays the model's) */
    {HCCL_K_ALLREDUCE, 4 * K, 1, 1, NULL, HCCL_PLAN_LOCAL, "local", "ring", false},
    {HCCL_K_BROADCAST, 4 * K, 1, 1, NULL, HCCL_PLAN_LOCAL, "local", NULL, false},
    {HCCL_K_BARRIER, 0, 1, 1, NULL, HCCL_PLAN_LOCAL, "local", NULL, false},
    {HCCL_K_GATHER, 4 * K, 1, 1, NULL, HCCL_PLAN_DIRECT_GATHER, "local", NULL, false},
    {HCCL_K_ALLTOALL, 4 * K, 1, 1, NULL, HCCL_PLAN_PAIRWISE_ALLTOALL, "local", NULL, false},
    /* one server of 8: halving-doubling while a message is short, the ring for long ones;
     * zero-copy offered from 64 KiB of a rank's larger buffer */
    {HCCL_K_ALLREDUCE, 4 * K, 1, 8, NULL, HCCL_PLAN_HD_ALLREDUCE, "halving-doubling", "hd", false},
    {HCCL_K_ALLREDUCE, 16 * K, 1, 8, NULL, HCCL_PLAN_HD_ALLREDUCE, "halving-doubling", "hd", false},
    {HCCL_K_ALLREDUCE, 64 * K, 1, 8, NULL, HCCL_PLAN_RING_ALLREDUCE, "ring", "ring", true},
    {HCCL_K_ALLREDUCE, 64 * M, 1, 8, NULL, HCCL_PLAN_RING_ALLREDUCE, "ring", "ring", true},
    {HCCL_K_ALLREDUCE, 64 * M, 1, 8, "ring", HCCL_PLAN_RING_ALLREDUCE, "ring", "ring", false},
    {HCCL_K_ALLREDUCE, 4 * K, 1, 8, "ring", HCCL_PLAN_RING_ALLREDUCE, "ring", "ring", false},
    {HCCL_K_ALLREDUCE, 64 * M, 1, 8, "tree", HCCL_PLAN_HD_ALLREDUCE, "halving-doubling", "hd",
     false},
    {HCCL_K_REDUCE_SCATTER, 64, 1, 8, NULL, HCCL_PLAN_RD_REDUCE_SCATTER,
     "recursive doubling allreduce", NULL, false},
    {HCCL_K_REDUCE_SCATTER, 64, 1, 2, NULL, HCCL_PLAN_RING_REDUCE_SCATTER, "ring", NULL, false},
    {HCCL_K_REDUCE_SCATTER, 16 * K, 1, 8, NULL, HCCL_PLAN_RING_REDUCE_SCATTER, "ring", NULL, true},
    {HCCL_K_ALLGATHER, 64, 1, 8, NULL, HCCL_PLAN_BRUCK_ALLGATHER, "Bruck", NULL, false},
    {HCCL_K_ALLGATHER, 64, 1, 2, NULL, HCCL_PLAN_RING_ALLGATHER, "ring", NULL, false},
    {HCCL_K_ALLGATHER, 1 * M, 1, 8, NULL, HCCL_PLAN_RING_ALLGATHER, "ring", NULL, true},
    {HCCL_K_BROADCAST, 4 * K, 1, 8, NULL, HCCL_PLAN_BINOMIAL_BROADCAST, "binomial tree", NULL,
     false},
    {HCCL_K_BROADCAST, 1 * M, 1, 8, NULL, HCCL_PLAN_CHAIN_BROADCAST, "chain", NULL, true},
    {HCCL_K_BROADCAST, 1 * M, 1, 8, "tree", HCCL_PLAN_BINOMIAL_BROADCAST, "binomial tree", NULL,
     false},
    {HCCL_K_REDUCE, 4 * K, 1, 8, NULL, HCCL_PLAN_BINOMIAL_REDUCE, "binomial tree", NULL, false},
    {HCCL_K_REDUCE, 1 * M, 1, 8, NULL, HCCL_PLAN_CHAIN_REDUCE, "chain", NULL, false},
    {HCCL_K_BARRIER, 0, 1, 8, NULL, HCCL_PLAN_DISSEMINATION_BARRIER, "dissemination", NULL, false},
    {HCCL_K_GATHER, 1 * M, 1, 8, NULL, HCCL_PLAN_DIRECT_GATHER, "direct", NULL, false},
    {HCCL_K_SCATTER, 1 * M, 1, 8, NULL, HCCL_PLAN_DIRECT_SCATTER, "direct", NULL, false},
    {HCCL_K_ALLTOALL, 1 * M, 1, 8, NULL, HCCL_PLAN_PAIRWISE_ALLTOALL, "pairwise", NULL, false},
    {HCCL_K_ALLTOALLV, 0, 1, 8, NULL, HCCL_PLAN_PAIRWISE_ALLTOALL, "pairwise", NULL, false},
    /* two servers of 4: two-level wins, halving-doubling between servers for short shards,
     * the ring for long ones; its steps inside the servers offer zero-copy from 64 KiB (no
     * other collective does across servers) */
    {HCCL_K_ALLREDUCE, 4 * K, 2, 4, NULL, HCCL_PLAN_HIER_HD,
     "two-level, halving-doubling between servers", "hier-hd", false},
    {HCCL_K_ALLREDUCE, 64 * M, 2, 4, NULL, HCCL_PLAN_HIER_RING, "two-level, ring between servers",
     "hier-ring", true},
    {HCCL_K_ALLGATHER, 1 * M, 2, 4, NULL, HCCL_PLAN_RING_ALLGATHER, "ring", NULL, false},
    {HCCL_K_ALLREDUCE, 64 * M, 2, 4, "level0:ring;level1:tree", HCCL_PLAN_HIER_HD,
     "two-level, halving-doubling between servers", "hier-hd", false},
    {HCCL_K_ALLREDUCE, 64 * M, 2, 4, "ring", HCCL_PLAN_RING_ALLREDUCE, "ring", "ring", false},
    {HCCL_K_BROADCAST, 1 * M, 2, 4, NULL, HCCL_PLAN_CHAIN_BROADCAST, "chain", NULL, false},
    /* four servers of one rank: flat, over TCP */
    {HCCL_K_ALLREDUCE, 4 * K, 4, 1, NULL, HCCL_PLAN_HD_ALLREDUCE, "halving-doubling", "hd", false},
    {HCCL_K_ALLREDUCE, 64 * M, 4, 1, NULL, HCCL_PLAN_RING_ALLREDUCE, "ring", "ring", false},
    {HCCL_K_ALLREDUCE, 64 * M, 4, 1, "level0:NA;level1:tree", HCCL_PLAN_HD_ALLREDUCE,
     "halving-doubling", "hd", false},
};

static void test_plan_table(void **st) {
  (void)st;
  for (size_t i = 0; i < sizeof(ROWS) / sizeof(ROWS[0]); i++) {
    const struct row *r = &ROWS[i];
    struct shape s;
    make_shape(&s, r->servers, r->per_server, r->algo_env);
    struct hccl_call call = CALL(r->kind, r->bytes / 4, 4);
    struct hccl_plan p = hccl__plan(&s.v, &call);
    printf("  %-14s %9zu B on %ux%u, HCCL_ALGO %-24s -> %s\n", hccl__coll_kind_name(r->kind),
           r->bytes, r->servers, r->per_server, r->algo_env ? r->algo_env : "unset", name_of(p));
    if (algo_of(p) != r->algo || strcmp(name_of(p), r->name) ||
        (r->word ? !p.word || strcmp(p.word, r->word) : p.word != NULL) ||
        p.zcopy_eligible != r->zcopy || offers_zcopy(p) != r->zcopy)
      fail_msg("row %zu: algo %d name \"%s\" word \"%s\" zero-copy %d/%d; expected %d \"%s\" "
               "\"%s\" %d",
               i, (int)algo_of(p), name_of(p), p.word ? p.word : "(null)", p.zcopy_eligible,
               offers_zcopy(p), (int)r->algo, r->name, r->word ? r->word : "(null)", r->zcopy);
    /* The same call asked as a size (HcclAllReduceAlgoName's way): the same algorithm, never
     * zero-copy. */
    s.v.offers = NULL;
    struct hccl_plan q = hccl__plan(&s.v, &call);
    assert_int_equal(algo_of(q), algo_of(p));
    assert_string_equal(name_of(q), name_of(p));
    assert_false(q.zcopy_eligible);
    assert_false(offers_zcopy(q));
  }
}

/* One-shot (plan.oneshot; algo stays the flat choice it falls back to): on one server of 3 or
 * more, not a power of two, up to 16 KiB with HCCL_ALGO unset; HCCL_ALGO=oneshot at any size
 * on one server of 2 or more; never across servers; not a level. */
static void test_plan_oneshot(void **st) {
  (void)st;
  static const struct {
    uint32_t servers, per_server;
    const char *algo;
    size_t bytes;
    bool oneshot;
  } cases[] = {{1, 8, NULL, 4 * K, false},    {1, 8, NULL, 64, false},
               {1, 4, NULL, 4, false},         {1, 4, NULL, 8 * K, false},
               {1, 3, NULL, 4 * K, true},      {1, 3, NULL, 16 * K, true},
               {1, 3, NULL, 16 * K + 4, false}, {1, 6, NULL, 4, true},
               {1, 6, NULL, 16 * K, true},     {1, 6, NULL, 16 * K + 4, false},
               {1, 7, NULL, 16 * K, true},     {1, 5, NULL, 8 * K, true},
               {1, 2, NULL, 4 * K, false},
               {1, 8, "tree", 4 * K, false},  {1, 2, "oneshot", 64 * M, true},
               {1, 8, "oneshot", 4 * K, true}, {2, 4, NULL, 4 * K, false},
               {2, 4, "oneshot", 4 * K, false}, {4, 1, NULL, 4 * K, false}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct shape s;
    make_shape(&s, cases[i].servers, cases[i].per_server, cases[i].algo);
    struct hccl_call call = CALL(HCCL_K_ALLREDUCE, cases[i].bytes / 4, 4);
    struct hccl_plan p = hccl__plan(&s.v, &call);
    if (tries_oneshot(p) != cases[i].oneshot ||
        (tries_oneshot(p) && strcmp(p.word, "oneshot") != 0) ||
        (tries_oneshot(p) && tries_staged(p)))
      fail_msg("case %zu (%zu B on %ux%u, HCCL_ALGO %s): one-shot %d word %s staged %d", i,
               cases[i].bytes, cases[i].servers, cases[i].per_server,
               cases[i].algo ? cases[i].algo : "unset", tries_oneshot(p), p.word, tries_staged(p));
  }
  struct hccl_algo_setting a;
  assert_int_equal(hccl__settings_parse_algo("level0:oneshot", &a), HCCL_E_PARA);
}

/* The plan reads the back-off and changes nothing; an eligible call whose collective is
 * backing off counts but does not offer. Each collective has its own. */
static void test_plan_backoff(void **st) {
  (void)st;
  struct shape s;
  make_shape(&s, 1, 4, NULL);
  struct hccl_call ar = CALL(HCCL_K_ALLREDUCE, M, 4);
  struct hccl_call bc = CALL(HCCL_K_BROADCAST, M, 4);
  s.offers[HCCL_ZCOPY_ALLREDUCE] = (struct hccl_zcopy_offers){.calls = 5, .next = 7, .skip = 2};
  struct hccl_plan p = hccl__plan(&s.v, &ar);
  assert_true(p.zcopy_eligible);
  assert_false(offers_zcopy(p));
  assert_string_equal(name_of(p), "ring");
  assert_int_equal(s.offers[HCCL_ZCOPY_ALLREDUCE].calls, 5);
  p = hccl__plan(&s.v, &bc);
  assert_true(p.zcopy_eligible && offers_zcopy(p));
  s.offers[HCCL_ZCOPY_ALLREDUCE].calls = 7;
  p = hccl__plan(&s.v, &ar);
  assert_true(p.zcopy_eligible && offers_zcopy(p));
  /* The threshold a test may lower (comm->zcopy_min_bytes): from one byte. */
  struct hccl_call tiny = CALL(HCCL_K_ALLGATHER, 1, 1);
  assert_false(offers_zcopy(hccl__plan(&s.v, &tiny)));
  s.v.zcopy_min_bytes = 1;
  assert_true(offers_zcopy(hccl__plan(&s.v, &tiny)));
}

/* Where zero-copy starts: 64 KiB while a server's ranks share cores; 4 KiB on one server with
 * a core for each rank, for every zero-copy collective; across servers (a two-level
 * allreduce's steps inside them) 64 KiB either way. */
static void test_plan_zcopy_threshold(void **st) {
  (void)st;
  static const enum hccl_coll_kind kinds[] = {HCCL_K_ALLREDUCE, HCCL_K_BROADCAST};
  struct shape s;
  for (int own = 0; own < 2; own++) {
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
      make_shape(&s, 1, 2, NULL);
      s.v.own_cores = own;
      struct hccl_call c4 = CALL(kinds[k], 1024, 4);
      struct hccl_call c2 = CALL(kinds[k], 512, 4);
      struct hccl_call c64 = CALL(kinds[k], 16384, 4);
      assert_int_equal(offers_zcopy(hccl__plan(&s.v, &c4)), own);
      assert_false(offers_zcopy(hccl__plan(&s.v, &c2)));
      assert_true(offers_zcopy(hccl__plan(&s.v, &c64)));
    }
    /* Allgather and reduce-scatter: their larger buffer (2 ranks x 2 KiB) decides. */
    struct hccl_call ag = CALL(HCCL_K_ALLGATHER, 512, 4);
    struct hccl_call rs = CALL(HCCL_K_REDUCE_SCATTER, 512, 4);
    assert_int_equal(offers_zcopy(hccl__plan(&s.v, &ag)), own);
    assert_int_equal(offers_zcopy(hccl__plan(&s.v, &rs)), own);
    /* 2 servers x 4 ranks: the two-level allreduce's steps inside a server from 64 KiB. */
    make_shape(&s, 2, 4, NULL);
    s.v.own_cores = own;
    for (size_t bytes = 4 * K; bytes <= 256 * K; bytes *= 4) {
      struct hccl_call c = CALL(HCCL_K_ALLREDUCE, bytes / 4, 4);
      struct hccl_plan p = hccl__plan(&s.v, &c);
      assert_string_equal(name_of(p), "two-level, halving-doubling between servers");
      assert_int_equal(offers_zcopy(p), bytes >= 64 * K);
    }
  }
}

/* The staged allreduce (algo/staged.c): planned from 64 KiB when the ranks it stages over (one
 * server's, or each server's in a two-level allreduce) are 4 or more, never when HCCL_ALGO
 * forces an algorithm, never for another collective. */
static void test_plan_staged(void **st) {
  (void)st;
  static const struct {
    uint32_t servers, per_server;
    const char *algo;
    bool staged; /* at 64 KiB and above */
  } shapes[] = {{1, 2, NULL, false},   {1, 4, NULL, true},      {1, 8, NULL, true},
                {1, 8, "ring", false}, {1, 8, "tree", false},   {2, 4, NULL, true},
                {2, 2, NULL, false},   {4, 1, NULL, false},     {2, 8, NULL, true},
                {2, 4, "level0:ring;level1:tree", false}};
  struct shape s;
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
    for (size_t bytes = 16 * K; bytes <= 64 * M; bytes *= 4) {
      make_shape(&s, shapes[i].servers, shapes[i].per_server, shapes[i].algo);
      struct hccl_call c = CALL(HCCL_K_ALLREDUCE, bytes / 4, 4);
      bool want = shapes[i].staged && bytes >= 64 * K;
      if (tries_staged(hccl__plan(&s.v, &c)) != want)
        fail_msg("%ux%u HCCL_ALGO=%s, %zu bytes: staged %d, want %d", shapes[i].servers,
                 shapes[i].per_server, shapes[i].algo ? shapes[i].algo : "(unset)", bytes,
                 !want, want);
    }
  make_shape(&s, 1, 8, NULL);
  struct hccl_call b = CALL(HCCL_K_BROADCAST, M, 4);
  assert_false(tries_staged(hccl__plan(&s.v, &b)));
}

/* A shrink's survivors on servers of different counts: `counts` ranks on each server. Every
 * rank's view of them, as core/comm.c makes it: the world and cross groups with the network's
 * figures and the local group with the device links', on every rank (an uneven communicator
 * takes every rank's worst); the cross group is the leaders for a leader, the rank alone for
 * the others. */
static void make_uneven(struct shape *s, const uint32_t *counts, uint32_t nservers, uint32_t on,
                        bool leader, const char *algo) {
  make_shape(s, nservers, counts[on], algo);
  uint32_t n = 0, most = 0;
  for (uint32_t i = 0; i < nservers; i++) {
    n += counts[i];
    if (counts[i] > most) most = counts[i];
  }
  s->world.n = s->v.nranks = n;
  s->v.max_local_nranks = most;
  s->cross.n = leader ? nservers : 1;
  s->v.uneven = true;
  /* The device links' slot (shm.c's largest, 128 KiB) is the smallest of the world's links. */
  s->world.chunk_bytes = s->local.chunk_bytes = SHM_CHUNK;
}

static bool is_lead(enum hccl_plan_algo a) {
  return a == HCCL_PLAN_LEAD_RING || a == HCCL_PLAN_LEAD_HD || a == HCCL_PLAN_LEAD_CHAIN_BROADCAST ||
         a == HCCL_PLAN_LEAD_TREE_BROADCAST || a == HCCL_PLAN_LEAD_CHAIN_REDUCE ||
         a == HCCL_PLAN_LEAD_TREE_REDUCE;
}

/* Servers of different counts (2 + 1, 4 + 2 + 1, 8 + 7): every rank plans the same allreduce,
 * broadcast and reduce whatever its server's count and whether it leads it; the even
 * two-level form never (there is no shard every server owns), but the form through leaders
 * where the model says so, or where HCCL_ALGO's level form asks (level 0 then says chain or
 * tree inside, level 1 ring/chain or halving-doubling/tree between the leaders); one word of
 * HCCL_ALGO gives the flat one; nothing is staged or zero-copy. Allgather and reduce-scatter
 * stay flat. */
static void test_plan_uneven(void **st) {
  (void)st;
  static const uint32_t layouts[][4] = {{2, 1}, {4, 2, 1}, {8, 7}, {1, 4}};
  static const uint32_t nservers[] = {2, 3, 2, 2};
  static const char *const algos[] = {NULL, "level0:ring;level1:hd", "level0:hd;level1:ring",
                                      "ring", "tree"};
  static const enum hccl_coll_kind kinds[] = {HCCL_K_ALLREDUCE, HCCL_K_BROADCAST, HCCL_K_REDUCE,
                                              HCCL_K_ALLGATHER, HCCL_K_REDUCE_SCATTER};
  for (size_t li = 0; li < 4; li++)
    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
      for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++)
        for (size_t bytes = 4 * K; bytes <= 64 * M; bytes *= 16) {
          struct hccl_plan first = {0};
          for (uint32_t on = 0; on < nservers[li]; on++)
            for (int leader = 1; leader >= (layouts[li][on] > 1 ? 0 : 1); leader--) {
              struct shape s;
              make_uneven(&s, layouts[li], nservers[li], on, leader, algos[a]);
              struct hccl_call c = CALL(kinds[ki], bytes / 4, 4);
              struct hccl_plan p = hccl__plan(&s.v, &c);
              if (on == 0 && leader && ki < 3)
                printf("  uneven layout %zu, kind %d, HCCL_ALGO %-22s %9zu B -> %s, %s inside\n",
                       li, (int)kinds[ki], algos[a] ? algos[a] : "unset", bytes, name_of(p),
                       p.tree_inside ? "tree" : "chain");
              assert_false(algo_of(p) == HCCL_PLAN_HIER_RING || algo_of(p) == HCCL_PLAN_HIER_HD);
              assert_false(tries_staged(p));
              assert_false(offers_zcopy(p));
              assert_false(tries_oneshot(p));
              bool lead = is_lead(algo_of(p)), forced = algos[a] && strchr(algos[a], ':');
              if (ki >= 3) assert_false(lead); /* allgather, reduce-scatter: flat */
              if (forced && ki < 3) {
                assert_true(lead);
                bool hd = algo_of(p) == HCCL_PLAN_LEAD_HD ||
                          algo_of(p) == HCCL_PLAN_LEAD_TREE_BROADCAST ||
                          algo_of(p) == HCCL_PLAN_LEAD_TREE_REDUCE;
                assert_int_equal(hd, strstr(algos[a], "level1:hd") != NULL);
                assert_int_equal(p.tree_inside, strstr(algos[a], "level0:hd") != NULL);
              }
              if (algos[a] && !forced) assert_false(lead);
              if (lead && ki == 0)
                assert_string_equal(p.word,
                                    algo_of(p) == HCCL_PLAN_LEAD_HD ? "hier-hd" : "hier-ring");
              if (lead && ki == 1)
                assert_true(algo_of(p) == HCCL_PLAN_LEAD_CHAIN_BROADCAST ||
                            algo_of(p) == HCCL_PLAN_LEAD_TREE_BROADCAST);
              if (lead && ki == 2)
                assert_true(algo_of(p) == HCCL_PLAN_LEAD_CHAIN_REDUCE ||
                            algo_of(p) == HCCL_PLAN_LEAD_TREE_REDUCE);
              if (on == 0 && leader) {
                first = p;
                continue;
              }
              if (algo_of(p) != algo_of(first) || p.tree_inside != first.tree_inside ||
                  strcmp(name_of(p), name_of(first)) || (p.word == NULL) != (first.word == NULL) ||
                  (p.word && strcmp(p.word, first.word)))
                fail_msg("layout %zu, kind %d, HCCL_ALGO=%s, %zu bytes: server 0's leader plans "
                         "%s, server %u's %s %s",
                         li, (int)kinds[ki], algos[a] ? algos[a] : "(unset)", bytes, name_of(first),
                         on, leader ? "leader" : "other rank", name_of(p));
            }
        }
  /* Unset, the model: through leaders for short messages (the network's latency paid over S
   * leaders, not p ranks), and for long ones where the servers are large (8 + 7: the flat
   * ring's 2(p-1)/p n across each server's link against 2(S-1)/S n); flat for long ones on
   * 2 + 1, where the chain inside costs more than the network bytes it saves. A broadcast
   * or reduce through leaders for short messages too; flat (the pipelined chain) for long
   * ones, whose bytes cross the network once either way while the leaders' steps inside
   * servers no longer overlap with it. */
  static const struct {
    size_t li, bytes;
    enum hccl_coll_kind kind;
    enum hccl_plan_algo algo;
  } want[] = {{0, 4 * K, HCCL_K_ALLREDUCE, HCCL_PLAN_LEAD_HD},
              {1, 4 * K, HCCL_K_ALLREDUCE, HCCL_PLAN_LEAD_HD},
              {2, 4 * K, HCCL_K_ALLREDUCE, HCCL_PLAN_LEAD_HD},
              {0, 64 * M, HCCL_K_ALLREDUCE, HCCL_PLAN_RING_ALLREDUCE},
              {2, 64 * M, HCCL_K_ALLREDUCE, HCCL_PLAN_LEAD_RING},
              {1, 4 * K, HCCL_K_BROADCAST, HCCL_PLAN_LEAD_CHAIN_BROADCAST},
              {1, 4 * K, HCCL_K_REDUCE, HCCL_PLAN_LEAD_CHAIN_REDUCE},
              {1, 64 * M, HCCL_K_BROADCAST, HCCL_PLAN_CHAIN_BROADCAST},
              {2, 64 * M, HCCL_K_REDUCE, HCCL_PLAN_CHAIN_REDUCE}};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    struct shape s;
    make_uneven(&s, layouts[want[i].li], nservers[want[i].li], 0, true, NULL);
    struct hccl_call c = CALL(want[i].kind, want[i].bytes / 4, 4);
    struct hccl_plan p = hccl__plan(&s.v, &c);
    if (algo_of(p) != want[i].algo)
      fail_msg("layout %zu, kind %d, %zu bytes: planned %s", want[i].li, (int)want[i].kind,
               want[i].bytes, name_of(p));
  }
  /* One kernel (pretend servers: every rank's boot id alike): every byte over any link costs
   * the same cores, so the flat ring's S crossings and p - S hops inside add up where the
   * leaders' S crossings and p - S hops inside cost as much or less, at fewer latencies.
   * bench/uneven.sh on 2 + 1 and 4 + 2 + 1 (docs/design.md): from 1 MiB the flat ring took
   * 1.2-1.9x the time of halving-doubling or the leaders (within 5% of each other at 64 MiB),
   * and broadcast through leaders was the fastest; so through leaders above a chunk a step, on
   * every rank alike (from 1 MiB here: eight chunks of the device links' 128 KiB). Up to a
   * chunk, where not crowded (below), and on separate servers (above) the plans are as
   * before. */
  for (size_t li = 0; li < 2; li++)
    for (size_t ki = 0; ki < 3; ki++)
      for (size_t bytes = 4 * K; bytes <= 64 * M; bytes *= 16)
        for (uint32_t on = 0; on < nservers[li]; on++) {
          struct shape s;
          make_uneven(&s, layouts[li], nservers[li], on, true, NULL);
          struct hccl_call c = CALL(kinds[ki], bytes / 4, 4);
          struct hccl_plan apart = hccl__plan(&s.v, &c);
          s.v.one_kernel = true;
          struct hccl_plan p = hccl__plan(&s.v, &c);
          /* Up to a chunk a step one kernel plans as separate servers do. */
          if (bytes <= s.v.world->chunk_bytes) {
            if (algo_of(p) != algo_of(apart))
              fail_msg("one kernel, layout %zu, kind %d, %zu bytes: planned %s, separate servers %s",
                       li, (int)kinds[ki], bytes, name_of(p), name_of(apart));
            continue;
          }
          if (on == 0)
            printf("  one kernel, layout %zu, kind %d, %9zu B -> %s\n", li, (int)kinds[ki], bytes,
                   name_of(p));
          if (!is_lead(algo_of(p)))
            fail_msg("one kernel, layout %zu, kind %d, %zu bytes: planned %s, want through leaders",
                     li, (int)kinds[ki], bytes, name_of(p));
        }
  /* One kernel with more ranks than cores (crowded): a hop between servers up to a chunk costs
   * a wake-up (plan.c's CROWDED_HOP_NS). On 4 + 2 + 1 bench/uneven.sh's forced runs had the
   * leaders' halving-doubling fastest to 64 KiB, their ring from 256 KiB; the model with TCP's
   * own figures chose the ring from 7.5 KB. Above the world's chunk (128 KiB there, the device
   * links' slot) the one-kernel pricing decides, as before. Every rank still plans alike. */
  static const struct {
    size_t bytes;
    enum hccl_plan_algo algo;
  } crowd[] = {{4 * K, HCCL_PLAN_LEAD_HD},
               {16 * K, HCCL_PLAN_LEAD_HD},
               {64 * K, HCCL_PLAN_LEAD_HD},
               {256 * K, HCCL_PLAN_LEAD_RING}};
  /* A reduce of 256 KiB on one kernel (two chunks of the device links' 128 KiB): the flat
   * chain, two of whose six hops move at once, where the leaders' three steps run in turn; a
   * broadcast of as much, and a reduce of 1 MiB, through leaders (bench/uneven.sh). */
  static const struct {
    enum hccl_coll_kind kind;
    size_t bytes;
    enum hccl_plan_algo algo;
  } rooted[] = {{HCCL_K_REDUCE, 256 * K, HCCL_PLAN_CHAIN_REDUCE},
                {HCCL_K_BROADCAST, 256 * K, HCCL_PLAN_LEAD_CHAIN_BROADCAST},
                {HCCL_K_REDUCE, 1 * M, HCCL_PLAN_LEAD_CHAIN_REDUCE}};
  for (size_t i = 0; i < sizeof(rooted) / sizeof(rooted[0]); i++) {
    struct shape s;
    make_uneven(&s, layouts[1], nservers[1], 0, true, NULL);
    s.v.one_kernel = s.v.crowded = true;
    struct hccl_call c = CALL(rooted[i].kind, rooted[i].bytes / 4, 4);
    struct hccl_plan p = hccl__plan(&s.v, &c);
    if (algo_of(p) != rooted[i].algo)
      fail_msg("one kernel 4+2+1, kind %d, %zu bytes: planned %s", (int)rooted[i].kind,
               rooted[i].bytes, name_of(p));
  }
  for (size_t i = 0; i < sizeof(crowd) / sizeof(crowd[0]); i++)
    for (uint32_t on = 0; on < nservers[1]; on++) {
      struct shape s;
      make_uneven(&s, layouts[1], nservers[1], on, true, NULL);
      s.v.one_kernel = s.v.crowded = true;
      struct hccl_call c = CALL(HCCL_K_ALLREDUCE, crowd[i].bytes / 4, 4);
      struct hccl_plan p = hccl__plan(&s.v, &c);
      s.v.crowded = false;
      struct hccl_plan roomy = hccl__plan(&s.v, &c);
      if (on == 0)
        printf("  crowded 4+2+1, allreduce %7zu B -> %s (not crowded: %s)\n", crowd[i].bytes,
               name_of(p), name_of(roomy));
      if (algo_of(p) != crowd[i].algo)
        fail_msg("crowded 4+2+1, server %u, %zu bytes: planned %s", on, crowd[i].bytes,
                 name_of(p));
    }
}

/* The candidates in the order hccl__plan_run tries them, each under the name the records give
 * it when it ran: zero-copy first when offered, then one-shot or staged, then the model's
 * choice, which is always last and always there; the two-level allreduce's forms with
 * zero-copy or staged steps inside servers likewise. */
static void test_plan_candidates(void **st) {
  (void)st;
  static const struct {
    enum hccl_coll_kind kind;
    size_t bytes;
    uint32_t servers, per_server;
    const char *algo_env;
    bool own_cores, backing_off; /* a core for each rank; the allreduce's offers backing off */
    uint32_t n;
    enum hccl_plan_algo algo[HCCL_PLAN_MAX_CANDS];
    const char *name[HCCL_PLAN_MAX_CANDS];
  } cases[] = {
      {HCCL_K_ALLREDUCE, 64 * K, 1, 8, NULL, false, false, 3,
       {HCCL_PLAN_ZERO_COPY, HCCL_PLAN_STAGED, HCCL_PLAN_RING_ALLREDUCE},
       {"zero-copy", "staged", "ring"}},
      {HCCL_K_ALLREDUCE, 64 * K, 1, 8, NULL, false, true, 2,
       {HCCL_PLAN_STAGED, HCCL_PLAN_RING_ALLREDUCE},
       {"staged", "ring"}},
      {HCCL_K_ALLREDUCE, 4 * K, 1, 8, NULL, false, false, 1,
       {HCCL_PLAN_HD_ALLREDUCE},
       {"halving-doubling"}},
      {HCCL_K_ALLREDUCE, 4 * K, 1, 6, NULL, false, false, 2,
       {HCCL_PLAN_ONESHOT, HCCL_PLAN_HD_ALLREDUCE},
       {"one-shot", "halving-doubling"}},
      {HCCL_K_ALLREDUCE, 8 * K, 1, 3, NULL, true, false, 3,
       {HCCL_PLAN_ZERO_COPY, HCCL_PLAN_ONESHOT, HCCL_PLAN_RING_ALLREDUCE},
       {"zero-copy", "one-shot", "ring"}},
      {HCCL_K_ALLREDUCE, 64 * M, 2, 4, NULL, false, false, 3,
       {HCCL_PLAN_HIER_ZCOPY_RING, HCCL_PLAN_HIER_STAGED_RING, HCCL_PLAN_HIER_RING},
       {"two-level, ring between servers, zero-copy inside servers",
        "two-level, ring between servers, staged inside servers",
        "two-level, ring between servers"}},
      {HCCL_K_ALLREDUCE, 4 * K, 2, 4, NULL, false, false, 1,
       {HCCL_PLAN_HIER_HD},
       {"two-level, halving-doubling between servers"}},
      {HCCL_K_ALLREDUCE, 64 * M, 1, 8, "ring", false, false, 1,
       {HCCL_PLAN_RING_ALLREDUCE},
       {"ring"}},
      {HCCL_K_BROADCAST, 1 * M, 1, 8, NULL, false, false, 2,
       {HCCL_PLAN_ZERO_COPY, HCCL_PLAN_CHAIN_BROADCAST},
       {"zero-copy", "chain"}},
      {HCCL_K_REDUCE, 1 * M, 1, 8, NULL, false, false, 1,
       {HCCL_PLAN_CHAIN_REDUCE},
       {"chain"}},
      {HCCL_K_GATHER, 4 * K, 1, 1, NULL, false, false, 1,
       {HCCL_PLAN_DIRECT_GATHER},
       {"local"}},
      {HCCL_K_ALLREDUCE, 64 * M, 1, 1, NULL, false, false, 1,
       {HCCL_PLAN_LOCAL},
       {"local"}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct shape s;
    make_shape(&s, cases[i].servers, cases[i].per_server, cases[i].algo_env);
    s.v.own_cores = cases[i].own_cores;
    if (cases[i].backing_off)
      s.offers[HCCL_ZCOPY_ALLREDUCE] = (struct hccl_zcopy_offers){.calls = 5, .next = 7, .skip = 2};
    struct hccl_call call = CALL(cases[i].kind, cases[i].bytes / 4, 4);
    struct hccl_plan p = hccl__plan(&s.v, &call);
    printf("  case %zu:", i);
    for (uint32_t k = 0; k < p.ncand; k++)
      printf(" %s\"%s\"", k ? "-> " : "", p.cand[k].name);
    printf("\n");
    assert_int_equal(p.ncand, cases[i].n);
    for (uint32_t k = 0; k < p.ncand; k++) {
      assert_int_equal(p.cand[k].algo, cases[i].algo[k]);
      assert_string_equal(p.cand[k].name, cases[i].name[k]);
    }
    assert_ptr_equal(hccl__plan_last(&p), &p.cand[p.ncand - 1]);
  }
}

/* Running a plan reads it and writes nothing of it (hccl__plan_run takes it const; its bytes
 * are compared too) and says which candidate ran, as the plan lists it: on one rank, without
 * processes, an allreduce that copies, one in place that does nothing, and a gather that
 * places the own block. */
static void test_plan_run_keeps_plan(void **st) {
  (void)st;
  struct shape s;
  make_shape(&s, 1, 1, NULL);
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8] = {0}, gathered[8] = {0};
  struct hccl_call calls[3] = {CALL(HCCL_K_ALLREDUCE, 8, 4), CALL(HCCL_K_ALLREDUCE, 8, 4),
                               CALL(HCCL_K_GATHER, 8, 4)};
  calls[0].send = in, calls[0].recv = out;
  calls[1].send = in, calls[1].recv = in;
  calls[2].send = in, calls[2].recv = gathered;
  static const enum hccl_plan_algo ran_algo[3] = {HCCL_PLAN_LOCAL, HCCL_PLAN_LOCAL,
                                                  HCCL_PLAN_DIRECT_GATHER};
  for (int i = 0; i < 3; i++) {
    struct hccl_plan plan = hccl__plan(&s.v, &calls[i]), before;
    memcpy(&before, &plan, sizeof(plan));
    struct hccl_prim p = {.esz = 4, .finish = true};
    struct hccl_ran ran = {.algo = HCCL_PLAN_RING_ALLREDUCE, .name = NULL};
    assert_int_equal(hccl__plan_run(&s.v, &plan, &p, &calls[i], &ran), HCCL_SUCCESS);
    assert_memory_equal(&plan, &before, sizeof(plan));
    assert_int_equal(ran.algo, ran_algo[i]);
    assert_ptr_equal(ran.name, plan.cand[0].name);
    assert_string_equal(ran.name, "local");
  }
  assert_memory_equal(out, in, sizeof(in));
  assert_memory_equal(gathered, in, sizeof(in));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_table),
      cmocka_unit_test(test_plan_backoff),
      cmocka_unit_test(test_plan_zcopy_threshold),
      cmocka_unit_test(test_plan_staged),
      cmocka_unit_test(test_plan_uneven),
      cmocka_unit_test(test_plan_oneshot),
      cmocka_unit_test(test_plan_candidates),
      cmocka_unit_test(test_plan_run_keeps_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
