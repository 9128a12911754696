/*
 * hostlist.h - Slurm's compressed host lists (SLURM_JOB_NODELIST: "node[01-04,07],gpu3"):
 * the first host, which is where rank 0 and the bootstrap store run when srun starts a job.
 * Shared by libhccl's settings and npu-launch (both link hccl_topo), with no logging of its own.
 */
#ifndef HCCL_HOSTLIST_H
#define HCCL_HOSTLIST_H

#include <stddef.h>

/* Writes the first host of list into out ("node[01-04,07],gpu3" -> "node01", zero padding as
 * written). Returns 0, or -1 when list names no host or its first entry is malformed. */
int hccl__hostlist_first(const char *list, char *out, size_t len);

#endif
