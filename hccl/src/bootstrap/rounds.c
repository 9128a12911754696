/*
 * rounds.c - the bootstrap's rounds through the store (rounds.h): a server's identity, the
 * allgather of one record per rank, and the end of the store's part.
 */
#include "rounds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "store.h"
#include "wait.h"

/* Same value for every process of one server: host name, boot id and network namespace, so
 * that servers simulated by network namespaces count as different servers. */
uint64_t hccl__host_identity(char *host, size_t len) {
  uint64_t h = HCCL_FNV1A_SEED;
  if (gethostname(host, len) != 0) snprintf(host, len, "unknown");
  host[len - 1] = '\0';
  h = hccl__fnv1a(h, host, strlen(host));
  char boot[64] = {0};
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
    fclose(f);
  }
  h = hccl__fnv1a(h, boot, strlen(boot));
  struct stat st;
  if (stat("/proc/self/ns/net", &st) == 0) h = hccl__fnv1a(h, &st.st_ino, sizeof(st.st_ino));
  return h;
}

/* The binomial tree over rank order: rank r's subtree is the ranks [r, r + span), span being
 * r's lowest set bit (for rank 0, every rank), clipped at n; its children are r + 2^j for
 * 2^j < span. Rank 0 has log2(n) children, half the ranks have none. */
static uint32_t subtree_span(uint32_t r, uint32_t n) {
  uint32_t span = r ? (r & (0u - r)) : n;
  return span < n - r ? span : n - r;
}

static int64_t left_ms(int64_t deadline_ns) {
  int64_t ms = (deadline_ns - hccl__now_ns()) / 1000000;
  return ms > 0 ? ms : 0;
}

/* After a timeout inside ranks [lo, hi): the first rank there that has not published its own
 * record of this round (UINT32_MAX if all have: one of them is slow, not missing). Costs one
 * short GET per rank, on the failure path only. */
static uint32_t first_missing(const struct hccl_rounds *rd, const char *round, uint32_t lo,
                              uint32_t hi) {
  char key[160];
  for (uint32_t k = lo; k < hi; k++) {
    void *val = NULL;
    size_t n;
    snprintf(key, sizeof(key), "%s/%s/%u", rd->key_prefix, round, k);
    HcclResult res = hccl__store_get(rd->store, key, &val, &n, 1);
    free(val);
    if (res != HCCL_SUCCESS) return k;
  }
  return UINT32_MAX;
}

/* GETs key into buf (want bytes) by the deadline; on failure, the message names who is behind:
 * the first of ranks [lo, hi) that has not joined. */
static HcclResult get_blob(const struct hccl_rounds *rd, const char *round, const char *key,
                           void *buf, size_t want, size_t len, int64_t deadline_ns, uint32_t lo,
                           uint32_t hi) {
  void *val = NULL;
  size_t n = 0;
  /* The store's own message lacks the bootstrap's context: keep it quiet, log ours once. */
  hccl__log_quiet(1);
  HcclResult res = hccl__store_get(rd->store, key, &val, &n, left_ms(deadline_ns));
  uint32_t missing = res == HCCL_E_TIMEOUT ? first_missing(rd, round, lo, hi) : UINT32_MAX;
  hccl__log_quiet(0);
  if (res != HCCL_SUCCESS && res != HCCL_E_TIMEOUT) {
    char why[1024];
    snprintf(why, sizeof(why), "%s", hccl__quiet_error());
    return hccl__fail(res, "rank %u lost the bootstrap store while waiting for '%s': %s",
                      rd->rank, key, why);
  }
  if (res == HCCL_E_TIMEOUT) {
    const char *how = rd->store_external ? "the connect timeout" : "HCCL_CONNECT_TIMEOUT";
    const char *same = rd->store_external ? "world size and store" : "MASTER_ADDR/MASTER_PORT";
    if (missing == UINT32_MAX)
      return hccl__fail(res,
                        "rank %u waited %lld s (%s) for the bootstrap records of ranks %u-%u of "
                        "%u; each has joined, but one of them did not pass its part on in time",
                        rd->rank, (long long)(rd->connect_timeout_ms / 1000), how, lo, hi - 1,
                        rd->nranks);
    return hccl__fail(res,
                      "rank %u waited %lld s (%s) for rank %u to join the communicator of %u "
                      "ranks; check that every rank was started with the same %s and that rank "
                      "%u is running",
                      rd->rank, (long long)(rd->connect_timeout_ms / 1000), how, missing,
                      rd->nranks, same, missing);
  }
  if (n != want) {
    free(val);
    if (n % len == 0 && want == (size_t)rd->nranks * len)
      return hccl__fail(HCCL_E_PARA,
                        "rank %u was started for %u ranks but rank 0 for %zu; every rank must "
                        "be given the same world size",
                        rd->rank, rd->nranks, n / len);
    return hccl__fail(HCCL_E_INTERNAL,
                      "rank %u read a %zu-byte '%s' where %zu were expected (a different libhccl "
                      "version?)",
                      rd->rank, n, key, want);
  }
  memcpy(buf, val, n);
  free(val);
  return HCCL_SUCCESS;
}

