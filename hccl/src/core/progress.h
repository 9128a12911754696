/*
 * progress.h - each rank publishes how far it got (its current collective, whether it is
 * inside it, whom it sleeps waiting for, a heartbeat while it sleeps) in a record its peers
 * can read (struct hccl_progress, progress_record.h). When a wait times out, the
 * message follows the chain of waits from the peer it waited for to the rank that is really
 * behind: one that has not reached the call, one inside it that waits for nobody, or one
 * whose heartbeat stopped (frozen by SIGSTOP or a debugger), as torch's desync report does.
 *
 * Cost: two stores into this rank's own cache line per call, one per sleep slice.
 */
#ifndef HCCL_PROGRESS_H
#define HCCL_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "progress_record.h"

struct hccl_comm;

/* A communicator's part of this file (struct hccl_comm's `progress`): where this rank publishes,
 * and what keeps a transport's thread answering a peer's query (hccl__progress_report) away
 * from the links destroy closes. */
struct hccl_progress_part {
  struct hccl_progress *self; /* this rank's record, once bound (hccl__progress_bind) */
  struct hccl_progress own;   /* the record when no transport shares one */
  /* A transport's thread answering a peer's progress query reads the records through the
   * links; destroy sets `closing` under report_lock before it closes any link. */
  pthread_mutex_t report_lock;
  bool closing;
};

/* Makes a part (report_lock) and frees what it made (comm.c's alloc and free). */
void hccl__progress_part_init(struct hccl_progress_part *pp);
void hccl__progress_part_destroy(struct hccl_progress_part *pp);
/* Destroy's first step: from now on a peer's query is answered "destroying" (report_lock). */
void hccl__progress_part_close(struct hccl_progress_part *pp);

/* This rank's record (the shared one when a transport has it, else the part's own). */
struct hccl_progress *hccl__progress_mine(struct hccl_comm *c);
/* Stores hccl__progress_mine in c->progress.self, once the transports are set up (the end of
 * the bootstrap): the records a transport shares stay where they are until it is torn down,
 * so every thread then reads the one pointer, and no call stores it. */
void hccl__progress_bind(struct hccl_comm *c);

/* Marks call number seq of collective `kind` (with `root`, UINT32_MAX for none) started / ended
 * in pp's record (bound). */
void hccl__progress_enter(struct hccl_progress_part *pp, uint64_t seq, unsigned kind,
                          uint32_t root);
void hccl__progress_leave(struct hccl_progress_part *pp);

/* Writes into buf why this rank's wait for `peer` in its current call may have timed out:
 * which rank is behind and how the waits chain to it. A rank on another server is asked over
 * the transport (ask_progress: its own account, hccl__progress_report), up to 4 servers along
 * the chain. One that does not answer within 1.5 s is named, by its server's host name and
 * address, as stopped or frozen when its host still acknowledges this rank's link (the
 * transport's quiet op); else a rank of a third server is asked whether it still reaches it
 * (ask_reach, up to 2 x 1 s): a network fault between the two servers if so, its server cut
 * off (or its host dead) if not, this rank's own server cut off when every other server is
 * silent here. A report whose chain leads to another server whose host is silent on this
 * rank's links says so, and an asker that then hears that rank answer names the network
 * between the two. */
void hccl__progress_explain(struct hccl_comm *c, uint32_t peer, char *buf, size_t len);

/* This rank's own account, for a peer on another server whose wait for it timed out in call
 * number `seq` (the TCP I/O thread answers a query with it): the chain of waits from this
 * rank through the records of this server, and in *next the rank on another server where the
 * chain leaves it (UINT32_MAX when it ends here). */
void hccl__progress_report(struct hccl_comm *c, uint32_t seq, char *buf, size_t len,
                           uint32_t *next);

/* Whether this rank, asleep waiting for `peer`, is in a deadlock: the chain of waits from
 * `peer` comes back to this rank, every rank on it asleep in a wait (a fresh heartbeat) and its
 * record in reach (this server). Such a cycle cannot resolve: a sleeping waiter on a device
 * link is woken only by the peer it waits for. Returns a signature of the waits on the cycle
 * (their ranks and wait numbers; never 0) and writes the cycle, naming each rank's call, into
 * buf; 0 when there is no such cycle. *oldest_beat_ms: the oldest heartbeat of the others on
 * it. The caller fails only when it sees the same signature again with every heartbeat renewed
 * since its first sighting: each of those ranks then looked at its word again, found nothing,
 * and slept on in the same wait (a rank frozen by SIGSTOP renews nothing, and is left to the
 * timeout, which names it). */
uint64_t hccl__progress_cycle(struct hccl_comm *c, uint32_t peer, char *buf, size_t len,
                              int64_t *oldest_beat_ms);

#endif
