/*
 * comm_init.c - the entry points that make a communicator, one per way a job meets: a root
 * info (HcclGetRootInfo / HcclCommInitRootInfo, as HCCL and NCCL's unique id), the environment
 * (HcclCommInitFromEnv: torchrun's and npu-launch's variables), a rank table
 * (HcclCommInitClusterInfo) and the caller's store (HcclCommInitStore). Each finds or starts
 * the store, sets the key prefix, and runs the bootstrap (comm.c).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "group_open.h"
#include "log.h"
#include "ranktable.h"
#include "store.h"
#include "trust.h"

#define ROOT_MAGIC 0x68636c6c726f6f74ULL

struct root_blob {
  uint64_t magic;
  uint64_t job;
  uint16_t port;
  char host[256];
};

/* Servers started by HcclGetRootInfo in this process, adopted by its rank-0 communicator. */
static struct pending_server {
  uint64_t job;
  struct hccl_store_server *server;
} g_pending[16];
static pthread_mutex_t g_pending_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned g_env_generation;

HcclResult hccl__comm_store_trust(const struct hccl_settings *cfg, const char *token,
                             struct hccl_store_trust *t) {
  memset(t, 0, sizeof(*t));
  snprintf(t->token, sizeof(t->token), "%s", token);
  if (cfg->whitelist_on) HCCL_TRY(hccl__whitelist_load(cfg->whitelist_file, &t->whitelist));
  return HCCL_SUCCESS;
}

/* A root info's job id is its job token: only holders of the root info get in. */
static void root_token(uint64_t job, char out[32]) {
  snprintf(out, 32, "root-%016llx", (unsigned long long)job);
}

HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) {
  if (!rootInfo) return hccl__fail(HCCL_E_PTR, "HcclGetRootInfo: rootInfo is NULL");
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_given(&cfg, 0, 1));
  struct root_blob blob = {.magic = ROOT_MAGIC};
  const char *addr = cfg.if_ip[0] ? cfg.if_ip : cfg.master_addr[0] ? cfg.master_addr : "127.0.0.1";
  snprintf(blob.host, sizeof(blob.host), "%s", addr);
  if (getrandom(&blob.job, sizeof(blob.job), 0) != sizeof(blob.job))
    blob.job = (uint64_t)hccl__now_ns() ^ ((uint64_t)getpid() << 32);
  struct hccl_store_server *server;
  struct hccl_store_trust trust;
  char token[32];
  root_token(blob.job, token);
  HCCL_TRY(hccl__comm_store_trust(&cfg, token, &trust));
  HCCL_TRY(hccl__store_server_start_trusted(addr, 0, &trust, &server, &blob.port));
  pthread_mutex_lock(&g_pending_lock);
  int slot = -1;
  for (int i = 0; i < 16; i++)
    if (!g_pending[i].server) {
      slot = i;
      break;
    }
  if (slot >= 0) g_pending[slot] = (struct pending_server){blob.job, server};
  pthread_mutex_unlock(&g_pending_lock);
  if (slot < 0) {
    hccl__store_server_stop(server);
    return hccl__fail(HCCL_E_UNAVAIL,
                      "HcclGetRootInfo: 16 root infos are already waiting for their "
                      "communicators in this process");
  }
  memset(rootInfo, 0, sizeof(*rootInfo));
  memcpy(rootInfo->internal, &blob, sizeof(blob));
  return HCCL_SUCCESS;
}

/* Where c's job meets, kept for HcclCommShrink (comm.h). */
static void remember_store(struct hccl_comm *c, const char *host, uint16_t port,
                           const char *token) {
  snprintf(c->boot.store_host, sizeof(c->boot.store_host), "%s", host);
  c->boot.store_port = port;
  snprintf(c->boot.store_token, sizeof(c->boot.store_token), "%s", token);
}

