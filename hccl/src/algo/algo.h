/*
 * algo.h - the collective algorithms. Each runs on one communicator with the primitives of
 * prims.h; none touches a transport directly. Counts are in elements of p->esz bytes. The
 * caller (coll.c) has validated arguments and handles count 0 and in-place conventions.
 *
 * Positions: ring-based algorithms walk comm->ring (topology-aware order); the halving-
 * doubling and binomial ones number ranks by ring position too, so their first, largest
 * exchanges stay between neighbours on a server.
 */
#ifndef HCCL_ALGO_H
#define HCCL_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "hccl.h"
#include "prims.h"

struct hccl_comm;

enum hccl_algo_kind {
  HCCL_ALGO_KIND_RING = 0, /* ring / pipelined chain */
  HCCL_ALGO_KIND_HD = 1,   /* recursive halving-doubling (allreduce), binomial tree (rooted) */
};

HcclResult hccl__ring_allreduce(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                                void *recv, size_t count);
HcclResult hccl__ring_reduce_scatter(struct hccl_comm *c, const struct hccl_prim *p,
                                     const void *send, void *recv, size_t recv_count);
HcclResult hccl__ring_allgather(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                                void *recv, size_t send_count);
HcclResult hccl__chain_broadcast(struct hccl_comm *c, const struct hccl_prim *p, void *buf,
                                 size_t count, uint32_t root);
HcclResult hccl__chain_reduce(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                              void *recv, size_t count, uint32_t root);

HcclResult hccl__hd_allreduce(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                              void *recv, size_t count);
HcclResult hccl__binomial_broadcast(struct hccl_comm *c, const struct hccl_prim *p, void *buf,
                                    size_t count, uint32_t root);
HcclResult hccl__binomial_reduce(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                                 void *recv, size_t count, uint32_t root);
HcclResult hccl__dissemination_barrier(struct hccl_comm *c, const struct hccl_prim *p);

/* Where block j of an all-to-all buffer lies: counts[j] elements of esz bytes at element
 * displs[j], or (NULL arrays) count elements at element j * count. */
struct hccl_blocks {
  const uint64_t *counts, *displs;
  uint64_t count;
  size_t esz;
};

/* Data-moving collectives of a2a.c; p->esz must be 1 (sizes in bytes). */
HcclResult hccl__direct_gather(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                               void *recv, size_t bytes, uint32_t root);
HcclResult hccl__direct_scatter(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                                void *recv, size_t bytes, uint32_t root);
HcclResult hccl__pairwise_alltoall(struct hccl_comm *c, const struct hccl_prim *p, const void *send,
                                   const struct hccl_blocks *sb, void *recv,
                                   const struct hccl_blocks *rb);

/* The cost model: which algorithm an allreduce / broadcast / reduce of `bytes` uses on this
 * communicator, unless HCCL_ALGO forces one. */
enum hccl_algo_kind hccl__select_allreduce(const struct hccl_comm *c, size_t bytes);
enum hccl_algo_kind hccl__select_rooted(const struct hccl_comm *c, size_t bytes);

#endif
