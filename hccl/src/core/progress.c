/*
 * progress.c - publishing this rank's progress and explaining a timeout from the peers'
 * records. See progress.h.
 */
#include "progress.h"

#include <stdio.h>

#include "comm.h"
#include "fingerprint.h"
#include "wait.h"

/* A sleeping waiter renews its heartbeat every 10 ms slice; one older than this is frozen. */
#define STALE_MS 1000

static struct hccl_progress *record_of(struct hccl_comm *c, uint32_t rank) {
  for (int i = 0; hccl__transports[i]; i++) {
    if (!hccl__transports[i]->progress) continue;
    struct hccl_progress *p = hccl__transports[i]->progress(c, rank);
    if (p) return p;
  }
  return NULL;
}

struct hccl_progress *hccl__progress_self(struct hccl_comm *c) {
  if (!c->progress) {
    c->progress = record_of(c, c->rank);
    if (!c->progress) c->progress = &c->progress_private;
  }
  return c->progress;
}

void hccl__progress_enter(struct hccl_comm *c, uint64_t seq, unsigned kind, uint32_t root) {
  struct hccl_progress *p = hccl__progress_self(c);
  atomic_store_explicit(&p->root, root, memory_order_relaxed);
  atomic_store_explicit(&p->call, seq << 8 | (kind & 0xff), memory_order_relaxed);
  atomic_store_explicit(&p->in_call, 1, memory_order_release);
}

void hccl__progress_leave(struct hccl_comm *c) {
  atomic_store_explicit(&hccl__progress_self(c)->in_call, 0, memory_order_release);
}

/* "call 57 (allreduce)", "call 58 (reduce, root 1)": `call` as read from pg, whose root it
 * adds for a rooted collective. */
static void call_name(const struct hccl_progress *pg, uint64_t call, char *buf, size_t len) {
  uint32_t root = atomic_load_explicit(&pg->root, memory_order_relaxed);
  const char *kind = hccl__coll_kind_name((unsigned)(call & 0xff));
  if (root == UINT32_MAX)
    snprintf(buf, len, "call %llu (%s)", (unsigned long long)(call >> 8), kind);
  else
    snprintf(buf, len, "call %llu (%s, root %u)", (unsigned long long)(call >> 8), kind, root);
}

void hccl__progress_explain(struct hccl_comm *c, uint32_t peer, char *buf, size_t len) {
  char path[192] = "", what[96];
  size_t pn = 0;
  uint32_t seen[64];
  uint32_t nseen = 0, p = peer;
  int64_t now_ms = hccl__now_ns() / 1000000;
  for (uint32_t hop = 0; hop <= c->nranks; hop++) {
    struct hccl_progress *pg = record_of(c, p);
    if (!pg) {
      snprintf(buf, len, "rank %u did not reach this call, or is stuck%s", p, path);
      return;
    }
    uint64_t call = atomic_load_explicit(&pg->call, memory_order_relaxed);
    uint32_t inside = atomic_load_explicit(&pg->in_call, memory_order_acquire);
    uint32_t wf = atomic_load_explicit(&pg->waiting_for, memory_order_relaxed);
    int64_t beat = atomic_load_explicit(&pg->beat_ms, memory_order_relaxed);
    call_name(pg, call, what, sizeof(what));
    if (!inside) {
      if (call >> 8 < c->coll_seq)
        snprintf(buf, len, "rank %u is behind: it has not started call %llu; its last was %s%s", p,
                 (unsigned long long)c->coll_seq, call ? what : "none", path);
      else
        snprintf(buf, len, "rank %u is outside the library after %s%s", p, what, path);
      return;
    }
    if (wf == 0) {
      snprintf(buf, len,
               "rank %u is behind: it is in %s but waits for no rank (stopped, or busy outside "
               "the library's waits)%s",
               p, what, path);
      return;
    }
    if (now_ms - beat > STALE_MS) {
      snprintf(buf, len,
               "rank %u is behind: it is in %s, waiting for rank %u, but has not run for %.1f s "
               "(stopped?)%s",
               p, what, wf - 1, (double)(now_ms - beat) / 1000, path);
      return;
    }
    uint32_t next = wf - 1;
    int cycle = next == c->rank;
    for (uint32_t i = 0; i < nseen && !cycle; i++)
      cycle = seen[i] == next;
    if (pn < sizeof(path))
      pn +=
          (size_t)snprintf(path + pn, sizeof(path) - pn, "; rank %u waits for rank %u in call %llu",
                           p, next, (unsigned long long)(call >> 8));
    if (cycle || nseen == sizeof(seen) / sizeof(seen[0])) {
      snprintf(buf, len, "the ranks wait for each other in a cycle (their calls differ?)%s", path);
      return;
    }
    seen[nseen++] = p;
    p = next;
  }
  snprintf(buf, len, "rank %u did not reach this call, or is stuck", peer);
}

uint64_t hccl__progress_cycle(struct hccl_comm *c, uint32_t peer, char *buf, size_t len,
                              int64_t *oldest_beat_ms) {
  struct hccl_progress *self = hccl__progress_self(c);
  char what[96];
  call_name(self, atomic_load_explicit(&self->call, memory_order_relaxed), what, sizeof(what));
  size_t n = (size_t)snprintf(buf, len, "rank %u in %s waits for rank %u", c->rank, what, peer);
  uint64_t sig = 0xcbf29ce484222325ULL ^ c->rank;
  sig = (sig ^ atomic_load_explicit(&self->wait_no, memory_order_relaxed)) * 0x100000001b3ULL;
  int64_t now_ms = hccl__now_ns() / 1000000;
  *oldest_beat_ms = INT64_MAX;
  uint32_t p = peer;
  for (uint32_t hop = 0; hop < c->nranks; hop++) {
    if (p == c->rank) return sig ? sig : 1;
    struct hccl_progress *pg = record_of(c, p);
    if (!pg || !atomic_load_explicit(&pg->in_call, memory_order_acquire)) return 0;
    uint32_t wf = atomic_load_explicit(&pg->waiting_for, memory_order_acquire);
    uint32_t no = atomic_load_explicit(&pg->wait_no, memory_order_acquire);
    int64_t beat = atomic_load_explicit(&pg->beat_ms, memory_order_relaxed);
    if (wf == 0 || now_ms - beat > STALE_MS) return 0;
    if (beat < *oldest_beat_ms) *oldest_beat_ms = beat;
    sig = (sig ^ p) * 0x100000001b3ULL;
    sig = (sig ^ no) * 0x100000001b3ULL;
    call_name(pg, atomic_load_explicit(&pg->call, memory_order_relaxed), what, sizeof(what));
    if (n < len)
      n += (size_t)snprintf(buf + n, len - n, "; rank %u in %s waits for rank %u", p, what, wf - 1);
    p = wf - 1;
  }
  return 0; /* a cycle that does not pass through this rank: its members will see it */
}
