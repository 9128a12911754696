/*
 * supervise.c - starting the ranks and watching them until none is left: fail-fast, signal
 * forwarding, no orphans, and the failure summary.
 *
 * Each rank is the leader of its own process group, so a signal sent to the group reaches
 * everything the rank started. The launcher blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP and
 * reads them from a signalfd in the same poll() as the ranks' output pipes: one loop, no
 * handlers, no busy waiting.
 *
 *   - The first rank to end badly (non-zero exit or a signal) makes the launcher send SIGTERM
 *     to every rank's group, then SIGKILL to what is left after the grace period. The launcher
 *     exits with that rank's code (128 + signal number for a signal).
 *   - With --on-failure continue the first rank to end badly is reported at once (the same
 *     line, "failed" instead of "failed first") and the others run on: a fault-tolerant
 *     program shrinks its group around the dead rank. What is left in that rank's group gets
 *     SIGTERM. A second failure is the job's: every rank is stopped as above and the launcher
 *     exits with that rank's code. Otherwise the job exits 0 when every other rank exits 0
 *     (and with the failed rank's code when it had no other rank: on a job of several servers
 *     the others go on, but this server's launcher still says a rank died, so that a job whose
 *     every rank dies never ends 0).
 *   - SIGINT, SIGTERM or SIGHUP sent to the launcher is sent on to every rank's group, with the
 *     same grace period; a second one sends SIGKILL at once. Exit code 128 + that signal.
 *   - SIGUSR1 is sent on to every rank and stops nothing (the flight recorder's dump).
 *   - No orphans: the launcher is a child subreaper (PR_SET_CHILD_SUBREAPER), so processes a
 *     rank leaves behind become its children; once every rank has ended, whatever is still in
 *     a rank's group is stopped the same way, and adopted strays are killed. Each rank also has
 *     PR_SET_PDEATHSIG = SIGKILL, so a launcher killed with SIGKILL takes its ranks with it.
 *   - Every wait has a deadline: the grace period, then a few seconds for SIGKILLed processes
 *     to be reaped, then 2 s to drain output. A job's own run time is not limited.
 */
#include "launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REAP_AFTER_KILL_S 5.0 /* how long SIGKILLed processes get to disappear */
#define DRAIN_S 2.0           /* how long output pipes get to reach EOF at the end */
#define CLEANUP_POLL_MS 50    /* re-check leftover groups this often while stopping them */

struct rank_proc {
  pid_t pid;          /* leader; also the process group id */
  bool alive;         /* leader not reaped yet */
  bool group_gone;    /* its process group was seen empty: never signal that id again */
  bool stopped_by_us; /* signalled by the launcher while still running */
  int stop_signal;    /* the last signal the launcher sent it */
  int status;         /* wait status once reaped */
  double t_end;       /* seconds after start */
  struct launch_stream out, err;
};

struct supervisor {
  struct launch_job *j;
  struct rank_proc p[LAUNCH_MAX_LOCAL];
  int nstarted;
  int sfd;
  sigset_t orig_mask;
  pid_t self;
  struct timespec t0;
  int first_failed; /* local index of the failure that stopped the ranks, -1 */
  struct timespec fail_wall;
  int let_pass; /* --on-failure continue: local index of the failure let pass, -1 */
  int interrupted_by; /* signal received by the launcher, 0 */
  bool spawn_failed;
  double kill_at; /* when to SIGKILL what is left (seconds after start); 0 = not stopping */
  bool killed;
  bool cleanup_noted;
};

static double now_s(const struct supervisor *s) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - s->t0.tv_sec) + (t.tv_nsec - s->t0.tv_nsec) / 1e9;
}

/* Whether rank p's process group still has a process in it. Once empty it is never probed
 * again, since its number may then be reused by an unrelated process group. */
static bool group_exists(struct rank_proc *p) {
  if (p->group_gone) return false;
  if (kill(-p->pid, 0) == 0 || errno == EPERM) return true;
  p->group_gone = true;
  return false;
}

