/*
 * elastic.c - --max-restarts across servers: the launchers of a job agree, through the store
 * they met on before their ranks started (servers.c: server 0's npu-launch serves it on
 * --master-port + 1, keys under "npu-launch/"), on when every server stops its ranks and
 * starts them again. Each server's device count does not change between starts: the ranks
 * are numbered once, when the launchers meet.
 *
 * Start k (0, 1, ...) of the group:
 *   - a watcher thread polls "fail/k" every 100 ms; once another server has counted a failure
 *     there, it sends SIGTERM to this server's ranks (their launch_run then ends as after a
 *     failure of its own);
 *   - when launch_run ends, the server counts itself in "fail/k" if a rank failed, then in
 *     "end/k", and waits until every server has ended start k (each one's ranks are gone);
 *   - then each decides alike: no failure anywhere, the job is done (exit 0); a rank's failure,
 *     and restarts left, start k + 1; else (or after a stop that was no rank's failure, such as
 *     the user's Ctrl-C, counted in "halt/k") exit with the failure's code. Each counts itself in
 *     "bye/k"; server 0 keeps serving until every server has, so nobody loses the store
 *     before it has read the decision.
 * A start's ranks get HCCL_JOB_TOKEN <base>.<k>, the base drawn by server 0 (or the user's
 * own), so a straggler of start k cannot join start k + 1. The wait for "end/k" has no
 * deadline of its own: another server's ranks may still be training; it ends with an error
 * when the store is gone (server 0's launcher died).
 */
#include "launch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "hccl_iface.h"

#define POLL_US 100000

static struct {
  struct hccl_store *st;       /* servers.c's, for this (the main) thread */
  struct hccl_store *watch_st; /* the watcher thread's own connection */
  pthread_t watcher;
  bool watching;
  _Atomic int stop_watch;
  struct launch_job *j;
  char base[24];
} g;

static int store_err(char *err, size_t errlen, const char *what) {
  snprintf(err, errlen, "--max-restarts across servers: %s: %s", what, HcclGetLastErrorMessage());
  return -1;
}

/* Adds delta (0: only reads) to the count `what` of start k; its value in *v. */
static int add(struct hccl_store *st, const char *what, int k, int64_t delta, int64_t *v) {
  char key[64];
  snprintf(key, sizeof(key), "npu-launch/%s/%d", what, k);
  return hccl__store_add(st, key, delta, v) == HCCL_SUCCESS ? 0 : -1;
}

static int count(struct hccl_store *st, const char *what, int k, int64_t *v) {
  return add(st, what, k, 0, v);
}

static int bump(struct hccl_store *st, const char *what, int k) {
  int64_t v;
  return add(st, what, k, 1, &v);
}

int launch_elastic_open(struct launch_job *j, char *err, size_t errlen) {
  g.j = j;
  g.st = launch_servers_store();
  if (!g.st || launch_servers_connect(j, &g.watch_st) != HCCL_SUCCESS)
    return store_err(err, errlen, "cannot reach the launchers' store on server 0");
  const char *mine = getenv("HCCL_JOB_TOKEN");
  if (j->o.node_rank == 0) {
    unsigned char r[8];
    if (mine && *mine)
      snprintf(g.base, sizeof(g.base), "%.23s", mine);
    else if (getrandom(r, sizeof(r), 0) == sizeof(r))
      for (int i = 0; i < 8; i++)
        snprintf(g.base + 2 * i, 3, "%02x", r[i]);
    if (hccl__store_set(g.st, "npu-launch/token", g.base, strlen(g.base) + 1) != HCCL_SUCCESS)
      return store_err(err, errlen, "cannot publish the job's token");
  } else {
    void *v = NULL;
    size_t len = 0;
    if (hccl__store_get(g.st, "npu-launch/token", &v, &len, (int64_t)j->o.connect_s * 1000) !=
        HCCL_SUCCESS)
      return store_err(err, errlen, "server 0 published no token");
    snprintf(g.base, sizeof(g.base), "%.*s", (int)(len ? len - 1 : 0), (const char *)v);
    free(v);
  }
  launch_elastic_token(j);
  return 0;
}

void launch_elastic_token(struct launch_job *j) {
  snprintf(j->job_token, sizeof(j->job_token), "%s.%d", g.base, j->restart);
}

static void *watch_main(void *arg) {
  (void)arg;
  int k = g.j->restart;
  while (!atomic_load(&g.stop_watch)) {
    int64_t failed = 0;
    if (count(g.watch_st, "fail", k, &failed) != 0) return NULL;
    if (failed > 0) {
      launch_note("a rank on another server failed (start %d): stopping this server's ranks", k);
      for (int i = 0; i < g.j->nlocal; i++)
        if (g.j->ranks[i].pid > 0) kill(-g.j->ranks[i].pid, SIGTERM);
      return NULL;
    }
    usleep(POLL_US);
  }
  return NULL;
}

void launch_elastic_watch(struct launch_job *j, bool on) {
  if (!g.st) return;
  if (on) {
    atomic_store(&g.stop_watch, 0);
    for (int i = 0; i < j->nlocal; i++)
      j->ranks[i].pid = 0;
    /* Born with every signal blocked (thread.h): a watcher that could take SIGCHLD would
     * swallow a rank's exit before launch_run's signalfd saw it. */
    g.watching = hccl__thread_start(&g.watcher, watch_main, NULL) == 0;
  } else if (g.watching) {
    atomic_store(&g.stop_watch, 1);
    pthread_join(g.watcher, NULL);
    g.watching = false;
  }
}

int launch_elastic_decide(struct launch_job *j, int code, bool *again) {
  int k = j->restart;
  int64_t ended = 0, failed = 0, halted = 0;
  *again = false;
  bool local_failure = code != 0;
  /* Not a rank's failure (the user's signal, a rank that could not start): nobody restarts. */
  bool halt = code != 0 && !j->rank_failed;
  if ((local_failure && bump(g.st, "fail", k) != 0) || (halt && bump(g.st, "halt", k) != 0) ||
      bump(g.st, "end", k) != 0)
    goto lost;
  while (count(g.st, "end", k, &ended) == 0 && ended < j->o.nnodes)
    usleep(POLL_US);
  if (ended < j->o.nnodes || count(g.st, "fail", k, &failed) != 0 ||
      count(g.st, "halt", k, &halted) != 0)
    goto lost;
  if (failed == 0) {
    code = 0;
  } else if (j->restart < j->o.max_restarts && halted == 0) {
    *again = true;
  } else if (code == 0) {
    code = 1; /* this server's ranks succeeded, another's failed: the job failed */
  }
  if (!local_failure && failed > 0)
    launch_note("start %d failed on %lld server%s%s", k, (long long)failed, failed > 1 ? "s" : "",
                *again ? "; starting again" : "");
  bump(g.st, "bye", k);
  if (j->o.node_rank == 0 && !*again) {
    /* Keep serving until every server has read the decision (bounded: a launcher that died
     * after "end" must not hold this one forever). */
    int64_t byes = 0;
    for (int t = 0; t < 300 && count(g.st, "bye", k, &byes) == 0 && byes < j->o.nnodes; t++)
      usleep(POLL_US);
  }
  return code;
lost:
  launch_note("lost the launchers' store on server 0 during start %d: %s", k,
              HcclGetLastErrorMessage());
  return code ? code : 1;
}

void launch_elastic_close(void) {
  hccl__store_close(g.watch_st); /* g.st is servers.c's: launch_servers_close closes it */
  memset(&g, 0, sizeof(g));
}
