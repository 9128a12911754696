/*
 * servers.c - the launchers of a job across servers (--nnodes above 1) meet before any rank
 * starts, through a store of their own that server 0's npu-launch serves on --master-port + 1
 * (libhccl's store server and client, keys under "npu-launch/"). Each says how many devices
 * it has, and numbers its ranks from everyone's counts (ranks.c), so servers may run different
 * numbers of ranks, as torchrun's nodes may (a different --nproc-per-node each):
 *
 *   every server k:  add "joined/k" 1 (above 1: another launcher gave --node-rank k too, and
 *                    this one stops), then add "count/k" its device count
 *   server 0:        reads count/0 .. count/N-1 every 50 ms until all are there or its
 *                    deadline (HCCL_CONNECT_TIMEOUT, else 60 s, from when it began serving),
 *                    then sets "counts" to "3,2,..." or, at the deadline, to "!" and a message
 *                    naming every server that never said its count
 *   every server:    gets "counts" (within the deadline and 5 s more), numbers its ranks from
 *                    it, and counts itself in "read"
 * Server 0 alone gathers, so N servers make O(N) requests, not O(N^2), and every server that
 * came fails with server 0's message. The store stays up for the job (elastic.c uses it for
 * --max-restarts); server 0 stops it last, once each server whose count it saw has read the
 * counts (waiting at most 5 s), so no launcher loses the store before it has them.
 */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_US 50000
#define MARGIN_MS 5000 /* past server 0's deadline: its answer is on its way */
#define MAX_NAMED 16   /* servers a message names one by one; the rest are counted */

static struct {
  struct hccl_store_server *server;
  struct hccl_store *st;
  int expect_reads; /* server 0: servers whose count it saw, each of which reads the answer */
  char where[96];   /* the store's "address:port", for messages */
} g;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int store_err(char *err, size_t errlen, const char *what) {
  snprintf(err, errlen, "servers meeting on the launchers' store %s: %s: %s", g.where, what,
           HcclGetLastErrorMessage());
  return -1;
}

/* Adds delta (0: only reads) to the integer "npu-launch/<what>[/<k>]" (k < 0: none). */
static int add(const char *what, int k, int64_t delta, int64_t *v) {
  char key[64];
  if (k < 0)
    snprintf(key, sizeof(key), "npu-launch/%s", what);
  else
    snprintf(key, sizeof(key), "npu-launch/%s/%d", what, k);
  return hccl__store_add(g.st, key, delta, v) == HCCL_SUCCESS ? 0 : -1;
}

HcclResult launch_servers_connect(const struct launch_job *j, struct hccl_store **out) {
  return hccl__store_tcp_connect(j->master_addr, (uint16_t)(j->o.master_port + 1),
                                 (int64_t)j->o.connect_s * 1000, out);
}

struct hccl_store *launch_servers_store(void) {
  return g.st;
}

/* Server 0, at its deadline: the message naming the servers whose count never came. */
static void name_missing(const struct launch_job *j, const int *counts, char *buf, size_t len) {
  int n = j->o.nnodes, missing = 0, named = 0;
  size_t at = 0;
  for (int k = 0; k < n; k++)
    missing += counts[k] == 0;
  at += (size_t)snprintf(buf, len, "server%s ", missing > 1 ? "s" : "");
  for (int k = 0; k < n && at < len; k++) {
    if (counts[k] || named == MAX_NAMED) continue;
    at += (size_t)snprintf(buf + at, len - at, "%s%d", named ? ", " : "", k);
    named++;
  }
  if (at < len && missing > named)
    at += (size_t)snprintf(buf + at, len - at, " and %d more", missing - named);
  if (at < len)
    snprintf(buf + at, len - at,
             " of %d never said %s device count within %d s (HCCL_CONNECT_TIMEOUT, else %d s): "
             "is npu-launch --nnodes %d --node-rank K --master-addr %s --master-port %d running "
             "on each server K, and can it reach %s?",
             n, missing > 1 ? "their" : "its", j->o.connect_s, LAUNCH_DEFAULT_CONNECT_S, n,
             j->master_addr, j->o.master_port, g.where);
}