static bool failed_status(int status) {
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Sends sig to every rank's group that still has processes; starts the grace period. */
static void stop_all(struct supervisor *s, int sig) {
  for (int i = 0; i < s->nstarted; i++) {
    struct rank_proc *p = &s->p[i];
    if (!group_exists(p)) continue;
    kill(-p->pid, sig);
    if (p->alive) {
      p->stopped_by_us = true;
      p->stop_signal = sig;
    }
  }
  if (sig == SIGKILL) {
    s->killed = true;
    s->kill_at = now_s(s);
  } else if (s->kill_at == 0) {
    s->kill_at = now_s(s) + s->j->o.grace_s;
  }
}

static void child_exec(struct supervisor *s, int i, int out_w, int err_w, int log_fd) {
  struct launch_job *j = s->j;
  struct launch_rank *r = &j->ranks[i];
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != s->self) _exit(LAUNCH_EXIT_NOT_FOUND); /* the launcher is already gone */
  static const int reset[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGTSTP, SIGUSR1};
  for (size_t k = 0; k < sizeof(reset) / sizeof(reset[0]); k++)
    signal(reset[k], SIG_DFL);
  sigprocmask(SIG_SETMASK, &s->orig_mask, NULL);

  /* stdin: the launcher's for local rank 0 unless it is a terminal (a rank in its own process
   * group reading the terminal would be stopped by SIGTTIN); /dev/null for the others. */
  if (i != 0 || isatty(0)) {
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0 && nul != 0) {
      dup2(nul, 0);
      close(nul);
    }
  }
  if (out_w >= 0) {
    dup2(out_w, 1);
    dup2(err_w, 2);
  } else if (log_fd >= 0) {
    dup2(log_fd, 1);
    dup2(log_fd, 2);
  }
  if (r->bound && sched_setaffinity(0, sizeof(r->cpus), &r->cpus) != 0) {
    char cpus[256];
    launch_format_cpus(&r->cpus, cpus, sizeof(cpus));
    dprintf(2, "npu-launch: rank %d: cannot bind to CPUs %s: %s\n", r->rank, cpus, strerror(errno));
    _exit(LAUNCH_EXIT_NOT_FOUND);
  }
  struct launch_var vars[LAUNCH_MAX_VARS];
  int nv = launch_rank_vars(j, i, vars);
  for (int v = 0; v < nv; v++)
    setenv(vars[v].name, vars[v].value, 1);
  execvp(j->o.argv[0], j->o.argv);
  dprintf(2, "npu-launch: rank %d: cannot run '%s': %s\n", r->rank, j->o.argv[0], strerror(errno));
  _exit(LAUNCH_EXIT_NOT_FOUND);
}

/* Starts local rank i. Returns 0, or -1 (noted) when the system refuses. */
static int spawn(struct supervisor *s, int i) {
  struct launch_job *j = s->j;
  struct rank_proc *p = &s->p[i];
  int out[2] = {-1, -1}, err[2] = {-1, -1}, log_fd = -1;
  p->out.fd = p->err.fd = -1;
  p->out.log_fd = p->err.log_fd = -1;
  if (j->o.log_dir) {
    char path[4200];
    launch_log_path(j, i, path, sizeof(path));
    log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      launch_note("cannot open log file %s: %s", path, strerror(errno));
      return -1;
    }
  }
  if (j->o.tag_output) {
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      launch_note("cannot make output pipes for rank %d: %s", j->ranks[i].rank, strerror(errno));
      if (log_fd >= 0) close(log_fd);
      return -1;
    }
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    launch_note("cannot start rank %d: fork: %s", j->ranks[i].rank, strerror(errno));
    int fds[] = {out[0], out[1], err[0], err[1], log_fd};
    for (size_t k = 0; k < sizeof(fds) / sizeof(fds[0]); k++)
      if (fds[k] >= 0) close(fds[k]);
    return -1;
  }
  if (pid == 0) child_exec(s, i, out[1], err[1], log_fd);
  setpgid(pid, pid); /* also done in the child: whichever runs first wins the race */
  p->pid = pid;
  s->j->ranks[i].pid = pid;
  p->alive = true;
  if (j->o.tag_output) {
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    p->out = (struct launch_stream){
        .fd = out[0], .out_fd = 1, .log_fd = log_fd, .rank = j->ranks[i].rank};
    p->err = (struct launch_stream){
        .fd = err[0], .out_fd = 2, .log_fd = log_fd, .rank = j->ranks[i].rank};
  } else if (log_fd >= 0) {
    close(log_fd); /* the child has it */
  }
  return 0;
}

