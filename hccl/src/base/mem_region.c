/*
 * mem_region.c - HcclMemAlloc / HcclMemFree / HcclMemDiscard: memory a server's ranks share, as
 * NCCL's ncclMemAlloc, and its pages given back.
 *
 * Each allocation is a memfd of its own named "hccl-mem-<serial>" (serials never repeat in a
 * process), mapped shared; the process keeps the descriptor open while the region lives so
 * that peers can open it through /proc/<pid>/fd/<fd> (transport/shm/shm_window.c, map_window) and
 * check its name. A process-wide list, under one mutex, answers "is this buffer inside a region"
 * (hccl__mem_window) for every collective that could run zero-copy.
 *
 * fork: a shared mapping would stay shared in the child, so a child's writes would land in the
 * parent's tensors (malloc'd memory is copy-on-write instead). A pthread_atfork child handler
 * therefore remaps every still-shared region MAP_PRIVATE at the same address from its memfd:
 * copy-on-write, nothing copied. Such a region is private from then on: never a zero-copy
 * window (its pages are no longer what peers would see), still freed by HcclMemFree. The one
 * difference from malloc: a page the child has not written yet shows the memfd's current
 * content, so the parent's later writes to it show through until the child writes that page
 * (the parent's mapping must stay shared; a snapshot would mean copying every region).
 * Regions that are already private (a child that forks again) keep their mapping: fork
 * already makes it copy-on-write, and remapping would drop the child's own writes.
 */
#define _GNU_SOURCE
#include "mem_region.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

struct region {
  struct region *next;
  char *base;
  size_t bytes; /* mapped (whole pages) */
  int fd;
  bool forked; /* remapped copy-on-write in a forked child: no longer a window */
  unsigned long long serial;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static unsigned long long next_serial = 1;

/* Who watches frees (hccl__mem_watch), under their own mutex: a watcher's call may take its
 * own locks, and the thread that looks a buffer up (hccl__mem_window, under mu) may hold
 * those. */
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void (*fn)(void *arg, uint64_t serial, uint64_t off, uint64_t len);
  void *arg;
} watchers[HCCL_MEM_WATCHERS];

static void tell_watchers(uint64_t serial, uint64_t off, uint64_t len) {
  pthread_mutex_lock(&watch_mu);
  for (int i = 0; i < HCCL_MEM_WATCHERS; i++)
    if (watchers[i].fn) watchers[i].fn(watchers[i].arg, serial, off, len);
  pthread_mutex_unlock(&watch_mu);
}

int hccl__mem_watch(void (*fn)(void *arg, uint64_t serial, uint64_t off, uint64_t len),
                    void *arg) {
  pthread_mutex_lock(&watch_mu);
  for (int i = 0; i < HCCL_MEM_WATCHERS; i++)
    if (!watchers[i].fn) {
      watchers[i].fn = fn;
      watchers[i].arg = arg;
      pthread_mutex_unlock(&watch_mu);
      return i;
    }
  pthread_mutex_unlock(&watch_mu);
  HCCL_WARN("%d watchers of HcclMemFree are in use: one more is not kept", HCCL_MEM_WATCHERS);
  return -1;
}

void hccl__mem_unwatch(int id) {
  if (id < 0 || id >= HCCL_MEM_WATCHERS) return;
  pthread_mutex_lock(&watch_mu);
  watchers[id].fn = NULL;
  watchers[id].arg = NULL;
  pthread_mutex_unlock(&watch_mu);
}

static void fork_prepare(void) {
  pthread_mutex_lock(&mu);
}
static void fork_parent(void) {
  pthread_mutex_unlock(&mu);
}

/* In the child (one thread, nothing else running yet). A region that cannot be remapped would
 * leave the child writing into the parent's memory: nothing safe remains but to stop. */
