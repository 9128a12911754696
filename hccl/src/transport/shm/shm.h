/*
 * shm.h - what the shared-memory transport's two files share: a link (struct shm_link, with
 * the peer's area it sends into and the windows it keeps). Internal to shm.c (the ops table
 * over the device-link areas) and shm_window.c (mapping a peer's HcclMemAlloc region for the
 * zero-copy collectives); opaque to everything else, which holds a `struct hccl_link *`.
 * Who calls whom: shm.c -> shm_window.c; never back.
 */
#ifndef HCCL_SHM_H
#define HCCL_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

struct shm_header;
struct shm_fifo;

struct shm_area {
  struct shm_header *hdr;
  struct shm_fifo *fifos;
  char *data;
  size_t bytes;
};

/* A peer's HcclMemAlloc region mapped here (map_window), kept for its next calls. torch_hccl's
 * allocator makes each arena as large as all before it, so 8 cover 128 GiB of tensors. */
#define SHM_WINDOWS 8
struct shm_window {
  uint64_t serial; /* 0: empty */
  char *base;
  size_t bytes;
  uint64_t used; /* the link's use counter when last used: the least recent is replaced */
};

struct shm_link {
  struct hccl_link base;
  struct shm_window win[SHM_WINDOWS];
  uint64_t win_uses;
  int channel;
  struct shm_area peer; /* the peer's area (we send into fifo[my local index]) */
  struct shm_fifo *sfifo;
  char *sdata;
  uint32_t sent, head_seen;
  struct shm_fifo *rfifo; /* in our own area: fifo[peer local index] */
  char *rdata;
  uint32_t received;
  int pidfd;
};

/* The map_window op (transport.h): the address of w's offset in the peer's region, mapped on
 * first use and kept among the link's SHM_WINDOWS (the least recently used replaced). */
HcclResult hccl__shm_map_window(struct hccl_link *base, const struct hccl_window *w, void **ptr);

#endif