/* How rank i ended ("exit code 3", "killed by SIGKILL") into how. */
static void describe_end(const struct rank_proc *p, char *how, size_t len) {
  char name[32];
  if (WIFSIGNALED(p->status))
    snprintf(how, len, "killed by %s", launch_signal_name(WTERMSIG(p->status), name, sizeof(name)));
  else
    snprintf(how, len, "exit code %d", WEXITSTATUS(p->status));
}

/* The one-line failure report: "rank R (device D, pid P) <what>: <how>, at <time> (<t> s after
 * start)<tail>". */
static void report_failure(const struct supervisor *s, int i, const struct timespec *wall,
                           const char *what, const char *tail) {
  const struct rank_proc *p = &s->p[i];
  const struct launch_rank *r = &s->j->ranks[i];
  char how[64], when[64];
  describe_end(p, how, sizeof(how));
  struct tm tm;
  localtime_r(&wall->tv_sec, &tm);
  strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
  launch_note("rank %d (device %d, pid %d) %s: %s, at %s.%03ld (%.2f s after start)%s", r->rank,
              r->device, (int)p->pid, what, how, when, wall->tv_nsec / 1000000, p->t_end, tail);
}

static void on_rank_end(struct supervisor *s, int i, int status) {
  struct rank_proc *p = &s->p[i];
  p->alive = false;
  p->status = status;
  p->t_end = now_s(s);
  if (failed_status(status) && s->first_failed < 0 && !s->interrupted_by && !p->stopped_by_us) {
    if (s->j->o.on_failure == LAUNCH_ON_FAILURE_CONTINUE && s->let_pass < 0) {
      struct timespec wall;
      s->let_pass = i;
      clock_gettime(CLOCK_REALTIME, &wall);
      const char *tail = "";
      if (s->nstarted > 1)
        tail = "; the other ranks go on (--on-failure continue)";
      else if (s->j->o.nnodes > 1)
        tail = "; it was this server's only rank: the job goes on on the other servers, and "
               "this launcher exits with its code (--on-failure continue)";
      report_failure(s, i, &wall, "failed", tail);
      if (group_exists(p)) kill(-p->pid, SIGTERM); /* what it left running in its group */
      return;
    }
    s->first_failed = i;
    clock_gettime(CLOCK_REALTIME, &s->fail_wall);
    stop_all(s, SIGTERM);
  }
}

static void reap(struct supervisor *s) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int i = 0; i < s->nstarted; i++)
      if (s->p[i].pid == pid && s->p[i].alive) on_rank_end(s, i, status);
    /* anything else is an adopted leftover (we are its subreaper): reaping it is all */
  }
}

static void on_signal(struct supervisor *s, int sig) {
  char name[32];
  if (sig == SIGCHLD) {
    reap(s);
    return;
  }
  launch_signal_name(sig, name, sizeof(name));
  if (sig == SIGUSR1) {
    /* Not a stop: the ranks' flight recorders write their files (HCCL_FLIGHT_RECORDER_DIR). */
    launch_note("received SIGUSR1; sending it to every rank (flight recorder dump)");
    for (int i = 0; i < s->nstarted; i++)
      if (s->p[i].alive) kill(s->p[i].pid, SIGUSR1);
    return;
  }
  if (s->kill_at == 0) {
    s->interrupted_by = sig;
    launch_note("received %s; sending it to every rank (SIGKILL after %g s)", name,
                s->j->o.grace_s);
    stop_all(s, sig);
  } else if (!s->killed) {
    if (!s->interrupted_by && s->first_failed < 0) s->interrupted_by = sig;
    launch_note("received %s while stopping the ranks; sending SIGKILL now", name);
    stop_all(s, SIGKILL);
  }
}

/* Kills processes the launcher adopted as subreaper that left their rank's group. */
static int kill_adopted(struct supervisor *s) {
  DIR *d = opendir("/proc");
  int n = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char path[300], buf[512];
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *close_paren = strrchr(buf, ')'), state;
    int ppid;
    if (!close_paren || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2) continue;
    if (ppid != s->self || state == 'Z') continue;
    kill((pid_t)atoi(e->d_name), SIGKILL);
    n++;
  }
  closedir(d);
  return n;
}

