/*
 * launch.h - the internal interface between the parts of npu-launch (see launcher/README.md for
 * the map): options -> job plan (devices, variables, CPU binding, master address) -> supervised
 * run (processes, signals, fail-fast) with output handling (tagging, per-rank logs, summary).
 *
 * The planning steps are pure apart from reading the environment and the CPU affinity: they
 * fill a struct launch_job or return -1 with a message naming the value and the rule in err.
 * main() prints that message and exits with LAUNCH_EXIT_USAGE, before anything starts.
 */
#ifndef NPU_LAUNCH_H
#define NPU_LAUNCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "hccl_iface.h"

#define LAUNCH_EXIT_USAGE 2       /* refused before anything started */
#define LAUNCH_EXIT_NOT_FOUND 127 /* the program cannot be run (as sh and env do) */
#define LAUNCH_MAX_LOCAL HCCL_TOPO_MAX_DEVICES /* ranks on one server: a device each */
#define LAUNCH_DEFAULT_PORT 29688 /* the Ascend guide's scripts */
#define LAUNCH_DEFAULT_ADDR "127.0.0.1"
#define LAUNCH_DEFAULT_GRACE_S 5.0
#define LAUNCH_DEFAULT_CONNECT_S 60 /* launchers waiting for each other: HCCL_CONNECT_TIMEOUT */
#define LAUNCH_TAIL_LINES 10 /* lines of the failed rank's log in the summary */
#define LAUNCH_MAX_VARS 20
#define LAUNCH_VALUE_MAX 1024

enum launch_cpu_bind { LAUNCH_BIND_BLOCK, LAUNCH_BIND_NONE, LAUNCH_BIND_LIST };

/* --on-failure: what a rank's failure does to the others. STOP (fail-fast, torchrun's) stops
 * every rank; CONTINUE reports the first failure and lets the others run on (a fault-tolerant
 * program shrinks its group around the dead rank), and a later failure stops them as STOP does. */
enum launch_on_failure { LAUNCH_ON_FAILURE_STOP, LAUNCH_ON_FAILURE_CONTINUE };

/* What the user asked for, as parsed from the command line (options.c). */
struct launch_opts {
  const char *device_list; /* as typed; NULL when not given */
  int nproc_per_node;      /* 0 when not given */
  int nnodes;              /* >= 1 */
  int node_rank;           /* in [0, nnodes) */
  const char *master_addr; /* as typed (default 127.0.0.1) */
  int master_port;         /* 1..65535 */
  int connect_s; /* how long launchers wait for each other (HCCL_CONNECT_TIMEOUT, else 60 s) */
  enum launch_cpu_bind cpu_bind;
  const char *cpu_bind_list; /* for LAUNCH_BIND_LIST */
  bool report_bindings;
  bool tag_output;
  bool dry_run;
  const char *log_dir;  /* NULL: output goes to the launcher's stdout/stderr */
  const char *topology; /* --topology, else $HCCL_TOPO_FILE, else NULL (flat server) */
  bool topology_from_option;
  double grace_s;
  int max_restarts; /* --max-restarts: times the whole group is started again after a failure */
  enum launch_on_failure on_failure;
  char **argv; /* the program and its arguments, NULL-terminated */
  char slurm_master[256]; /* first host of SLURM_JOB_NODELIST, when master_addr came from it */
};

/* One rank on this server. */
struct launch_rank {
  int local_rank;
  int rank;   /* first + local_rank */
  int device; /* sorted device list [local_rank] */
  bool bound; /* false with --cpu-bind none */
  cpu_set_t cpus;
  int ncpus; /* CPUs bound to (or the fair share when unbound); the OMP_NUM_THREADS value */
  _Atomic int pid; /* while it runs (supervise.c writes, elastic.c's watcher reads); 0 before */
};

