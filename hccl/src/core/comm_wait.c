/*
 * comm_wait.c - a communicator's side of its waits. See comm_wait.h.
 */
#include "comm_wait.h"

#include <stdlib.h>

#include "comm.h"
#include "progress.h"
#include "trace.h"

HcclResult hccl__check_aborts(struct hccl_comm *c, const char *what) {
  HCCL_FOR_EACH_TRANSPORT_WITH(t, check_abort) HCCL_TRY(t->check_abort(&c->tx, what));
  return HCCL_SUCCESS;
}

struct hccl_wait hccl__comm_wait(struct hccl_comm *c, const char *what,
                                 struct hccl_progress *progress) {
  return (struct hccl_wait){.waiter = &c->waiter,
                            .rank = c->rank,
                            .what = what,
                            .deadline_ns = hccl__now_ns() + c->cfg.exec_timeout_ms * 1000000LL,
                            .progress = progress};
}

static HcclResult aborted(void *arg, const char *what) {
  return hccl__check_aborts(arg, what);
}

static uint64_t cycle(void *arg, uint32_t peer, char *buf, size_t len, int64_t *oldest_ms) {
  return hccl__progress_cycle(arg, peer, buf, len, oldest_ms);
}

static void explain(void *arg, uint32_t peer, char *buf, size_t len) {
  hccl__progress_explain(arg, peer, buf, len);
}

static void slept(void *arg, int64_t from_ns, int64_t to_ns, uint32_t peer, const char *what) {
  struct hccl_comm *c = arg;
  hccl__trace_wait(c->trace, from_ns, to_ns, peer, what);
}

/* The ranks of this server pinned to the one CPU this rank is pinned to (a launcher's binding
 * with more ranks than cores: npu-launch puts rank r on CPU r mod ncpu), or NULL when there
 * are none (or no memory for the list: waits then only poll longer). At 4 ranks on 2 cores
 * a 4 KiB allreduce took 3.8-4.8 us so, against 7.0-8.3 us polling for such a peer too. */
static uint8_t *same_core(const struct hccl_comm *c) {
  const struct hccl_peer_info *me = &c->peers[c->rank];
  uint8_t *s = NULL;
  for (uint32_t r = 0; me->cpu >= 0 && r < c->nranks; r++) {
    if (r == c->rank || c->peers[r].host_hash != me->host_hash || c->peers[r].cpu != me->cpu)
      continue;
    if (!s && !(s = calloc(c->nranks, 1))) return NULL;
    s[r] = 1;
  }
  return s;
}

void hccl__comm_waiter_init(struct hccl_comm *c) {
  c->same_core = same_core(c);
  /* Across servers each rank also has a TCP I/O thread, which its waits depend on: it
   * needs a core as much as the rank does. */
  c->waiter = (struct hccl_waiter){
      .same_core = c->same_core,
      .spin = hccl__wait_spin_budget((int)c->local_nranks * (c->nservers > 1 ? 2 : 1),
                                     c->cfg.spin),
      .aborted = aborted,
      .cycle = cycle,
      .explain = explain,
      .slept = c->trace ? slept : NULL,
      .arg = c,
      .timeout_ms = c->cfg.exec_timeout_ms,
      .timeout_src = c->cfg.exec_timeout_src,
  };
}
