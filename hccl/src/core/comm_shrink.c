/*
 * comm_shrink.c - HcclCommShrink (NCCL's ncclCommShrink): the survivors of a communicator make
 * a smaller one without the ranks they name, typically after one died, and go on without
 * restarting the job.
 *
 * Nothing here may wait on an excluded rank, and the survivors cannot talk before they have a
 * communicator, so everything they must agree on is derived from what each already holds:
 *   - where to meet: the parent's store. For the caller's store (HcclCommInitStore) that is the
 *     same store; otherwise parent rank 0 serves a store anew at the address and port it served
 *     the bootstrap on (stopped since), with the job's token. When rank 0 is excluded that
 *     store is gone with it: HCCL_E_UNAVAIL, named, at once.
 *   - the keys: "<parent key prefix>/s<n>", n counting the shrinks made from the parent, the
 *     same on every survivor that makes the same calls.
 *   - the list: each survivor publishes its (sorted) list under its parent rank and reads every
 *     other survivor's; a difference fails with both lists named, before any bootstrap round.
 * Then the new communicator's ordinary bootstrap (comm.c) runs over that store: new links,
 * groups and placement; the parent's links (one of them to a dead peer) are never used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "group_open.h"
#include "log.h"
#include "store.h"
#include "trust.h"
#include "wait.h"

/* "[1, 3]" for the list's first n ranks, cut short to fit out. */
static void list_text(const uint32_t *l, uint32_t n, char *out, size_t len) {
  size_t k = (size_t)snprintf(out, len, "[");
  for (uint32_t i = 0; i < n && k < len; i++)
    k += (size_t)snprintf(out + k, len - k, "%s%u", i ? ", " : "", l[i]);
  if (k < len) snprintf(out + k, len - k, "]");
}

/* Checks the caller's list against comm and fills gone[r] (1 = excluded) and the sorted list;
 * each failure names the value and the rule. */
static HcclResult check_list(const struct hccl_comm *comm, const int *excl, int count,
                             uint8_t *gone, uint32_t *sorted) {
  for (int i = 0; i < count; i++) {
    int r = excl[i];
    if (r < 0 || (uint32_t)r >= comm->nranks)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommShrink: excludeRanks[%d] = %d is not a rank of this "
                        "communicator of %u ranks (0-%u)",
                        i, r, comm->nranks, comm->nranks - 1);
    if (gone[r])
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommShrink: rank %d is listed twice in excludeRanks (again at "
                        "index %d); list each rank once",
                        r, i);
    if ((uint32_t)r == comm->rank)
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommShrink: rank %d excludes itself (excludeRanks[%d]); only the "
                        "ranks that stay call HcclCommShrink",
                        r, i);
    gone[r] = 1;
  }
  uint32_t k = 0;
  for (uint32_t r = 0; r < comm->nranks; r++)
    if (gone[r]) sorted[k++] = r;
  return HCCL_SUCCESS;
}

/* The parent's store, for the new communicator c (see the top of the file). */
static HcclResult meet_store(const struct hccl_comm *comm, const uint8_t *gone,
                             struct hccl_comm *c) {
  if (comm->boot.store_user.set) {
    c->boot.store_external = true;
    c->boot.store_user = comm->boot.store_user;
    return hccl__store_ext_new(&comm->boot.store_user, &c->boot.store);
  }
  snprintf(c->boot.store_host, sizeof(c->boot.store_host), "%s", comm->boot.store_host);
  c->boot.store_port = comm->boot.store_port;
  snprintf(c->boot.store_token, sizeof(c->boot.store_token), "%s", comm->boot.store_token);
  /* The parent's own server may still be up, finishing its bootstrap: this one's keys say
   * which is which. */
  char key[160];
  uint32_t one = 1;
  snprintf(key, sizeof(key), "%s/serving", c->key_prefix);
  if (comm->rank == 0) {
    struct hccl_store_trust trust;
    uint16_t port;
    HCCL_TRY(hccl__comm_store_trust(&c->cfg, comm->boot.store_token, &trust));
    HCCL_TRY(hccl__store_server_start_trusted(comm->boot.store_host, comm->boot.store_port, &trust,
                                              &c->boot.server, &port));
    HCCL_TRY(hccl__store_tcp_connect(comm->boot.store_host, comm->boot.store_port,
                                     c->cfg.connect_timeout_ms, &c->boot.store));
    HCCL_TRY(hccl__store_tcp_hello(c->boot.store, comm->boot.store_token));
    return hccl__store_set(c->boot.store, key, &one, sizeof(one));
  }
  return hccl__comm_store_join(c, comm->boot.store_host, comm->boot.store_port,
                               comm->boot.store_token, key, &one, sizeof(one));
}

