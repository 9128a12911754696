/*
 * options.c - npu-launch's command line: the option table (with torchrun's underscore
 * spellings as aliases), defaults, range checks of numeric values, --help and --version.
 *
 * Parsing stops at the first word that is not an option (or after "--"): that word is the
 * program and everything after it is passed to the program untouched.
 */
#include "launch.h"


#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NPU_LAUNCH_VERSION
#define NPU_LAUNCH_VERSION "0.0.0"
#endif

enum {
  OPT_DEVICE_LIST = 256,
  OPT_NPROC,
  OPT_NNODES,
  OPT_NODE_RANK,
  OPT_MASTER_ADDR,
  OPT_MASTER_PORT,
  OPT_CPU_BIND,
  OPT_REPORT_BINDINGS,
  OPT_LOG_DIR,
  OPT_TAG_OUTPUT,
  OPT_DRY_RUN,
  OPT_TOPOLOGY,
  OPT_GRACE,
  OPT_MAX_RESTARTS,
  OPT_ON_FAILURE,
};

static const struct option long_options[] = {
    {"device-list", required_argument, NULL, OPT_DEVICE_LIST},
    {"nproc-per-node", required_argument, NULL, OPT_NPROC},
    {"nproc_per_node", required_argument, NULL, OPT_NPROC},
    {"nnodes", required_argument, NULL, OPT_NNODES},
    {"node-rank", required_argument, NULL, OPT_NODE_RANK},
    {"node_rank", required_argument, NULL, OPT_NODE_RANK},
    {"master-addr", required_argument, NULL, OPT_MASTER_ADDR},
    {"master_addr", required_argument, NULL, OPT_MASTER_ADDR},
    {"master-port", required_argument, NULL, OPT_MASTER_PORT},
    {"master_port", required_argument, NULL, OPT_MASTER_PORT},
    {"cpu-bind", required_argument, NULL, OPT_CPU_BIND},
    {"report-bindings", no_argument, NULL, OPT_REPORT_BINDINGS},
    {"log-dir", required_argument, NULL, OPT_LOG_DIR},
    {"log_dir", required_argument, NULL, OPT_LOG_DIR},
    {"tag-output", no_argument, NULL, OPT_TAG_OUTPUT},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"topology", required_argument, NULL, OPT_TOPOLOGY},
    {"grace-period", required_argument, NULL, OPT_GRACE},
    {"max-restarts", required_argument, NULL, OPT_MAX_RESTARTS},
    {"max_restarts", required_argument, NULL, OPT_MAX_RESTARTS},
    {"on-failure", required_argument, NULL, OPT_ON_FAILURE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const char usage_text[] =
    "Usage: npu-launch [options] [--] program [args...]\n"
    "\n"
    "Starts one process (rank) per device of this server, with the variables HCCL, torchrun\n"
    "and the Ascend scripts read, each bound to its own CPUs. When one rank fails the others\n"
    "are stopped (unless --on-failure continue) and a summary names the failure.\n"
    "\n"
    "Devices and servers:\n"
    "  --device-list LIST     devices of this server, e.g. 0,1,2,3 or 0-3 (sorted: rank i\n"
    "                         drives device sorted[i]); any number of devices on a flat\n"
    "                         topology (the default), 1, 2, 4 or 8 on ascend910\n"
    "  --nproc-per-node N     without --device-list: devices 0..N-1\n"
    "  --nnodes N             servers in the job (default 1); ranks are numbered server by\n"
    "                         server, and servers may run different numbers of ranks (the\n"
    "                         launchers meet on --master-port + 1 and add up their counts)\n"
    "  --node-rank K          this server's index, 0..N-1 (required with --nnodes N > 1,\n"
    "                         unless srun's SLURM_NODEID gives it)\n"
    "  --master-addr ADDR     IPv4 address of server 0 (default 127.0.0.1; names are\n"
    "                         resolved to IPv4, so localhost never becomes ::1)\n"
    "  --master-port PORT     port on server 0 (default 29688); checked to be free there\n"
    "  --topology NAME|PATH   server topology (default: flat, no placement rule; also\n"
    "                         $HCCL_TOPO_FILE). ascend910 turns on HCCL's rules: 1, 2, 4 or\n"
    "                         8 devices, the same on every server, and a 2- or 4-device job\n"
    "                         inside devices 0-3 or 4-7\n"
    "\n"
    "CPU binding:\n"
    "  --cpu-bind MODE        block (default): nproc/ranks CPUs each, rank r on the r-th\n"
    "                         contiguous block, as taskset -c does; none; or a list with one\n"
    "                         entry per rank: 0,1 or 0-3,4-7 or 0+2,1+3 ('+' joins CPUs)\n"
    "  --report-bindings      print each rank's CPUs\n"
    "\n"
    "Output and failures:\n"
    "  --tag-output           prefix each output line with \"[rank N] \"\n"
    "  --log-dir DIR          write each rank's stdout and stderr to DIR/rank_N.log\n"
    "  --grace-period SEC     after the first failure, SIGTERM every rank, then SIGKILL\n"
    "                         those still running after SEC seconds (default 5)\n"
    "  --max-restarts N       when a rank fails, stop every rank and start the whole group\n"
    "                         again, up to N times (torchrun's meaning; default 0); ranks see\n"
    "                         TORCHELASTIC_RESTART_COUNT and NPU_LAUNCH_RESTART_COUNT; across\n"
    "                         servers the launchers agree on --master-port + 1\n"
    "  --on-failure MODE      stop (default): a rank's failure stops every rank; continue:\n"
    "                         the first failed rank is reported and the others run on (a\n"
    "                         program that shrinks its group, dist.shrink_group); the job\n"
    "                         exits 0 when every other rank exits 0, and a second failure\n"
    "                         stops the rest as stop does. Not with --max-restarts\n"
    "  --dry-run              print each rank's command, variables and CPUs; start nothing\n"
    "  -h, --help             this text\n"
    "  -V, --version          the version\n"
    "\n"
    "Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
    "MASTER_PORT, RANK_ID, RANK_SIZE, DEVICE_ID, ASCEND_DEVICE_ID, and OMP_NUM_THREADS (its CPU\n"
    "count) unless already set. Exit status: 0 when every rank exits 0 (with --on-failure\n"
    "continue: every rank but the first failed one); 2 when refused before starting; otherwise\n"
    "the failed rank's exit code (128 + signal number for a signal).\n"
    "See docs/launching.md.\n";

bool launch_parse_long(const char *s, long lo, long hi, long *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* The long option nearest to an unknown "--word" or "--word=value" (a typo: 1 edit in a name
 * of up to 4 letters, 2 up to 10, 3 beyond), or NULL. */
static const char *closest_option(const char *arg) {
  if (strncmp(arg, "--", 2) != 0) return NULL;
  arg += 2;
  size_t n = strcspn(arg, "=");
  if (n == 0 || n > 63) return NULL;
  int limit = n <= 4 ? 1 : n <= 10 ? 2 : 3, best = limit + 1;
  const char *closest = NULL;
  for (const struct option *o = long_options; o->name; o++) {
    size_t m = strlen(o->name);
    if (m > 63 || strchr(o->name, '_')) continue; /* suggest the documented spelling */
    int d = hccl__edit_distance(arg, n, o->name, m);
    if (d < best) {
      best = d;
      closest = o->name;
    }
  }
  return closest;
}

static int usage_error(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int usage_error(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

/* What the command line gave, for the checks that fill in the rest from Slurm. */
struct given {
  bool nnodes, node_rank, master;
};

static void set_defaults(struct launch_opts *o) {
  memset(o, 0, sizeof(*o));
  o->nnodes = 1;
  o->node_rank = 0;
  o->master_addr = LAUNCH_DEFAULT_ADDR;
  o->master_port = LAUNCH_DEFAULT_PORT;
  o->cpu_bind = LAUNCH_BIND_BLOCK;
  o->grace_s = LAUNCH_DEFAULT_GRACE_S;
  o->connect_s = LAUNCH_DEFAULT_CONNECT_S;
}

/* The options that say where this server is in the job: ranks per server, servers, this
 * one's number, server 0's address and port. 0, or -1 with the message in err. */
static int take_placement(int c, struct launch_opts *o, struct given *g, char *err,
                          size_t errlen) {
  long v;
  switch (c) {
  case OPT_NPROC:
    if (!launch_parse_long(optarg, 1, 1000000, &v))
      return usage_error(err, errlen,
                         "--nproc-per-node '%s' is not a positive whole number of ranks", optarg);
    o->nproc_per_node = (int)v;
    break;
  case OPT_NNODES:
    if (!launch_parse_long(optarg, 1, 65536, &v))
      return usage_error(err, errlen, "--nnodes '%s' must be a whole number from 1 to 65536",
                         optarg);
    o->nnodes = (int)v;
    g->nnodes = true;
    break;
  case OPT_NODE_RANK:
    if (!launch_parse_long(optarg, 0, 65535, &v))
      return usage_error(err, errlen, "--node-rank '%s' must be a whole number, 0 or more",
                         optarg);
    o->node_rank = (int)v;
    g->node_rank = true;
    break;
  case OPT_MASTER_ADDR:
    if (!*optarg)
      return usage_error(err, errlen, "--master-addr is empty; give server 0's IPv4 address");
    o->master_addr = optarg;
    g->master = true;
    break;
  case OPT_MASTER_PORT:
    if (!launch_parse_long(optarg, 1, 65535, &v))
      return usage_error(err, errlen, "--master-port '%s' must be a port number from 1 to 65535",
                         optarg);
    o->master_port = (int)v;
    break;
  }
  return 0;
}

/* The options that say how the ranks run: devices, CPU binding, output, topology, restarts,
 * what a failure does, grace period. 0, or -1 with the message in err. */
static int take_run(int c, struct launch_opts *o, char *err, size_t errlen) {
  switch (c) {
  case OPT_DEVICE_LIST:
    o->device_list = optarg;
    break;
  case OPT_CPU_BIND:
    if (strcmp(optarg, "block") == 0) {
      o->cpu_bind = LAUNCH_BIND_BLOCK;
    } else if (strcmp(optarg, "none") == 0) {
      o->cpu_bind = LAUNCH_BIND_NONE;
    } else {
      o->cpu_bind = LAUNCH_BIND_LIST; /* checked by cpubind.c against the rank count */
      o->cpu_bind_list = optarg;
    }
    break;
  case OPT_REPORT_BINDINGS:
    o->report_bindings = true;
    break;
  case OPT_LOG_DIR:
    if (!*optarg)
      return usage_error(err, errlen, "--log-dir is empty; give a directory for the rank logs");
    o->log_dir = optarg;
    break;
  case OPT_TAG_OUTPUT:
    o->tag_output = true;
    break;
  case OPT_DRY_RUN:
    o->dry_run = true;
    break;
  case OPT_TOPOLOGY:
    o->topology = optarg;
    o->topology_from_option = true;
    break;
  case OPT_MAX_RESTARTS: {
    long restarts;
    if (!launch_parse_long(optarg, 0, 1000, &restarts))
      return usage_error(err, errlen, "--max-restarts '%s' must be a whole number from 0 to 1000",
                         optarg);
    o->max_restarts = (int)restarts;
    break;
  }
  case OPT_ON_FAILURE:
    if (strcmp(optarg, "stop") == 0)
      o->on_failure = LAUNCH_ON_FAILURE_STOP;
    else if (strcmp(optarg, "continue") == 0)
      o->on_failure = LAUNCH_ON_FAILURE_CONTINUE;
    else
      return usage_error(err, errlen, "--on-failure '%s' must be stop or continue", optarg);
    break;
  case OPT_GRACE: {
    char *end;
    errno = 0;
    double g = strtod(optarg, &end);
    if (errno || end == optarg || *end || !(g >= 0 && g <= 3600))
      return usage_error(
          err, errlen, "--grace-period '%s' must be a number of seconds from 0 to 3600", optarg);
    o->grace_s = g;
    break;
  }
  }
  return 0;
}

/* An option getopt_long refused (name: as written): a value missing, or an unknown option,
 * with the documented spelling it is closest to. Always -1. */
static int refuse_option(int c, const char *name, char *err, size_t errlen) {
  if (c == ':')
    return usage_error(err, errlen, "option %s needs a value; see npu-launch --help", name);
  if (optopt && optopt < 256)
    return usage_error(err, errlen, "unknown option '-%c'; see npu-launch --help", optopt);
  if (closest_option(name))
    return usage_error(err, errlen, "unknown option '%.*s' (did you mean --%s?); see "
                       "npu-launch --help", (int)strcspn(name, "="), name,
                       closest_option(name));
  return usage_error(err, errlen, "unknown option '%s'; see npu-launch --help", name);
}

/* Under srun (one npu-launch per server), Slurm says what the flags did not: the servers, this
 * one's number, server 0's host. Refuses an srun that started several npu-launch per server.
 * 0, or -1 with the message in err. */
static int take_slurm(struct launch_opts *o, struct given *g, char *err, size_t errlen) {
  const char *nn = getenv("SLURM_NNODES"), *nid = getenv("SLURM_NODEID");
  const char *nodes = getenv("SLURM_JOB_NODELIST");
  const char *steptasks = getenv("SLURM_STEP_NUM_TASKS"), *stepnodes = getenv("SLURM_STEP_NUM_NODES");
  long ntasks_step, nnodes_step, v;
  if (!g->nnodes && !g->node_rank && steptasks && stepnodes &&
      launch_parse_long(steptasks, 1, 1 << 24, &ntasks_step) &&
      launch_parse_long(stepnodes, 1, 65536, &nnodes_step) && ntasks_step > nnodes_step)
    return usage_error(err, errlen,
                       "srun started %ld npu-launch tasks on %ld server%s "
                       "(SLURM_STEP_NUM_TASKS=%s, SLURM_STEP_NUM_NODES=%s); npu-launch starts "
                       "every rank of its server, so start one per server (srun "
                       "--ntasks-per-node 1 npu-launch ...), or let srun start the ranks "
                       "themselves (srun --ntasks-per-node 8 ./train); --nnodes and --node-rank "
                       "given on the command line skip this check",
                       ntasks_step, nnodes_step, nnodes_step > 1 ? "s" : "", steptasks, stepnodes);
  if (!g->nnodes && nn && *nn) {
    if (!launch_parse_long(nn, 1, 65536, &v))
      return usage_error(err, errlen, "SLURM_NNODES='%s' is not a number of servers", nn);
    o->nnodes = (int)v;
    g->nnodes = true;
  }
  if (!g->node_rank && nid && *nid && o->nnodes > 1) {
    if (!launch_parse_long(nid, 0, 65535, &v))
      return usage_error(err, errlen, "SLURM_NODEID='%s' is not a server number", nid);
    o->node_rank = (int)v;
    g->node_rank = true;
  }
  if (!g->master && nodes && *nodes && o->nnodes > 1) {
    if (hccl__hostlist_first(nodes, o->slurm_master, sizeof(o->slurm_master)) != 0)
      return usage_error(err, errlen,
                         "SLURM_JOB_NODELIST='%s' does not start with a host; give "
                         "--master-addr",
                         nodes);
    o->master_addr = o->slurm_master;
  }
  return 0;
}

/* What a failure does: --on-failure continue keeps the other ranks running, --max-restarts
 * stops them all to start the group again; both at once is refused, naming both. */
static int check_on_failure(const struct launch_opts *o, char *err, size_t errlen) {
  if (o->on_failure == LAUNCH_ON_FAILURE_CONTINUE && o->max_restarts > 0)
    return usage_error(err, errlen,
                       "--on-failure continue with --max-restarts %d: continue keeps the other "
                       "ranks running after a failure, --max-restarts stops them all to start the "
                       "group again; choose one",
                       o->max_restarts);
  return 0;
}

/* The servers agree with each other: this one's number below their count, given whenever
 * there are several, and room for the launchers' port above --master-port. */
static int check_servers(const struct launch_opts *o, const struct given *g, char *err,
                         size_t errlen) {
  if (o->node_rank >= o->nnodes) {
    snprintf(err, errlen, "--node-rank %d is not below --nnodes %d; servers are numbered 0-%d",
             o->node_rank, o->nnodes, o->nnodes - 1);
    return -1;
  }
  /* Taking server 0 by default made a second "server 0" on every other server, and the job
   * failed after HCCL_CONNECT_TIMEOUT with a message about MASTER_ADDR. */
  if (o->nnodes > 1 && !g->node_rank)
    return usage_error(err, errlen,
                       "--nnodes %d without --node-rank: each server must say which it is; give "
                       "--node-rank K (0-%d) on each, or start npu-launch under srun, whose "
                       "SLURM_NODEID gives it",
                       o->nnodes, o->nnodes - 1);
  if (o->nnodes > 1 && o->master_port >= 65535)
    return usage_error(err, errlen,
                       "--nnodes %d: the launchers meet on --master-port + 1, and --master-port "
                       "is %d; choose a lower one",
                       o->nnodes, o->master_port);
  return 0;
}

/* Across servers, how long the launchers wait for each other: HCCL_CONNECT_TIMEOUT, which
 * libhccl's ranks read for the same wait among themselves, else 60 s. */
static int take_connect_timeout(struct launch_opts *o, char *err, size_t errlen) {
  const char *ct = getenv("HCCL_CONNECT_TIMEOUT");
  long v;
  if (o->nnodes == 1 || !ct || !*ct) return 0;
  if (!launch_parse_long(ct, 1, 7200, &v))
    return usage_error(err, errlen,
                       "HCCL_CONNECT_TIMEOUT='%s' must be a whole number of seconds from 1 to "
                       "7200 (how long the launchers of a job across servers, and its ranks, "
                       "wait for each other)",
                       ct);
  o->connect_s = (int)v;
  return 0;
}

/* The topology (the option, else HCCL_TOPO_FILE) fits, and some devices were named. */
static int check_devices(struct launch_opts *o, char *err, size_t errlen) {
  if (!o->topology) {
    const char *env = getenv("HCCL_TOPO_FILE");
    if (env && *env) o->topology = env;
  }
  if (o->topology && strlen(o->topology) >= LAUNCH_VALUE_MAX - 1) {
    snprintf(err, errlen, "--topology value is longer than %d characters", LAUNCH_VALUE_MAX - 2);
    return -1;
  }
  if (!o->device_list && !o->nproc_per_node) {
    snprintf(err, errlen,
             "no devices given; say which devices this server uses with --device-list (e.g. "
             "--device-list 0,1,2,3 or 0-3) or how many with --nproc-per-node N (devices "
             "0..N-1)");
    return -1;
  }
  return 0;
}

int launch_parse_options(int argc, char **argv, struct launch_opts *o, char *err, size_t errlen) {
  set_defaults(o);
  struct given g = {false, false, false};

  opterr = 0; /* we word the messages ourselves */
  optind = 1;
  int c, idx;
  while ((c = getopt_long(argc, argv, "+:hV", long_options, &idx)) != -1) {
    const char *name = argv[optind - 1]; /* the option itself for ':' and '?' */
    switch (c) {
    case OPT_NPROC:
    case OPT_NNODES:
    case OPT_NODE_RANK:
    case OPT_MASTER_ADDR:
    case OPT_MASTER_PORT:
      if (take_placement(c, o, &g, err, errlen) != 0) return -1;
      break;
    case 'h':
      fputs(usage_text, stdout);
      return 1;
    case 'V':
      printf("npu-launch %s\n", NPU_LAUNCH_VERSION);
      return 1;
    case ':':
    case '?':
      return refuse_option(c, name, err, errlen);
    default:
      if (take_run(c, o, err, errlen) != 0) return -1;
    }
  }

  if (optind >= argc) {
    snprintf(err, errlen,
             "no program given; usage: npu-launch [options] [--] program [args...], e.g. "
             "npu-launch --device-list 0,1 -- python3 train.py");
    return -1;
  }
  o->argv = argv + optind;
  if (check_on_failure(o, err, errlen) != 0 || take_slurm(o, &g, err, errlen) != 0 ||
      check_servers(o, &g, err, errlen) != 0 || take_connect_timeout(o, err, errlen) != 0)
    return -1;
  return check_devices(o, err, errlen);
}