/* A gather up the binomial tree and a broadcast of the whole from rank 0, through the store:
 * about 4n requests a round in all (each rank's own record, its subtree's, a GET per child and
 * one of the whole), where every rank reading every record made n^2. The bytes are still
 * n^2 records (each rank reads the whole). */
HcclResult hccl__round_allgather(const struct hccl_rounds *rd, const char *round,
                                 const void *mine, size_t len, void *all) {
  uint32_t me = rd->rank, n = rd->nranks;
  int64_t deadline = hccl__now_ns() + rd->connect_timeout_ms * 1000000LL;
  char key[160];
  /* Its own record first: it says "joined", for the message that names a missing rank. */
  snprintf(key, sizeof(key), "%s/%s/%u", rd->key_prefix, round, me);
  HCCL_TRY(hccl__store_set(rd->store, key, mine, len));
  memcpy((char *)all + (size_t)me * len, mine, len);
  uint32_t span = subtree_span(me, n);
  for (uint32_t step = 1; step < span; step <<= 1) {
    uint32_t child = me + step, cspan = subtree_span(child, n);
    snprintf(key, sizeof(key), "%s/%s/sub/%u", rd->key_prefix, round, child);
    HCCL_TRY(get_blob(rd, round, key, (char *)all + (size_t)child * len, (size_t)cspan * len, len,
                      deadline, child, child + cspan));
  }
  if (me != 0) {
    snprintf(key, sizeof(key), "%s/%s/sub/%u", rd->key_prefix, round, me);
    HCCL_TRY(hccl__store_set(rd->store, key, (char *)all + (size_t)me * len, (size_t)span * len));
    snprintf(key, sizeof(key), "%s/%s/all", rd->key_prefix, round);
    return get_blob(rd, round, key, all, (size_t)n * len, len, deadline, 0, n);
  }
  snprintf(key, sizeof(key), "%s/%s/all", rd->key_prefix, round);
  return hccl__store_set(rd->store, key, all, (size_t)n * len);
}

/* Ends the store's part, on success and on failure alike: each other rank says "done" as its
 * last store call; rank 0, if every rank joined (so every rank will say it), waits for all of
 * them, then stops the store. No rank loses the store while it still reads from it, and no
 * store outlives its bootstrap. The caller's store outlives a bootstrap that succeeded, so
 * then nobody waits; but after a failure rank 0's caller gets the error and may end the
 * process that holds that store (torch's TCPStore lives in rank 0's), while another rank is
 * still reading the records that make it fail the same way: so then they wait as well. */
void hccl__round_finish(struct hccl_rounds *rd, bool all_joined, bool failed) {
  char key[160];
  if (rd->store_external && !(all_joined && failed)) {
    /* Nobody loses the caller's store early, and no server of ours needs stopping. */
  } else if (rd->store && rd->rank != 0) {
    snprintf(key, sizeof(key), "%s/done/%u", rd->key_prefix, rd->rank);
    uint32_t one = 1;
    hccl__log_quiet(1); /* the store may close as soon as rank 0 has seen it */
    hccl__store_set(rd->store, key, &one, sizeof(one));
    hccl__log_quiet(0);
  } else if (rd->store && all_joined) {
    for (uint32_t r = 1; r < rd->nranks; r++) {
      void *val = NULL;
      size_t n;
      snprintf(key, sizeof(key), "%s/done/%u", rd->key_prefix, r);
      hccl__log_quiet(1);
      HcclResult res = hccl__store_get(rd->store, key, &val, &n, rd->connect_timeout_ms);
      hccl__log_quiet(0);
      free(val);
      if (res != HCCL_SUCCESS) {
        HCCL_WARN("rank %u did not finish bootstrap within HCCL_CONNECT_TIMEOUT", r);
        break;
      }
    }
  }
  hccl__store_close(rd->store);
  rd->store = NULL;
  hccl__store_server_stop(rd->server);
  rd->server = NULL;
}
