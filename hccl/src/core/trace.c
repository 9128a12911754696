/*
 * trace.c - the per-rank event buffer and its Chrome trace JSON file. See trace.h.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtype.h"
#include "log.h"

#define MAX_EVENTS (1u << 18)

/* One event, raw: formatted only when the file is written. */
struct event {
  const char *name, *algo; /* algo: a call's algorithm, a wait's call name */
  int64_t t0, t1;
  uint64_t seq, count;
  uint32_t root; /* a wait's peer */
  int32_t tid;
  int16_t op; /* -1: none; a wait: -2 */
  uint8_t dt;
  uint8_t result;
};

/* Timestamps are CLOCK_MONOTONIC microseconds, the same clock for every rank of a machine, so
 * the ranks' files line up when merged. */
struct hccl_trace {
  char path[600];
  uint32_t rank, nranks; /* the file's header: whose events these are */
  int32_t device;
  _Atomic uint32_t next;
  struct event *ev; /* MAX_EVENTS slots, touched only as used */
};

/* How many communicators of this process have opened a trace: the k-th writes its own file
 * (below), so a process with several (torch's new_group, a second init after a destroy) keeps
 * every communicator's events instead of the last one's. */
static _Atomic uint32_t g_traced;

/* path with "%r" replaced by the rank and "%c" by k, or ".<rank>.json" appended when there is
 * no "%r"; without "%c", the k-th communicator (k >= 2) gets ".c<k>" before ".json". */
static void rank_path(const char *tmpl, uint32_t rank, uint32_t k, char *out, size_t len) {
  size_t o = 0;
  bool has_r = strstr(tmpl, "%r") != NULL, has_c = strstr(tmpl, "%c") != NULL;
  for (const char *p = tmpl; *p && o + 1 < len; p++) {
    int w = 0;
    if (p[0] == '%' && p[1] == 'r')
      w = snprintf(out + o, len - o, "%u", rank);
    else if (p[0] == '%' && p[1] == 'c')
      w = snprintf(out + o, len - o, "%u", k);
    else
      out[o++] = *p;
    if (w) {
      o += (size_t)w < len - o ? (size_t)w : len - o - 1;
      p++;
    }
  }
  out[o] = '\0';
  if (!has_r) snprintf(out + o, len - o, ".%u.json", rank);
  if (has_c || k < 2) return;
  size_t n = strlen(out);
  bool json = n >= 5 && strcmp(out + n - 5, ".json") == 0;
  char tail[8];
  snprintf(tail, sizeof(tail), "%s", json ? ".json" : "");
  snprintf(out + n - (json ? 5 : 0), len - (n - (json ? 5 : 0)), ".c%u%s", k, tail);
}

HcclResult hccl__trace_open(const char *file, uint32_t rank, uint32_t nranks, int32_t device,
                            struct hccl_trace **out) {
  if (!file[0]) return HCCL_SUCCESS;
  struct hccl_trace *t = calloc(1, sizeof(*t));
  struct event *ev = calloc(MAX_EVENTS, sizeof(*ev));
  if (!t || !ev) {
    free(t);
    free(ev);
    return hccl__fail(HCCL_E_MEMORY, "out of memory for the trace buffer (HCCL_TRACE_FILE)");
  }
  rank_path(file, rank, atomic_fetch_add(&g_traced, 1) + 1, t->path,
            sizeof(t->path));
  /* Fail now, not at destroy, when the file cannot be written. */
  FILE *f = fopen(t->path, "w");
  if (!f) {
    HcclResult r = hccl__fail(HCCL_E_OPEN_FILE_FAILURE, "HCCL_TRACE_FILE=%s: cannot write %s: %s",
                              file, t->path, strerror(errno));
    free(t);
    free(ev);
    return r;
  }
  fclose(f);
  t->ev = ev;
  t->rank = rank;
  t->nranks = nranks;
  t->device = device;
  *out = t;
  return HCCL_SUCCESS;
}

