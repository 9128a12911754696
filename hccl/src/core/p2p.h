/*
 * p2p.h - the point-to-point engine (p2p.c): HcclSend/HcclRecv/HcclRecvAny post to it; the
 * communicator stops it on destroy. Internal to libhccl.
 */
#ifndef HCCL_P2P_H
#define HCCL_P2P_H

struct hccl_comm;

/* Lets the engine finish (or fail, each by its deadline) every posted op, stops its thread and
 * frees the requests nobody waited for. Before the links close. No-op if it never started. */
void hccl__p2p_shutdown(struct hccl_comm *comm);

#endif