static struct hccl_store_server *adopt_server(uint64_t job) {
  struct hccl_store_server *s = NULL;
  pthread_mutex_lock(&g_pending_lock);
  for (int i = 0; i < 16; i++)
    if (g_pending[i].server && g_pending[i].job == job) {
      s = g_pending[i].server;
      g_pending[i].server = NULL;
    }
  pthread_mutex_unlock(&g_pending_lock);
  return s;
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                HcclComm *comm) {
  HCCL_TRY(hccl__group_refuse_call("HcclCommInitRootInfo"));
  if (!rootInfo || !comm)
    return hccl__fail(HCCL_E_PTR, "HcclCommInitRootInfo: %s is NULL",
                      rootInfo ? "comm" : "rootInfo");
  if (nRanks == 0 || rank >= nRanks)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommInitRootInfo: rank %u is not valid for nRanks %u; a rank must "
                      "be below nRanks and nRanks at least 1",
                      rank, nRanks);
  struct root_blob blob;
  memcpy(&blob, rootInfo->internal, sizeof(blob));
  if (blob.magic != ROOT_MAGIC)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommInitRootInfo: the root info is not one HcclGetRootInfo made "
                      "(bad magic); copy all %d bytes from rank 0",
                      HCCL_ROOT_INFO_BYTES);
  blob.host[sizeof(blob.host) - 1] = '\0';
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_given(&cfg, rank, nRanks));
  struct hccl_comm *c = hccl__comm_alloc(&cfg, rank, nRanks);
  if (!c) return hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
  hccl__log_bind(&c->log);
  snprintf(c->key_prefix, sizeof(c->key_prefix), "job%016llx", (unsigned long long)blob.job);
  if (rank == 0) c->boot.server = adopt_server(blob.job);
  HcclResult r = HCCL_SUCCESS;
  char token[32];
  root_token(blob.job, token);
  remember_store(c, blob.host, blob.port, token);
  if (nRanks > 1)
    r = hccl__store_tcp_connect(blob.host, blob.port, cfg.connect_timeout_ms, &c->boot.store);
  if (r == HCCL_SUCCESS && c->boot.store) r = hccl__store_tcp_hello(c->boot.store, token);
  if (r == HCCL_SUCCESS) r = hccl__comm_bootstrap(c);
  if (r != HCCL_SUCCESS) {
    hccl__comm_free(c);
    return r;
  }
  *comm = c;
  return HCCL_SUCCESS;
}

HcclResult hccl__comm_store_join(struct hccl_comm *c, const char *host, uint16_t port,
                                 const char *token, const char *key, const void *want,
                                 size_t len) {
  int64_t deadline = hccl__now_ns() + c->cfg.connect_timeout_ms * 1000000LL;
  for (;;) {
    int64_t left_ms = (deadline - hccl__now_ns()) / 1000000;
    if (left_ms <= 0) break;
    struct hccl_store *s;
    HCCL_TRY(hccl__store_tcp_connect(host, port, left_ms, &s));
    HcclResult hr = hccl__store_tcp_hello(s, token);
    if (hr != HCCL_SUCCESS) {
      hccl__store_close(s); /* another job's store: waiting will not help */
      return hr;
    }
    void *val = NULL;
    size_t n = 0;
    hccl__log_quiet(1); /* a store of an earlier communicator may close under us */
    HcclResult r = hccl__store_get(s, key, &val, &n, left_ms < 2000 ? left_ms : 2000);
    hccl__log_quiet(0);
    if (r == HCCL_SUCCESS && n == len && memcmp(val, want, n) == 0) {
      free(val);
      c->boot.store = s;
      return HCCL_SUCCESS;
    }
    free(val);
    hccl__store_close(s);
    if (r != HCCL_SUCCESS && r != HCCL_E_TIMEOUT && r != HCCL_E_TCP_TRANSFER) return r;
    usleep(50000);
  }
  return hccl__fail(HCCL_E_TIMEOUT,
                    "rank %u could not join communicator '%s' at %s:%u within %lld s "
                    "(%s): rank 0 never served it",
                    c->rank, c->key_prefix, host, port,
                    (long long)(c->cfg.connect_timeout_ms / 1000), c->cfg.connect_timeout_src);
}

/* Whether host names this machine: one of its interface addresses, or its host name. */
static bool is_this_host(const char *host) {
  struct in6_addr a6;
  struct in_addr a4;
  int fam = inet_pton(AF_INET, host, &a4) == 1    ? AF_INET
            : inet_pton(AF_INET6, host, &a6) == 1 ? AF_INET6
                                                  : 0;
  if (!fam) {
    char me[256] = "";
    gethostname(me, sizeof(me) - 1);
    return strcmp(me, host) == 0 || strcmp(host, "localhost") == 0;
  }
  struct ifaddrs *ifs, *i;
  if (getifaddrs(&ifs) != 0) return true; /* cannot tell: do not refuse */
  bool found = false;
  for (i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != fam) continue;
    found = fam == AF_INET
                ? memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, &a4, sizeof(a4)) == 0
                : memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, &a6, sizeof(a6)) == 0;
  }
  freeifaddrs(ifs);
  return found;
}

