/*
 * create.c - a ddp_t's life: the knobs, the agreement every rank checks before anything
 * moves, the broadcast of rank 0's parameters, the first bucket layout, and destroy.
 *
 * The agreement is two allgathers. The first carries each rank's parameter count, wire knobs
 * and whether its own arguments were valid, so a rank that refuses its arguments makes every
 * rank fail together instead of leaving the others waiting in a collective. The second
 * carries every (count, dtype) pair; each rank compares all ranks with rank 0 and every rank
 * reports the same first difference, with both ranks named.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_int.h"

void ddp_config_init(ddp_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->size = sizeof(*cfg);
  cfg->bucket_cap_bytes = 25ull << 20;
  cfg->first_bucket_cap_bytes = 1ull << 20;
  cfg->grad_as_bucket_view = 1;
  cfg->overlap = 1;
  cfg->rebuild_buckets = 1;
  cfg->fp16_wire = 0;
  cfg->check_finite = 1;
  cfg->poll_yield = 1;
}

enum { H_NPARAMS, H_CAP, H_FIRST_CAP, H_FP16_WIRE, H_BAD, H_FIELDS };

/* This rank's own argument check; returns 0 or 1 + the index of the first bad parameter
 * (nparams + 1 for a problem with the config), with the reason in why. */
static uint64_t check_local(const ddp_param *params, size_t nparams, const ddp_config *cfg,
                            char *why, size_t len) {
  if (cfg->bucket_cap_bytes == 0 || cfg->first_bucket_cap_bytes == 0) {
    snprintf(why, len, "bucket caps must be > 0 (got %" PRIu64 " and first %" PRIu64 ")",
             cfg->bucket_cap_bytes, cfg->first_bucket_cap_bytes);
    return nparams + 1;
  }
  for (size_t i = 0; i < nparams; i++) {
    const ddp_param *p = &params[i];
    if (!p->data || p->count == 0 || ddp__dtype_size(p->dtype) == 0 ||
        (!cfg->grad_as_bucket_view && !p->grad)) {
      snprintf(why, len, "parameter %zu ('%s'): %s", i, p->name ? p->name : "",
               !p->data        ? "data is NULL"
               : p->count == 0 ? "count is 0"
               : ddp__dtype_size(p->dtype) == 0
                   ? "dtype must be HCCL_DATA_TYPE_FP32 or HCCL_DATA_TYPE_FP16"
                   : "grad is NULL (needed when grad_as_bucket_view is 0)");
      return i + 1;
    }
  }
  return 0;
}

