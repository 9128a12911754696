/*
 * trace.h - HCCL_TRACE_FILE: each rank records Chrome trace events (the JSON that
 * chrome://tracing and Perfetto open) for every collective call (its arguments, the
 * algorithm, the result) and for every wait that had to sleep (the peer waited for), and
 * writes them when the communicator is destroyed: one file per rank, "%r" in the path
 * standing for the rank (else ".<rank>.json" is appended). scripts/trace_merge.py joins the
 * ranks' files into one timeline. The role of Ascend's ACL_PROF_HCCL_TRACE.
 *
 * Off (no file named): one branch per call. On: two clock reads and one slot of a bounded
 * buffer per event; events past the buffer are counted and dropped, never block a call.
 */
#ifndef HCCL_TRACE_H
#define HCCL_TRACE_H

#include <stdint.h>

#include "hccl.h"

/* A communicator's part of this file (struct hccl_comm's `trace`) is a pointer to its recorder,
 * NULL when it records nothing. */
struct hccl_trace;

/* Starts recording for rank `rank` of nranks, on `device`, when `file` (HCCL_TRACE_FILE) is not
 * empty: *out is the recorder (else it stays NULL). */
HcclResult hccl__trace_open(const char *file, uint32_t rank, uint32_t nranks, int32_t device,
                            struct hccl_trace **out);

/* Records a collective call [t0_ns, t1_ns) (CLOCK_MONOTONIC) on the calling thread. name and
 * algo are static strings; op is -1 for a call that does not reduce. Formatting waits for
 * the file, so recording costs a few stores. */
void hccl__trace_call(struct hccl_trace *t, const char *name, int64_t t0_ns, int64_t t1_ns,
                      uint64_t seq, uint64_t count, HcclDataType dt, int op, uint32_t root,
                      const char *algo, HcclResult result);

/* Records a wait that slept for `peer` inside the call named `what` (a static string). */
void hccl__trace_wait(struct hccl_trace *t, int64_t t0_ns, int64_t t1_ns, uint32_t peer,
                      const char *what);

/* Writes the file (logging, not failing, when it cannot) and frees the recorder *tp, after
 * setting *tp to NULL; nothing when *tp is NULL. */
void hccl__trace_close(struct hccl_trace **tp);

#endif
