/*
 * coll_kind.h - the collectives the library has, as one list: the fingerprint every message
 * carries (core/fingerprint.h), the progress records peers read (progress_record.h), traces
 * and the flight recorder all name a call by it.
 */
#ifndef HCCL_COLL_KIND_H
#define HCCL_COLL_KIND_H

enum hccl_coll_kind {
  HCCL_K_ALLREDUCE,
  HCCL_K_BROADCAST,
  HCCL_K_ALLGATHER,
  HCCL_K_REDUCE_SCATTER,
  HCCL_K_REDUCE,
  HCCL_K_BARRIER,
  HCCL_K_GATHER,
  HCCL_K_SCATTER,
  HCCL_K_ALLTOALL,
  HCCL_K_ALLTOALLV,
  HCCL_K_NKINDS
};

/* "allreduce", "reduce-scatter", ...; "?" for a value out of range. */
const char *hccl__coll_kind_name(unsigned kind);

#endif
