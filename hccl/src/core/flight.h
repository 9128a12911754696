/*
 * flight.h - the flight recorder (HCCL_FLIGHT_RECORDER_DIR): each communicator keeps its last
 * HCCL_FLIGHT_RECORDER_ENTRIES calls (collectives and point-to-point: sequence number,
 * fingerprint, algorithm, size, peer, state, and the times it was enqueued, started and
 * finished) in a fixed ring, and writes it to one file per rank when the communicator fails
 * (a timeout, a peer's failure, HcclCommAbort) or the process gets SIGUSR1, as torch's NCCL
 * flight recorder does. The file is named after the job's run (comm.h: unique to the job and
 * to this start of it), the communicator and the rank. `hccl-fr DIR` (scripts/hccl_fr.py)
 * reads one run's files and says which call diverged, which ranks are behind and what each
 * waits for. docs/flight-recorder.md documents the file's format.
 *
 * Off (no directory named): one branch per call. On: a mutex and a dozen stores per call.
 */
#ifndef HCCL_FLIGHT_H
#define HCCL_FLIGHT_H

#include <stdbool.h>
#include <stdint.h>

#include "hccl.h"

struct hccl_comm;
/* A communicator's part of this file (struct hccl_comm's `fr`) is a pointer to its ring, NULL
 * when it records nothing. */
struct hccl_fr;

/* Kinds of point-to-point entries (collectives use enum hccl_coll_kind, below these). */
#define HCCL_FR_P2P_SEND 200
#define HCCL_FR_P2P_RECV 201

/* Starts recording for c when c->cfg names a directory (else c->fr stays NULL); the first one
 * in the process installs the SIGUSR1 handler (unless the program has its own) and its thread. */
HcclResult hccl__fr_open(struct hccl_comm *c);
/* A call entered fr's ring (collective: seq 0 until it starts; point-to-point: peer set).
 * Returns its entry's id (0 when fr is NULL: not recording). */
uint64_t hccl__fr_enqueue(struct hccl_fr *fr, unsigned kind, uint64_t count, HcclDataType dt,
                          int op, uint32_t root, uint32_t peer);
/* Entry `id` started as collective number `seq` with fingerprint `fp`. */
void hccl__fr_start(struct hccl_fr *fr, uint64_t id, uint64_t seq, uint64_t fp);
/* Entry `id` ended with `result`; algo is a static string (or NULL). */
void hccl__fr_end(struct hccl_fr *fr, uint64_t id, HcclResult result, const char *algo);
/* Writes c's file now (logging, never failing, when it cannot): reason says why. It takes the
 * communicator, not its ring: the file's first line is the communicator's state (its run, host,
 * failure and published progress), and SIGUSR1's thread dumps every live communicator. */
void hccl__fr_dump(struct hccl_comm *c, const char *reason);
/* Stops recording for c and frees its ring (after its threads stopped); c leaves the list of
 * live communicators SIGUSR1 dumps. */
void hccl__fr_close(struct hccl_comm *c);

#endif
