/*
 * main.c - npu-launch: starts one process per device of this server with the variables HCCL,
 * torchrun and the Ascend scripts read, binds each to its CPUs, and supervises them.
 *
 * The order matters: every refusal (bad options, device list, topology rule, CPU list, master
 * address or port, missing program, log directory) happens before any rank starts, and exits
 * with status 2 (127 for a program that cannot be run) and one message naming the value and
 * the rule. Across servers the launchers then meet (servers.c): each learns the others'
 * device counts and numbers its ranks; a server that never comes fails the job on every
 * server that did, before any rank starts (also status 2). Only then are ranks started
 * (supervise.c).
 */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* One job, one secret: the ranks present it to rank 0's store, which turns away processes of
 * other jobs (libhccl's bootstrap/trust.h). Only for a one-server job without HCCL_JOB_TOKEN:
 * across servers each npu-launch would draw its own, so there the user's HCCL_JOB_TOKEN
 * (which the ranks inherit) is the one that counts. */
static void make_job_token(struct launch_job *j) {
  const char *mine = getenv("HCCL_JOB_TOKEN");
  unsigned char r[16];
  if ((mine && *mine) || j->o.nnodes != 1 || getrandom(r, sizeof(r), 0) != sizeof(r)) return;
  for (int i = 0; i < 16; i++)
    snprintf(j->job_token + 2 * i, 3, "%02x", r[i]);
}

static int refuse(int code, const char *err) {
  launch_note("%s", err);
  return code;
}

int main(int argc, char **argv) {
  struct launch_job job;
  char err[1024] = "";
  memset(&job, 0, sizeof(job));

  int rc = launch_parse_options(argc, argv, &job.o, err, sizeof(err));
  if (rc > 0) return 0; /* --help or --version */
  if (rc < 0) return refuse(LAUNCH_EXIT_USAGE, err);

  make_job_token(&job);
  if (launch_plan_devices(&job, err, sizeof(err))) return refuse(LAUNCH_EXIT_USAGE, err);
  if (launch_plan_binding(&job, err, sizeof(err))) return refuse(LAUNCH_EXIT_USAGE, err);
  if (launch_resolve_master(job.o.master_addr, job.master_addr, sizeof(job.master_addr), err,
                            sizeof(err)))
    return refuse(LAUNCH_EXIT_USAGE, err);
  if (launch_find_program(job.o.argv[0], err, sizeof(err))) {
    /* A dry run plans a command that may run elsewhere or later: say so, but go on. */
    if (!job.o.dry_run) return refuse(LAUNCH_EXIT_NOT_FOUND, err);
    fprintf(stderr, "npu-launch: warning: %s (dry run: printed anyway)\n", err);
  }

  if (job.o.dry_run) {
    /* The port is not probed: a dry run must not depend on what else runs right now. */
    launch_print_dry_run(&job);
    return 0;
  }
  if (job.o.node_rank == 0 &&
      launch_probe_master_port(job.master_addr, job.o.master_port, err, sizeof(err)))
    return refuse(LAUNCH_EXIT_USAGE, err);
  if (job.o.log_dir && launch_make_log_dir(job.o.log_dir, err, sizeof(err)))
    return refuse(LAUNCH_EXIT_USAGE, err);
  /* Once, before the first start: the counts do not change between restarts. */
  bool across = job.o.nnodes > 1;
  if (across && launch_servers_open(&job, err, sizeof(err)))
    return refuse(LAUNCH_EXIT_USAGE, err);
  if (job.o.report_bindings) launch_report_bindings(&job);
  /* torchrun's --max-restarts: after a rank's failure every rank was stopped; start the whole
   * group again, with a new job token (a straggler of the last start cannot join the next).
   * Across servers the launchers agree through their store (elastic.c). */
  bool elastic = job.o.max_restarts > 0 && across;
  if (elastic && launch_elastic_open(&job, err, sizeof(err))) {
    launch_servers_close();
    return refuse(1, err);
  }
  for (;;) {
    if (elastic) launch_elastic_watch(&job, true);
    int code = launch_run(&job);
    bool again = code != 0 && job.rank_failed && job.restart < job.o.max_restarts;
    if (elastic) {
      launch_elastic_watch(&job, false);
      code = launch_elastic_decide(&job, code, &again);
    }
    if (!again) {
      if (elastic) launch_elastic_close();
      if (across) launch_servers_close();
      return code;
    }
    job.restart++;
    launch_note("starting every rank again: restart %d of %d (--max-restarts)", job.restart,
                job.o.max_restarts);
    if (elastic)
      launch_elastic_token(&job);
    else
      make_job_token(&job);
    for (int tries = 0;
         job.o.node_rank == 0 &&
         launch_probe_master_port(job.master_addr, job.o.master_port, err, sizeof(err)) != 0;
         tries++) {
      if (tries == 50) return refuse(code, err); /* 5 s: something else took the port */
      usleep(100000);
    }
  }
}
