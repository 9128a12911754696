/*
 * stats.c - what a step cost, and its timeline as a Chrome trace.
 *
 * Communication time is the union of the buckets' intervals, each from its allreduce call to
 * the moment the layer saw it complete (buckets run one after another on the worker thread,
 * so a queued bucket's interval overlaps the one before it; the union counts that time once).
 * The overlapped part is the part of that union before ddp_finish was called, i.e. while the
 * caller was still computing backward; the rest is exposed: the caller waited for it.
 *
 * The trace is gathered to rank 0 with one allgather of fixed-size records (every rank has
 * the same parameters and buckets), timestamps being CLOCK_MONOTONIC, which all processes of
 * one machine share. Rank 0 writes the Trace Event Format's JSON: one process per rank, a
 * "backward" thread with one span per gradient (from the previous ready mark, or the start of
 * backward, to its own mark: the computation that produced it), an "allreduce" thread with one
 * span per bucket, and a "ddp_finish" span.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ddp_int.h"

void ddp__stats_compute(ddp_t *d) {
  ddp_step_stats *s = &d->stats;
  s->step = d->step;
  s->synced = d->sync;
  s->backward_s = d->t_finish_call - d->t_begin;
  s->finish_s = d->t_finish_end - d->t_finish_call;
  s->buckets = 0;
  s->wire_bytes = 0;
  double comm = 0, overlap = 0, cur_s = 0, cur_e = -1;
  for (size_t k = 0; k <= d->nbuckets; k++) {
    const struct ddp_bucket *b = k < d->nbuckets ? &d->buckets[k] : NULL;
    if (b && !(b->launched && b->done)) continue;
    if (b) {
      s->buckets++;
      if (d->nranks > 1) s->wire_bytes += b->count * (b->wire ? 2 : ddp__dtype_size(b->dtype));
    }
    if (b && cur_e >= 0 && b->t_start <= cur_e) { /* extends the current run */
      if (b->t_done > cur_e) cur_e = b->t_done;
      continue;
    }
    if (cur_e >= 0) { /* close the run [cur_s, cur_e] */
      comm += cur_e - cur_s;
      double hidden_end = cur_e < d->t_finish_call ? cur_e : d->t_finish_call;
      if (hidden_end > cur_s) overlap += hidden_end - cur_s;
    }
    if (b) {
      cur_s = b->t_start;
      cur_e = b->t_done;
    }
  }
  s->comm_s = comm;
  s->overlap_s = overlap;
  s->exposed_s = comm - overlap;
}

/* Record of one rank: begin, finish call, finish end, ready time per parameter, start and
 * done per bucket. */
static size_t record_len(const ddp_t *d) {
  return 3 + d->nparams + 2 * d->nbuckets;
}

static void json_span(FILE *f, int *first, const char *name, uint32_t pid, int tid, double ts,
                      double dur, const char *args) {
  fprintf(f,
          "%s\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%u,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f%s%s}",
          *first ? "" : ",", name, pid, tid, ts, dur < 0 ? 0 : dur, args ? ",\"args\":" : "",
          args ? args : "");
  *first = 0;
}

static void json_meta(FILE *f, int *first, const char *what, uint32_t pid, int tid,
                      const char *name) {
  fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%u,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
          *first ? "" : ",", what, pid, tid, name);
  *first = 0;
}

