/*
 * ddp_int.h - the DDP layer's internal interface: the state of a ddp_t, and the functions its
 * files share. Names with a double underscore are internal (not exported from libhccl_ddp.so).
 */
#ifndef DDP_INT_H
#define DDP_INT_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"

#define DDP_NAME_MAX 64

struct ddp_pstate {
  void *data, *grad; /* grad: the caller's buffer (copy mode) */
  uint64_t count;
  HcclDataType dtype;
  char name[DDP_NAME_MAX];
  size_t bucket;   /* index into ddp.buckets */
  size_t position; /* index in that bucket's parameter list */
  uint64_t offset; /* elements from the start of the bucket's buffer */
  int ready;       /* marked in this step */
  double t_ready;  /* when */
};

struct ddp_bucket {
  size_t nparams;
  size_t *params; /* parameter indices, in the bucket's order */
  uint64_t count; /* elements */
  HcclDataType dtype;
  void *buf;      /* count elements of dtype: the gradients (views point here) */
  void *wire;     /* fp16 copy for the wire (fp16_wire on an fp32 bucket), else NULL */
  size_t pending; /* gradients not yet ready in this step */
  HcclRequest req;
  int launched, done;
  double t_start, t_done;
};

struct ddp {
  HcclComm comm;
  uint32_t rank, nranks;
  ddp_config cfg;
  size_t nparams;
  struct ddp_pstate *p;
  size_t nbuckets;
  struct ddp_bucket *buckets;
  size_t next_launch; /* first bucket not yet started (buckets start in order) */

  /* step state */
  uint64_t step;
  int in_step, sync, failed;
  char step_error[400]; /* the step's first ready-mark error, repeated by ddp_finish */
  size_t nready;
  size_t *ready_order; /* parameter indices in the order they were marked this step */
  int order_recorded;  /* a complete first step's order is in first_order */
  size_t *first_order;
  int rebuilt;

  /* timeline of the step */
  double t_begin, t_finish_call, t_finish_end;
  ddp_step_stats stats;
};

/* ---- error.c ---- */
/* Formats the message, keeps it for ddp_last_error(), prints it to stderr, returns code. */
HcclResult ddp__fail(HcclResult code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A libhccl call failed (libhccl logged it): keeps "<what>: <libhccl's message>" for
 * ddp_last_error() without logging again, and returns code. */
HcclResult ddp__fail_hccl(HcclResult code, const char *what);
double ddp__now(void);

/* Passes a non-success result up. */
#define DDP_TRY(expr)                                                                              \
  do {                                                                                             \
    HcclResult ddp__r = (expr);                                                                    \
    if (ddp__r != HCCL_SUCCESS) return ddp__r;                                                     \
  } while (0)

/* ---- bucket.c ---- */
/* The pure assignment rule (PyTorch's compute_bucket_assignment_by_size): parameters are taken
 * in `order`; each dtype has an open bucket; a parameter joins its dtype's open bucket, which
 * is closed once it holds at least the current cap (first_cap for a dtype's first bucket, then
 * cap); buckets are then sorted by the position in `order` of their first parameter. Writes
 * bucket_of[i] for every parameter i and returns the number of buckets. */
size_t ddp__assign_buckets(const size_t *order, size_t n, const uint64_t *bytes,
                           const HcclDataType *dtype, uint64_t first_cap, uint64_t cap,
                           size_t *bucket_of);
/* Builds d->buckets from `order` (allocates buffers, sets views). When old buckets exist the
 * gradient values are moved to the new layout, and the old buckets freed. */
HcclResult ddp__layout(ddp_t *d, const size_t *order);
void ddp__free_buckets(struct ddp_bucket *b, size_t n);
size_t ddp__dtype_size(HcclDataType dt);
const char *ddp__dtype_name(HcclDataType dt);

/* ---- half.c ---- */
void ddp__f32_to_f16_scaled(uint16_t *dst, const float *src, uint64_t n, float scale);
void ddp__f16_to_f32(float *dst, const uint16_t *src, uint64_t n);
void ddp__scale(void *buf, HcclDataType dt, uint64_t n, float scale);
/* Index of the first inf/nan element, or -1. */
int64_t ddp__first_nonfinite(const void *buf, HcclDataType dt, uint64_t n);

/* ---- stats.c ---- */
void ddp__stats_compute(ddp_t *d);

#endif
