/*
 * coll.h - what the rest of the core asks of the collective entry (coll.c). comm.c includes
 * this, coll.c includes comm.h: the dependency runs one way, from the calls to the
 * communicator.
 */
#ifndef HCCL_COLL_H
#define HCCL_COLL_H

struct hccl_comm;

/* Finishes queued calls and stops the worker thread; HcclCommDestroy calls it first. */
void hccl__coll_shutdown(struct hccl_comm *comm);

#endif
