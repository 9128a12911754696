/*
 * step.c - one training step: ddp_backward_begin, ddp_grad_ready, ddp_poll, ddp_finish.
 *
 * Each bucket counts the gradients it still waits for. When a mark brings a bucket to zero,
 * every bucket from the first not yet started up to the first incomplete one is started: so
 * buckets start as early as possible but always in bucket order, the order being the same on
 * every rank, which keeps the ranks' collectives matched (libhccl runs them in call order on
 * the communicator's worker thread). Starting a bucket divides it by the world size (exact for
 * 1, 2, 4 and 8 ranks, and done while the data is still warm from backward) and, with the fp16
 * wire, converts it into the fp16 wire buffer; the allreduce is then a plain in-place sum.
 *
 * Completion is seen by testing the requests in flight at every mark, at every ddp_poll and
 * in ddp_finish; a completed bucket is finished at once (fp16 back to fp32, copy-out in copy
 * mode, inf/nan scan) so that work too overlaps with backward where it can.
 *
 * ddp_poll also yields the CPU while a bucket is in flight. The allreduce is CPU work on the
 * communicator's worker thread; where ranks outnumber cores, that thread shares a core with
 * backward, and each hand-off between ranks wakes a worker that the scheduler lets wait for
 * the compute thread's time slice (milliseconds) before it runs. A yield every fraction of a
 * millisecond from the compute thread lets it run at once: measured at 4 ranks on 2 cores, the
 * first bucket then completes during backward instead of after it.
 *
 * The first complete step records the order in which gradients became ready; the next
 * ddp_backward_begin broadcasts rank 0's record and rebuilds the buckets in that order.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_int.h"

/* Keeps the step's first failure, which ddp_finish repeats. */
static HcclResult mark_failed(ddp_t *d, HcclResult code) {
  if (!d->failed) snprintf(d->step_error, sizeof(d->step_error), "%s", ddp_last_error());
  d->failed = 1;
  return code;
}

static HcclResult step_error(ddp_t *d, HcclResult code, const char *fmt, const char *name,
                             size_t i) {
  char msg[400];
  snprintf(msg, sizeof(msg), fmt, i, name, (unsigned long long)d->step);
  return mark_failed(d, ddp__fail(code, "%s", msg));
}

static HcclResult rebuild(ddp_t *d) {
  size_t n = d->nparams;
  uint64_t *order = malloc(n * sizeof(uint64_t));
  size_t *sorder = malloc(n * sizeof(size_t));
  if (!order || !sorder) {
    free(order);
    free(sorder);
    return ddp__fail(HCCL_E_MEMORY, "rebuilding buckets: out of memory");
  }
  for (size_t k = 0; k < n; k++)
    order[k] = d->first_order[k];
  HcclResult rc = HCCL_SUCCESS;
  if (d->nranks > 1) rc = HcclBroadcast(order, n, HCCL_DATA_TYPE_UINT64, 0, d->comm, NULL);
  if (rc != HCCL_SUCCESS) {
    free(order);
    free(sorder);
    return ddp__fail_hccl(rc, "rebuilding buckets: broadcasting rank 0's ready order");
  }
  for (size_t k = 0; k < n; k++)
    sorder[k] = (size_t)order[k];
  rc = ddp__layout(d, sorder);
  free(order);
  free(sorder);
  return rc;
}

HcclResult ddp_backward_begin(ddp_t *d, int sync) {
  if (!d) return ddp__fail(HCCL_E_PTR, "ddp_backward_begin: d is NULL");
  if (d->in_step)
    return ddp__fail(HCCL_E_PARA,
                     "ddp_backward_begin: step %llu was begun and not finished; call ddp_finish",
                     (unsigned long long)d->step);
  if (d->cfg.rebuild_buckets && d->order_recorded && !d->rebuilt) {
    d->rebuilt = 1;
    DDP_TRY(rebuild(d));
  }
  for (size_t i = 0; i < d->nparams; i++) {
    d->p[i].ready = 0;
    d->p[i].t_ready = 0;
  }
  for (size_t k = 0; k < d->nbuckets; k++) {
    struct ddp_bucket *b = &d->buckets[k];
    b->pending = b->nparams;
    b->launched = b->done = 0;
    b->req = NULL;
    b->t_start = b->t_done = 0;
  }
  d->next_launch = 0;
  d->nready = 0;
  d->failed = 0;
  d->sync = sync != 0;
  d->in_step = 1;
  d->stats.first_nonfinite_param = -1;
  d->stats.nonfinite = 0;
  d->t_finish_call = d->t_finish_end = 0;
  d->t_begin = ddp__now();
  return HCCL_SUCCESS;
}

