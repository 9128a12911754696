/*
 * settings.h - every environment variable libhccl reads, read in one place (settings.c) when a
 * communicator is made, and documented in one table (docs/settings.md).
 *
 * Two kinds: the HCCL_* tuning variables (names and defaults as Huawei's HCCL), and the rank
 * variables launchers set (torchrun's RANK/WORLD_SIZE/..., Ascend scripts' RANK_ID/RANK_SIZE/
 * DEVICE_ID). A bad value fails the load with HCCL_E_PARA and a message naming the variable,
 * the value and the accepted range.
 */
#ifndef HCCL_SETTINGS_H
#define HCCL_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"

/* HCCL_ALGO_ONESHOT: the one-shot allreduce inside one server (algo/oneshot.c); one word only. */
enum hccl_algo_choice {
  HCCL_ALGO_AUTO = 0,
  HCCL_ALGO_RING = 1,
  HCCL_ALGO_HD = 2,
  HCCL_ALGO_ONESHOT = 3
};

/* HCCL_ALGO: one word forces one flat algorithm over every rank; HCCL's level form forces
 * the algorithm inside a server (level 0) and between servers (level 1) of the two-level
 * allreduce. `choice` is the flat choice (the word, or level0 else level1 of the level form). */
struct hccl_algo_setting {
  enum hccl_algo_choice choice;
  bool levels; /* the level form was used */
  enum hccl_algo_choice level[2];
};

/* HCCL_NET: which transport carries the links between servers. */
enum hccl_net {
  HCCL_NET_AUTO = 0, /* RDMA when both ranks have an active port, else TCP */
  HCCL_NET_RDMA = 1, /* RDMA or an error naming what was found */
  HCCL_NET_TCP = 2   /* TCP only: no RDMA device is opened */
};

/* Parses an HCCL_NET value: auto; rdma (or NCCL_NET's IB, and RoCE); tcp (or NCCL_NET's
 * Socket); case ignored. HCCL_E_PARA, logged, for anything else. */
HcclResult hccl__settings_parse_net(const char *text, enum hccl_net *out);

struct hccl_settings {
  int64_t connect_timeout_ms;    /* HCCL_CONNECT_TIMEOUT, seconds in the variable */
  char connect_timeout_src[64];  /* where connect_timeout_ms came from, as the user set it: the
                                  * variable, or HcclCommConfig's timeoutSource */
  int64_t exec_timeout_ms;       /* HCCL_EXEC_TIMEOUT, seconds in the variable */
  char exec_timeout_src[64];     /* where exec_timeout_ms came from, as the user set it: the
                                  * variable, or HcclCommConfig's timeoutSource */
  size_t buffsize;               /* HCCL_BUFFSIZE, MB in the variable, bytes here */
  struct hccl_algo_setting algo; /* HCCL_ALGO */
  char topo_file[512];           /* HCCL_TOPO_FILE, "" = flat */
  char if_ip[64];                /* HCCL_IF_IP, "" = unset; "localhost" reads as 127.0.0.1 */
  char socket_ifname[256];       /* HCCL_SOCKET_IFNAME, "" = automatic (transport/tcp/tcp.h) */
  int spin;                      /* HCCL_SPIN: microseconds of polling, -1 = automatic */
  char trace_file[512];          /* HCCL_TRACE_FILE, "" = no trace (core/trace.h) */
  char fr_dir[512];              /* HCCL_FLIGHT_RECORDER_DIR, "" = off (core/flight.h) */
  uint32_t fr_entries;           /* HCCL_FLIGHT_RECORDER_ENTRIES */
  char job_token[129];           /* HCCL_JOB_TOKEN, "" = none (bootstrap/trust.h) */
  bool whitelist_on;             /* HCCL_WHITELIST_DISABLE=0 */
  char whitelist_file[512];      /* HCCL_WHITELIST_FILE */
  /* Between servers (transport/rdma/rdma.h): HCCL_NET chooses RDMA or TCP; the rest are the
   * RDMA queue pairs' knobs, with HCCL's names, ranges and defaults where HCCL has them. */
  enum hccl_net net;             /* HCCL_NET */
  int rdma_timeout;              /* HCCL_RDMA_TIMEOUT: 4.096 us x 2^t per try, 5-20 */
  int rdma_retry_cnt;            /* HCCL_RDMA_RETRY_CNT: 1-7 */
  int rdma_tc;                   /* HCCL_RDMA_TC: traffic class (DSCP x 4), 0-255 */
  int rdma_sl;                   /* HCCL_RDMA_SL: service level, 0-7 */
  int rdma_gid_index;            /* HCCL_RDMA_GID_INDEX, -1 = RoCE v2 over IPv4, found */
  char rdma_device[64];          /* HCCL_RDMA_DEVICE: "name" or "name:port", "" = first active */

