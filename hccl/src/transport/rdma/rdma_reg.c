/*
 * rdma_reg.c - the RDMA transport's registration cache (NCCL's is the model): the caller's
 * buffers that lie in an HcclMemAlloc region are sent without a copy, from memory registered
 * once per region and communicator, the whole region at once (its first use pays the
 * registration; every later message from it is free). HcclMemFree tells the cache (the watch
 * of base/mem_region.h) before the region's pages go, and its registration is dropped then;
 * teardown drops the rest. Other memory (malloc'd) is not registered here: registering each
 * buffer on every call would cost more than the copy into a slot it saves.
 * Called by rdma_data.c (send_ref) and rdma.c (setup, teardown); calls no file of the room.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mem_region.h"
#include "rdma.h"

/* The watch's call, on the thread that frees: the region's registration goes. */
static void evict(void *arg, uint64_t serial) {
  struct rdma_state *st = arg;
  pthread_mutex_lock(&st->reg_lock);
  for (int i = 0; i < st->nreg; i++)
    if (st->reg[i].serial == serial) {
      st->v->dereg_mr(st->reg[i].mr);
      st->reg[i] = st->reg[--st->nreg];
      atomic_fetch_add(&st->reg_evicted, 1);
      break;
    }
  pthread_mutex_unlock(&st->reg_lock);
}

void hccl__rdma_reg_init(struct rdma_state *st) {
  pthread_mutex_init(&st->reg_lock, NULL);
  st->reg_watch = hccl__mem_watch(evict, st);
}

bool hccl__rdma_reg_find(struct rdma_state *st, const void *buf, size_t bytes, uint32_t *lkey) {
  struct hccl_window w;
  if (st->reg_watch < 0 || !hccl__mem_window(buf, bytes, &w)) return false;
  char *base = (char *)buf - w.offset;
  bool found = false;
  pthread_mutex_lock(&st->reg_lock);
  for (int i = 0; i < st->nreg && !found; i++)
    if (st->reg[i].serial == w.serial) {
      *lkey = st->reg[i].mr->lkey;
      found = true;
    }
  if (!found && st->nreg < RDMA_REG_MAX) {
    /* Read by the adapter only (the source of RDMA WRITEs). */
    struct ibv_mr *mr = st->v->reg_mr(st->pd, base, w.region_bytes, IBV_ACCESS_LOCAL_WRITE);
    if (mr) {
      st->reg[st->nreg++] = (struct rdma_reg){.serial = w.serial, .mr = mr};
      *lkey = mr->lkey;
      found = true;
    } else if (!st->reg_warned) {
      st->reg_warned = true;
      HCCL_WARN("RDMA rank %u cannot register an HcclMemAlloc region of %llu bytes; its "
                "buffers are copied into slots (ulimit -l may be too low)",
                st->tx->rank, (unsigned long long)w.region_bytes);
    }
  }
  pthread_mutex_unlock(&st->reg_lock);
  return found;
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