static HcclResult agree(ddp_t *d, const ddp_param *params, uint64_t bad, const char *why) {
  uint32_t n = d->nranks;
  uint64_t mine[H_FIELDS] = {d->nparams, d->cfg.bucket_cap_bytes, d->cfg.first_bucket_cap_bytes,
                             (uint64_t)(d->cfg.fp16_wire != 0), bad};
  uint64_t *all = calloc((size_t)n * H_FIELDS, sizeof(uint64_t));
  if (!all) return ddp__fail(HCCL_E_MEMORY, "ddp_create: out of memory");
  HcclResult rc = HcclAllGather(mine, all, H_FIELDS, HCCL_DATA_TYPE_UINT64, d->comm, NULL);
  if (rc != HCCL_SUCCESS) {
    free(all);
    return ddp__fail_hccl(rc, "ddp_create: exchanging parameter counts");
  }
  for (uint32_t r = 0; r < n; r++) {
    const uint64_t *h = all + (size_t)r * H_FIELDS;
    if (h[H_BAD]) {
      free(all);
      if (r == d->rank) return ddp__fail(HCCL_E_PARA, "ddp_create on rank %u: %s", r, why);
      return ddp__fail(HCCL_E_PARA,
                       "ddp_create: rank %u refused its arguments (its message says why)", r);
    }
  }
  for (uint32_t r = 1; r < n; r++) {
    const uint64_t *h0 = all, *h = all + (size_t)r * H_FIELDS;
    static const char *const what[H_FIELDS] = {"parameters", "bucket_cap_bytes",
                                               "first_bucket_cap_bytes", "fp16_wire", ""};
    for (int f = 0; f < H_BAD; f++) {
      if (h0[f] == h[f]) continue;
      uint64_t v0 = h0[f], v = h[f];
      free(all);
      if (f == H_NPARAMS)
        return ddp__fail(HCCL_E_PARA,
                         "ddp_create: rank 0 registered %" PRIu64 " parameters but rank %u "
                         "registered %" PRIu64 "; every rank must register the same parameters",
                         v0, r, v);
      return ddp__fail(HCCL_E_PARA,
                       "ddp_create: %s is %" PRIu64 " on rank 0 but %" PRIu64
                       " on rank %u; every rank must use the same bucket caps and wire format",
                       what[f], v0, v, r);
    }
  }
  free(all);

  /* Every (count, dtype) pair. */
  size_t np = d->nparams;
  uint64_t *desc = malloc(np * 2 * sizeof(uint64_t));
  uint64_t *alld = malloc((size_t)n * np * 2 * sizeof(uint64_t));
  if (!desc || !alld) {
    free(desc);
    free(alld);
    return ddp__fail(HCCL_E_MEMORY, "ddp_create: out of memory");
  }
  for (size_t i = 0; i < np; i++) {
    desc[2 * i] = params[i].count;
    desc[2 * i + 1] = (uint64_t)params[i].dtype;
  }
  rc = HcclAllGather(desc, alld, np * 2, HCCL_DATA_TYPE_UINT64, d->comm, NULL);
  free(desc);
  if (rc != HCCL_SUCCESS) {
    free(alld);
    return ddp__fail_hccl(rc, "ddp_create: exchanging parameter shapes");
  }
  for (size_t i = 0; i < np; i++) {
    for (uint32_t r = 1; r < n; r++) {
      const uint64_t *a = alld + 2 * i, *b = alld + ((size_t)r * np + i) * 2;
      if (a[0] == b[0] && a[1] == b[1]) continue;
      HcclResult e = ddp__fail(
          HCCL_E_PARA,
          "ddp_create: parameter %zu ('%s') has %" PRIu64 " %s elements on rank 0 but %" PRIu64
          " %s elements on rank %u; every rank must register the same parameters in the same "
          "order",
          i, d->p[i].name, a[0], ddp__dtype_name((HcclDataType)a[1]), b[0],
          ddp__dtype_name((HcclDataType)b[1]), r);
      free(alld);
      return e;
    }
  }
  free(alld);
  return HCCL_SUCCESS;
}

static HcclResult broadcast_params(ddp_t *d) {
  if (d->nranks == 1) return HCCL_SUCCESS;
  HcclRequest *req = calloc(d->nparams, sizeof(*req));
  if (!req) return ddp__fail(HCCL_E_MEMORY, "ddp_create: out of memory");
  HcclResult first = HCCL_SUCCESS;
  size_t issued = 0;
  for (; issued < d->nparams; issued++) {
    struct ddp_pstate *p = &d->p[issued];
    HcclResult rc = HcclBroadcast(p->data, p->count, p->dtype, 0, d->comm, &req[issued]);
    if (rc != HCCL_SUCCESS) {
      first = ddp__fail_hccl(rc, "ddp_create: broadcasting the parameters from rank 0");
      break;
    }
  }
  for (size_t i = 0; i < issued; i++) {
    HcclResult rc = HcclRequestWait(req[i]);
    if (rc != HCCL_SUCCESS && first == HCCL_SUCCESS)
      first = ddp__fail_hccl(rc, "ddp_create: broadcasting the parameters from rank 0");
  }
  free(req);
  return first;
}

