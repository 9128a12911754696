/*
 * settings.c - reads the environment once per communicator into struct hccl_settings, and
 * warns (once per process) of HCCL_* names no part of the project reads. The table in
 * docs/settings.md lists the same variables with their defaults and ranges; keep the two in
 * step.
 */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hostlist.h"
#include "log.h"
#include "spelling.h"

/* Reads integer variable `name` into *out, or leaves *out (the default) when unset. */
/* Reads an integer variable in [lo, hi]; unit (NULL: none) names what it counts, so that the
 * message of a bad value says what the number means ("from 1 to 65536 MiB"). */
static HcclResult env_int_unit(const char *name, int64_t lo, int64_t hi, const char *unit,
                               int64_t *out, bool *set) {
  const char *v = getenv(name);
  if (set) *set = false;
  if (v == NULL || *v == '\0') return HCCL_SUCCESS;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  while (*end && isspace((unsigned char)*end))
    end++;
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi)
    return hccl__fail(HCCL_E_PARA,
                      "%s='%s' is not valid: it must be an integer from %lld to %lld%s%s", name,
                      v, (long long)lo, (long long)hi, unit ? " " : "", unit ? unit : "");
  *out = x;
  if (set) *set = true;
  return HCCL_SUCCESS;
}

static HcclResult env_int(const char *name, int64_t lo, int64_t hi, int64_t *out, bool *set) {
  return env_int_unit(name, lo, hi, NULL, out, set);
}

static void env_str(const char *name, char *out, size_t len) {
  const char *v = getenv(name);
  out[0] = '\0';
  if (v) {
    strncpy(out, v, len - 1);
    out[len - 1] = '\0';
  }
}

static int algo_word(const char *w, size_t n) {
  static const struct {
    const char *name;
    int algo;
  } words[] = {{"ring", HCCL_ALGO_RING}, {"tree", HCCL_ALGO_HD},     {"hd", HCCL_ALGO_HD},
               {"H-D_R", HCCL_ALGO_HD},  {"H-D", HCCL_ALGO_HD},      {"NA", HCCL_ALGO_AUTO},
               {"auto", HCCL_ALGO_AUTO}, {"default", HCCL_ALGO_AUTO}, {"oneshot", HCCL_ALGO_ONESHOT}};
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
    if (strlen(words[i].name) == n && strncasecmp(words[i].name, w, n) == 0) return words[i].algo;
  return -1;
}

HcclResult hccl__settings_parse_algo(const char *text, struct hccl_algo_setting *out) {
  /* Either one word (one flat algorithm over every rank), or HCCL's "level0:X;level1:Y"
   * (inside a server level0, between servers level1; a level set to NA is left to the cost
   * model). `choice` is what a flat choice uses: the word, or level0, else level1. */
  const char *p = text;
  memset(out, 0, sizeof(*out));
  if (strchr(text, ':') == NULL) {
    int a = algo_word(text, strlen(text));
    if (a < 0) goto bad;
    out->choice = (enum hccl_algo_choice)a;
    return HCCL_SUCCESS;
  }
  int level_algo[2] = {HCCL_ALGO_AUTO, HCCL_ALGO_AUTO};
  while (*p) {
    const char *semi = strchr(p, ';');
    size_t len = semi ? (size_t)(semi - p) : strlen(p);
    const char *colon = memchr(p, ':', len);
    if (!colon) goto bad;
    size_t klen = (size_t)(colon - p);
    int level;
    if (klen == 6 && strncasecmp(p, "level0", 6) == 0)
      level = 0;
    else if (klen == 6 && strncasecmp(p, "level1", 6) == 0)
      level = 1;
    else
      goto bad;
    int a = algo_word(colon + 1, len - klen - 1);
    if (a < 0 || a == HCCL_ALGO_ONESHOT) goto bad; /* one-shot has no levels */
    level_algo[level] = a;
    p += len;
    if (*p == ';') p++;
  }
  out->levels = true;
  out->level[0] = (enum hccl_algo_choice)level_algo[0];
  out->level[1] = (enum hccl_algo_choice)level_algo[1];
  out->choice = out->level[0] != HCCL_ALGO_AUTO ? out->level[0] : out->level[1];
  return HCCL_SUCCESS;
bad:
  return hccl__fail(HCCL_E_PARA,
                    "HCCL_ALGO='%s' is not valid: use ring, tree (recursive halving-doubling, "
                    "also spelled hd or H-D_R), oneshot (one server's allreduce in one "
                    "synchronisation; a word of its own, not a level), or HCCL's form "
                    "level0:<algo>;level1:<algo> with NA for a level left to the cost model",
                    text);
}

