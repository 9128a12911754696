/*
 * rdma_reg.c - the RDMA transport's registration cache (NCCL's is the model): the caller's buffers
 * that lie in an HcclMemAlloc region are sent (send_ref) and received (recv_post: the peer writes
 * into them) without a copy, from and into memory registered once per communicator, for local and
 * remote writes. A registration covers the region's pages around the buffer in steps of
 * RDMA_REG_GRAIN (64 MiB), the whole region when it is smaller (the perf programs' -R 1 buffers:
 * one registration each): torch_hccl's allocator carves every tensor out of arenas of 1 GiB and
 * more (torch_hccl/csrc/allocator.cpp), mostly untouched, and registering one whole would pin all
 * of its pages. Later buffers inside a registered part cost a lookup. HcclMemFree and
 * HcclMemDiscard tell the cache (the watch of base/mem_region.h) before the pages go, and the
 * registrations of them are dropped then; teardown drops the rest. Other memory (malloc'd) is not
 * registered here: registering each buffer on every call would cost more than the copy into a slot
 * it saves. With RDMA_REG_MAX parts registered, further buffers go through slots. Called by
 * rdma_data.c (send_ref, recv_post) and rdma.c (setup, teardown); calls no file of the room.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mem_region.h"
#include "rdma.h"

/* The watch's call, on the thread that frees or discards: the registrations of the region's
 * bytes [off, off + len) go (a registration keeps the pages it pinned, which those addresses
 * no longer show). */
static void evict(void *arg, uint64_t serial, uint64_t off, uint64_t len) {
  struct rdma_state *st = arg;
  pthread_mutex_lock(&st->reg_lock);
  for (int i = 0; i < st->nreg;)
    if (st->reg[i].serial == serial && st->reg[i].off < off + len &&
        off < st->reg[i].off + st->reg[i].len) {
      st->v->dereg_mr(st->reg[i].mr);
      st->reg[i] = st->reg[--st->nreg];
      atomic_fetch_add(&st->reg_evicted, 1);
    } else {
      i++;
    }
  pthread_mutex_unlock(&st->reg_lock);
}

void hccl__rdma_reg_init(struct rdma_state *st) {
  pthread_mutex_init(&st->reg_lock, NULL);
  st->reg_watch = hccl__mem_watch(evict, st);
}

bool hccl__rdma_reg_find(struct rdma_state *st, const void *buf, size_t bytes, uint32_t *lkey,
                         uint32_t *rkey) {
  struct hccl_window w;
  if (st->reg_watch < 0 || !hccl__mem_window(buf, bytes, &w)) return false;
  char *base = (char *)buf - w.offset;
  struct ibv_mr *mr = NULL;
  pthread_mutex_lock(&st->reg_lock);
  for (int i = 0; i < st->nreg && !mr; i++) {
    const struct rdma_reg *r = &st->reg[i];
    if (r->serial == w.serial && r->off <= w.offset && w.offset + bytes <= r->off + r->len)
      mr = r->mr;
  }
  if (!mr && st->nreg < RDMA_REG_MAX) {
    /* The grains around the buffer, inside the region. */
    uint64_t lo = w.offset / RDMA_REG_GRAIN * RDMA_REG_GRAIN;
    uint64_t hi = (w.offset + bytes + RDMA_REG_GRAIN - 1) / RDMA_REG_GRAIN * RDMA_REG_GRAIN;
    if (hi > w.region_bytes) hi = w.region_bytes;
    mr = st->v->reg_mr(st->pd, base + lo, hi - lo,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr) {
      st->reg[st->nreg++] = (struct rdma_reg){.serial = w.serial, .off = lo, .len = hi - lo,
                                              .mr = mr};
    } else if (!st->reg_warned) {
      st->reg_warned = true;
      HCCL_WARN("RDMA rank %u cannot register %llu bytes of an HcclMemAlloc region; its "
                "buffers are copied through slots (ulimit -l may be too low)",
                st->tx->rank, (unsigned long long)(hi - lo));
    }
  } else if (!mr && !st->reg_warned) {
    st->reg_warned = true;
    HCCL_INFO("RDMA rank %u has %d parts of HcclMemAlloc regions registered, the most it keeps; "
              "buffers elsewhere are copied through slots until HcclMemFree frees some",
              st->tx->rank, RDMA_REG_MAX);
  }
  if (mr) {
    *lkey = mr->lkey;
    *rkey = mr->rkey;
  }
  pthread_mutex_unlock(&st->reg_lock);
  return mr != NULL;
}

void hccl__rdma_reg_free(struct rdma_state *st) {
  if (st->reg_watch >= 0) hccl__mem_unwatch(st->reg_watch);
  st->reg_watch = -1;
  pthread_mutex_lock(&st->reg_lock);
  for (int i = 0; i < st->nreg; i++)
    st->v->dereg_mr(st->reg[i].mr);
  st->nreg = 0;
  pthread_mutex_unlock(&st->reg_lock);
}
