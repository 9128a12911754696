/*
 * hccl_iface.h - the internal interface libhccl gives the components beside it (launcher/,
 * ddp/, bench/): the only way they reach what is not in hccl.h. NCCL and libuv keep their
 * internal headers internal; so does this tree. CMake target `hccl_iface` puts this folder
 * and a copy of exactly the headers named below on a component's include path, and nothing
 * else of hccl/src (hccl/CMakeLists.txt reads the list from this file, so the two cannot
 * drift apart). ctest `components` fails when a component includes any other header of
 * hccl/src, or one of these by its own name instead of this file.
 *
 * Declarations only: a program that calls the store, the thread or the topology functions
 * links their code from `hccl_store` and `hccl_topo` (npu-launch), one that calls the kernels
 * from `hccl_internal` (reduce_rate); ddp's shared library uses only half.h's inline
 * conversions and links libhccl.so.
 *
 * One line per header, its users after it. Add a header here only with a user, and say why.
 */
#ifndef HCCL_IFACE_H
#define HCCL_IFACE_H

#include "dtype.h"    /* dtype facts (sizes, names): bench/reduce_rate.c */
#include "half.h"     /* fp32 <-> fp16/bf16 conversions: ddp/src/half.c, bench/reduce_rate.c */
#include "hostlist.h" /* Slurm host lists: launcher/options.c */
#include "reduce.h"   /* the reduction kernels: bench/reduce_rate.c */
#include "spelling.h" /* "did you mean": launcher/options.c */
#include "store.h"    /* the bootstrap store's server and client: launcher/elastic.c */
#include "thread.h"   /* a thread born with signals blocked: launcher/elastic.c */
#include "topo.h"     /* server topologies and device rules: launcher/launch.h */

#endif
