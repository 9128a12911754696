/*
 * place.c - placing a communicator's ranks on servers, devices and the world ring (place.h).
 */
#include "place.h"

#include <stdio.h>
#include <stdlib.h>

/* Servers in order of their lowest rank; local index = order among the server's ranks. Any
 * count per server and servers of different counts (uneven) unless the topology limits the
 * counts (ascend910: HCCL's n servers x 1, 2, 4 or 8); a shrink's survivors never are. */
static HcclResult find_servers(const struct hccl_place_rank *r, uint32_t n,
                               const struct hccl_topo *topo, struct hccl_place *out,
                               uint32_t *count, uint64_t *hashes, char *err, size_t errlen) {
  uint32_t ns = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t s = 0;
    while (s < ns && hashes[s] != r[k].host_hash)
      s++;
    if (s == ns) hashes[ns++] = r[k].host_hash;
    out->server_of[k] = s;
    out->local_index[k] = count[s]++;
  }
  out->nservers = ns;
  out->per_server = count[0];
  bool rule = topo && topo->counts && !out->any_count;
  for (uint32_t s = 0; s < ns; s++) {
    uint32_t m = count[s], first = 0;
    while (out->server_of[first] != s)
      first++;
    if (rule && !hccl__topo_count_ok(topo, (int)m)) {
      char why[256];
      hccl__topo_count_rule(topo, why, sizeof(why));
      snprintf(err, errlen, "%u ranks on server %s; %s", m, r[first].host, why);
      return HCCL_E_PARA;
    }
    if (m != count[0] && !rule) out->uneven = true;
    else if (m != count[0]) {
      snprintf(err, errlen,
               "server %s has %u ranks but server %s has %u; topology %s needs the same number "
               "on every server (n servers x L); a flat topology takes any (HCCL_TOPO_FILE=flat8, "
               "npu-launch --topology flat8)",
               r[first].host, m, r[0].host, count[0], topo->name);
      return HCCL_E_PARA;
    }
  }
  return HCCL_SUCCESS;
}

/* Each rank's choice, else its local index; unique per server. */
static HcclResult assign_devices(struct hccl_place_rank *r, uint32_t n,
                                 const struct hccl_place *out, char *err, size_t errlen) {
  for (uint32_t k = 0; k < n; k++)
    if (r[k].device < 0) r[k].device = (int32_t)out->local_index[k];
  for (uint32_t a = 0; a < n; a++)
    for (uint32_t b = a + 1; b < n; b++)
      if (out->server_of[a] == out->server_of[b] && r[a].device == r[b].device) {
        snprintf(err, errlen,
                 "ranks %u and %u both drive device %d on server %s (rank %u's from %s, rank "
                 "%u's from %s); each device must have one rank: give each process its own "
                 "(torch_hccl.set_device / HcclSetDevice, DEVICE_ID, --device-list)",
                 a, b, r[a].device, r[a].host, a, r[a].device_src, b, r[b].device_src);
        return HCCL_E_PARA;
      }
  return HCCL_SUCCESS;
}

/* The world ring: servers in order, each server's ranks in the topology's ring order. */
static HcclResult make_ring(const struct hccl_place_rank *r, uint32_t n, const struct hccl_topo *t,
                            bool check, struct hccl_place *out, char *err, size_t errlen) {
  uint32_t pos = 0;
  int *devs = malloc(sizeof(int) * n), *order = malloc(sizeof(int) * n);
  uint32_t *ranks = malloc(sizeof(uint32_t) * n);
  HcclResult res = HCCL_SUCCESS;
  if (!devs || !order || !ranks) {
    snprintf(err, errlen, "out of memory placing %u ranks", n);
    res = HCCL_E_MEMORY;
  }
  for (uint32_t s = 0; s < out->nservers && res == HCCL_SUCCESS; s++) {
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++)
      if (out->server_of[k] == s) ranks[m] = k, devs[m++] = r[k].device;
    char why[512];
    if (check && hccl__topo_check_devices(t, devs, (int)m, why, sizeof(why)) != HCCL_SUCCESS) {
      snprintf(err, errlen, "server %s: %s", r[ranks[0]].host, why);
      res = HCCL_E_PARA;
      break;
    }
    hccl__topo_ring(t, devs, (int)m, order);
    for (uint32_t k = 0; k < m; k++)
      out->ring[pos++] = ranks[order[k]];
  }
  free(devs);
  free(order);
  free(ranks);
  return res;
}

HcclResult hccl__place(struct hccl_place_rank *r, uint32_t n, const struct hccl_topo *topo,
                       struct hccl_place *out, char *err, size_t errlen) {
  uint32_t *count = calloc(n, sizeof(uint32_t));
  uint64_t *hashes = calloc(n, sizeof(uint64_t));
  HcclResult res = HCCL_E_MEMORY;
  if (!count || !hashes) {
    snprintf(err, errlen, "out of memory placing %u ranks", n);
    goto out;
  }
  res = find_servers(r, n, topo, out, count, hashes, err, errlen);
  if (res == HCCL_SUCCESS) res = assign_devices(r, n, out, err, errlen);
  if (res == HCCL_SUCCESS) {
    struct hccl_topo flat;
    if (!topo) {
      int maxdev = 0;
      for (uint32_t k = 0; k < n; k++)
        if (r[k].device > maxdev) maxdev = r[k].device;
      hccl__topo_flat(maxdev + 1 > 8 ? maxdev + 1 : 8, &flat);
    }
    res = make_ring(r, n, topo ? topo : &flat, topo && !out->any_count, out, err, errlen);
  }
out:
  free(count);
  free(hashes);
  return res;
}