/* Publishes this survivor's list under its parent rank and compares every other survivor's:
 * ranks that disagree fail here, naming both lists, before the bootstrap's rounds. */
static HcclResult agree(const struct hccl_comm *comm, struct hccl_comm *c, const uint8_t *gone,
                        const uint32_t *sorted, uint32_t count) {
  char key[160];
  snprintf(key, sizeof(key), "%s/list/%u", c->key_prefix, comm->rank);
  HCCL_TRY(hccl__store_set(c->boot.store, key, sorted, count * sizeof(uint32_t)));
  int64_t deadline = hccl__now_ns() + c->cfg.connect_timeout_ms * 1000000LL;
  for (uint32_t r = 0; r < comm->nranks; r++) {
    if (gone[r] || r == comm->rank) continue;
    snprintf(key, sizeof(key), "%s/list/%u", c->key_prefix, r);
    void *val = NULL;
    size_t len = 0;
    int64_t left = (deadline - hccl__now_ns()) / 1000000;
    hccl__log_quiet(1); /* ours names the survivor; the store's would name a key */
    HcclResult res = hccl__store_get(c->boot.store, key, &val, &len, left > 0 ? left : 0);
    hccl__log_quiet(0);
    if (res == HCCL_E_TIMEOUT)
      return hccl__fail(res,
                        "HcclCommShrink: rank %u waited %lld s (the connect timeout) for rank "
                        "%u, which its list keeps, to call HcclCommShrink; if rank %u is dead "
                        "too, exclude it as well",
                        comm->rank, (long long)(c->cfg.connect_timeout_ms / 1000), r, r);
    if (res != HCCL_SUCCESS) {
      char why[512];
      snprintf(why, sizeof(why), "%s", hccl__quiet_error());
      return hccl__fail(res, "HcclCommShrink: rank %u lost the store while meeting rank %u: %s",
                        comm->rank, r, why);
    }
    bool same = len == count * sizeof(uint32_t) && memcmp(val, sorted, len) == 0;
    if (!same) {
      char mine[256], theirs[256];
      list_text(sorted, count, mine, sizeof(mine));
      list_text(val, (uint32_t)(len / sizeof(uint32_t)), theirs, sizeof(theirs));
      free(val);
      return hccl__fail(HCCL_E_PARA,
                        "HcclCommShrink: rank %u excludes ranks %s but rank %u excludes %s; "
                        "every surviving rank must pass the same list",
                        comm->rank, mine, r, theirs);
    }
    free(val);
  }
  return HCCL_SUCCESS;
}

/* After agree() failed: the others may still be reading the lists, so no survivor loses the
 * store early. Each other survivor says it left; parent rank 0, which serves the store, waits
 * for every survivor its list keeps (each fails in agree() too: it meets a list that differs
 * from its own, or rank 0's), at most the connect timeout, before the store stops. */
static void leave(const struct hccl_comm *comm, struct hccl_comm *c, const uint8_t *gone) {
  char key[160];
  uint32_t one = 1;
  hccl__log_quiet(1);
  if (comm->rank != 0 && !c->boot.store_external) {
    snprintf(key, sizeof(key), "%s/left/%u", c->key_prefix, comm->rank);
    hccl__store_set(c->boot.store, key, &one, sizeof(one));
  } else if (c->boot.server) {
    int64_t deadline = hccl__now_ns() + c->cfg.connect_timeout_ms * 1000000LL;
    for (uint32_t r = 1; r < comm->nranks; r++) {
      if (gone[r]) continue;
      void *val = NULL;
      size_t len;
      int64_t left = (deadline - hccl__now_ns()) / 1000000;
      snprintf(key, sizeof(key), "%s/left/%u", c->key_prefix, r);
      HcclResult res = hccl__store_get(c->boot.store, key, &val, &len, left > 0 ? left : 0);
      free(val);
      if (res != HCCL_SUCCESS) break;
    }
  }
  hccl__log_quiet(0);
}