static HcclResult complete(ddp_t *d, size_t k);

static HcclResult launch(ddp_t *d, size_t k) {
  struct ddp_bucket *b = &d->buckets[k];
  float scale = 1.0f / (float)d->nranks;
  HcclResult rc;
  if (d->nranks == 1) { /* nothing to reduce, nothing to divide: finished as it starts */
    b->launched = 1;
    b->t_start = b->t_done = ddp__now();
    return complete(d, k);
  }
  if (b->wire) {
    ddp__f32_to_f16_scaled(b->wire, b->buf, b->count, scale);
    b->t_start = ddp__now();
    rc = HcclAllReduce(b->wire, b->wire, b->count, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, d->comm,
                       &b->req);
  } else {
    ddp__scale(b->buf, b->dtype, b->count, scale);
    b->t_start = ddp__now();
    rc = HcclAllReduce(b->buf, b->buf, b->count, b->dtype, HCCL_REDUCE_SUM, d->comm, &b->req);
  }
  if (rc != HCCL_SUCCESS) {
    b->req = NULL;
    char what[96];
    snprintf(what, sizeof(what), "step %llu: starting the allreduce of bucket %zu",
             (unsigned long long)d->step, k);
    return mark_failed(d, ddp__fail_hccl(rc, what));
  }
  b->launched = 1;
  return HCCL_SUCCESS;
}

/* Starts every bucket, in order, up to the first one still waiting for a gradient. */
static HcclResult launch_ready(ddp_t *d) {
  while (d->next_launch < d->nbuckets && d->buckets[d->next_launch].pending == 0) {
    DDP_TRY(launch(d, d->next_launch));
    d->next_launch++;
  }
  return HCCL_SUCCESS;
}

/* The allreduce of bucket k has finished (or is about to: waits for it). */
static HcclResult complete(ddp_t *d, size_t k) {
  struct ddp_bucket *b = &d->buckets[k];
  HcclResult rc = b->req ? HcclRequestWait(b->req) : HCCL_SUCCESS;
  b->req = NULL;
  if (b->t_done == 0) b->t_done = ddp__now();
  b->done = 1;
  if (rc != HCCL_SUCCESS) {
    char what[96];
    snprintf(what, sizeof(what), "step %llu: allreduce of bucket %zu", (unsigned long long)d->step,
             k);
    return mark_failed(d, ddp__fail_hccl(rc, what));
  }
  if (b->wire && d->nranks > 1) ddp__f16_to_f32(b->buf, b->wire, b->count);
  size_t es = ddp__dtype_size(b->dtype);
  if (!d->cfg.grad_as_bucket_view)
    for (size_t j = 0; j < b->nparams; j++) {
      struct ddp_pstate *p = &d->p[b->params[j]];
      memcpy(p->grad, (char *)b->buf + p->offset * es, p->count * es);
    }
  if (d->cfg.check_finite && !d->stats.nonfinite) {
    for (size_t j = 0; j < b->nparams; j++) {
      struct ddp_pstate *p = &d->p[b->params[j]];
      if (ddp__first_nonfinite((char *)b->buf + p->offset * es, b->dtype, p->count) >= 0) {
        d->stats.nonfinite = 1;
        d->stats.first_nonfinite_param = (int64_t)b->params[j];
        break;
      }
    }
  }
  return HCCL_SUCCESS;
}