/* Everything decided before any process starts. */
struct launch_job {
  struct launch_opts o;
  struct hccl_topo topo;
  char master_addr[64]; /* numeric IPv4 */
  int nlocal;           /* ranks on this server */
  int first;            /* this server's first rank: the sum of the counts of servers before it */
  int world;            /* the sum of every server's count */
  bool met;             /* the servers' counts are known (servers.c); else assumed equal */
  bool set_omp;         /* OMP_NUM_THREADS was unset: each rank gets its CPU count */
  char job_token[40];   /* HCCL_JOB_TOKEN for the ranks, "" = leave theirs alone */
  int restart;          /* this start of the group: 0, then 1 .. max_restarts */
  bool rank_failed;     /* set by launch_run: a rank failed (not the user's signal): restartable */
  struct launch_rank ranks[LAUNCH_MAX_LOCAL];
};

struct launch_var {
  const char *name;
  char value[LAUNCH_VALUE_MAX];
};

/* ---- servers.c: the launchers of a job across servers meet ---- */

/* With --nnodes above 1, before any rank starts: serves (server 0) and joins the launchers'
 * store on --master-port + 1, says this server's device count there and waits (at most
 * o.connect_s) for every other's, then numbers this server's ranks (launch_place_ranks) and
 * sets j->met. Blocks. -1 with a message in err naming what is wrong (servers that never said
 * their count, the deadline); the store is then closed. */
int launch_servers_open(struct launch_job *j, char *err, size_t errlen);
/* The launchers' store, once launch_servers_open succeeded (one request at a time: its user is
 * the main thread); NULL before. */
struct hccl_store *launch_servers_store(void);
/* Another connection to the launchers' store, for a second thread. HCCL_SUCCESS or the
 * store's error (HcclGetLastErrorMessage names it). */
HcclResult launch_servers_connect(const struct launch_job *j, struct hccl_store **out);
/* Closes the store; server 0 first waits (bounded) until every server has read the counts. */
void launch_servers_close(void);

/* ---- ranks.c ---- */

/* Numbers ranks across servers of different device counts: *first = the sum of counts[k] for
 * k < node_rank, *world = the sum of all nnodes counts. same_topo, when not NULL, names a
 * topology that needs the same count on every server (ascend910). Pure. 0, or -1 with err
 * set (a count outside 1..LAUNCH_MAX_LOCAL, counts that differ under same_topo, a node rank
 * out of range); *first and *world are set only on success. */
int launch_number_ranks(const int *counts, int nnodes, int node_rank, const char *same_topo,
                        int *first, int *world, char *err, size_t errlen);

/* ---- elastic.c: --max-restarts across servers ---- */

/* On the launchers' store (launch_servers_open first): connects the watcher and sets the token
 * of start 0. -1 with the message in err. */
int launch_elastic_open(struct launch_job *j, char *err, size_t errlen);
/* j->job_token for start j->restart: the job's base token and the start's number. */
void launch_elastic_token(struct launch_job *j);
/* Starts (on) or stops the thread that stops this server's ranks once another server's failed. */
void launch_elastic_watch(struct launch_job *j, bool on);
/* After launch_run returned `code`: agrees with the other servers on what happens next. Sets
 * *again when every server starts its ranks again; else returns the job's exit code. */
int launch_elastic_decide(struct launch_job *j, int code, bool *again);
void launch_elastic_close(void);

/* ---- options.c ---- */

/* Parses argv into *o (defaults filled in). Returns 0 to go on, 1 when --help or --version was
 * printed (exit 0), -1 on a usage error with the message in err. */
int launch_parse_options(int argc, char **argv, struct launch_opts *o, char *err, size_t errlen);

/* Parses a whole decimal integer in [lo, hi]; false when s is anything else. */
bool launch_parse_long(const char *s, long lo, long hi, long *out);

/* ---- devices.c ---- */

/* Parses a device list ("0,1,2,3", "0-3", "4-7,0-3"; spaces allowed around entries) into
 * devices[0..*n), sorted ascending. Refuses an empty list or entry, a non-number, a negative
 * number, a backwards range and a device named twice. At most max devices are stored; a longer
 * list is refused by its count. Returns 0 or -1 with err set. */
