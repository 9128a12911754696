/*
 * coll_kind.c - the collectives' names. See coll_kind.h.
 */
#include "coll_kind.h"

static const char *const kind_names[HCCL_K_NKINDS] = {
    "allreduce", "broadcast", "allgather", "reduce-scatter", "reduce",
    "barrier",   "gather",    "scatter",   "alltoall",       "alltoallv"};

const char *hccl__coll_kind_name(unsigned kind) {
  return kind < HCCL_K_NKINDS ? kind_names[kind] : "?";
}
