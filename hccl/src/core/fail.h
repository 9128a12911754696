/*
 * fail.h - breaking a communicator after a failure (fail.c). Its own header, not comm.h's: the
 * paths that fail a communicator (coll_run.c, p2p.c) and the one that makes and destroys it
 * (comm.c) reach it here, and fail.c calls none of them, so they do not call each other in a
 * circle.
 */
#ifndef HCCL_FAIL_H
#define HCCL_FAIL_H

#include <stdint.h>

#include "hccl.h"

struct hccl_comm;

/* Marks the communicator broken after a failed collective, keeping the last error message,
 * and tells every peer (transport abort) so their waits fail too. */
void hccl__comm_fail(struct hccl_comm *comm, HcclResult code);

/* hccl__comm_fail with the peers told that rank `origin` failed (their messages say "rank
 * <origin> failed: <this rank's message>"): a split's parent round names the rank its
 * bootstrap tree found dead, not the rank that found it. */
void hccl__comm_fail_blame(struct hccl_comm *comm, HcclResult code, uint32_t origin);

#endif
