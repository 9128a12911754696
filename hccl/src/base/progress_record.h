/*
 * progress_record.h - the record in which a rank publishes how far it got, where its peers can
 * read it (the shm transport shares it between the ranks of a server; the TCP I/O thread
 * answers for it across servers). Reading the records and explaining a timeout from them
 * needs the communicator: core/progress.h.
 */
#ifndef HCCL_PROGRESS_RECORD_H
#define HCCL_PROGRESS_RECORD_H

#include <stddef.h>
#include <stdint.h>

/* How far a rank got, where its peers can read it, for the message of a timeout (which rank is
 * really behind, core/progress.c). Written only by its owner. */
struct hccl_progress {
  _Atomic uint64_t call;        /* number << 8 | collective of the current or last call */
  _Atomic uint32_t in_call;     /* 1 while inside that call */
  _Atomic uint32_t waiting_for; /* peer + 1 while asleep waiting for that peer, else 0 */
  _Atomic int64_t beat_ms;      /* CLOCK_MONOTONIC ms, renewed each sleep slice of a wait */
  _Atomic uint32_t wait_no;     /* sleeping waits begun: the same number = the same wait */
  _Atomic uint32_t root;        /* the current call's root, UINT32_MAX when it has none */
};

/* The value of `call` for call number seq of collective `kind` (coll_kind.h). */
static inline uint64_t hccl__progress_call(uint64_t seq, unsigned kind) {
  return seq << 8 | (kind & 0xff);
}

/* "call 57 (allreduce)", "call 58 (reduce, root 1)": `call` as read from pg, whose root it
 * adds for a rooted collective. */
void hccl__progress_call_name(const struct hccl_progress *pg, uint64_t call, char *buf,
                              size_t len);

#endif