static void write_rank(FILE *f, int *first, const ddp_t *d, uint32_t r, const double *rec,
                       double t0) {
  const double *ready = rec + 3, *bk = rec + 3 + d->nparams;
  char name[160], args[200];
  snprintf(name, sizeof(name), "rank %u", r);
  json_meta(f, first, "process_name", r, 0, name);
  json_meta(f, first, "thread_name", r, 1, "backward");
  json_meta(f, first, "thread_name", r, 2, "allreduce");
  /* Backward spans: gradients in the order they became ready. */
  size_t *idx = malloc(d->nparams * sizeof(size_t));
  size_t n = 0;
  for (size_t i = 0; i < d->nparams; i++)
    if (ready[i] > 0) idx[n++] = i;
  for (size_t a = 1; a < n; a++) /* insertion sort by time: n is a model's parameter count */
    for (size_t b = a; b > 0 && ready[idx[b]] < ready[idx[b - 1]]; b--) {
      size_t t = idx[b];
      idx[b] = idx[b - 1];
      idx[b - 1] = t;
    }
  double prev = rec[0];
  for (size_t a = 0; a < n; a++) {
    size_t i = idx[a];
    snprintf(name, sizeof(name), "grad %s", d->p[i].name);
    snprintf(args, sizeof(args), "{\"param\":%zu,\"bucket\":%zu}", i, d->p[i].bucket);
    json_span(f, first, name, r, 1, (prev - t0) * 1e6, (ready[i] - prev) * 1e6, args);
    prev = ready[i];
  }
  free(idx);
  if (rec[1] > 0)
    json_span(f, first, "ddp_finish", r, 1, (rec[1] - t0) * 1e6, (rec[2] - rec[1]) * 1e6, NULL);
  for (size_t k = 0; k < d->nbuckets; k++) {
    double s = bk[2 * k], e = bk[2 * k + 1];
    if (s <= 0 || e <= 0) continue;
    const struct ddp_bucket *b = &d->buckets[k];
    snprintf(name, sizeof(name), "bucket %zu", k);
    snprintf(args, sizeof(args), "{\"params\":%zu,\"bytes\":%llu,\"first\":\"%s\"}", b->nparams,
             (unsigned long long)(b->count * (b->wire ? 2 : ddp__dtype_size(b->dtype))),
             d->p[b->params[0]].name);
    json_span(f, first, name, r, 2, (s - t0) * 1e6, (e - s) * 1e6, args);
  }
}

HcclResult ddp_trace_write(ddp_t *d, const char *path) {
  if (!d) return ddp__fail(HCCL_E_PTR, "ddp_trace_write: d is NULL");
  size_t len = record_len(d);
  double *mine = calloc(len, sizeof(double));
  double *all = calloc(len * d->nranks, sizeof(double));
  if (!mine || !all) {
    free(mine);
    free(all);
    return ddp__fail(HCCL_E_MEMORY, "ddp_trace_write: out of memory");
  }
  mine[0] = d->t_begin;
  mine[1] = d->t_finish_call;
  mine[2] = d->t_finish_end;
  for (size_t i = 0; i < d->nparams; i++)
    mine[3 + i] = d->p[i].t_ready;
  for (size_t k = 0; k < d->nbuckets; k++) {
    mine[3 + d->nparams + 2 * k] = d->buckets[k].t_start;
    mine[3 + d->nparams + 2 * k + 1] = d->buckets[k].t_done;
  }
  HcclResult rc = HcclAllGather(mine, all, len, HCCL_DATA_TYPE_FP64, d->comm, NULL);
  free(mine);
  if (rc != HCCL_SUCCESS) {
    free(all);
    return ddp__fail_hccl(rc, "ddp_trace_write: gathering the timelines");
  }
  if (d->rank != 0) {
    free(all);
    return HCCL_SUCCESS;
  }
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) {
    free(all);
    return ddp__fail(HCCL_E_OPEN_FILE_FAILURE, "ddp_trace_write: cannot open '%s' for writing",
                     path ? path : "(null)");
  }
  double t0 = all[0];
  for (uint32_t r = 1; r < d->nranks; r++)
    if (all[r * len] > 0 && all[r * len] < t0) t0 = all[r * len];
  int first = 1;
  fprintf(f,
          "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"step\":%llu,\"ranks\":%u},"
          "\"traceEvents\":[",
          (unsigned long long)d->stats.step, d->nranks);
  for (uint32_t r = 0; r < d->nranks; r++)
    write_rank(f, &first, d, r, all + r * len, t0);
  fprintf(f, "\n]}\n");
  int bad = fclose(f) != 0;
  free(all);
  if (bad) return ddp__fail(HCCL_E_OPEN_FILE_FAILURE, "ddp_trace_write: writing '%s' failed", path);
  return HCCL_SUCCESS;
}