/* Fills the rank fields of cfg from rank table `path` for `rank` (HCCL's RANK_TABLE_FILE). */
static HcclResult settings_from_table(const char *path, uint32_t rank, struct hccl_settings *cfg) {
  struct hccl_ranktable *t;
  HCCL_TRY(hccl__ranktable_load(path, &t));
  HcclResult r = HCCL_SUCCESS;
  if (rank >= t->nranks) {
    r = hccl__fail(HCCL_E_PARA, "rank %u is not in rank table %s, which has rank_id 0-%u", rank,
                   path, t->nranks - 1);
  } else if (!is_this_host(t->rank[rank].server_id)) {
    char me[256] = "?";
    gethostname(me, sizeof(me) - 1);
    r = hccl__fail(HCCL_E_PARA,
                   "rank table %s: server_list[%u].server_id: \"%s\" holds rank %u, but that "
                   "rank runs on %s, which has no such address",
                   path, t->rank[rank].server, t->rank[rank].server_id, rank, me);
  } else {
    const struct hccl_ranktable_rank *rk = &t->rank[rank];
    cfg->have_rank = true;
    cfg->rank = rank;
    cfg->world_size = t->nranks;
    cfg->local_rank = (int32_t)rk->local_rank;
    cfg->local_world_size = (int32_t)t->per_server;
    if (cfg->device_src && strcmp(cfg->device_src, "HcclSetDevice") == 0 &&
        cfg->device_id != rk->device) {
      r = hccl__fail(HCCL_E_PARA,
                     "rank table %s gives rank %u device_id %d, but this process set device %d "
                     "(HcclSetDevice / torch_hccl.set_device); they must agree",
                     path, rank, rk->device, cfg->device_id);
      goto out;
    }
    cfg->device_id = rk->device;
    cfg->device_src = "the rank table";
    /* Rank 0 serves the bootstrap store on its server's address. */
    snprintf(cfg->master_addr, sizeof(cfg->master_addr), "%s", t->rank[0].server_id);
    if (!getenv("MASTER_PORT") || !*getenv("MASTER_PORT")) cfg->master_port = cfg->base_port;
  }
out:
  free(t);
  return r;
}

static HcclResult init_env(struct hccl_settings cfg, HcclComm *comm);

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
  HCCL_TRY(hccl__group_refuse_call("HcclCommInitClusterInfo"));
  if (!clusterInfo || !comm)
    return hccl__fail(HCCL_E_PTR, "HcclCommInitClusterInfo: %s is NULL",
                      clusterInfo ? "comm" : "clusterInfo");
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_given(&cfg, rank, 0)); /* the table gives the size */
  HCCL_TRY(settings_from_table(clusterInfo, rank, &cfg));
  return init_env(cfg, comm);
}

HcclResult HcclCommInitFromEnv(HcclComm *comm) {
  HCCL_TRY(hccl__group_refuse_call("HcclCommInitFromEnv"));
  if (!comm) return hccl__fail(HCCL_E_PTR, "HcclCommInitFromEnv: comm is NULL");
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_no_master(&cfg));
  if (cfg.rank_table[0]) {
    if (!cfg.have_rank)
      return hccl__fail(HCCL_E_PARA,
                        "RANK_TABLE_FILE=%s is set but no rank is: set RANK_ID (or RANK) to this "
                        "process's rank_id in it",
                        cfg.rank_table);
    HCCL_TRY(settings_from_table(cfg.rank_table, cfg.rank, &cfg));
  } else {
    HCCL_TRY(hccl__settings_load(&cfg));
  }
  return init_env(cfg, comm);
}

/* Makes the communicator the rank fields of cfg describe, meeting at its master address. */
static HcclResult init_env(struct hccl_settings cfg, HcclComm *comm) {
  uint32_t rank = cfg.have_rank ? cfg.rank : 0, size = cfg.have_rank ? cfg.world_size : 1;
  unsigned gen = atomic_fetch_add(&g_env_generation, 1) + 1;
  struct hccl_comm *c = hccl__comm_alloc(&cfg, rank, size);
  if (!c) return hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
  hccl__log_bind(&c->log);
  snprintf(c->key_prefix, sizeof(c->key_prefix), "env%u", gen);
  remember_store(c, cfg.master_addr, cfg.master_port, cfg.job_token);
  HcclResult r = HCCL_SUCCESS;
  if (size > 1) {
    if (rank == 0) {
      uint16_t port;
      struct hccl_store_trust trust;
      r = hccl__comm_store_trust(&cfg, cfg.job_token, &trust);
      if (r == HCCL_SUCCESS)
        r = hccl__store_server_start_trusted(cfg.master_addr, cfg.master_port, &trust,
                                             &c->boot.server, &port);
      struct hccl_store *s = NULL;
      if (r == HCCL_SUCCESS)
        r = hccl__store_tcp_connect(cfg.master_addr, cfg.master_port, cfg.connect_timeout_ms, &s);
      if (r == HCCL_SUCCESS) {
        c->boot.store = s;
        r = hccl__store_tcp_hello(s, cfg.job_token);
      }
      if (r == HCCL_SUCCESS) r = hccl__store_set(s, "generation", &gen, sizeof(gen));
    } else {
      r = hccl__comm_store_join(c, cfg.master_addr, cfg.master_port, cfg.job_token,
                                "generation", &gen, sizeof(gen));
    }
  }
  if (r == HCCL_SUCCESS) r = hccl__comm_bootstrap(c);
  if (r != HCCL_SUCCESS) {
    hccl__comm_free(c);
    return r;
  }
  *comm = c;
  return HCCL_SUCCESS;
}

