/*
 * prims.h - the moves every algorithm is made of, on one message of at most a link's slot:
 * receive from one link and/or send to another, optionally reducing what arrives with a local
 * buffer and/or writing the value to an output buffer. Algorithms call only these; these call
 * only the transport ops table.
 *
 * One step computes v = recv (op) local, or recv, or local (whichever inputs are given), then
 * writes v to `out` (if given) and to the send slot (if a send link is given). Reducing
 * straight from the receive slot into the send slot means a byte crosses memory once per hop.
 */
#ifndef HCCL_PRIMS_H
#define HCCL_PRIMS_H

#include <stddef.h>

#include "hccl.h"
#include "reduce.h"
#include "transport.h"
#include "wait.h"

struct hccl_prim {
  const struct hccl_wait *w;
  hccl__reduce_fn reduce; /* NULL for data-moving collectives */
  size_t esz;             /* element size */
};

/* recv_from / send_to may be NULL (no receive / no send); local and out may be NULL. bytes is
 * the size of this message (a multiple of esz, at most the slot size). Fails, naming the peer,
 * when a received message has a size other than `bytes` (the ranks' call sequences differ). */
HcclResult hccl__prim_step(const struct hccl_prim *p, struct hccl_link *recv_from,
                           struct hccl_link *send_to, const void *local, void *out, size_t bytes);

/* Sends or receives a whole buffer of any size as slot-sized messages. */
HcclResult hccl__prim_send(const struct hccl_prim *p, struct hccl_link *to, const void *buf,
                           size_t bytes);
HcclResult hccl__prim_recv(const struct hccl_prim *p, struct hccl_link *from, void *buf,
                           size_t bytes);

/* Symmetric exchange with one partner, chunk by chunk (send chunk i, then receive chunk i), so
 * both sides progress with one slot of room: sends send_bytes from sbuf; receives recv_bytes
 * and writes (received op local) or the received bytes (local == NULL) to out. */
HcclResult hccl__prim_exchange(const struct hccl_prim *p, struct hccl_link *l, const void *sbuf,
                               size_t send_bytes, const void *local, void *out, size_t recv_bytes);

#endif
