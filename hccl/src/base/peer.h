/*
 * peer.h - what each rank publishes about itself at bootstrap (struct hccl_peer_info): plain
 * data of a fixed size, exchanged through the store (core/comm.c), read by the core (placement,
 * agreement checks, the run) and by the transports (same server or not, the pid a dead peer is
 * watched by, and each transport's connection blob).
 */
#ifndef HCCL_PEER_H
#define HCCL_PEER_H

#include <stdint.h>

/* Per-transport slots: a peer info's conn[] and a transport context's state[] (transport.h).
 * Each transport owns the index in its ops table. */
#define HCCL_MAX_TRANSPORTS 4
#define HCCL_CONN_BYTES 64

struct hccl_peer_info {
  uint32_t rank;
  uint32_t nranks;
  int32_t device;
  int32_t pid;
  int32_t cpu; /* the one CPU this rank may run on (hccl__wait_pinned_cpu), -1: more than one */
  char device_src[24]; /* where device came from: "HcclSetDevice", "DEVICE_ID", ... */
  uint64_t host_hash; /* same server = same hash (host name, boot id, network namespace) */
  char host[64];
  uint64_t buffsize;
  int32_t algo;
  /* The run rank 0 proposes (core/comm.c, run_propose); every rank takes rank 0's. */
  uint64_t run;
  int64_t run_start_us;
  /* What each transport needs to connect to this rank, opaque to the core (transport.h). */
  uint8_t conn[HCCL_MAX_TRANSPORTS][HCCL_CONN_BYTES];
};

#endif