HcclResult HcclCommShrink(HcclComm comm, const int *excludeRanks, int excludeCount,
                          HcclComm *newcomm, const HcclCommConfig *config, int shrinkFlags) {
  if (!comm || !newcomm)
    return hccl__fail(HCCL_E_PTR, "HcclCommShrink: %s is NULL", comm ? "newcomm" : "comm");
  hccl__log_bind(&comm->log);
  HCCL_TRY(hccl__group_refuse_call("HcclCommShrink"));
  if (excludeCount < 0 || (excludeCount > 0 && !excludeRanks))
    return hccl__fail(excludeCount < 0 ? HCCL_E_PARA : HCCL_E_PTR,
                      "HcclCommShrink: excludeCount is %d with excludeRanks %s; give a list of "
                      "excludeCount >= 0 ranks",
                      excludeCount, excludeRanks ? "set" : "NULL");
  if (shrinkFlags != HCCL_SHRINK_DEFAULT && shrinkFlags != HCCL_SHRINK_ABORT)
    return hccl__fail(HCCL_E_PARA,
                      "HcclCommShrink: shrinkFlags %d is not HCCL_SHRINK_DEFAULT (0) or "
                      "HCCL_SHRINK_ABORT (1)",
                      shrinkFlags);
  struct hccl_settings cfg = comm->cfg;
  if (config) HCCL_TRY(hccl__comm_config_apply(config, &cfg));
  uint8_t *gone = calloc(comm->nranks, 1);
  uint32_t *sorted = calloc(comm->nranks, sizeof(uint32_t));
  struct hccl_comm *c = NULL;
  HcclResult r = HCCL_E_MEMORY;
  if (!gone || !sorted) {
    hccl__fail(r, "out of memory shrinking a communicator of %u ranks", comm->nranks);
    goto out;
  }
  r = check_list(comm, excludeRanks, excludeCount, gone, sorted);
  if (r != HCCL_SUCCESS) goto out;
  if (gone[0] && !comm->boot.store_user.set) {
    r = hccl__fail(HCCL_E_UNAVAIL,
                   "HcclCommShrink: rank 0 is excluded, and it served this communicator's "
                   "store (%s:%u), which is gone with it; to survive rank 0, make the "
                   "communicator with HcclCommInitStore over a store that outlives rank 0",
                   comm->boot.store_host, comm->boot.store_port);
    goto out;
  }
  uint32_t me = 0, n = comm->nranks - (uint32_t)excludeCount;
  for (uint32_t k = 0; k < comm->rank; k++)
    me += !gone[k];
  /* The parent's outstanding work fails now (HCCL_E_REMOTE), not at its deadline. */
  if (shrinkFlags == HCCL_SHRINK_ABORT) HcclCommAbort(comm);
  /* Each survivor keeps its device: the parent's placement already made them distinct. */
  cfg.have_rank = true;
  cfg.rank = me;
  cfg.world_size = n;
  cfg.device_id = comm->device;
  cfg.device_src = "the parent communicator";
  c = hccl__comm_alloc(&cfg, me, n);
  if (!c) {
    r = hccl__fail(HCCL_E_MEMORY, "out of memory for a communicator");
    goto out;
  }
  snprintf(c->log.name, sizeof(c->log.name), "%s",
           config && config->commName[0] ? config->commName : comm->log.name);
  hccl__log_bind(&c->log);
  c->boot.shrunk = true;
  int k = snprintf(c->key_prefix, sizeof(c->key_prefix), "%s/s%u", comm->key_prefix,
                   comm->boot.shrinks + 1);
  if (k < 0 || (size_t)k >= sizeof(c->key_prefix)) {
    r = hccl__fail(HCCL_E_PARA,
                   "HcclCommShrink: communicator '%s' was shrunk too many times over to name "
                   "another one's keys; make a new communicator instead",
                   comm->key_prefix);
    goto out;
  }
  comm->boot.shrinks++;
  r = meet_store(comm, gone, c);
  if (r == HCCL_SUCCESS) {
    r = agree(comm, c, gone, sorted, (uint32_t)excludeCount);
    if (r != HCCL_SUCCESS) leave(comm, c, gone);
  }
  if (r == HCCL_SUCCESS) r = hccl__comm_bootstrap(c);
  if (r == HCCL_SUCCESS) {
    HCCL_INFO("shrunk: parent rank %u of %u is rank %u of %u", comm->rank, comm->nranks, me, n);
    *newcomm = c;
    c = NULL;
  }
out:
  if (c) hccl__comm_free(c);
  hccl__log_bind(&comm->log);
  free(gone);
  free(sorted);
  return r;
}
