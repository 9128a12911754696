/*
 * bucket.c - which gradients share a bucket, and the buckets' memory.
 *
 * The rule is PyTorch DDP's (compute_bucket_assignment_by_size), written as a pure function
 * so the unit tests can drive it: parameters are visited in an order (reverse registration
 * order at first, the observed ready order after the rebuild), a parameter is never split,
 * each dtype fills its own bucket, and a bucket is closed as soon as it holds at least its cap
 * (1 MiB for a dtype's first bucket, so the last layers' gradients are not held back behind a
 * large reduction, then 25 MiB). Buckets are numbered in the order their first parameter was
 * visited, which is the order they fill during backward and the order they are started in.
 *
 * A bucket's buffer is one flat allocation holding its gradients back to back, each starting
 * on a 64-byte boundary (the few padding elements are zero and reduced with the rest). In
 * view mode the caller's gradients are these slices. Relayout moves the values over. Buffers
 * (and fp16 wire buffers) come from HcclMemAlloc, so a job inside one server reduces them
 * zero-copy (hccl/src/algo/zcopy.c); every rank lays out the same buckets, so all agree.
 */
#include <stdlib.h>
#include <string.h>

#include "ddp_int.h"

#define DDP_ALIGN 64

size_t ddp__dtype_size(HcclDataType dt) {
  switch (dt) {
  case HCCL_DATA_TYPE_FP16:
    return 2;
  case HCCL_DATA_TYPE_FP32:
    return 4;
  default:
    return 0;
  }
}

const char *ddp__dtype_name(HcclDataType dt) {
  switch (dt) {
  case HCCL_DATA_TYPE_FP16:
    return "fp16";
  case HCCL_DATA_TYPE_FP32:
    return "fp32";
  default:
    return "unsupported";
  }
}

size_t ddp__assign_buckets(const size_t *order, size_t n, const uint64_t *bytes,
                           const HcclDataType *dtype, uint64_t first_cap, uint64_t cap,
                           size_t *bucket_of) {
  enum { NDT = HCCL_DATA_TYPE_RESERVED + 1 };
  long open[NDT];
  uint64_t filled[NDT];
  size_t closed[NDT];
  for (int k = 0; k < NDT; k++) {
    open[k] = -1;
    filled[k] = 0;
    closed[k] = 0;
  }
  size_t nb = 0;
  for (size_t pos = 0; pos < n; pos++) {
    size_t i = order[pos];
    int k = (unsigned)dtype[i] < HCCL_DATA_TYPE_RESERVED ? (int)dtype[i] : NDT - 1;
    if (open[k] < 0) {
      open[k] = (long)nb++;
      filled[k] = 0;
    }
    bucket_of[i] = (size_t)open[k];
    filled[k] += bytes[i];
    if (filled[k] >= (closed[k] == 0 ? first_cap : cap)) {
      closed[k]++;
      open[k] = -1;
    }
  }
  return nb;
}

void ddp__free_buckets(struct ddp_bucket *b, size_t n) {
  if (!b) return;
  for (size_t k = 0; k < n; k++) {
    free(b[k].params);
    HcclMemFree(b[k].buf);
    HcclMemFree(b[k].wire);
  }
  free(b);
}

/* Zero-filled, page-aligned shared memory (NULL when the system refuses). */
static void *zalloc_shared(size_t bytes) {
  void *p = NULL;
  return HcclMemAlloc(&p, bytes ? bytes : 1) == HCCL_SUCCESS ? p : NULL;
}

HcclResult ddp__layout(ddp_t *d, const size_t *order) {
  size_t n = d->nparams;
  uint64_t *bytes = calloc(n, sizeof(*bytes));
  HcclDataType *dts = calloc(n, sizeof(*dts));
  size_t *bucket_of = malloc(n * sizeof(*bucket_of));
  uint64_t *offset = malloc(n * sizeof(*offset));
  size_t *position = malloc(n * sizeof(*position));
  struct ddp_bucket *nb = NULL;
  size_t nbuckets = 0;
  if (!bytes || !dts || !bucket_of || !offset || !position) goto err_nomem;
  for (size_t i = 0; i < n; i++) {
    bytes[i] = d->p[i].count * ddp__dtype_size(d->p[i].dtype);
    dts[i] = d->p[i].dtype;
  }
  nbuckets = ddp__assign_buckets(order, n, bytes, dts, d->cfg.first_bucket_cap_bytes,
                                 d->cfg.bucket_cap_bytes, bucket_of);
  nb = calloc(nbuckets, sizeof(*nb));
  if (!nb) goto err_nomem;
  for (size_t pos = 0; pos < n; pos++) { /* sizes and offsets, in visiting order */
    size_t i = order[pos];
    struct ddp_bucket *b = &nb[bucket_of[i]];
    size_t es = ddp__dtype_size(dts[i]), per_align = DDP_ALIGN / es;
    b->dtype = dts[i];
    b->count = (b->count + per_align - 1) / per_align * per_align;
    offset[i] = b->count;
    position[i] = b->nparams++;
    b->count += d->p[i].count;
  }
  for (size_t k = 0; k < nbuckets; k++) {
    struct ddp_bucket *b = &nb[k];
    b->params = malloc(b->nparams * sizeof(size_t));
    b->buf = zalloc_shared(b->count * ddp__dtype_size(b->dtype));
    if (d->cfg.fp16_wire && b->dtype == HCCL_DATA_TYPE_FP32) b->wire = zalloc_shared(b->count * 2);
    if (!b->params || !b->buf || (d->cfg.fp16_wire && b->dtype == HCCL_DATA_TYPE_FP32 && !b->wire))
      goto err_nomem;
  }
  for (size_t i = 0; i < n; i++)
    nb[bucket_of[i]].params[position[i]] = i;
  if (d->buckets) { /* move the gradient values to the new layout */
    for (size_t i = 0; i < n; i++) {
      const struct ddp_pstate *p = &d->p[i];
      size_t es = ddp__dtype_size(p->dtype);
      memcpy((char *)nb[bucket_of[i]].buf + offset[i] * es,
             (char *)d->buckets[p->bucket].buf + p->offset * es, p->count * es);
    }
    ddp__free_buckets(d->buckets, d->nbuckets);
  }
  for (size_t i = 0; i < n; i++) {
    d->p[i].bucket = bucket_of[i];
    d->p[i].offset = offset[i];
    d->p[i].position = position[i];
  }
  d->buckets = nb;
  d->nbuckets = nbuckets;
  free(bytes);
  free(dts);
  free(bucket_of);
  free(offset);
  free(position);
  return HCCL_SUCCESS;

err_nomem:
  ddp__free_buckets(nb, nbuckets);
  free(bytes);
  free(dts);
  free(bucket_of);
  free(offset);
  free(position);
  return ddp__fail(HCCL_E_MEMORY, "bucket layout of %zu parameters: out of memory", n);
}