/* Server 0: every server's count into counts[0..N), each read until it is there or the
 * deadline; then the answer for all ("3,2,..." or "!message") in "npu-launch/counts". */
static int gather(const struct launch_job *j, int *counts, char *err, size_t errlen) {
  int n = j->o.nnodes, left = n;
  int64_t deadline = now_ms() + (int64_t)j->o.connect_s * 1000;
  for (;;) {
    for (int k = 0; k < n; k++) {
      int64_t v = 0;
      if (counts[k]) continue;
      if (add("count", k, 0, &v) != 0) return store_err(err, errlen, "reading the counts");
      if (v > 0) {
        counts[k] = v > LAUNCH_MAX_LOCAL ? LAUNCH_MAX_LOCAL + 1 : (int)v; /* ranks.c refuses */
        left--;
      }
    }
    if (left == 0 || now_ms() >= deadline) break;
    usleep(POLL_US);
  }
  g.expect_reads = n - left;
  size_t len = (size_t)n * 4 + 1024;
  char *answer = malloc(len);
  if (!answer) {
    snprintf(err, errlen, "no memory for the device counts of %d servers", n);
    return -1;
  }
  size_t at = 0;
  if (left > 0) {
    answer[at++] = '!';
    name_missing(j, counts, answer + at, len - at);
  } else {
    for (int k = 0; k < n; k++)
      at += (size_t)snprintf(answer + at, len - at, "%s%d", k ? "," : "", counts[k]);
  }
  HcclResult rc = hccl__store_set(g.st, "npu-launch/counts", answer, strlen(answer) + 1);
  free(answer);
  return rc == HCCL_SUCCESS ? 0 : store_err(err, errlen, "publishing the counts");
}

/* The answer of server 0 into counts[0..N): 0, or -1 with err naming what is wrong. */
static int parse_answer(const struct launch_job *j, const char *text, int *counts, char *err,
                        size_t errlen) {
  int n = j->o.nnodes, k = 1;
  if (text[0] == '!') {
    snprintf(err, errlen, "%s%s", j->o.node_rank ? "server 0 says: " : "", text + 1);
    return -1;
  }
  for (const char *p = text; *p; p++)
    k += *p == ',';
  if (k != n) {
    snprintf(err, errlen,
             "server 0 counted the devices of %d servers (its --nnodes), but this server has "
             "--nnodes %d; give every server the same --nnodes",
             k, n);
    return -1;
  }
  const char *p = text;
  for (k = 0; k < n; k++) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || *end != (k == n - 1 ? '\0' : ',')) {
      snprintf(err, errlen, "server 0's device counts '%.60s' are not numbers separated by commas",
               text);
      return -1;
    }
    counts[k] = v < 0 || v > LAUNCH_MAX_LOCAL ? LAUNCH_MAX_LOCAL + 1 : (int)v; /* ranks.c refuses */
    p = end + 1;
  }
  return 0;
}

/* "3+2+1", at most MAX_NAMED counts, then "+... (N servers)". */
static void format_counts(const int *counts, int n, char *buf, size_t len) {
  size_t at = 0;
  for (int k = 0; k < n && k < MAX_NAMED && at < len; k++)
    at += (size_t)snprintf(buf + at, len - at, "%s%d", k ? "+" : "", counts[k]);
  if (n > MAX_NAMED && at < len) snprintf(buf + at, len - at, "+... (%d servers)", n);
}

