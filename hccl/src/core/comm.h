/*
 * comm.h - the communicator: who the ranks are, where they run, the links between them, the
 * ring order, and the queue of asynchronous calls. Internal to libhccl.
 */
#ifndef HCCL_COMM_H
#define HCCL_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "algo.h"
#include "coll_run.h"
#include "group.h"
#include "hccl.h"
#include "log.h"
#include "peer.h"
#include "plan.h"
#include "progress.h"
#include "settings.h"
#include "transport.h"
#include "wait.h"

struct hccl_store;
struct hccl_store_server;
struct hccl_p2p;
struct hccl_tree;

/* The bootstrap's state of a communicator (struct hccl_comm's `boot`): the part of comm.c, and
 * of the files that make communicators (comm_init.c, comm_split.c, comm_shrink.c). */
struct hccl_boot {
  struct hccl_store *store;
  struct hccl_store_server *server; /* rank 0 owns the bootstrap server */
  bool store_external;              /* the caller's store (HcclCommInitStore): not ours to stop */
  /* Where the job met, for HcclCommShrink (comm_shrink.c) to meet again without the excluded
   * ranks: rank 0's store address and job token (it serves the store again there), or the
   * caller's store (store_user.set != NULL); and the shrinks made from this communicator so
   * far, which name the next one's keys ("<key_prefix>/s<n>") with no message sent. */
  char store_host[256];
  uint16_t store_port;
  char store_token[129];
  HcclStore store_user;
  uint32_t shrinks;
  bool shrunk; /* made by HcclCommShrink: placement takes any count per server (place.h) */
  /* A communicator made from a parent (comm_split.c) runs its bootstrap's rounds through this
   * instead of a store: an allgather of one record of len bytes per rank into all[], in rank
   * order. NULL: the store's rounds (bootstrap/rounds.c). */
  HcclResult (*round_fn)(void *arg, const char *round, const void *mine, size_t len, void *all);
  void *round_arg;
  /* Every member's transport blobs are in peers[] before setup (a split group's, from the
   * parent's round: comm_split.c), so the bootstrap skips its "conn" round. */
  bool conn_known;
  uint32_t splits; /* HcclCommSplit calls on this communicator so far (ranks must agree) */
  /* Its bootstrap's binomial tree of sockets (bootstrap/rounds.h), kept open after the store's
   * part ended on a communicator whose rounds ran over it: HcclCommSplit's parent round runs
   * there (comm_split.c). NULL on a split's child, a one-rank communicator, or after a round
   * over it failed. */
  struct hccl_tree *tree;
};

struct hccl_comm {
  uint32_t rank, nranks;
  int32_t device;
  uint32_t local_rank, local_nranks; /* on this server */
  uint32_t max_local_nranks;         /* on the server with the most ranks */
  uint32_t nservers;
  bool uneven; /* servers of different counts (topo/place.h): 2 + 1, 3 + 2 */
  bool one_kernel; /* uneven, and every rank's kernel boot id alike (comm.c's "ready" round) */
  bool crowded;    /* one_kernel, and more ranks than the machine's online CPUs */
  struct hccl_settings cfg;
  struct hccl_peer_info *peers; /* [nranks] */
  uint32_t *local_index;        /* [nranks]: index among its server's ranks */
  uint32_t *server_of;          /* [nranks]: its server's index (placement order); NULL until placed */
  /* What the transports see of this communicator (transport.h): rank, peers, settings, each
   * transport's state, and the link tables: tx.links[HCCL_CHANNEL_COLL] (collectives) and
   * tx.links[HCCL_CHANNEL_P2P] (point-to-point), [nranks] each, NULL for self. */
  struct hccl_tctx tx;
  /* The groups algorithms run over (algo/group.h): every rank in the topology-aware ring
   * order (servers in order, each server's ranks in its topology's ring order); this
   * server's ranks; the ranks with this rank's local index, one per server. */
  struct hccl_group world, local, cross;
  struct hccl_algo_state astate; /* what the groups share: transports, scratch, temp (group.h) */
  struct hccl_waiter waiter;     /* this communicator's side of every wait (comm_wait.c) */

  struct hccl_log_ctx log; /* rank and name its log lines carry; bound by every entry point */

  char key_prefix[96]; /* the keys of its bootstrap; the name of the communicator */
  struct hccl_boot boot; /* the store, the rounds, the kept tree (below) */
  /* This job's run: an id unique to the job and to this start of it (a restart draws a new
   * one), the same on every rank, and when it began (microseconds since 1970). A
   * communicator made while another is live in the process takes that one's run, so a job's
   * groups share it. The flight recorder's file names carry it. */
  uint64_t run;
  int64_t run_start_us;
  bool run_counted; /* counted in the process's live communicators of a run (comm.c) */