/* Tests the buckets in flight, in order; returns in *busy whether one is still running. */
static HcclResult test_buckets(ddp_t *d, int *busy) {
  *busy = 0;
  for (size_t k = 0; k < d->next_launch; k++) {
    struct ddp_bucket *b = &d->buckets[k];
    if (!b->launched || b->done) continue;
    int done = 0;
    HcclResult rc = HcclRequestTest(b->req, &done);
    if (rc != HCCL_SUCCESS) return mark_failed(d, ddp__fail_hccl(rc, "testing a bucket"));
    if (!done) { /* later buckets run after this one */
      *busy = 1;
      break;
    }
    b->t_done = ddp__now();
    DDP_TRY(complete(d, k));
  }
  return HCCL_SUCCESS;
}

HcclResult ddp_poll(ddp_t *d) {
  if (!d) return ddp__fail(HCCL_E_PTR, "ddp_poll: d is NULL");
  int busy;
  DDP_TRY(test_buckets(d, &busy));
  if (busy && d->cfg.poll_yield) sched_yield();
  return HCCL_SUCCESS;
}

HcclResult ddp_grad_ready(ddp_t *d, size_t i) {
  if (!d) return ddp__fail(HCCL_E_PTR, "ddp_grad_ready: d is NULL");
  if (i >= d->nparams)
    return ddp__fail(HCCL_E_PARA, "ddp_grad_ready: gradient %zu does not exist (%zu parameters)", i,
                     d->nparams);
  struct ddp_pstate *p = &d->p[i];
  if (!d->in_step)
    return ddp__fail(HCCL_E_PARA,
                     "ddp_grad_ready: gradient %zu ('%s') marked ready outside a step; call "
                     "ddp_backward_begin first",
                     i, p->name);
  if (p->ready)
    return step_error(d, HCCL_E_PARA,
                      "gradient %zu ('%s') marked ready twice in step %llu; each gradient is "
                      "marked once per backward",
                      p->name, i);
  p->ready = 1;
  p->t_ready = ddp__now();
  d->ready_order[d->nready++] = i;
  struct ddp_bucket *b = &d->buckets[p->bucket];
  if (d->sync && !d->cfg.grad_as_bucket_view) {
    size_t es = ddp__dtype_size(p->dtype);
    memcpy((char *)b->buf + p->offset * es, p->grad, p->count * es);
  }
  b->pending--;
  if (d->sync && d->cfg.overlap) DDP_TRY(launch_ready(d));
  int busy;
  return test_buckets(d, &busy);
}

HcclResult ddp_finish(ddp_t *d, int *nonfinite) {
  if (!d) return ddp__fail(HCCL_E_PTR, "ddp_finish: d is NULL");
  if (!d->in_step)
    return ddp__fail(HCCL_E_PARA, "ddp_finish: no step begun; call ddp_backward_begin first");
  d->t_finish_call = ddp__now();
  HcclResult first = HCCL_SUCCESS, rc;
  if (d->sync) {
    int busy;
    if ((rc = test_buckets(d, &busy)) != HCCL_SUCCESS) first = rc;
    if (first == HCCL_SUCCESS && (rc = launch_ready(d)) != HCCL_SUCCESS) first = rc;
  }
  if (d->nready < d->nparams) {
    size_t i = 0;
    while (d->p[i].ready)
      i++;
    rc = step_error(d, HCCL_E_PARA,
                    "gradient %zu ('%s') was never marked ready in step %llu; its bucket and "
                    "every later one were not reduced",
                    d->p[i].name, i);
    if (first == HCCL_SUCCESS) first = rc;
  }
  for (size_t k = 0; k < d->next_launch; k++) { /* wait even after an error: buffers in use */
    struct ddp_bucket *b = &d->buckets[k];
    if (!b->launched || b->done) continue;
    rc = complete(d, k);
    if (rc != HCCL_SUCCESS && first == HCCL_SUCCESS) first = rc;
  }
  if (first == HCCL_SUCCESS && d->failed) first = ddp__fail(HCCL_E_PARA, "%s", d->step_error);
  d->t_finish_end = ddp__now();
  ddp__stats_compute(d);
  if (first == HCCL_SUCCESS && !d->order_recorded) {
    memcpy(d->first_order, d->ready_order, d->nparams * sizeof(size_t));
    d->order_recorded = 1;
  }
  d->in_step = 0;
  d->step++;
  if (nonfinite) *nonfinite = d->stats.nonfinite;
  return first;
}
