/*
 * fail.c - breaking a communicator: the first failure's code and message stay in it, and every
 * transport marks the failure where its peers' waits look (their abort marks), so one rank's
 * failure becomes an error on every rank. Called by the collective worker, the p2p engine and
 * HcclCommAbort (and by a split's parent round, naming the rank its bootstrap tree found dead
 * as the failed one); it calls only the transports' ops table, so the call paths that fail
 * (coll.c, p2p.c) and the one that makes and destroys communicators (comm.c) do not call each
 * other in a circle.
 */
#include <stdio.h>

#include "fail.h"

#include "comm.h"
#include "flight.h"

void hccl__comm_fail(struct hccl_comm *comm, HcclResult code) {
  hccl__comm_fail_blame(comm, code, comm->rank);
}

void hccl__comm_fail_blame(struct hccl_comm *comm, HcclResult code, uint32_t origin) {
  /* Two threads (the collective worker or caller, and the p2p engine) may fail at once: the
   * first claims the message, writes it, and only then publishes `broken`, so whoever reads
   * broken != 0 reads a whole message. */
  int expect = 0;
  if (atomic_compare_exchange_strong(&comm->failing, &expect, 1)) {
    snprintf(comm->broken_msg, sizeof(comm->broken_msg), "%s", HcclGetLastErrorMessage());
    atomic_store(&comm->broken, (int)code);
    hccl__fr_dump(comm, code == HCCL_E_TIMEOUT  ? "timeout"
                        : code == HCCL_E_REMOTE ? "peer failure"
                                                : "failure");
  }
  HCCL_FOR_EACH_TRANSPORT_WITH(t, abort) t->abort(&comm->tx, origin, code);
}