HcclResult hccl__settings_parse_net(const char *text, enum hccl_net *out) {
  static const struct {
    const char *word;
    enum hccl_net net;
  } words[] = {{"auto", HCCL_NET_AUTO}, {"rdma", HCCL_NET_RDMA}, {"ib", HCCL_NET_RDMA},
               {"roce", HCCL_NET_RDMA}, {"tcp", HCCL_NET_TCP},   {"socket", HCCL_NET_TCP}};
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
    if (strcasecmp(text, words[i].word) == 0) {
      *out = words[i].net;
      return HCCL_SUCCESS;
    }
  return hccl__fail(HCCL_E_PARA,
                    "HCCL_NET='%s' is not valid: use auto (RDMA between servers whose ranks both "
                    "have an active RDMA port, else TCP), rdma (also IB or RoCE: RDMA or an "
                    "error) or tcp (also Socket)",
                    text);
}

/* The RDMA settings (transport/rdma/): HCCL's four knobs with HCCL's ranges and defaults
 * (CANN's environment variable reference), and the device and GID index NCCL users set with
 * NCCL_IB_HCA and NCCL_IB_GID_INDEX. */
static HcclResult load_rdma(struct hccl_settings *s) {
  const char *net = getenv("HCCL_NET");
  s->net = HCCL_NET_AUTO;
  if (net && *net) HCCL_TRY(hccl__settings_parse_net(net, &s->net));
  int64_t v = 20;
  HCCL_TRY(env_int_unit("HCCL_RDMA_TIMEOUT", 5, 20, "(the QP's timeout: 4.096 us x 2^value)",
                        &v, NULL));
  s->rdma_timeout = (int)v;
  v = 7;
  HCCL_TRY(env_int_unit("HCCL_RDMA_RETRY_CNT", 1, 7, "retries", &v, NULL));
  s->rdma_retry_cnt = (int)v;
  v = 132;
  HCCL_TRY(env_int_unit("HCCL_RDMA_TC", 0, 255, "(DSCP x 4)", &v, NULL));
  if (v % 4 != 0)
    return hccl__fail(HCCL_E_PARA,
                      "HCCL_RDMA_TC='%s' is not valid: it must be a multiple of 4 from 0 to 255 "
                      "(the DSCP x 4: the low 2 bits of the traffic class are ECN's)",
                      getenv("HCCL_RDMA_TC"));
  s->rdma_tc = (int)v;
  v = 4;
  HCCL_TRY(env_int_unit("HCCL_RDMA_SL", 0, 7, "(the service level)", &v, NULL));
  s->rdma_sl = (int)v;
  v = -1;
  HCCL_TRY(env_int_unit("HCCL_RDMA_GID_INDEX", 0, 255, "(an index of the port's GID table)", &v,
                        NULL));
  s->rdma_gid_index = (int)v;
  const char *dev = getenv("HCCL_RDMA_DEVICE");
  if (dev && strlen(dev) >= sizeof(s->rdma_device))
    return hccl__fail(HCCL_E_PARA, "HCCL_RDMA_DEVICE='%s' is too long: at most %zu characters",
                      dev, sizeof(s->rdma_device) - 1);
  env_str("HCCL_RDMA_DEVICE", s->rdma_device, sizeof(s->rdma_device));
  return HCCL_SUCCESS;
}

/* Every HCCL_* variable some part of this project reads or sets, the one list of them: a name
 * in the environment that starts with HCCL_ and is not here draws a warning (warn_unknown).
 * Each is documented in docs/settings.md; tests/base/test_settings.c greps the sources for a
 * name read anywhere and missing here. HCCL's own names that Ascend users export (FACTS.md's
 * HCCL table) are all read by libhccl, so none is listed as "accepted and ignored". */