  /* Rank variables; have_rank is false when none is set (a one-rank job). */
  bool have_rank;
  uint32_t rank, world_size;
  int32_t local_rank;       /* -1 when unset */
  int32_t local_world_size; /* -1 when unset */
  int32_t device_id;        /* HcclSetDevice, else DEVICE_ID, ASCEND_DEVICE_ID, the local rank
                               variable (those only when they describe this process), else -1 */
  const char *device_src;   /* which of those gave device_id (a static string), NULL when -1 */
  char master_addr[256];    /* "" when unset */
  uint16_t master_port;     /* 0 when unset */
  uint16_t base_port;       /* HCCL_IF_BASE_PORT: the store's port under mpirun/srun/rank tables */
  const char *starter;      /* whose variables gave the rank ("Open MPI's mpirun", ...) */
  char rank_table[512];     /* RANK_TABLE_FILE, "" = none */
};

/* Reads every variable into *out (defaults for the unset ones) and applies HCCL_LOG_LEVEL.
 * Returns HCCL_E_PARA, logged, naming the first bad variable. */
HcclResult hccl__settings_load(struct hccl_settings *out);

/* The same, for a communicator that meets its peers through a store the caller passed in: the
 * rank variables may be set without MASTER_ADDR/MASTER_PORT (torch's file:// init). */
HcclResult hccl__settings_load_no_master(struct hccl_settings *out);

/* The same, for a communicator whose caller gives the rank and size (HcclCommInitStore,
 * HcclCommInitRootInfo, HcclCommInitClusterInfo): no starter's rank variable is read, since a
 * parent may have left them (a Slurm allocation, an exported WORLD_SIZE). The device is
 * HcclSetDevice's; else DEVICE_ID, ASCEND_DEVICE_ID or the local rank variable, but only when
 * the starter's rank variable equals `rank` (and its size variable, if set, `size`), i.e. they
 * were set for this process; else -1 (the bootstrap then uses the rank's index on its server). */
HcclResult hccl__settings_load_given(struct hccl_settings *out, uint32_t rank, uint32_t size);

/* Largest device id HcclSetDevice and the device variables accept. */
#define HCCL_MAX_DEVICE_ID (1 << 20)

/* The process's device (core/process.c's HcclSetDevice/HcclGetDevice; the settings' first
 * source of a rank's device). _set: HCCL_E_PARA, naming caller and the range, unless device is
 * from 0 to HCCL_MAX_DEVICE_ID. hccl__process_device: the device set, or -1. */
HcclResult hccl__process_device_set(int32_t device, const char *caller);
int32_t hccl__process_device(void);

/* The first host of a Slurm host list ("node[01-04,07],gpu3" -> "node01"). */
HcclResult hccl__slurm_first_host(const char *list, char *out, size_t len);

/* Every HCCL_* name some part of the project (libhccl, npu-launch, torch_hccl, ddp, perf, the
 * build and the tests) reads or sets, NULL-terminated. The first load of a process logs one
 * warning per HCCL_* name in its environment that is not in this list. */
extern const char *const hccl__settings_known[];

/* The known name nearest (edit distance, case ignored) to name[0..len), or NULL when none is
 * within a typo's reach of it. */
const char *hccl__settings_closest(const char *name, size_t len);

/* Logs one WARN line per HCCL_* entry of env ("NAME=value" strings, NULL-terminated) that is
 * not a known name, with the closest known name when there is one. Returns how many. */
int hccl__settings_warn_unknown(char *const *env);

/* Parses an HCCL_ALGO value ("ring", "tree", "hd", "H-D_R", "level0:NA;level1:ring", ...). */
HcclResult hccl__settings_parse_algo(const char *text, struct hccl_algo_setting *out);

#endif
