/*
 * ddp.h - the one public header of the DDP layer: data-parallel gradient bucketing over a
 * libhccl communicator, for training loops written in C.
 *
 * The caller registers its parameters in forward order. The layer groups their gradients into
 * flat buckets, in reverse order (backward produces the last layer's gradients first), and as
 * backward marks each gradient ready it starts the allreduce of every bucket whose gradients
 * are all ready, so communication runs while backward computes the earlier layers. This is
 * PyTorch DDP's reducer (and Horovod's fusion buffer) in C; ../docs/ddp.md has the picture.
 *
 * One step:
 *
 *     ddp_backward_begin(d, 1);            // before backward's first computation
 *     for (l = last; l >= 0; l--) {
 *       float *gw = ddp_grad(d, 2 * l);     // view mode: write the gradient here
 *       ...compute it...
 *       ddp_grad_ready(d, 2 * l);           // may start a bucket's allreduce
 *       ...
 *     }
 *     ddp_finish(d, &nonfinite);            // every bucket done; gradients averaged
 *     ...optimizer step with ddp_grad(d, i)...
 *
 * Results: every call that can fail returns an HcclResult (the layer's failures reuse libhccl's
 * codes: HCCL_E_PARA for a caller's mistake, HCCL_E_MEMORY, or the code a collective
 * returned), and ddp_last_error() gives the one-line message, which names the parameter, the
 * step and the ranks involved. One enum for the whole stack means a caller checks one kind of
 * code whether the failure came from the layer or from the collective under it.
 *
 * Calls that communicate (ddp_create, ddp_backward_begin of the second step, ddp_finish in a
 * synced step, ddp_trace_write) are collective: every rank makes them in the same order. Only
 * hccl.h's public calls are used; the allreduces run on the communicator's worker thread. A
 * ddp_t is used by one thread at a time, and the communicator must not be used by the caller
 * between ddp_backward_begin and ddp_finish.
 */
#ifndef DDP_H
#define DDP_H

#include <stddef.h>
#include <stdint.h>

#include "hccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Public symbols are the only ones libhccl_ddp.so exports. */
#if defined(__GNUC__)
#define DDP_API __attribute__((visibility("default")))
#else
#define DDP_API
#endif

typedef struct ddp ddp_t;

/* One parameter, as registered at ddp_create (forward order). */
typedef struct {
  void *data;         /* the values; overwritten with rank 0's at ddp_create */
  void *grad;         /* copy mode: the caller's gradient (count elements); unused in view mode */
  uint64_t count;     /* elements, > 0 */
  HcclDataType dtype; /* HCCL_DATA_TYPE_FP32 or HCCL_DATA_TYPE_FP16 */
  const char *name;   /* shown in messages and traces; copied; NULL means "param <i>" */
} ddp_param;

/* Knobs. Fill with ddp_config_init, then change fields. Fields that change what goes on the
 * wire (caps, fp16_wire) must agree on every rank; ddp_create checks. */
typedef struct {
  /* sizeof(ddp_config), set by ddp_config_init */
  size_t size;
  /* A bucket is closed once it holds at least this many bytes: 25 MiB. */
  uint64_t bucket_cap_bytes;
  /* The same for the first bucket of each dtype: 1 MiB. */
  uint64_t first_bucket_cap_bytes;
  /* 1 (default): gradients live in the buckets (ddp_grad gives the view), no copies.
   * 0: the caller's ddp_param.grad buffers, copied in at ready and out at finish. */
  int grad_as_bucket_view;
  /* 1 (default): a bucket starts as soon as its gradients are ready. 0: every bucket starts in
   * ddp_finish (no overlap, for comparison). */
  int overlap;
  /* 1 (default): after the first step, rebuild the buckets in the order in which rank 0's
   * gradients became ready. */
  int rebuild_buckets;
  /* 0 (default). 1: fp32 buckets travel as fp16, divided by the world size before the
   * conversion; the error this adds is measured in docs/ddp.md. */
  int fp16_wire;
  /* 1 (default): ddp_finish reports inf/nan in the reduced gradients. */
  int check_finite;
  /* 1 (default): ddp_poll yields the CPU while a bucket is in flight (lets the communication
   * thread run where it shares a core with backward). */
  int poll_yield;
} ddp_config;

/* Statistics of one step, as PyTorch DDP's logging data. Times in seconds, CLOCK_MONOTONIC.
 * Communication of a bucket runs from its allreduce call to the moment the layer saw it done
 * (ddp_grad_ready, ddp_poll and ddp_finish test every bucket in flight), so it is an upper
 * bound, sharp to one backward layer during backward and to microseconds in ddp_finish. */