  /* After a failure the communicator is unusable; the first failure's code stays here. */
  _Atomic int broken;  /* set after broken_msg is written */
  _Atomic int failing; /* claimed by the first failure, which writes broken_msg */
  char broken_msg[HCCL_REASON_MAX];

  struct hccl_queue queue; /* the asynchronous calls and their worker thread (coll_run.h) */
  uint64_t coll_seq; /* collectives started so far (fingerprint.h) */
  /* The zero-copy back-off per collective (enum hccl_zcopy_kind), kept by algo/plan.c. */
  struct hccl_zcopy_offers zcopy[HCCL_ZCOPY_NKINDS];
  uint64_t zcopy_ran; /* coll_seq + 1 of the last call that ran zero-copy, the two-level
                       * allreduce's zero-copy steps inside a server too (tests read it) */
  uint64_t staged_ran; /* the same for the staged allreduce (algo/staged.c) */
  uint64_t oneshot_ran; /* and for the one-shot allreduce (algo/oneshot.c) */
  /* The size from which calls offer zero-copy (algo/plan.c); 0, as made: plan.c's
   * measured threshold. Only tests change it, on every rank alike, to run the zero-copy path
   * on the few-element calls that put empty blocks at its edges. */
  size_t zcopy_min_bytes;
  bool own_cores; /* online CPUs >= local_nranks (the planner's zero-copy threshold) */
  uint8_t *same_core; /* [nranks]: the waiter's same_core (base/wait.h), or NULL */

  /* Ops made by HcclRedOpCreatePreMulSum (coll.c): op HCCL__PREMUL_OP_BASE + i is premul[i]. */
  struct hccl_premul *premul;
  uint32_t npremul;

  /* Point-to-point: the engine thread (p2p.c), made on first use. */
  struct hccl_p2p *p2p_engine;

  /* The diagnostics, each the part of the file that owns it: where this rank publishes its
   * progress and the lock of a peer's query for it (progress.h), the HCCL_TRACE_FILE recorder
   * (trace.h) and the HCCL_FLIGHT_RECORDER_DIR ring (flight.h), NULL when off. */
  struct hccl_progress_part progress;
  struct hccl_trace *trace;
  struct hccl_fr *fr;
};

/* A communicator of nranks with this rank and settings, nothing made yet (comm.c); NULL when
 * out of memory. */
struct hccl_comm *hccl__comm_alloc(const struct hccl_settings *cfg, uint32_t rank,
                                   uint32_t nranks);
/* Runs the bootstrap on c, whose store, rank, size and key prefix are set: the rounds, the
 * placement, the transports, the groups, the links (comm.c). */
HcclResult hccl__comm_bootstrap(struct hccl_comm *c);
/* What a rank of nranks with settings cfg publishes in the bootstrap's "info" round; rank 0
 * also proposes the run (the process's live one, else a new one). comm_split.c sends it with
 * the split's first exchange, so a split group needs no "info" round of its own. */
void hccl__peer_self(const struct hccl_settings *cfg, uint32_t rank, uint32_t nranks,
                     struct hccl_peer_info *self);
/* Frees c and everything it made: links, transports, the store (comm.c). */
void hccl__comm_free(struct hccl_comm *c);

/* What a store server of this job checks (bootstrap/trust.h): token ("" = none), and the
 * whitelist when HCCL_WHITELIST_DISABLE=0 (comm_init.c). */
struct hccl_store_trust;
HcclResult hccl__comm_store_trust(const struct hccl_settings *cfg, const char *token,
                                  struct hccl_store_trust *t);
/* A config's non-zero fields replace the environment's values in *cfg; HCCL_E_PARA naming the
 * field when one is out of range (comm_init.c). */
HcclResult hccl__comm_config_apply(const HcclCommConfig *cf, struct hccl_settings *cfg);

/* Connects c->boot.store to rank 0's store server at host:port with the job's token, once that
 * server holds `key` = want[0..len): a server still finishing an earlier communicator's
 * bootstrap (rank 0 not done with it yet) is left and tried again, until the connect timeout
 * (HCCL_E_TIMEOUT naming c's keys and the address) (comm_init.c). */
HcclResult hccl__comm_store_join(struct hccl_comm *c, const char *host, uint16_t port,
                                 const char *token, const char *key, const void *want,
                                 size_t len);

#endif