static _Thread_local int32_t t_tid;

static struct event *slot(struct hccl_trace *t) {
  uint32_t i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
  if (i >= MAX_EVENTS) return NULL;
  if (!t_tid) t_tid = (int32_t)gettid();
  t->ev[i].tid = t_tid;
  return &t->ev[i];
}

void hccl__trace_call(struct hccl_trace *t, const char *name, int64_t t0_ns, int64_t t1_ns,
                      uint64_t seq, uint64_t count, HcclDataType dt, int op, uint32_t root,
                      const char *algo, HcclResult result) {
  struct event *e = t ? slot(t) : NULL;
  if (!e) return;
  e->name = name;
  e->algo = algo;
  e->t0 = t0_ns;
  e->t1 = t1_ns;
  e->seq = seq;
  e->count = count;
  e->dt = (uint8_t)dt;
  e->op = (int16_t)op;
  e->root = root;
  e->result = (uint8_t)result;
}

void hccl__trace_wait(struct hccl_trace *t, int64_t t0_ns, int64_t t1_ns, uint32_t peer,
                      const char *what) {
  struct event *e = t ? slot(t) : NULL;
  if (!e) return;
  e->name = "wait";
  e->algo = what;
  e->t0 = t0_ns;
  e->t1 = t1_ns;
  e->op = -2;
  e->root = peer;
}

static void write_event(FILE *f, uint32_t rank, const struct event *e) {
  fprintf(f,
          ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, "
          "\"pid\": %u, \"tid\": %d, \"args\": {",
          e->name, e->op == -2 ? "wait" : "collective", (double)e->t0 / 1000,
          (double)(e->t1 - e->t0) / 1000, rank, e->tid);
  if (e->op == -2)
    fprintf(f, "\"peer\": %u, \"in\": \"%s\"}}", e->root, e->algo);
  else
    fprintf(f,
            "\"call\": %llu, \"count\": %llu, \"dtype\": \"%s\", \"op\": \"%s\", "
            "\"root\": %u, \"algo\": \"%s\", \"result\": \"%s\"}}",
            (unsigned long long)e->seq, (unsigned long long)e->count,
            hccl__dtype_name((HcclDataType)e->dt),
            e->op < 0 ? "none" : hccl__op_name((HcclReduceOp)e->op), e->root, e->algo,
            HcclGetErrorString((HcclResult)e->result));
}

void hccl__trace_close(struct hccl_trace **tp) {
  struct hccl_trace *t = *tp;
  if (!t) return;
  *tp = NULL;
  uint32_t n = atomic_load(&t->next);
  uint32_t kept = n < MAX_EVENTS ? n : MAX_EVENTS;
  FILE *f = fopen(t->path, "w");
  if (!f) {
    HCCL_WARN("HCCL_TRACE_FILE: cannot write %s: %s; %u events lost", t->path, strerror(errno),
              kept);
  } else {
    fprintf(f, "{\"traceEvents\": [\n");
    fprintf(f,
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %u, \"args\": {\"name\": "
            "\"rank %u (device %d)\"}},\n",
            t->rank, t->rank, t->device);
    fprintf(f,
            "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %u, \"args\": "
            "{\"sort_index\": %u}}",
            t->rank, t->rank);
    for (uint32_t i = 0; i < kept; i++)
      write_event(f, t->rank, &t->ev[i]);
    fprintf(f,
            "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": %u, \"nranks\": %u, "
            "\"events\": %u, \"dropped\": %u}}\n",
            t->rank, t->nranks, kept, n - kept);
    if (fclose(f) != 0) HCCL_WARN("HCCL_TRACE_FILE: writing %s failed", t->path);
    if (n > kept)
      HCCL_WARN("HCCL_TRACE_FILE: %u events past the buffer of %u were dropped (%s)", n - kept,
                MAX_EVENTS, t->path);
  }
  free(t->ev);
  free(t);
}
