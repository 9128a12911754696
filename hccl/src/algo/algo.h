/*
 * algo.h - the collective algorithms. Each runs over a group of ranks (group.h) with the
 * primitives of prims.h; none touches a transport directly. Counts are in elements of p->esz
 * bytes. The caller (coll.c) has validated arguments and handles count 0 and in-place
 * conventions. Roots are MEMBER indices of the group (for the whole communicator, member k is
 * rank k).
 *
 * Positions: ring-based algorithms walk the group's ring (topology-aware order); the halving-
 * doubling and binomial ones number members by ring position too, so their first, largest
 * exchanges stay between neighbours on a server.
 */
#ifndef HCCL_ALGO_H
#define HCCL_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "group.h"
#include "hccl.h"
#include "prims.h"

enum hccl_algo_kind {
  HCCL_ALGO_KIND_RING = 0, /* ring / pipelined chain */
  HCCL_ALGO_KIND_HD = 1,   /* recursive halving-doubling (allreduce), binomial tree (rooted) */
};

HcclResult hccl__ring_allreduce(const struct hccl_group *g, const struct hccl_prim *p,
                                const void *send, void *recv, size_t count);
HcclResult hccl__ring_reduce_scatter(const struct hccl_group *g, const struct hccl_prim *p,
                                     const void *send, void *recv, size_t recv_count);
HcclResult hccl__ring_allgather(const struct hccl_group *g, const struct hccl_prim *p,
                                const void *send, void *recv, size_t send_count);
/* The two halves of a ring allreduce of `count` elements cut into n blocks (block k, member
 * k's, has count/n elements, one more for k < count % n): reduce-scatter leaves block `me` of
 * recv reduced over the group (other blocks of recv are not written); allgather fills every
 * block of buf from its owner's (the own block already in place). */
HcclResult hccl__ring_reduce_scatter_split(const struct hccl_group *g, const struct hccl_prim *p,
                                           const void *send, void *recv, size_t count);
HcclResult hccl__ring_allgather_split(const struct hccl_group *g, const struct hccl_prim *p,
                                      void *buf, size_t count);
HcclResult hccl__chain_broadcast(const struct hccl_group *g, const struct hccl_prim *p, void *buf,
                                 size_t count, uint32_t root);
HcclResult hccl__chain_reduce(const struct hccl_group *g, const struct hccl_prim *p,
                              const void *send, void *recv, size_t count, uint32_t root);

HcclResult hccl__hd_allreduce(const struct hccl_group *g, const struct hccl_prim *p,
                              const void *send, void *recv, size_t count);
HcclResult hccl__binomial_broadcast(const struct hccl_group *g, const struct hccl_prim *p,
                                    void *buf, size_t count, uint32_t root);
HcclResult hccl__binomial_reduce(const struct hccl_group *g, const struct hccl_prim *p,
                                 const void *send, void *recv, size_t count, uint32_t root);
/* Allgather of `count` elements a member by Bruck's algorithm: ceil(log2 n) steps for any n
 * (the ring takes n - 1), one message each way per step over the ring positions 2^k away;
 * recv as hccl__ring_allgather's (member k's block at k * count); count > 0 (a call of 0
 * returns before any algorithm). The blocks in rotated order take n x count elements of the
 * communicator's temp memory (hccl__group_temp). */
HcclResult hccl__bruck_allgather(const struct hccl_group *g, const struct hccl_prim *p,
                                 const void *send, void *recv, size_t count);

/* The dissemination barrier (barrier.c): returns once every member of g has entered it;
 * ceil(log2 n) rounds of empty messages over the ring positions 2^k away. */
HcclResult hccl__dissemination_barrier(const struct hccl_group *g, const struct hccl_prim *p);

/* Two-level allreduce (hier.c): reduce-scatter over `local`, allreduce of the shard over
 * `cross` with cross_kind, allgather over `local`. With *zcopy true the local steps are first
 * offered zero-copy (hccl__zcopy over `local`, the exchange between servers run `between`
 * them), then, with *staged true, staged (hccl__staged_allreduce); *zcopy and *staged say on
 * return which ran (neither: the ring's). */
HcclResult hccl__hier_allreduce(const struct hccl_group *local, const struct hccl_group *cross,
                                enum hccl_algo_kind cross_kind, const struct hccl_prim *p,
                                const void *send, void *recv, size_t count, bool *zcopy,
                                bool *staged);
/* Two-level allreduce through leaders (hier.c), for servers of different counts: reduce to
 * member 0 of `local`, allreduce of the whole over `cross` (the leaders; skipped by the other
 * members) with `between`, broadcast from member 0 over `local`; the steps inside a server by
 * chain (HCCL_ALGO_KIND_RING) or binomial tree (HCCL_ALGO_KIND_HD) as `inside` says. recv is
 * the whole result on every member. */
HcclResult hccl__lead_allreduce(const struct hccl_group *local, const struct hccl_group *cross,
                                enum hccl_algo_kind inside, enum hccl_algo_kind between,
                                const struct hccl_prim *p, const void *send, void *recv,
                                size_t count);

/* Where a broadcast or reduce through leaders starts or ends: the root's server (its leader's
 * member index in the cross group), the root's member index in its local group, and whether
 * this rank is on the root's server. */
struct hccl_lead_root {
  uint32_t server, local;
  bool home;
};
/* Broadcast through leaders (hier.c), for servers of different counts: from the root over its
 * server (`inside`: chain or binomial tree), from the root's server's leader over `cross` (the
 * leaders; `between`), from member 0 over each other server. buf is the whole on return on
 * every member. */
HcclResult hccl__lead_broadcast(const struct hccl_group *local, const struct hccl_group *cross,
                                enum hccl_algo_kind inside, enum hccl_algo_kind between,
                                const struct hccl_prim *p, void *buf, size_t count,
                                const struct hccl_lead_root *root);
