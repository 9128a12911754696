/*
 * rounds.h - the bootstrap's rounds: each rank gives one record and gets every rank's. The
 * store only introduces the ranks: each publishes the address of a bootstrap listener of its
 * own under "<prefix>/tree/<rank>" and reads its parent's in a binomial tree; the records then
 * move over the tree's sockets (gathered up, the whole sent down), so rank 0's store serves
 * O(n) bytes in all, not n^2 records. The store's part ends with a "done" handshake so no
 * rank loses the store while it still reads. core/comm.c runs the rounds ("info", "conn",
 * "ready") and decides what the records hold.
 */
#ifndef HCCL_ROUNDS_H
#define HCCL_ROUNDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hccl.h"

struct hccl_store;
struct hccl_store_server;
struct hccl_tree;

/* What the rounds are given of a communicator, and all they read: its store, the prefix of its
 * keys, who this rank is among how many, and how long to wait. core/comm.c fills one where it
 * runs a round; the rounds never see the communicator. */
struct hccl_rounds {
  struct hccl_store *store;
  struct hccl_store_server *server; /* rank 0's store server, or NULL: finish stops it */
  bool store_external;              /* the caller's store: "done" only after a failure, and a
                                     * timeout names the connect timeout, not
                                     * HCCL_CONNECT_TIMEOUT */
  const char *key_prefix;           /* keys are "<key_prefix>/<round>/..." */
  uint32_t rank, nranks;
  int64_t connect_timeout_ms; /* each round's deadline, and each "done" wait's */
  /* The address (port ignored) this rank's bootstrap listener binds, where its peers reach
   * it; AF_UNSPEC (zeroed): 127.0.0.1 (one host: tests). */
  struct sockaddr_storage bind;
  /* This rank's sockets to its tree parent and children: made by the first round, closed by
   * hccl__round_finish unless hccl__round_keep_tree took them. NULL until then. */
  struct hccl_tree *tree;
  /* The setting whose value connect_timeout_ms holds, as the user set it, for the timeout
   * message: HCCL_CONNECT_TIMEOUT, a framework's own (torch's timeout=, HcclCommConfig's
   * timeoutSource), "HCCL_EXEC_TIMEOUT" for a round over a kept tree; NULL: HCCL_CONNECT_TIMEOUT
   * (or "the connect timeout" with an external store). Set for a round over a kept tree (no
   * store: store NULL): a check asked
   * every 100 ms of a wait and after a peer's socket closes, whose failure (logged by it: the
   * communicator's abort, say) ends the round with its result. */
  const char *timeout_name;
  HcclResult (*check)(void *arg);
  void *check_arg;
  /* Set by each round: after a failure, the rank every rank of the tree names as the one that
   * failed (a missing rank, a peer whose socket closed without a word, or the rank a failure
   * record from a neighbour names); UINT32_MAX when none is (a timeout, a check's failure: its
   * message says). core/comm_split.c marks the parent's abort with it. */
  uint32_t blame;
};

/* A hash of the kernel's boot id, the same in every network namespace of one machine and
 * different between machines (and boots); 0 when unreadable. */
uint64_t hccl__boot_id_hash(void);

/* Same value for every process of one server (host name, boot id, network namespace); the
 * host name is written to host. */
uint64_t hccl__host_identity(char *host, size_t len);

/* Gives `mine` (len bytes, the same len on every rank) for round `round` and fills
 * all[r * len] with every rank's, in rank order. The first round opens rd->tree (one store SET
 * and one GET a rank). Waits up to the connect timeout for the round; the failure names the
 * rank missing, or the world size that differs, on every rank (a rank that fails sends its
 * neighbours a record of why, which each passes on, and closes its sockets, so every rank
 * fails at once naming the rank that failed, rd->blame, rather than its neighbour). */
HcclResult hccl__round_allgather(struct hccl_rounds *rd, const char *round, const void *mine,
                                 size_t len, void *all);

/* Takes rd->tree from the rounds (rd->tree becomes NULL), so hccl__round_finish leaves its
 * sockets open: later rounds among the same ranks (HcclCommSplit's parent round, core/
 * comm_split.c) run over it with rd->store NULL. Turns TCP keepalive on for its sockets (a
 * probe after 10 idle seconds, the socket failed after 12 unanswered 5 s apart: rounds.c), so
 * no NAT or firewall drops them for idleness and a path that died is found within 70 s. NULL
 * when no round opened one. */
struct hccl_tree *hccl__round_keep_tree(struct hccl_rounds *rd);

/* The kept tree's sockets (its parent's, its children's), at most max of them in fds; returns
 * how many. For tests and diagnostics: the tree owns them. */
int hccl__tree_fds(const struct hccl_tree *t, int *fds, int max);

/* Closes a kept tree's sockets (its neighbours' next round over it fails at once). NULL: none. */
void hccl__tree_close(struct hccl_tree *t);

/* Ends the store's part of the bootstrap, on success and on failure alike, closing rd->tree
 * and rd->store and stopping rd->server (rank 0's), and setting them to NULL: the caller forgets its own
 * pointers to them too. all_joined: every rank published its "info" record; failed: the
 * bootstrap failed after that (the same checks fail on every rank). */
void hccl__round_finish(struct hccl_rounds *rd, bool all_joined, bool failed);

#endif