int launch_parse_device_list(const char *list, int *devices, int max, int *n, char *err,
                             size_t errlen);

/* Chooses the topology (o->topology by name or path, else a flat 8-device server), the device
 * list (--device-list, else 0..nproc-1) and checks it against the topology; fills j->topo,
 * j->nlocal and each rank's local_rank and device, and numbers the ranks as if every server
 * had this one's count (launch_servers_open numbers them again from the real counts; a dry run
 * keeps this). Returns 0 or -1. */
int launch_plan_devices(struct launch_job *j, char *err, size_t errlen);

/* Sets j->first, j->world and each rank's number (first + local rank). */
void launch_place_ranks(struct launch_job *j, int first, int world);

/* The variables rank local_rank gets, in a fixed order, into vars[LAUNCH_MAX_VARS]. Returns
 * how many. */
int launch_rank_vars(const struct launch_job *j, int local_rank, struct launch_var *vars);

/* Prints what a dry run shows: per rank its device, binding, variables and command. */
void launch_print_dry_run(const struct launch_job *j);

/* ---- cpubind.c ---- */

/* Fills each rank's cpus/bound/ncpus from --cpu-bind and the launcher's own affinity, and
 * decides j->set_omp. Notes (round-robin sharing, OMP_NUM_THREADS) go to stderr once.
 * Returns 0 or -1 with err set. */
int launch_plan_binding(struct launch_job *j, char *err, size_t errlen);

/* Formats a CPU set compactly ("0-3,8"). */
void launch_format_cpus(const cpu_set_t *set, char *buf, size_t len);

/* Prints --report-bindings lines to stderr. */
void launch_report_bindings(const struct launch_job *j);

/* ---- master.c ---- */

/* Resolves the master address to numeric IPv4 into out ("localhost" -> 127.0.0.1, never ::1).
 * Returns 0 or -1 with err set. */
int launch_resolve_master(const char *addr, char *out, size_t outlen, char *err, size_t errlen);

/* On server 0: fails (-1, err set) when addr:port cannot be bound, e.g. another job holds it.
 * The probe socket is closed before returning. */
int launch_probe_master_port(const char *addr, int port, char *err, size_t errlen);

/* Finds the program as execvp would; -1 with err set when it cannot be run. */
int launch_find_program(const char *prog, char *err, size_t errlen);

/* ---- output.c ---- */

/* "npu-launch: <message>" on stderr. */
void launch_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Creates dir (and its parents) if needed. Returns 0 or -1 with err set. */
int launch_make_log_dir(const char *dir, char *err, size_t errlen);

/* DIR/rank_<global rank>.log */
void launch_log_path(const struct launch_job *j, int local_rank, char *buf, size_t len);

/* A rank's output stream read by the launcher (--tag-output): complete lines are written to
 * out_fd with the prefix "[rank N] ", and untouched to log_fd when it is >= 0. */
struct launch_stream {
  int fd;     /* read end; -1 once at EOF */
  int out_fd; /* 1 or 2 */
  int log_fd; /* -1 when no log */
  int rank;
  size_t len;
  char buf[8192];
};

/* Reads what is available from s->fd (non-blocking) and writes out complete lines; at EOF
 * writes the unfinished last line with a newline added, closes s->fd and sets it to -1. */
void launch_stream_pump(struct launch_stream *s);

/* Prints the last n lines of the file at path to stderr, each prefixed. */
void launch_print_log_tail(const char *path, int n);

/* The name of a signal with its SIG prefix ("SIGTERM"), or "signal N". */
const char *launch_signal_name(int sig, char *buf, size_t len);

/* ---- supervise.c ---- */

/* Starts every rank of the job and supervises them until all have ended (fail-fast, signal
 * forwarding, no leftovers). Returns the launcher's exit code. */
int launch_run(struct launch_job *j);

#endif
