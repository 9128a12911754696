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

#include "comm.h"
#include "log.h"
#include "store.h"

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

/* Same value for every process of one server: host name, boot id and network namespace, so
 * that servers simulated by network namespaces count as different servers. */
uint64_t hccl__host_identity(char *host, size_t len) {
  uint64_t h = 0xcbf29ce484222325ULL;
  if (gethostname(host, len) != 0) snprintf(host, len, "unknown");
  host[len - 1] = '\0';
  h = fnv1a(h, host, strlen(host));
  char boot[64] = {0};
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
    fclose(f);
  }
  h = fnv1a(h, boot, strlen(boot));
  struct stat st;
  if (stat("/proc/self/ns/net", &st) == 0) h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
  return h;
}

HcclResult hccl__round_allgather(struct hccl_comm *c, const char *round, const void *mine,
                                 size_t len, void *all) {
  char key[160];
  snprintf(key, sizeof(key), "%s/%s/%u", c->key_prefix, round, c->rank);
  HCCL_TRY(hccl__store_set(c->store, key, mine, len));
  for (uint32_t r = 0; r < c->nranks; r++) {
    void *val;
    size_t n;
    snprintf(key, sizeof(key), "%s/%s/%u", c->key_prefix, round, r);
    /* The store's own message lacks the bootstrap's context: keep it quiet, log ours once. */
    hccl__log_quiet(1);
    HcclResult res = hccl__store_get(c->store, key, &val, &n, c->cfg.connect_timeout_ms);
    hccl__log_quiet(0);
    if (res != HCCL_SUCCESS && res != HCCL_E_TIMEOUT) {
      char why[1024];
      snprintf(why, sizeof(why), "%s", hccl__quiet_error());
      return hccl__fail(res, "rank %u lost the bootstrap store while waiting for rank %u: %s",
                        c->rank, r, why);
    }
    if (res == HCCL_E_TIMEOUT)
      return hccl__fail(res,
                        "rank %u waited %lld s (%s) for rank %u to join the communicator of %u "
                        "ranks; check that every rank was started with the same %s and that "
                        "rank %u is running",
                        c->rank, (long long)(c->cfg.connect_timeout_ms / 1000),
                        c->store_external ? "the connect timeout" : "HCCL_CONNECT_TIMEOUT", r,
                        c->nranks,
                        c->store_external ? "world size and store" : "MASTER_ADDR/MASTER_PORT", r);
    if (n != len) {
      free(val);
      return hccl__fail(HCCL_E_INTERNAL,
                        "rank %u published a %zu-byte '%s' record where %zu were expected "
                        "(a different libhccl version?)",
                        r, n, round, len);
    }
    memcpy((char *)all + (size_t)r * len, val, len);
    free(val);
  }
  return HCCL_SUCCESS;
}

/* Ends the store's part, on success and on failure alike: each other rank says "done" as its
 * last store call; rank 0, if every rank joined (so every rank will say it), waits for all of
 * them, then stops the store. No rank loses the store while it still reads from it, and no
 * store outlives its bootstrap. */
void hccl__round_finish(struct hccl_comm *c, bool all_joined) {
  char key[160];
  if (c->store_external) {
    /* The caller's store outlives us, and no server of ours needs stopping. */
  } else if (c->store && c->rank != 0) {
    snprintf(key, sizeof(key), "%s/done/%u", c->key_prefix, c->rank);
    uint32_t one = 1;
    hccl__log_quiet(1); /* the store may close as soon as rank 0 has seen it */
    hccl__store_set(c->store, key, &one, sizeof(one));
    hccl__log_quiet(0);
  } else if (c->store && all_joined) {
    for (uint32_t r = 1; r < c->nranks; r++) {
      void *val = NULL;
      size_t n;
      snprintf(key, sizeof(key), "%s/done/%u", c->key_prefix, r);
      hccl__log_quiet(1);
      HcclResult res = hccl__store_get(c->store, key, &val, &n, c->cfg.connect_timeout_ms);
      hccl__log_quiet(0);
      free(val);
      if (res != HCCL_SUCCESS) {
        HCCL_WARN("rank %u did not finish bootstrap within HCCL_CONNECT_TIMEOUT", r);
        break;
      }
    }
  }
  hccl__store_close(c->store);
  c->store = NULL;
  hccl__store_server_stop(c->server);
  c->server = NULL;
}