static void print_summary(struct supervisor *s) {
  struct launch_job *j = s->j;
  char name[32];
  if (s->first_failed >= 0) {
    char what[64] = "failed first";
    if (s->let_pass >= 0)
      snprintf(what, sizeof(what), "failed after rank %d (a second failure)",
               j->ranks[s->let_pass].rank);
    report_failure(s, s->first_failed, &s->fail_wall, what, "");
    if (j->nlocal > 1)
      launch_note("the other ranks were sent SIGTERM, and SIGKILL if still running after %g s",
                  j->o.grace_s);
  }
  launch_note("%-6s %-7s %-8s %-36s %s", "rank", "device", "pid", "ended", "after");
  for (int i = 0; i < s->nstarted; i++) {
    struct rank_proc *p = &s->p[i];
    char how[96];
    if (p->alive)
      snprintf(how, sizeof(how), "still running (would not die)");
    else if (WIFSIGNALED(p->status))
      snprintf(how, sizeof(how), "%s%s",
               launch_signal_name(WTERMSIG(p->status), name, sizeof(name)),
               p->stopped_by_us && WTERMSIG(p->status) == p->stop_signal ? " from npu-launch" : "");
    else
      snprintf(how, sizeof(how), "exit code %d", WEXITSTATUS(p->status));
    if (i == s->first_failed)
      strncat(how, s->let_pass >= 0 ? " (second failure)" : " (first failure)",
              sizeof(how) - strlen(how) - 1);
    if (i == s->let_pass) strncat(how, " (went on without it)", sizeof(how) - strlen(how) - 1);
    char after[32] = "-";
    if (!p->alive) snprintf(after, sizeof(after), "%.2f s", p->t_end);
    launch_note("%-6d %-7d %-8d %-36s %s", j->ranks[i].rank, j->ranks[i].device, (int)p->pid, how,
                after);
  }
  int failed = s->first_failed >= 0 ? s->first_failed : s->let_pass;
  if (failed >= 0 && j->o.log_dir) {
    char path[4200];
    launch_log_path(j, failed, path, sizeof(path));
    launch_print_log_tail(path, LAUNCH_TAIL_LINES);
  }
}

