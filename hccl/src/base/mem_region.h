/*
 * mem_region.h - HcclMemAlloc's regions: memory a rank's peers on the same server can map, and
 * the lookup that tells whether a buffer lies in one (for the zero-copy collectives,
 * algo/zcopy.c).
 */
#ifndef HCCL_MEM_REGION_H
#define HCCL_MEM_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"

/* HcclMemAlloc/HcclMemFree's work (core/process.c holds the entry points; algo/group.c
 * allocates its staging area here too): *ptr = `size` bytes (rounded up to pages) of a new
 * region, zeroed; HCCL_E_PARA for size 0 or too large, HCCL_E_PTR for a NULL ptr,
 * HCCL_E_MEMORY/HCCL_E_SYSCALL when the system refuses. _free: NULL is accepted; any pointer
 * _alloc did not return is HCCL_E_PARA. Messages name the public calls. */
HcclResult hccl__mem_alloc(void **ptr, size_t size);
HcclResult hccl__mem_free(void *ptr);

/* A buffer inside a peer's HcclMemAlloc region as its owner describes it (mem_region.c): the
 * region's memfd in the owner, its serial number and size, and the buffer's offset in it.
 * fd < 0: the buffer is not in such memory. */
struct hccl_window {
  int32_t fd;
  uint32_t pad;
  uint64_t serial, region_bytes, offset;
};

/* Describes [ptr, ptr + bytes) as a window its peers can map, or returns false (w->fd = -1)
 * when the range is not inside one HcclMemAlloc region, or is inside one this process
 * inherited through fork (copy-on-write here, so not what a peer would map). */
bool hccl__mem_window(const void *ptr, size_t bytes, struct hccl_window *w);

/* HcclMemDiscard's work: the whole pages inside [ptr, ptr + size), which must lie in one
 * region, are given back to the system (MADV_REMOVE on its memfd: they read as zeros when next
 * touched, in every process that maps them), after the watchers were told. HCCL_E_PARA (the
 * message names HcclMemDiscard) for a range outside one region or in one a fork made private. */
HcclResult hccl__mem_discard(void *ptr, size_t size);

/* Watching pages going (a transport's registration cache, transport/rdma/rdma_reg.c, drops
 * what it registered of them first: a registration pins the pages it had, which the addresses
 * no longer show after this): fn(arg, serial, off, len) is called with bytes [off, off + len)
 * of region `serial` for each region HcclMemFree frees from now on (its whole size, after the
 * region left the list and before it is unmapped) and for each range HcclMemDiscard gives back
 * (before it does), on the calling thread, until hccl__mem_unwatch. Returns the watch's id, or
 * -1 (logged) when HCCL_MEM_WATCHERS are in use. _unwatch returns once no call of that watch
 * runs. */
#define HCCL_MEM_WATCHERS 64
int hccl__mem_watch(void (*fn)(void *arg, uint64_t serial, uint64_t off, uint64_t len),
                    void *arg);
void hccl__mem_unwatch(int id);

/* The name every region's memfd carries, "hccl-mem-<serial>": a peer that opened the
 * descriptor through /proc checks it names the region it was told about. */
#define HCCL_MEM_NAME_FMT "hccl-mem-%llu"

#endif
