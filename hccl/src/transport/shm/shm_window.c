/*
 * shm_window.c - the shared-memory transport's zero-copy windows: a peer's HcclMemAlloc region
 * (a memfd of mem_region.c) opened through /proc/<pid>/fd, checked to be still the region it was
 * described as, mapped here and kept among the link's few windows for its next calls, so that a
 * collective can read or write the peer's buffer in place (the map_window op). See shm.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mem_region.h"
#include "shm.h"
#include "transport.h"

/* Opens the owner's region through /proc and checks that the descriptor still names the
 * region it was described as (the owner may have freed it and reused the number). */
static HcclResult map_region(struct shm_link *l, const struct hccl_window *w,
                             struct shm_window *slot) {
  struct hccl_tctx *tx = l->base.tx;
  uint32_t peer = l->base.peer;
  char path[64], got[128], want[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", tx->peers[peer].pid, w->fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return hccl__fail(HCCL_E_SYSCALL,
                      "rank %u cannot open rank %u's HcclMemAlloc region %llu (%s): %s; was it "
                      "freed during the call?",
                      tx->rank, peer, (unsigned long long)w->serial, path, strerror(errno));
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, got, sizeof(got) - 1);
  got[n > 0 ? n : 0] = '\0';
  snprintf(want, sizeof(want), "/memfd:" HCCL_MEM_NAME_FMT " ", (unsigned long long)w->serial);
  struct stat sb;
  if (strncmp(got, want, strlen(want)) != 0 || fstat(fd, &sb) != 0 ||
      (uint64_t)sb.st_size != w->region_bytes) {
    close(fd);
    return hccl__fail(HCCL_E_PARA,
                      "rank %u: rank %u's buffer is no longer in HcclMemAlloc region %llu (its "
                      "descriptor now names \"%s\"); was it freed during the call?",
                      tx->rank, peer, (unsigned long long)w->serial, got);
  }
  void *base = mmap(NULL, w->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (base == MAP_FAILED)
    return hccl__fail(HCCL_E_MEMORY, "rank %u cannot map %llu bytes of rank %u's HcclMemAlloc "
                      "region: %s", tx->rank, (unsigned long long)w->region_bytes, peer,
                      strerror(e));
  if (slot->serial) munmap(slot->base, slot->bytes);
  slot->serial = w->serial;
  slot->base = base;
  slot->bytes = w->region_bytes;
  return HCCL_SUCCESS;
}

HcclResult hccl__shm_map_window(struct hccl_link *base, const struct hccl_window *w, void **ptr) {
  struct shm_link *l = (struct shm_link *)base;
  struct shm_window *slot = &l->win[0];
  for (int i = 0; i < SHM_WINDOWS; i++) {
    if (l->win[i].serial == w->serial && l->win[i].bytes == w->region_bytes) {
      slot = &l->win[i];
      goto found;
    }
    if (l->win[i].used < slot->used) slot = &l->win[i];
  }
  HCCL_TRY(map_region(l, w, slot));
found:
  slot->used = ++l->win_uses;
  *ptr = slot->base + w->offset;
  return HCCL_SUCCESS;
}
