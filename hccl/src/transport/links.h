/*
 * links.h - a communicator's link tables (struct hccl_tctx's links[], transport.h), filled by
 * links.c: the links made at init and the ones made on first use, each with the first transport
 * of the priority table that can join the pair. With transport.h, the only header of transport/
 * the core and the algorithms include: each transport's own headers are private to its room
 * (transport/shm/, transport/tcp/).
 */
#ifndef HCCL_LINKS_H
#define HCCL_LINKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"
#include "transport.h"

/* Connects the links a communicator makes at init (links.c): both channels to every rank of
 * this server (the device links), and channel 0 to every rank with need[rank] set (the partners
 * of the collective algorithms, algo/group.c). Every other link is made on first use. */
HcclResult hccl__links_connect(struct hccl_tctx *tx, const bool *need);

/* The link to `peer` on `channel` (tx->links[channel]), made now if it is not there, with the
 * first transport in the table that can join the pair. *out is NULL when `mode` does not wait
 * and the link is not made yet. Fails naming the pair (no transport, the transport's reason,
 * HCCL_CONNECT_TIMEOUT). */
HcclResult hccl__link_get(struct hccl_tctx *tx, int channel, uint32_t peer, int mode,
                          struct hccl_link **out);

/* The transport hccl__link_get would make the link to `peer` with (NULL if none), and in
 * *slot that link's slot_bytes (0: unknown), without making it. */
const struct hccl_transport_ops *hccl__link_expect(const struct hccl_tctx *tx, uint32_t peer,
                                                   size_t *slot);

#endif