/* A rank's wait status as an exit code: its own, or 128 + the signal that killed it. */
static int code_of(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static int exit_code(const struct supervisor *s) {
  if (s->first_failed >= 0) return code_of(s->p[s->first_failed].status);
  if (s->interrupted_by) return 128 + s->interrupted_by;
  if (s->spawn_failed) return 1;
  /* No other rank of this server went on: its code is this launcher's. Across servers the other
   * servers' ranks may well go on, but exiting 0 here would let a job whose every rank died (one
   * rank a server) end 0 everywhere; a scheduler that must not stop the survivors is told so by
   * docs/launching.md (no --kill-on-bad-exit with --on-failure continue). */
  if (s->let_pass >= 0 && s->nstarted == 1)
    return code_of(s->p[s->let_pass].status);
  return 0;
}

static bool any_alive(const struct supervisor *s) {
  for (int i = 0; i < s->nstarted; i++)
    if (s->p[i].alive) return true;
  return false;
}

static bool any_group(struct supervisor *s) {
  for (int i = 0; i < s->nstarted; i++)
    if (group_exists(&s->p[i])) return true;
  return false;
}

/* One poll over the signalfd and the open output pipes, for at most timeout_ms. */
static void wait_events(struct supervisor *s, int timeout_ms) {
  struct pollfd fds[1 + 2 * LAUNCH_MAX_LOCAL];
  struct launch_stream *streams[2 * LAUNCH_MAX_LOCAL];
  int n = 0, ns = 0;
  fds[n++] = (struct pollfd){.fd = s->sfd, .events = POLLIN};
  for (int i = 0; i < s->nstarted; i++) {
    struct launch_stream *st[2] = {&s->p[i].out, &s->p[i].err};
    for (int k = 0; k < 2; k++)
      if (st[k]->fd >= 0) {
        streams[ns++] = st[k];
        fds[n++] = (struct pollfd){.fd = st[k]->fd, .events = POLLIN};
      }
  }
  int rc = poll(fds, (nfds_t)n, timeout_ms);
  if (rc <= 0) return;
  if (fds[0].revents & POLLIN) {
    struct signalfd_siginfo si[8];
    ssize_t r = read(s->sfd, si, sizeof(si));
    for (ssize_t k = 0; r > 0 && k < r / (ssize_t)sizeof(si[0]); k++)
      on_signal(s, (int)si[k].ssi_signo);
  }
  for (int k = 0; k < ns; k++)
    if (fds[1 + k].revents) launch_stream_pump(streams[k]);
}

static int timeout_until(const struct supervisor *s, double t) {
  double ms = (t - now_s(s)) * 1000.0;
  return ms <= 0 ? 0 : ms > 60000 ? 60000 : (int)ms + 1;
}

int launch_run(struct launch_job *j) {
  struct supervisor s;
  memset(&s, 0, sizeof(s));
  s.j = j;
  s.first_failed = -1;
  s.let_pass = -1;
  s.self = getpid();
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  signal(SIGPIPE, SIG_IGN);

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGUSR1);
  sigprocmask(SIG_BLOCK, &mask, &s.orig_mask);
  s.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (s.sfd < 0) {
    launch_note("cannot watch signals: signalfd: %s", strerror(errno));
    return 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &s.t0);
  for (int i = 0; i < j->nlocal; i++) {
    if (spawn(&s, i) != 0) {
      s.spawn_failed = true;
      stop_all(&s, SIGTERM);
      break;
    }
    s.nstarted++;
  }
  if (j->o.log_dir) launch_note("output of each rank goes to %s/rank_N.log", j->o.log_dir);

  double hard_deadline = 0;
  for (;;) {
    reap(&s); /* a rank may have ended before the signalfd existed for it */
    bool alive = any_alive(&s), groups = any_group(&s);
    if (!alive && !groups) break;
    if (!alive && groups && s.kill_at == 0) {
      /* every rank ended but left processes behind in its group */
      if (!s.cleanup_noted)
        launch_note("every rank has ended; stopping processes they left running");
      s.cleanup_noted = true;
      stop_all(&s, SIGTERM);
    }
    if (s.kill_at > 0 && !s.killed && now_s(&s) >= s.kill_at) stop_all(&s, SIGKILL);
    if (s.killed && hard_deadline == 0) hard_deadline = now_s(&s) + REAP_AFTER_KILL_S;
    if (hard_deadline > 0 && now_s(&s) >= hard_deadline) {
      launch_note("some processes did not end %g s after SIGKILL; giving up on them",
                  REAP_AFTER_KILL_S);
      break;
    }
    int timeout = -1;
    if (s.kill_at > 0 && !s.killed) timeout = timeout_until(&s, s.kill_at);
    if (hard_deadline > 0) timeout = timeout_until(&s, hard_deadline);
    if (!alive && (timeout < 0 || timeout > CLEANUP_POLL_MS)) timeout = CLEANUP_POLL_MS;
    wait_events(&s, timeout);
  }

  /* Strays that left their rank's group were adopted by us: kill and reap them. */
  for (int round = 0; round < 20 && kill_adopted(&s) > 0; round++) {
    usleep(20000);
    reap(&s);
  }
  /* Drain what is left in the output pipes (the writers are gone, so EOF comes quickly). */
  double drain_end = now_s(&s) + DRAIN_S;
  for (;;) {
    bool open = false;
    for (int i = 0; i < s.nstarted; i++)
      open |= s.p[i].out.fd >= 0 || s.p[i].err.fd >= 0;
    if (!open || now_s(&s) >= drain_end) break;
    wait_events(&s, timeout_until(&s, drain_end));
  }
  for (int i = 0; i < s.nstarted; i++)
    if (s.p[i].out.log_fd >= 0) close(s.p[i].out.log_fd);

  if (s.first_failed >= 0 || s.interrupted_by || s.spawn_failed || s.let_pass >= 0)
    print_summary(&s);
  int code = exit_code(&s);
  if (code != 0) {
    if (s.first_failed >= 0)
      launch_note("exit code %d (rank %d's)", code, j->ranks[s.first_failed].rank);
    else if (s.let_pass >= 0 && !s.interrupted_by && !s.spawn_failed)
      launch_note("exit code %d (rank %d's: no other rank went on)", code,
                  j->ranks[s.let_pass].rank);
    else
      launch_note("exit code %d", code);
  }
  close(s.sfd);
  /* A restart runs this again: its ranks must not inherit blocked signals. */
  sigprocmask(SIG_SETMASK, &s.orig_mask, NULL);
  j->rank_failed = s.first_failed >= 0 && !s.interrupted_by && !s.spawn_failed;
  return code;
}