/* Reduce through leaders (hier.c): over each server but the root's to its member 0, over
 * `cross` to the root's server's leader, over the root's server to the root (its leader's
 * input being the leaders' result). recv is written on the root only; the leaders' partial
 * results use the communicator's temp memory (hccl__group_temp, count elements). */
HcclResult hccl__lead_reduce(const struct hccl_group *local, const struct hccl_group *cross,
                             enum hccl_algo_kind inside, enum hccl_algo_kind between,
                             const struct hccl_prim *p, const void *send, void *recv,
                             size_t count, const struct hccl_lead_root *root);

/* Where block j of an all-to-all buffer lies: counts[j] elements of esz bytes at element
 * displs[j], or (NULL arrays) count elements at element j * count. */
struct hccl_blocks {
  const uint64_t *counts, *displs;
  uint64_t count;
  size_t esz;
};

/* Data-moving collectives of a2a.c over every member of g (the world group: member k = rank
 * k), making links on first use; p->esz must be 1 (sizes in bytes). */
HcclResult hccl__direct_gather(const struct hccl_group *g, const struct hccl_prim *p,
                               const void *send, void *recv, size_t bytes, uint32_t root);
HcclResult hccl__direct_scatter(const struct hccl_group *g, const struct hccl_prim *p,
                                const void *send, void *recv, size_t bytes, uint32_t root);
HcclResult hccl__pairwise_alltoall(const struct hccl_group *g, const struct hccl_prim *p,
                                   const void *send, const struct hccl_blocks *sb, void *recv,
                                   const struct hccl_blocks *rb);

/* The even cut of count elements into n blocks that the ring's reduce-scatter makes (block j
 * belongs to member j): block j has count/n elements, one more when j < count % n. Returns its
 * element count and sets *first to its first element. */
static inline size_t hccl__even_block(size_t count, uint32_t n, uint32_t j, size_t *first) {
  size_t base = count / n, rem = count % n;
  *first = j * base + (j < rem ? j : rem);
  return base + (j < rem);
}

/* The zero-copy collectives (zcopy.c), over a group on one server: one call as the API makes
 * it. count is the API's: elements of the whole buffer (allreduce, broadcast), of each
 * member's block (allgather's sendCount, reduce-scatter's recvCount). Broadcast: send and
 * recv are both the one buffer, root a member index. In place as the API defines it. */
enum hccl_zcopy_kind {
  HCCL_ZCOPY_ALLREDUCE,
  HCCL_ZCOPY_REDUCE_SCATTER,
  HCCL_ZCOPY_ALLGATHER,
  HCCL_ZCOPY_BROADCAST,
  HCCL_ZCOPY_NKINDS
};
struct hccl_zcopy_call {
  enum hccl_zcopy_kind kind;
  const void *send;
  void *recv;
  size_t count;
  uint32_t root;
  /* Allreduce only, optional: run on this member's block of recv, reduced over the group (c
   * elements in place), between the reduce and the spread; the two-level allreduce's exchange
   * between servers (hier.c). Every member calls it, c of 0 included, and a failure ends the
   * call at once. NULL: each chunk is reduced and spread at once, while it is in cache. */
  HcclResult (*between)(void *arg, void *block, size_t c);
  void *between_arg;
};

/* The bytes of each member's send and receive buffer in call z on n members of esz bytes. */
static inline void hccl__zcopy_shape(const struct hccl_zcopy_call *z, uint32_t n, size_t esz,
                                     size_t *send_bytes, size_t *recv_bytes) {
  size_t block = z->count * esz;
  *send_bytes = z->kind == HCCL_ZCOPY_REDUCE_SCATTER ? block * n : block;
  *recv_bytes = z->kind == HCCL_ZCOPY_ALLGATHER ? block * n : block;
}

/* Runs z zero-copy (*ran = true) when every member's send and receive buffers lie in
 * HcclMemAlloc memory, as every member learns in its first exchange; otherwise returns at once
 * with *ran = false on every member, having moved only the descriptors, and the caller runs
 * another algorithm. p->reduce is the kernel of a reducing call. */
HcclResult hccl__zcopy(const struct hccl_group *g, const struct hccl_prim *p,
                       const struct hccl_zcopy_call *z, bool *ran);

/* Allreduce of ordinary buffers over a group on one server through a staging area every member
 * maps (staged.c); `between` (optional) as struct hccl_zcopy_call's, run on this member's block
 * of recv once reduced. *ran = false on every member alike when the area cannot be had on some
 * member (then nothing but the descriptors moved). */
HcclResult hccl__staged_allreduce(const struct hccl_group *g, const struct hccl_prim *p,
                                  const void *send, void *recv, size_t count,
                                  HcclResult (*between)(void *, void *, size_t),
                                  void *between_arg, bool *ran);

/* The one-shot allreduce over a group on one server (oneshot.c): every member copies its input
 * into an area all members map, arrives once, and reduces every member's copy itself, in
 * rounds of at most HCCL_ONESHOT_ROUND_BYTES. The areas are made and learnt in the group's
 * first call (one exchange of descriptors); *ran = false on every member alike, then and on
 * every later call, when some member has none (nothing but the descriptors moved). For the
 * communicator's world group only (its state keeps one area). */
#define HCCL_ONESHOT_ROUND_BYTES (16u << 10)
HcclResult hccl__oneshot_allreduce(const struct hccl_group *g, const struct hccl_prim *p,
                                   const void *send, void *recv, size_t count, bool *ran);
/* Frees what the one-shot path keeps in s (its area); nothing when it never ran. */
void hccl__oneshot_free(struct hccl_algo_state *s);

#endif
