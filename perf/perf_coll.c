/*
 * perf_coll.c - the table of collective descriptions (see perf_coll.h). Each collective is a
 * shape function (counts for a size), a block function (the reference result) and its bus
 * bandwidth factor; nothing here runs a call or touches a buffer.
 *
 *   collective      send   recv   count   in place (input / result)   busbw / algbw
 *   allreduce       n      n      n       same buffer                 2(p-1)/p
 *   allgather       b      b*p    b       at slot rank / whole        (p-1)/p
 *   reduce_scatter  b*p    b      b       whole / at slot rank        (p-1)/p
 *   broadcast       n      n      n       same buffer                 1
 *   reduce          n      n      n       same buffer                 1
 *   alltoall        b*p    b*p    b       none                        (p-1)/p
 *   sendrecv        n      n      n       none                        1
 * n = size / type size; b = n / p rounded down to 16 bytes. The size column is the larger of
 * send and recv in bytes, and algbw = size / time.
 */
#include "perf_coll.h"

/* n / p elements, rounded down to a multiple of 16 bytes. */
static size_t per_rank(size_t n, size_t es, int p) {
  return n / (size_t)p & ~(16 / es - 1);
}

static void shape_whole(size_t n, size_t es, int p, struct perf_shape *sh) {
  *sh = (struct perf_shape){.send = n, .recv = n, .count = n};
}

static void shape_allgather(size_t n, size_t es, int p, struct perf_shape *sh) {
  size_t b = per_rank(n, es, p);
  *sh = (struct perf_shape){.send = b, .recv = b * p, .count = b, .send_at = b};
}

static void shape_reduce_scatter(size_t n, size_t es, int p, struct perf_shape *sh) {
  size_t b = per_rank(n, es, p);
  *sh = (struct perf_shape){.send = b * p, .recv = b, .count = b, .recv_at = b};
}

static void shape_alltoall(size_t n, size_t es, int p, struct perf_shape *sh) {
  size_t b = per_rank(n, es, p);
  *sh = (struct perf_shape){.send = b * p, .recv = b * p, .count = b};
}

#define BLOCK(name)                                                                                \
  static struct perf_block name(int rank, int p, int root, int inplace, size_t k, size_t len)

BLOCK(block_allreduce) {
  return (struct perf_block){.src = PERF_SRC_RESULT};
}

/* Block k is rank k's input. */
BLOCK(block_allgather) {
  return (struct perf_block){.src = PERF_SRC_INPUT, .rank = (int)k};
}

/* The rank's own slot of the reduction. */
BLOCK(block_reduce_scatter) {
  return (struct perf_block){.src = PERF_SRC_RESULT, .at = (size_t)rank * len};
}

/* The root's input everywhere; the root's own receive buffer is not part of an out-of-place
 * call (struct perf_call). */
BLOCK(block_broadcast) {
  if (rank == root && !inplace) return (struct perf_block){.src = PERF_SRC_UNTOUCHED};
  return (struct perf_block){.src = PERF_SRC_INPUT, .rank = root};
}

/* The reduction on the root; elsewhere the buffer keeps what it had: the input in place,
 * the sentinel out of place. */
BLOCK(block_reduce) {
  if (rank == root) return (struct perf_block){.src = PERF_SRC_RESULT};
  if (inplace) return (struct perf_block){.src = PERF_SRC_INPUT, .rank = rank};
  return (struct perf_block){.src = PERF_SRC_UNTOUCHED};
}

/* Block k is what rank k sent to this rank: its block number `rank`. */
BLOCK(block_alltoall) {
  return (struct perf_block){.src = PERF_SRC_INPUT, .rank = (int)k, .at = (size_t)rank * len};
}

/* The input of the rank before this one on the ring. */
BLOCK(block_sendrecv) {
  return (struct perf_block){.src = PERF_SRC_INPUT, .rank = (rank - 1 + p) % p};
}

const struct perf_coll_desc perf_colls[PERF_NCOLLS] = {
    [PERF_ALLREDUCE] = {.name = "allreduce",
                        .reduces = 1,
                        .inplace = 1,
                        .bus_mul = 2.0,
                        .bus_part = 1,
                        .shape = shape_whole,
                        .block = block_allreduce},
    [PERF_ALLGATHER] = {.name = "allgather",
                        .inplace = 1,
                        .per_peer = 1,
                        .bus_mul = 1.0,
                        .bus_part = 1,
                        .shape = shape_allgather,
                        .block = block_allgather},
    [PERF_REDUCE_SCATTER] = {.name = "reduce_scatter",
                             .reduces = 1,
                             .inplace = 1,
                             .bus_mul = 1.0,
                             .bus_part = 1,
                             .shape = shape_reduce_scatter,
                             .block = block_reduce_scatter},
    [PERF_BROADCAST] = {.name = "broadcast",
                        .rooted = 1,
                        .inplace = 1,
                        .bus_mul = 1.0,
                        .shape = shape_whole,
                        .block = block_broadcast},
    [PERF_REDUCE] = {.name = "reduce",
                     .reduces = 1,
                     .rooted = 1,
                     .inplace = 1,
                     .bus_mul = 1.0,
                     .shape = shape_whole,
                     .block = block_reduce},
    [PERF_ALLTOALL] = {.name = "alltoall",
                       .per_peer = 1,
                       .bus_mul = 1.0,
                       .bus_part = 1,
                       .shape = shape_alltoall,
                       .block = block_alltoall},
    [PERF_SENDRECV] = {.name = "sendrecv",
                       .bus_mul = 1.0,
                       .shape = shape_whole,
                       .block = block_sendrecv},
};

const char *perf_coll_name(perf_coll c) {
  return (unsigned)c < PERF_NCOLLS ? perf_colls[c].name : "unknown";
}