const char *const hccl__settings_known[] = {
    /* libhccl (load_common, load_log_level) */
    "HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT", "HCCL_BUFFSIZE", "HCCL_SPIN", "HCCL_ALGO",
    "HCCL_TOPO_FILE", "HCCL_IF_IP", "HCCL_SOCKET_IFNAME", "HCCL_TRACE_FILE",
    "HCCL_FLIGHT_RECORDER_DIR", "HCCL_FLIGHT_RECORDER_ENTRIES", "HCCL_JOB_TOKEN",
    "HCCL_WHITELIST_DISABLE", "HCCL_WHITELIST_FILE", "HCCL_IF_BASE_PORT", "HCCL_LOG_LEVEL",
    "HCCL_NET", "HCCL_RDMA_TIMEOUT", "HCCL_RDMA_RETRY_CNT", "HCCL_RDMA_TC", "HCCL_RDMA_SL",
    "HCCL_RDMA_DEVICE", "HCCL_RDMA_GID_INDEX",
    /* npu-launch reads and sets for its ranks only HCCL_TOPO_FILE and HCCL_JOB_TOKEN (above);
     * torch_hccl, ddp and the perf programs read none. The build and the test suite: */
    "HCCL_BIN_DIR", "HCCL_TEST_INIT", "HCCL_TEST_SHARED", "HCCL_REDUCE_BENCH",
    NULL};

const char *hccl__settings_closest(const char *name, size_t len) {
  /* Up to 1 edit in a name of up to 4 letters after HCCL_, 2 up to 10, 3 beyond: enough for a
   * typo, too few to turn one word into another. */
  size_t body = len > 5 ? len - 5 : 0;
  int limit = body <= 4 ? 1 : body <= 10 ? 2 : 3, best = limit + 1;
  const char *closest = NULL;
  if (len > 63) return NULL;
  for (int i = 0; hccl__settings_known[i]; i++) {
    const char *k = hccl__settings_known[i];
    int d = hccl__edit_distance(name, len, k, strlen(k));
    if (d < best) {
      best = d;
      closest = k;
    }
  }
  return closest;
}

int hccl__settings_warn_unknown(char *const *env) {
  int warned = 0;
  for (; env && *env; env++) {
    const char *e = *env;
    if (strncmp(e, "HCCL_", 5) != 0) continue;
    size_t len = strcspn(e, "=");
    bool known = false;
    for (int i = 0; hccl__settings_known[i] && !known; i++) {
      const char *k = hccl__settings_known[i];
      known = strlen(k) == len && strncmp(k, e, len) == 0;
    }
    if (known) continue;
    const char *near = hccl__settings_closest(e, len);
    if (near)
      HCCL_WARN("%.*s is not a setting of this library (did you mean %s?); it is ignored",
                (int)len, e, near);
    else
      HCCL_WARN("%.*s is not a setting of this library; it is ignored (docs/settings.md lists "
                "the settings)",
                (int)len, e);
    warned++;
  }
  return warned;
}

extern char **environ;

/* The environment's unknown HCCL_* names are logged by the first load of the process only:
 * they do not change between communicators, and one line per name is enough. */
static void warn_unknown_once(void) {
  static atomic_flag done = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&done)) hccl__settings_warn_unknown(environ);
}

static HcclResult load_log_level(void) {
  const char *v = getenv("HCCL_LOG_LEVEL");
  if (!v || !*v) return HCCL_SUCCESS;
  static const char *const names[] = {"debug", "info", "warn", "error"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(v, names[i]) == 0 || (v[0] == '0' + i && v[1] == '\0')) {
      hccl__log_set_level((enum hccl_log_level)i);
      return HCCL_SUCCESS;
    }
  }
  if (strcasecmp(v, "warning") == 0) {
    hccl__log_set_level(HCCL_LOG_WARN);
    return HCCL_SUCCESS;
  }
  return hccl__fail(HCCL_E_PARA,
                    "HCCL_LOG_LEVEL='%s' is not valid: use debug, info, warn or error "
                    "(or Ascend's 0-3)",
                    v);
}

/* The device this process chose with HcclSetDevice (torch_hccl.set_device), -1 = none: the
 * role of aclrtSetDevice / torch.npu.set_device. Process-wide, as a device is. */
static _Atomic int32_t g_process_device = -1;