void HcclCommConfigInit(HcclCommConfig *config) {
  if (!config) return;
  memset(config, 0, sizeof(*config));
  config->size = sizeof(*config);
}

/* A config's non-zero fields replace the environment's values in *cfg. */
HcclResult hccl__comm_config_apply(const HcclCommConfig *cf, struct hccl_settings *cfg) {
  if (cf->size != sizeof(*cf))
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommConfig.size is %zu, expected %zu: fill the config with "
                      "HcclCommConfigInit first",
                      cf->size, sizeof(*cf));
  if (cf->bufferSizeMB > 65536)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommConfig.bufferSizeMB=%u is not valid: it must be from 1 to 65536 "
                      "(0 = HCCL_BUFFSIZE)",
                      cf->bufferSizeMB);
  if (cf->connectTimeoutMs < 0 || cf->execTimeoutMs < 0)
    return hccl__fail(
        HCCL_E_PARA,
        "HcclCommConfig.%s=%lld is not valid: a timeout is a positive number of "
        "milliseconds (0 = from the environment)",
        cf->connectTimeoutMs < 0 ? "connectTimeoutMs" : "execTimeoutMs",
        (long long)(cf->connectTimeoutMs < 0 ? cf->connectTimeoutMs : cf->execTimeoutMs));
  if (cf->bufferSizeMB) cfg->buffsize = (size_t)cf->bufferSizeMB << 20;
  /* Each timeout named as the user set it: the caller's timeoutSource (a framework's setting,
   * as torch's timeout= sets both), else the field. */
  size_t n = strnlen(cf->timeoutSource, sizeof(cf->timeoutSource));
  if (cf->connectTimeoutMs) {
    cfg->connect_timeout_ms = cf->connectTimeoutMs;
    snprintf(cfg->connect_timeout_src, sizeof(cfg->connect_timeout_src), "%.*s",
             n ? (int)n : (int)strlen("HcclCommConfig.connectTimeoutMs"),
             n ? cf->timeoutSource : "HcclCommConfig.connectTimeoutMs");
  }
  if (cf->execTimeoutMs) {
    cfg->exec_timeout_ms = cf->execTimeoutMs;
    snprintf(cfg->exec_timeout_src, sizeof(cfg->exec_timeout_src), "%.*s",
             n ? (int)n : (int)strlen("HcclCommConfig.execTimeoutMs"),
             n ? cf->timeoutSource : "HcclCommConfig.execTimeoutMs");
  }
  return HCCL_SUCCESS;
}

HcclResult HcclCommInitStore(const HcclStore *store, uint32_t nRanks, uint32_t rank,
                             const HcclCommConfig *config, HcclComm *comm) {
  HCCL_TRY(hccl__group_refuse_call("HcclCommInitStore"));
  if (!store || !comm || !store->set || !store->get)
    return hccl__fail(HCCL_E_PTR, "HcclCommInitStore: %s is NULL",
                      !store        ? "store"
                      : !comm       ? "comm"
                      : !store->set ? "store->set"
                                    : "store->get");
  if (nRanks == 0 || rank >= nRanks)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommInitStore: rank %u is not valid for nRanks %u; a rank must be "
                      "below nRanks and nRanks at least 1",
                      rank, nRanks);
  struct hccl_settings cfg;
  HCCL_TRY(hccl__settings_load_given(&cfg, rank, nRanks));
  if (config) HCCL_TRY(hccl__comm_config_apply(config, &cfg));
  struct hccl_comm *c = hccl__comm_alloc(&cfg, rank, nRanks);
  if (!c) return hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
  if (config) {
    memcpy(c->log.name, config->commName, sizeof(c->log.name));
    c->log.name[sizeof(c->log.name) - 1] = '\0';
  }
  hccl__log_bind(&c->log);
  /* The caller gives each communicator its own namespace (torch: a PrefixStore per group);
   * the name keeps two communicators over one store apart. */
  snprintf(c->key_prefix, sizeof(c->key_prefix), "hccl/%s", c->log.name);
  c->boot.store_external = true;
  c->boot.store_user = *store;
  HcclResult r = hccl__store_ext_new(store, &c->boot.store);
  if (r == HCCL_SUCCESS) r = hccl__comm_bootstrap(c);
  if (r != HCCL_SUCCESS) {
    hccl__comm_free(c);
    return r;
  }
  *comm = c;
  return HCCL_SUCCESS;
}

