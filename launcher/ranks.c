/*
 * ranks.c - numbering ranks across servers that hold different device counts, as torchrun's
 * elastic agent does when each node has its own --nproc-per-node: a server's ranks follow
 * those of every server with a lower node rank, and the world is the sum of the counts.
 *
 *   node rank      0         1     2
 *   count          3         1     2
 *   ranks          0 1 2     3     4 5        world 6
 *   first          0         3     4          (the sum of the counts before it)
 *
 * With the same count n everywhere this is node_rank * n + local_rank, as before. Pure: no
 * I/O, no globals; servers.c calls it once the launchers have met, tests call it directly.
 */
#include "launch.h"

#include <stdio.h>

int launch_number_ranks(const int *counts, int nnodes, int node_rank, const char *same_topo,
                        int *first, int *world, char *err, size_t errlen) {
  if (nnodes < 1 || node_rank < 0 || node_rank >= nnodes) {
    snprintf(err, errlen, "server %d of %d: node ranks run from 0 to --nnodes - 1", node_rank,
             nnodes);
    return -1;
  }
  int before = 0, total = 0;
  for (int k = 0; k < nnodes; k++) {
    if (counts[k] < 1 || counts[k] > LAUNCH_MAX_LOCAL) {
      snprintf(err, errlen, "server %d says it has %d devices; a server has 1 to %d", k, counts[k],
               LAUNCH_MAX_LOCAL);
      return -1;
    }
    if (same_topo && counts[k] != counts[0]) {
      snprintf(err, errlen,
               "server %d has %d devices but server 0 has %d; topology %s needs the same number "
               "on every server (n servers x L); a flat topology takes any (npu-launch "
               "--topology flat8, HCCL_TOPO_FILE=flat8)",
               k, counts[k], counts[0], same_topo);
      return -1;
    }
    if (k == node_rank) before = total;
    total += counts[k]; /* at most 65536 x 64: no overflow */
  }
  *first = before;
  *world = total;
  return 0;
}