/* Says this server's count, gets everyone's (server 0 gathers them), numbers the ranks. */
static int meet(struct launch_job *j, char *err, size_t errlen) {
  int n = j->o.nnodes, me = j->o.node_rank;
  int64_t v = 0;
  if (add("joined", me, 1, &v) != 0) return store_err(err, errlen, "joining");
  if (v > 1) {
    snprintf(err, errlen,
             "another launcher already joined this job as server %d (--node-rank %d): each "
             "server needs its own --node-rank, 0-%d",
             me, me, n - 1);
    return -1;
  }
  if (add("count", me, j->nlocal, &v) != 0) return store_err(err, errlen, "saying its count");
  int *counts = calloc((size_t)n, sizeof(int));
  if (!counts) {
    snprintf(err, errlen, "no memory for the device counts of %d servers", n);
    return -1;
  }
  int rc = -1;
  void *text = NULL;
  size_t len = 0;
  if (me == 0 && gather(j, counts, err, errlen) != 0) goto out;
  int64_t wait_ms = (int64_t)j->o.connect_s * 1000 + MARGIN_MS;
  if (hccl__store_get(g.st, "npu-launch/counts", &text, &len, wait_ms) != HCCL_SUCCESS) {
    char what[160];
    snprintf(what, sizeof(what),
             "server 0 gave no device counts within %d s (HCCL_CONNECT_TIMEOUT, else %d s, and "
             "%d s more)",
             j->o.connect_s, LAUNCH_DEFAULT_CONNECT_S, MARGIN_MS / 1000);
    store_err(err, errlen, what);
    goto out;
  }
  add("read", -1, 1, &v); /* lets server 0 stop serving; a lost store shows below if at all */
  int first = 0, world = 0;
  if (parse_answer(j, text, counts, err, errlen) != 0 ||
      launch_number_ranks(counts, n, me, j->topo.counts ? j->topo.name : NULL, &first, &world,
                          err, errlen) != 0)
    goto out;
  launch_place_ranks(j, first, world);
  j->met = true;
  char list[160];
  format_counts(counts, n, list, sizeof(list));
  launch_note("servers met: ranks %d-%d of world size %d here (server %d of %d; devices per "
              "server %s)",
              first, first + j->nlocal - 1, world, me, n, list);
  rc = 0;
out:
  free(text);
  free(counts);
  return rc;
}

int launch_servers_open(struct launch_job *j, char *err, size_t errlen) {
  int port = j->o.master_port + 1; /* below 65536: options.c */
  uint16_t bound = 0;
  snprintf(g.where, sizeof(g.where), "%s:%d", j->master_addr, port);
  if (j->o.node_rank == 0 &&
      hccl__store_server_start(j->master_addr, (uint16_t)port, &g.server, &bound) != HCCL_SUCCESS) {
    store_err(err, errlen, "server 0 cannot serve it (--master-port + 1 must be free too)");
    launch_servers_close();
    return -1;
  }
  if (launch_servers_connect(j, &g.st) != HCCL_SUCCESS) {
    char what[200];
    snprintf(what, sizeof(what),
             "cannot reach it within %d s (HCCL_CONNECT_TIMEOUT, else %d s); is server 0's "
             "npu-launch (--node-rank 0) running, with this --master-addr and --master-port?",
             j->o.connect_s, LAUNCH_DEFAULT_CONNECT_S);
    store_err(err, errlen, what);
    launch_servers_close();
    return -1;
  }
  if (meet(j, err, errlen) != 0) {
    launch_servers_close();
    return -1;
  }
  return 0;
}

void launch_servers_close(void) {
  int64_t reads = 0;
  /* Server 0 keeps serving until the servers whose count it saw have read the answer, even a
   * failure (bounded: a launcher that died in between must not hold this one). */
  for (int t = 0; g.server && g.st && g.expect_reads > 0 && t < MARGIN_MS / 50 &&
                  add("read", -1, 0, &reads) == 0 && reads < g.expect_reads;
       t++)
    usleep(50000);
  hccl__store_close(g.st);
  hccl__store_server_stop(g.server);
  memset(&g, 0, sizeof(g));
}
