/*
 * coll.h - one collective call as the entry points (coll.c) describe it and coll_run.c runs
 * it (coll_run.h: how it runs, and the call queue), and the ops HcclRedOpCreatePreMulSum makes.
 * coll.c and coll_run.c include comm.h: the dependency runs one way, from the calls to the
 * communicator.
 */
#ifndef HCCL_COLL_H
#define HCCL_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll_kind.h"
#include "hccl.h"

/* A validated call. */
struct hccl_op {
  enum hccl_coll_kind kind;
  const void *send;
  void *recv;
  size_t count;    /* alltoall: sendCount */
  HcclDataType dt; /* alltoall(v): sendType */
  /* count elements of dt (a block's, where count is a block's; 0 for a barrier and an
   * alltoallv): the call's size, computed once by coll.c's checks and passed down to the
   * planner and the algorithms (struct hccl_call's bytes). */
  size_t bytes;
  HcclReduceOp op; /* a built-in op, or HCCL__RED_PREMUL_SUM (algo/reduce.h) */
  uint64_t scalar; /* PREMUL_SUM: the scalar's bytes (one element of dt), read at submission */
  uint32_t root;
  size_t recv_count;    /* alltoall */
  HcclDataType recv_dt; /* alltoall(v) */
  /* alltoallv: sendCounts, sdispls, recvCounts, rdispls, nranks each. The caller's arrays for a
   * call run at once; a copy, freed when the call is done, for a queued one. */
  const uint64_t *v;
  bool v_owned;
  uint64_t fr_id; /* its flight recorder entry, once queued (flight.h) */
  /* The type the user passed, as HcclSetCallUserType named it on the calling thread: its code
   * + 1; 0 for none (the call as made). Only the fingerprint reads it, for messages. */
  uint32_t user_type;
};

/* An op made by HcclRedOpCreatePreMulSum: the scalar's type, and its value (read at creation)
 * or where each call reads it. */
struct hccl_premul {
  bool used;
  HcclDataType dt;
  HcclScalarResidence residence;
  uint64_t value;
  const void *at;
};
/* The value of the first op HcclRedOpCreatePreMulSum hands out; op v is premul[v - base]. */
#define HCCL__PREMUL_OP_BASE 256

#endif