HcclResult ddp_create(HcclComm comm, const ddp_param *params, size_t nparams, const ddp_config *cfg,
                      ddp_t **out) {
  if (!comm || !out || (!params && nparams))
    return ddp__fail(HCCL_E_PTR, "ddp_create: %s is NULL",
                     !comm  ? "comm"
                     : !out ? "out"
                            : "params");
  if (nparams == 0) return ddp__fail(HCCL_E_PARA, "ddp_create: no parameters (nparams is 0)");
  if (cfg && cfg->size != sizeof(ddp_config))
    return ddp__fail(HCCL_E_PARA,
                     "ddp_create: cfg->size is %zu, expected %zu; fill it with ddp_config_init",
                     cfg->size, sizeof(ddp_config));
  ddp_t *d = calloc(1, sizeof(*d));
  if (!d) return ddp__fail(HCCL_E_MEMORY, "ddp_create: out of memory");
  HcclResult rc;
  d->comm = comm;
  if (cfg)
    d->cfg = *cfg;
  else
    ddp_config_init(&d->cfg);
  if ((rc = HcclGetRankSize(comm, &d->nranks)) != HCCL_SUCCESS ||
      (rc = HcclGetRankId(comm, &d->rank)) != HCCL_SUCCESS) {
    free(d);
    return ddp__fail_hccl(rc, "ddp_create: reading the communicator's size and rank");
  }
  d->nparams = nparams;
  d->p = calloc(nparams, sizeof(*d->p));
  d->ready_order = calloc(nparams, sizeof(size_t));
  d->first_order = calloc(nparams, sizeof(size_t));
  size_t *order = calloc(nparams, sizeof(size_t));
  if (!d->p || !d->ready_order || !d->first_order || !order) {
    rc = ddp__fail(HCCL_E_MEMORY, "ddp_create: out of memory for %zu parameters", nparams);
    goto err_free;
  }
  for (size_t i = 0; i < nparams; i++) {
    struct ddp_pstate *p = &d->p[i];
    p->data = params[i].data;
    p->grad = params[i].grad;
    p->count = params[i].count;
    p->dtype = params[i].dtype;
    if (params[i].name)
      snprintf(p->name, sizeof(p->name), "%s", params[i].name);
    else
      snprintf(p->name, sizeof(p->name), "param %zu", i);
    for (char *c = p->name; *c; c++) /* names go into JSON traces unescaped */
      if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '_';
    order[i] = nparams - 1 - i; /* backward produces the last parameters first */
  }
  char why[256] = "";
  uint64_t bad = check_local(params, nparams, &d->cfg, why, sizeof(why));
  if ((rc = agree(d, params, bad, why)) != HCCL_SUCCESS) goto err_free;
  if ((rc = broadcast_params(d)) != HCCL_SUCCESS) goto err_free;
  if ((rc = ddp__layout(d, order)) != HCCL_SUCCESS) goto err_free;
  free(order);
  d->stats.first_nonfinite_param = -1;
  *out = d;
  return HCCL_SUCCESS;

err_free:
  free(order);
  free(d->p);
  free(d->ready_order);
  free(d->first_order);
  free(d);
  return rc;
}

void ddp_destroy(ddp_t *d) {
  if (!d) return;
  for (size_t k = 0; k < d->nbuckets; k++) /* the worker may still write these buffers */
    if (d->buckets[k].req) HcclRequestWait(d->buckets[k].req);
  ddp__free_buckets(d->buckets, d->nbuckets);
  free(d->p);
  free(d->ready_order);
  free(d->first_order);
  free(d);
}

void *ddp_grad(ddp_t *d, size_t i) {
  if (!d || i >= d->nparams) return NULL;
  struct ddp_pstate *p = &d->p[i];
  if (!d->cfg.grad_as_bucket_view) return p->grad;
  return (char *)d->buckets[p->bucket].buf + p->offset * ddp__dtype_size(p->dtype);
}

size_t ddp_bucket_count(const ddp_t *d) {
  return d ? d->nbuckets : 0;
}

int ddp_bucket_of(const ddp_t *d, size_t i, size_t *position) {
  if (!d || i >= d->nparams) return -1;
  if (position) *position = d->p[i].position;
  return (int)d->p[i].bucket;
}

HcclResult ddp_last_stats(const ddp_t *d, ddp_step_stats *out) {
  if (!d || !out) return ddp__fail(HCCL_E_PTR, "ddp_last_stats: %s is NULL", d ? "out" : "d");
  *out = d->stats;
  return HCCL_SUCCESS;
}
