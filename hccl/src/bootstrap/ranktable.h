/*
 * ranktable.h - HCCL's rank table ("version 1.0" JSON, RANK_TABLE_FILE): which server and
 * device each rank has. HcclCommInitClusterInfo (core/comm.c) reads one and meets its peers at
 * the server_id of the server that holds rank 0, on MASTER_PORT or HCCL_IF_BASE_PORT.
 *
 *   {"version": "1.0", "server_count": "2", "status": "completed",
 *    "server_list": [{"server_id": "10.0.0.1",
 *                     "device": [{"device_id": "0", "device_ip": "192.168.1.10", "rank_id": "0"},
 *                                ...]},
 *                    ...]}
 *
 * Numbers may be written as strings (as HCCL's tools write them) or as JSON numbers. Fields
 * this library does not use (container_ip, host_ip, hardware_type, ...) are accepted and
 * ignored. Every refusal names the file, the field path and the value:
 * "server_list[1].device[2].rank_id: 9 is out of range 0-7".
 */
#ifndef HCCL_RANKTABLE_H
#define HCCL_RANKTABLE_H

#include <stdint.h>

#include "hccl.h"

struct hccl_ranktable_rank {
  uint32_t server;     /* index in server_list */
  uint32_t local_rank; /* index in its server's device list */
  int32_t device;      /* device_id */
  char server_id[256]; /* its server's server_id */
};

struct hccl_ranktable {
  uint32_t nranks, nservers, per_server;
  struct hccl_ranktable_rank rank[]; /* [nranks], by rank_id */
};

/* Parses text (from `file`, named in messages) into a table the caller frees with free(). */
HcclResult hccl__ranktable_parse(const char *text, const char *file, struct hccl_ranktable **out);
/* Reads and parses the file at path. */
HcclResult hccl__ranktable_load(const char *path, struct hccl_ranktable **out);

#endif