HcclResult hccl__process_device_set(int32_t device, const char *caller) {
  if (device < 0 || device > HCCL_MAX_DEVICE_ID)
    return hccl__fail(HCCL_E_PARA, "%s(%d): a device id must be from 0 to %d", caller,
                      (int)device, HCCL_MAX_DEVICE_ID);
  atomic_store(&g_process_device, device);
  return HCCL_SUCCESS;
}

int32_t hccl__process_device(void) { return atomic_load(&g_process_device); }

/* The device HcclSetDevice chose, which beats every variable. */
static void process_device(struct hccl_settings *s) {
  int32_t d = hccl__process_device();
  s->device_id = d;
  s->device_src = d >= 0 ? "HcclSetDevice" : NULL;
}

/* The job starters whose variables give a rank its place, in the order they are looked for:
 * the first whose rank or size variable is set wins. Local rank/size fall back to
 * LOCAL_RANK/LOCAL_WORLD_SIZE. */
static const struct starter {
  const char *name, *rank, *size, *local_rank, *local_size;
} starters[] = {
    {"torchrun/npu-launch", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Ascend", "RANK_ID", "RANK_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI's mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH's mpiexec", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm's srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

static bool set(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

HcclResult hccl__slurm_first_host(const char *list, char *out, size_t len) {
  if (hccl__hostlist_first(list, out, len) != 0)
    return hccl__fail(HCCL_E_PARA,
                      "SLURM_JOB_NODELIST='%s' does not start with a host or a host[range] entry",
                      list ? list : "");
  return HCCL_SUCCESS;
}

/* The starter whose rank or size variable is set, or NULL when none is. */
static const struct starter *find_starter(void) {
  for (size_t i = 0; i < sizeof(starters) / sizeof(starters[0]); i++)
    if (set(starters[i].rank) || set(starters[i].size)) return &starters[i];
  return NULL;
}

/* The device named by the environment for the process its rank variables describe:
 * DEVICE_ID, else ASCEND_DEVICE_ID, else the starter's local rank (st may be NULL: none set).
 * Sets s->device_id and s->device_src, or leaves -1 and NULL. */
static HcclResult env_device(const struct starter *st, struct hccl_settings *s) {
  const char *const names[] = {"DEVICE_ID", "ASCEND_DEVICE_ID",
                               st && set(st->local_rank) ? st->local_rank : "LOCAL_RANK"};
  for (int i = 0; i < 3; i++) {
    int64_t v = -1;
    bool have;
    HCCL_TRY(env_int(names[i], 0, HCCL_MAX_DEVICE_ID, &v, &have));
    if (have) {
      s->device_id = (int32_t)v;
      s->device_src = names[i];
      return HCCL_SUCCESS;
    }
  }
  return HCCL_SUCCESS;
}

/* need_master: the rank variables are the job's rendezvous (HcclCommInitFromEnv), so a master
 * address and port must be known. */
static HcclResult load_rank(struct hccl_settings *s, bool need_master) {
  const struct starter *st = find_starter();
  if (!st) st = &starters[0];
  s->starter = st->name;
  int64_t rank = 0, size = 1;
  bool have_r, have_s;
  HCCL_TRY(env_int(st->size, 1, 1 << 20, &size, &have_s));
  HCCL_TRY(env_int(st->rank, 0, (1 << 20) - 1, &rank, &have_r));
  /* With a rank table the size is the table's: the rank alone is enough (HCCL's RANK_ID). */
  if (have_r && !have_s && set("RANK_TABLE_FILE")) {
    have_s = true;
    size = rank + 1;
  }
  if (have_r != have_s)
    return hccl__fail(HCCL_E_PARA, "%s is set but %s is not: a launcher must set both",
                      have_r ? st->rank : st->size, have_r ? st->size : st->rank);
  if (rank >= size)
    return hccl__fail(HCCL_E_PARA, "%s=%lld is out of range: it must be below %s=%lld", st->rank,
                      (long long)rank, st->size, (long long)size);
  s->have_rank = have_r;
  s->rank = (uint32_t)rank;
  s->world_size = (uint32_t)size;

  int64_t v = -1;
  const char *lr = set(st->local_rank) ? st->local_rank : "LOCAL_RANK";
  const char *ls = set(st->local_size) ? st->local_size : "LOCAL_WORLD_SIZE";
  HCCL_TRY(env_int(lr, 0, 1 << 20, &v, NULL));
  s->local_rank = (int32_t)v;
  v = -1;
  /* Slurm writes SLURM_NTASKS_PER_NODE only with --ntasks-per-node; a plain number then. */
  const char *lsv = getenv(ls);
  if (strcmp(ls, "SLURM_NTASKS_PER_NODE") != 0 || (lsv && strspn(lsv, "0123456789") == strlen(lsv)))
    HCCL_TRY(env_int(ls, 1, 1 << 20, &v, NULL));
  s->local_world_size = (int32_t)v;
  process_device(s);
  if (s->device_id < 0) HCCL_TRY(env_device(st, s));

  bool have_port = s->master_port != 0;
  int64_t port = s->master_port;
  bool mpi_or_slurm = st != &starters[0] && st != &starters[1];
  /* Started by mpirun or srun without MASTER_*: Slurm names the hosts; mpirun on one host
   * means this host; the port is HCCL's base port. */
  if (!s->master_addr[0] && mpi_or_slurm && s->have_rank) {
    if (set("SLURM_JOB_NODELIST") && st == &starters[4])
      HCCL_TRY(hccl__slurm_first_host(getenv("SLURM_JOB_NODELIST"), s->master_addr,
                                      sizeof(s->master_addr)));
    else if (s->local_world_size == (int32_t)s->world_size)
      snprintf(s->master_addr, sizeof(s->master_addr), "127.0.0.1");
  }
  if (!have_port && mpi_or_slurm && s->have_rank) {
    port = s->base_port;
    have_port = true;
  }
  s->master_port = (uint16_t)port;
  if (need_master && s->have_rank && s->world_size > 1) {
    if (s->master_addr[0] == '\0')
      return hccl__fail(HCCL_E_PARA,
                        "MASTER_ADDR is not set: with %s=%u (%s) on several servers every rank "
                        "needs the address where rank 0 serves the bootstrap store; set it "
                        "(mpirun -x MASTER_ADDR=<rank 0's host>)",
                        st->size, s->world_size, st->name);
    if (!have_port)
      return hccl__fail(HCCL_E_PARA,
                        "MASTER_PORT is not set: with %s=%u every rank needs the port where rank "
                        "0 serves the bootstrap store",
                        st->size, s->world_size);
  }
  return HCCL_SUCCESS;
}

/* Everything but the rank variables. */
static HcclResult load_common(struct hccl_settings *s) {
  memset(s, 0, sizeof(*s));
  s->local_rank = s->local_world_size = s->device_id = -1;
  HCCL_TRY(load_log_level());
  warn_unknown_once();

  int64_t v = 120;
  HCCL_TRY(env_int_unit("HCCL_CONNECT_TIMEOUT", 1, 7200, "seconds", &v, NULL));
  s->connect_timeout_ms = v * 1000;
  snprintf(s->connect_timeout_src, sizeof(s->connect_timeout_src), "HCCL_CONNECT_TIMEOUT");
  v = 1836;
  HCCL_TRY(env_int_unit("HCCL_EXEC_TIMEOUT", 1, 2147483, "seconds", &v, NULL));
  s->exec_timeout_ms = v * 1000;
  snprintf(s->exec_timeout_src, sizeof(s->exec_timeout_src), "HCCL_EXEC_TIMEOUT");
  v = 200;
  HCCL_TRY(env_int_unit("HCCL_BUFFSIZE", 1, 65536, "MiB", &v, NULL));
  s->buffsize = (size_t)v << 20;
  v = -1;
  HCCL_TRY(env_int_unit("HCCL_SPIN", 0, 1000000, "microseconds", &v, NULL));
  s->spin = (int)v;

  const char *algo = getenv("HCCL_ALGO");
  memset(&s->algo, 0, sizeof(s->algo));
  if (algo && *algo) HCCL_TRY(hccl__settings_parse_algo(algo, &s->algo));

  env_str("HCCL_TOPO_FILE", s->topo_file, sizeof(s->topo_file));
  env_str("HCCL_IF_IP", s->if_ip, sizeof(s->if_ip));
  if (strcasecmp(s->if_ip, "localhost") == 0) snprintf(s->if_ip, sizeof(s->if_ip), "127.0.0.1");
  env_str("HCCL_SOCKET_IFNAME", s->socket_ifname, sizeof(s->socket_ifname));

  env_str("HCCL_TRACE_FILE", s->trace_file, sizeof(s->trace_file));
  env_str("HCCL_FLIGHT_RECORDER_DIR", s->fr_dir, sizeof(s->fr_dir));
  v = 2048;
  HCCL_TRY(env_int_unit("HCCL_FLIGHT_RECORDER_ENTRIES", 1, 1000000, "entries", &v, NULL));
  s->fr_entries = (uint32_t)v;
  env_str("MASTER_ADDR", s->master_addr, sizeof(s->master_addr));
  v = 0;
  HCCL_TRY(env_int("MASTER_PORT", 1, 65535, &v, NULL));
  s->master_port = (uint16_t)v; /* 0: unset */
  env_str("RANK_TABLE_FILE", s->rank_table, sizeof(s->rank_table));
  const char *token = getenv("HCCL_JOB_TOKEN");
  if (token && strlen(token) >= sizeof(s->job_token))
    return hccl__fail(HCCL_E_PARA, "HCCL_JOB_TOKEN is %zu characters long; the limit is %zu",
                      strlen(token), sizeof(s->job_token) - 1);
  env_str("HCCL_JOB_TOKEN", s->job_token, sizeof(s->job_token));
  v = 1;
  HCCL_TRY(env_int("HCCL_WHITELIST_DISABLE", 0, 1, &v, NULL));
  s->whitelist_on = v == 0;
  env_str("HCCL_WHITELIST_FILE", s->whitelist_file, sizeof(s->whitelist_file));
  if (s->whitelist_on && !s->whitelist_file[0])
    return hccl__fail(HCCL_E_PARA,
                      "HCCL_WHITELIST_DISABLE=0 turns the whitelist on, but HCCL_WHITELIST_FILE "
                      "is not set: name the JSON file of allowed addresses");
  v = 60000;
  HCCL_TRY(env_int("HCCL_IF_BASE_PORT", 1, 65535, &v, NULL));
  s->base_port = (uint16_t)v;
  return load_rdma(s);
}

HcclResult hccl__settings_load(struct hccl_settings *s) {
  HCCL_TRY(load_common(s));
  return load_rank(s, true);
}

HcclResult hccl__settings_load_no_master(struct hccl_settings *s) {
  HCCL_TRY(load_common(s));
  return load_rank(s, false);
}

/* Whether the starter's rank variables describe the process the caller says is `rank` of
 * `size`: its rank variable is set and equal, and its size variable, if set, equal. A value
 * that is not a number describes nothing (it is not ours to judge: the caller gave the rank). */
static bool describes(const struct starter *st, uint32_t rank, uint32_t size) {
  const char *r = getenv(st->rank), *n = getenv(st->size);
  char *end;
  if (!r || !*r) return false;
  errno = 0;
  long long x = strtoll(r, &end, 10);
  if (errno || end == r || *end || x != (long long)rank) return false;
  if (!n || !*n) return true;
  x = strtoll(n, &end, 10);
  return !errno && end != n && !*end && x == (long long)size;
}

HcclResult hccl__settings_load_given(struct hccl_settings *s, uint32_t rank, uint32_t size) {
  HCCL_TRY(load_common(s));
  s->have_rank = true;
  s->rank = rank;
  s->world_size = size;
  s->starter = "the caller";
  process_device(s);
  if (s->device_id >= 0) return HCCL_SUCCESS;
  const struct starter *st = find_starter();
  if (st && !describes(st, rank, size)) {
    /* Left behind by a parent (a Slurm allocation, an exported WORLD_SIZE, the launcher that
     * started the spawning process): they describe another process, so none is read. */
    HCCL_INFO("rank %u of %u: %s=%s %s=%s (%s) describe another process; the device is this "
              "rank's index on its server",
              rank, size, st->rank, getenv(st->rank) ? getenv(st->rank) : "", st->size,
              getenv(st->size) ? getenv(st->size) : "", st->name);
    return HCCL_SUCCESS;
  }
  return env_device(st, s);
}
