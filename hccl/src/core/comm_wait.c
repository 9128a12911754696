/*
 * comm_wait.c - a communicator's side of its waits. See comm_wait.h.
 */
#include "comm_wait.h"

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

void hccl__comm_waiter_init(struct hccl_comm *c) {
  /* Across servers each rank also has a TCP progress thread, which its waits depend on: it
   * needs a core as much as the rank does. */
  c->waiter = (struct hccl_waiter){
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