typedef struct {
  uint64_t step;       /* 0-based, no-sync steps included */
  int synced;          /* 0 for a no-sync step (nothing communicated) */
  double backward_s;   /* ddp_backward_begin to the ddp_finish call: backward compute */
  double comm_s;       /* union of the buckets' communication intervals */
  double overlap_s;    /* the part of comm_s before the ddp_finish call (hidden by backward) */
  double exposed_s;    /* comm_s - overlap_s */
  double finish_s;     /* time spent inside ddp_finish */
  uint32_t buckets;    /* buckets reduced */
  uint64_t wire_bytes; /* bytes allreduced per rank */
  int nonfinite;       /* 1 when a reduced gradient held inf or nan */
  int64_t first_nonfinite_param; /* its parameter index, or -1 */
} ddp_step_stats;

/* Fills cfg with the defaults above. */
DDP_API void ddp_config_init(ddp_config *cfg);

/* Collective. Checks that every rank registered the same number of parameters with the same
 * counts and dtypes and the same wire knobs (else HCCL_E_PARA on every rank, naming the first
 * difference and the ranks), broadcasts every parameter's data from rank 0, and builds the
 * buckets. params is copied. cfg may be NULL (defaults). The communicator must outlive the
 * ddp_t. On success *out is set; on failure it is untouched. */
DDP_API HcclResult ddp_create(HcclComm comm, const ddp_param *params, size_t nparams,
                              const ddp_config *cfg, ddp_t **out);

/* Waits for any allreduce still in flight, then frees everything. Not collective. NULL ok. */
DDP_API void ddp_destroy(ddp_t *d);

/* Where parameter i's gradient lives: in view mode, a view into its bucket (zeroed at create;
 * valid until the next ddp_backward_begin, which may move it when it rebuilds the buckets,
 * keeping the values); in copy mode, the caller's ddp_param.grad. NULL when i is out of range.
 */
DDP_API void *ddp_grad(ddp_t *d, size_t i);

/* Starts a step's backward. sync = 0 is PyTorch's no_sync: gradients stay local (the caller
 * accumulates into them) and are reduced, accumulated, by the next synced step. The first
 * call after the first complete step rebuilds the buckets (collective: rank 0's order is
 * broadcast). Errors: a step already begun and not finished. */
DDP_API HcclResult ddp_backward_begin(ddp_t *d, int sync);

/* Gradient i is final for this step. In a synced step with overlap, each bucket whose
 * gradients are now all ready is started, in bucket order (a bucket never starts before the
 * one before it). Also tests the buckets in flight. Errors (HCCL_E_PARA, naming the gradient
 * and the step): i out of range, no step begun, i already marked in this step. */
DDP_API HcclResult ddp_grad_ready(ddp_t *d, size_t i);

/* Tests the buckets in flight (records completion times, finishes completed buckets) and,
 * while one is still running and poll_yield is on, yields the CPU once (sched_yield), so that
 * libhccl's worker thread, when it shares this core, runs now instead of at the end of this
 * thread's time slice. Never blocks. Call it inside long computations (every ~0.1-1 ms of
 * backward): it is what lets communication progress during backward on a machine with fewer
 * cores than threads, and it sharpens the statistics. */
DDP_API HcclResult ddp_poll(ddp_t *d);

/* Ends the step: waits for every bucket, leaves every gradient divided by the world size
 * (summed over ranks and, with no-sync steps before, over those steps), and with check_finite
 * sets *nonfinite (may be NULL) to 1 when any reduced gradient holds inf or nan (the same on
 * every rank: all ranks hold the same reduced values). A gradient never marked ready is an
 * error naming it; its bucket (and every later one) was never started on any rank that made
 * the same mistake. After an error the next ddp_backward_begin starts afresh. */
DDP_API HcclResult ddp_finish(ddp_t *d, int *nonfinite);

/* Statistics of the last finished step. */
DDP_API HcclResult ddp_last_stats(const ddp_t *d, ddp_step_stats *out);

/* Collective: gathers every rank's timeline of the last finished step and rank 0 writes it to
 * path as a Chrome trace (chrome://tracing, Perfetto): per rank, a backward track (one span
 * per gradient, from the previous ready mark to its own) and an allreduce track (one span per
 * bucket). Other ranks ignore path (may be NULL). */
DDP_API HcclResult ddp_trace_write(ddp_t *d, const char *path);

/* Bucket layout, for tests and tools: number of buckets, and the bucket of parameter i and
 * its position in that bucket (-1 when out of range). */
DDP_API size_t ddp_bucket_count(const ddp_t *d);
DDP_API int ddp_bucket_of(const ddp_t *d, size_t i, size_t *position);

/* The message of the last failure of a ddp call on this thread, or "". */
DDP_API const char *ddp_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DDP_H */
