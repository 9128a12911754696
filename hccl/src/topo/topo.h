/*
 * topo.h - server topologies: which devices a server has and which of them form full-mesh
 * groups (the Ascend 910: 0-3 and 4-7 over HCCS, the two groups joined by PCIe; a flat server:
 * one group). Read from JSON (topologies/<name>.json) by one parser.
 *
 * Pure functions: no logging, no globals. A failure returns an HcclResult and writes a message
 * naming the value and the rule into err[0..errlen). Used by libhccl and by npu-launch, which
 * does not link libhccl.
 */
#ifndef HCCL_TOPO_H
#define HCCL_TOPO_H

#include <stdbool.h>
#include <stddef.h>

#include "hccl.h"

#define HCCL_TOPO_MAX_DEVICES 64
#define HCCL_TOPO_MAX_GROUPS 16

struct hccl_topo {
  char name[64];
  int ndevices;                        /* devices 0..ndevices-1 */
  int ngroups;                         /* full-mesh groups, >= 1 */
  int group_of[HCCL_TOPO_MAX_DEVICES]; /* group index of each device */
  bool partial_jobs_within_group;      /* a 2- or 4-device job must sit inside one group */
  /* The device counts a job may use on one server ("device_counts"): bit k-1 set = k allowed.
   * 0 = any count from 1 to ndevices (a flat server, as gloo and NCCL take any). A topology
   * that limits them (ascend910: 1, 2, 4 or 8) also makes every server of a job run the same
   * count (HCCL's n servers x L). */
  uint64_t counts;
};

/* Parses a topology document (format in topologies/README.md). */
HcclResult hccl__topo_parse(const char *json, struct hccl_topo *out, char *err, size_t errlen);

/* Loads a topology by path (contains '/' or ends in .json) or by name, looked up as
 * <dir>/<name>.json where dir is HCCL_TOPO_DIR's compiled-in default (the source tree's
 * topologies/), or the installed copy (HCCL_TOPO_INSTALL_DIR) when the source tree's is gone,
 * unless topo_dir is non-NULL. */
HcclResult hccl__topo_load(const char *path_or_name, const char *topo_dir, struct hccl_topo *out,
                           char *err, size_t errlen);

/* A flat server of n devices: one group, no placement rule, any device count. */
void hccl__topo_flat(int ndevices, struct hccl_topo *out);

/* Checks a job's devices on one server: each id in [0, ndevices), no duplicates, n one of the
 * topology's device_counts when it has them (ascend910: 1, 2, 4 or 8; a flat server: any), and,
 * when partial_jobs_within_group, a 2- or 4-device job inside one group.
 * Messages read like "device list 0,1,4,5 spans groups 0-3 and 4-7 of topology ascend910; a
 * 2- or 4-device job must sit inside one group". */
HcclResult hccl__topo_check_devices(const struct hccl_topo *t, const int *devices, int n, char *err,
                                    size_t errlen);

/* Ring order over a job's devices: fills order[0..n) with indices into devices[] so that
 * walking the ring crosses between groups as few times as possible (devices grouped, sorted
 * by id inside a group; groups in index order). Devices unknown to the topology go last. */
void hccl__topo_ring(const struct hccl_topo *t, const int *devices, int n, int *order);

/* Whether the topology allows a job of n devices on one server (its device_counts). */
bool hccl__topo_count_ok(const struct hccl_topo *t, int n);

/* The topology's count rule in words, for messages: "topology ascend910 allows 1, 2, 4 or 8
 * devices on a server; for any count choose a flat topology (HCCL_TOPO_FILE=flat8, npu-launch
 * --topology flat8)". Empty when any count is allowed. */
void hccl__topo_count_rule(const struct hccl_topo *t, char *buf, size_t len);

#endif