static void fork_child(void) {
  for (struct region *r = regions; r; r = r->next) {
    if (r->forked) continue;
    void *p = mmap(r->base, r->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, r->fd, 0);
    if (p == MAP_FAILED) {
      char msg[160];
      int n = snprintf(msg, sizeof(msg),
                       "hccl: fork: cannot remap HcclMemAlloc region %llu (%zu bytes) "
                       "copy-on-write in the child: %s\n",
                       r->serial, r->bytes, strerror(errno));
      size_t len = n < 0 ? 0 : (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1;
      ssize_t put = write(STDERR_FILENO, msg, len);
      (void)put;
      abort();
    }
    r->forked = true;
  }
  pthread_mutex_unlock(&mu);
}

/* At load, so these handlers are registered before any of a user's (torch_hccl's allocator
 * holds its own lock while it calls HcclMemAlloc: its prepare handler, registered later, runs
 * first, and the two locks are taken in the same order as everywhere else). */
__attribute__((constructor)) static void mem_init(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

HcclResult hccl__mem_alloc(void **ptr, size_t size) {
  if (!ptr) return hccl__fail(HCCL_E_PTR, "HcclMemAlloc: ptr is NULL");
  if (size == 0) return hccl__fail(HCCL_E_PARA, "HcclMemAlloc: size is 0; it must be at least 1");
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
  if (bytes < size) return hccl__fail(HCCL_E_PARA, "HcclMemAlloc: size %zu is too large", size);
  struct region *r = calloc(1, sizeof(*r));
  if (!r) return hccl__fail(HCCL_E_MEMORY, "HcclMemAlloc: out of memory");
  pthread_mutex_lock(&mu);
  r->serial = next_serial++;
  pthread_mutex_unlock(&mu);
  char name[48];
  snprintf(name, sizeof(name), HCCL_MEM_NAME_FMT, r->serial);
  const char *what = "memfd_create";
  r->fd = memfd_create(name, MFD_CLOEXEC);
  if (r->fd < 0) goto fail;
  what = "ftruncate";
  if (ftruncate(r->fd, (off_t)bytes) != 0) goto fail;
  what = "mmap";
  r->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (r->base == MAP_FAILED) goto fail;
  r->bytes = bytes;
  pthread_mutex_lock(&mu);
  r->next = regions;
  regions = r;
  pthread_mutex_unlock(&mu);
  *ptr = r->base;
  return HCCL_SUCCESS;
fail:;
  int e = errno;
  HcclResult code = r->fd < 0 ? HCCL_E_SYSCALL : HCCL_E_MEMORY;
  if (r->fd >= 0) close(r->fd);
  free(r);
  return hccl__fail(code, "HcclMemAlloc of %zu bytes: %s: %s", size, what, strerror(e));
}

HcclResult hccl__mem_free(void *ptr) {
  if (!ptr) return HCCL_SUCCESS;
  pthread_mutex_lock(&mu);
  struct region **pp = &regions;
  while (*pp && (*pp)->base != ptr)
    pp = &(*pp)->next;
  struct region *r = *pp;
  if (r) *pp = r->next;
  pthread_mutex_unlock(&mu);
  if (!r)
    return hccl__fail(HCCL_E_PARA, "HcclMemFree: %p was not returned by HcclMemAlloc (or was "
                                   "freed already)", ptr);
  tell_watchers(r->serial, 0, r->bytes);
  munmap(r->base, r->bytes);
  close(r->fd);
  free(r);
  return HCCL_SUCCESS;
}

HcclResult hccl__mem_discard(void *ptr, size_t size) {
  struct hccl_window w;
  if (!hccl__mem_window(ptr, size, &w))
    return hccl__fail(HCCL_E_PARA, "HcclMemDiscard: [%p, +%zu) is not inside one region "
                      "HcclMemAlloc returned (or this process inherited it through fork)", ptr,
                      size);
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), p = (uintptr_t)ptr;
  uintptr_t lo = (p + page - 1) / page * page, hi = (p + size) / page * page;
  if (hi <= lo) return HCCL_SUCCESS; /* no whole page */
  tell_watchers(w.serial, w.offset + (lo - p), hi - lo);
  if (madvise((void *)lo, hi - lo, MADV_REMOVE) != 0)
    return hccl__fail(HCCL_E_SYSCALL, "HcclMemDiscard: madvise(MADV_REMOVE) of %zu bytes at "
                      "%p: %s", (size_t)(hi - lo), (void *)lo, strerror(errno));
  return HCCL_SUCCESS;
}

bool hccl__mem_window(const void *ptr, size_t bytes, struct hccl_window *w) {
  const char *p = ptr;
  w->fd = -1;
  if (!p) return false;
  pthread_mutex_lock(&mu);
  for (struct region *r = regions; r; r = r->next) {
    if (p >= r->base && p < r->base + r->bytes && bytes <= (size_t)(r->base + r->bytes - p)) {
      if (r->forked) break;
      w->fd = r->fd;
      w->serial = r->serial;
      w->region_bytes = r->bytes;
      w->offset = (uint64_t)(p - r->base);
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  return w->fd >= 0;
}
