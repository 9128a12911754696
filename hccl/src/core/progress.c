/*
 * progress.c - publishing this rank's progress and explaining a timeout from the peers'
 * records. See progress.h.
 */
#include "progress.h"

#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "fingerprint.h"
#include "wait.h"

/* A sleeping waiter renews its heartbeat every 10 ms slice; one older than this is frozen. */
#define STALE_MS 1000

static struct hccl_progress *record_of(struct hccl_comm *c, uint32_t rank) {
  HCCL_FOR_EACH_TRANSPORT_WITH(t, progress) {
    struct hccl_progress *p = t->progress(&c->tx, rank);
    if (p) return p;
  }
  return NULL;
}

void hccl__progress_part_init(struct hccl_progress_part *pp) {
  pthread_mutex_init(&pp->report_lock, NULL);
}

void hccl__progress_part_destroy(struct hccl_progress_part *pp) {
  pthread_mutex_destroy(&pp->report_lock);
}

void hccl__progress_part_close(struct hccl_progress_part *pp) {
  pthread_mutex_lock(&pp->report_lock);
  pp->closing = true;
  pthread_mutex_unlock(&pp->report_lock);
}

struct hccl_progress *hccl__progress_mine(struct hccl_comm *c) {
  struct hccl_progress *p = record_of(c, c->rank);
  return p ? p : &c->progress.own;
}

void hccl__progress_bind(struct hccl_comm *c) { c->progress.self = hccl__progress_mine(c); }

void hccl__progress_enter(struct hccl_progress_part *pp, uint64_t seq, unsigned kind,
                          uint32_t root) {
  struct hccl_progress *p = pp->self;
  atomic_store_explicit(&p->root, root, memory_order_relaxed);
  atomic_store_explicit(&p->call, hccl__progress_call(seq, kind), memory_order_relaxed);
  atomic_store_explicit(&p->in_call, 1, memory_order_release);
}

void hccl__progress_leave(struct hccl_progress_part *pp) {
  atomic_store_explicit(&pp->self->in_call, 0, memory_order_release);
}

/* How long a timed-out rank waits for a peer on another server to answer a progress query. */
#define ASK_MS 1500
/* A host that has acknowledged nothing on a link for this long does not answer: with a
 * keepalive probe after each idle second (transport/tcp/tcp.c), a live host's last acknowledgement
 * is never much older than 1 s. */
#define QUIET_MS 2500
/* How long a rank of a third server may take to say how its links to a silent peer are, and
 * how many are asked: the whole diagnosis stays within ASK_MS + ASKS * REACH_MS (3.5 s). */
#define REACH_MS 1000
#define REACHES 2
/* What a report says of a rank its chain leads to whose host is silent on the reporter's
 * links; the asker, finding that rank answers it, names the network between the two. */
#define SILENT_MARK "has acknowledged nothing on"

/* The quiet of rank r's host on this rank's links (ms, -1: no link; quiet op, transport.h),
 * the ms since bytes came from it in *data_ms, its address in addr. */
static int64_t quiet_of(struct hccl_comm *c, uint32_t r, int64_t *data_ms, char *addr, size_t n) {
  int64_t q = -1;
  addr[0] = '\0';
  if (data_ms) *data_ms = -1;
  HCCL_FOR_EACH_TRANSPORT_WITH(t, quiet) {
    q = t->quiet(&c->tx, r, data_ms, addr, n);
    if (q >= 0 || addr[0]) break;
  }
  if (!addr[0]) snprintf(addr, n, "address unknown");
  return q;
}

static int64_t ask_reach(struct hccl_comm *c, uint32_t via, uint32_t target) {
  HCCL_FOR_EACH_TRANSPORT_WITH(t, ask_reach) {
    int64_t v = t->ask_reach(&c->tx, via, target, REACH_MS);
    if (v != -2) return v;
  }
  return -2;
}

/* Why rank p (another server) answered no progress query: its process frozen while its host
 * answers this rank's links; the network between the two servers down while a rank of a third
 * server still reaches it; its server (or this one) cut off from every server; or, with no
 * third server to ask, one of the last two. */
static void no_answer(struct hccl_comm *c, uint32_t p, const char *path, char *buf, size_t len) {
  char pa[64], ma[64], va[64];
  int64_t data;
  const char *ph = c->peers[p].host, *mh = c->peers[c->rank].host;
  int64_t q = quiet_of(c, p, &data, pa, sizeof(pa));
  quiet_of(c, c->rank, NULL, ma, sizeof(ma));
  if (q < QUIET_MS) {
    snprintf(buf, len,
             "rank %u (server %s, %s) is behind: it did not answer a progress query within %.1f s "
             "though its host acknowledges this rank's link, so its process is stopped or "
             "frozen%s",
             p, ph, pa, ASK_MS / 1000.0, path);
    return;
  }
  /* Its host is silent here: ask ranks of other servers (not its own, not this one) that this
   * rank still reaches whether its host answers them. */
  uint32_t live = 0, silent = 0, asks = 0, via_live = UINT32_MAX, via_silent = UINT32_MAX;
  for (uint32_t r = 0; r < c->nranks; r++) {
    if (c->peers[r].host_hash == c->peers[c->rank].host_hash ||
        c->peers[r].host_hash == c->peers[p].host_hash)
      continue;
    int64_t rq = quiet_of(c, r, NULL, va, sizeof(va));
    if (rq < 0) continue;
    if (rq >= QUIET_MS) {
      silent++;
      continue;
    }
    live++;
    if (via_live != UINT32_MAX || asks == REACHES) continue;
    asks++;
    int64_t v = ask_reach(c, r, p);
    if (v >= 0 && v < QUIET_MS) via_live = r;
    else if (v >= QUIET_MS) via_silent = r;
  }
  double qs = (double)q / 1000, ds = (double)data / 1000;
  if (via_live != UINT32_MAX) {
    quiet_of(c, via_live, NULL, va, sizeof(va));
    snprintf(buf, len,
             "network fault between server %s (%s) and server %s (%s): rank %u there is alive "
             "(rank %u on server %s (%s) reaches its host) but its host has acknowledged nothing "
             "from rank %u for %.1f s; the last bytes from it came %.1f s ago%s",
             mh, ma, ph, pa, p, via_live, c->peers[via_live].host, va, c->rank, qs, ds, path);
  } else if (via_silent != UINT32_MAX) {
    quiet_of(c, via_silent, NULL, va, sizeof(va));
    snprintf(buf, len,
             "rank %u (server %s, %s) is unreachable: its host answers no server (silent for "
             "%.1f s to rank %u, and to rank %u on server %s (%s)), so its server is cut off "
             "from the network or its host is dead; the last bytes from it came %.1f s ago%s",
             p, ph, pa, qs, c->rank, via_silent, c->peers[via_silent].host, va, ds, path);
  } else if (silent > 0 && live == 0) {
    snprintf(buf, len,
             "this rank's server %s (%s) is cut off: no other server's host has acknowledged "
             "anything on its links for %.1f s or more (rank %u on server %s (%s) last sent "
             "bytes %.1f s ago)%s",
             mh, ma, qs, p, ph, pa, ds, path);
  } else {
    snprintf(buf, len,
             "rank %u (server %s, %s) is unreachable from rank %u (server %s, %s): its host has "
             "acknowledged nothing for %.1f s (the last bytes from it came %.1f s ago); the "
             "network between the two servers is down, or that server is cut off or dead (no "
             "third server could be asked)%s",
             p, ph, pa, c->rank, mh, ma, qs, ds, path);
  }
}

/* A record of this server's, or NULL (the TCP I/O thread calls this too). */
static struct hccl_progress *record_in_reach(struct hccl_comm *c, uint32_t rank) {
  return rank == c->rank ? hccl__progress_mine(c) : record_of(c, rank);
}

/* Follows the chain of waits from rank `p` (call number `seq` is the one waited in) through the
 * records in reach, writing who is behind into buf. A rank out of reach (another server): with
 * `ask`, its own answer over the transport (its I/O thread's report), whose chain is
 * followed on from where it leaves that server; without, *out_of_reach is set to it (else
 * UINT32_MAX) and the text says where the chain left. */
static void walk(struct hccl_comm *c, uint32_t p, uint64_t seq, bool ask, char *buf, size_t len,
                 uint32_t *out_of_reach) {
  char path[320] = "", what[96], answer[HCCL_REASON_MAX];
  size_t pn = 0;
  char silent_said[200] = "";
  uint32_t seen[64], asked_rank[4];
  uint32_t nseen = 0, asked = 0, silent_from = UINT32_MAX, silent_to = UINT32_MAX;
  int64_t now_ms = hccl__now_ns() / 1000000;
  if (out_of_reach) *out_of_reach = UINT32_MAX;
  for (uint32_t hop = 0; hop <= c->nranks; hop++) {
    struct hccl_progress *pg = record_in_reach(c, p);
    if (!pg && ask && asked < 4) {
      uint32_t next = UINT32_MAX;
      int got = -1;
      HCCL_FOR_EACH_TRANSPORT_WITH(t, ask_progress) {
        got = t->ask_progress(&c->tx, p, (uint32_t)seq, ASK_MS, answer, sizeof(answer), &next);
        if (got >= 0) break;
      }
      asked_rank[asked++] = p;
      if (got == 0) {
        no_answer(c, p, path, buf, len);
        return;
      }
      bool again = false; /* the chain comes back to a rank that already answered */
      for (uint32_t i = 0; got > 0 && i + 1 < asked && !again; i++)
        again = asked_rank[i] == next;
      if (got == 1 && p == silent_to) {
        /* p answers this rank, yet an earlier reporter says p's host is silent on its links. */
        char pa[64], fa[64];
        quiet_of(c, p, NULL, pa, sizeof(pa));
        quiet_of(c, silent_from, NULL, fa, sizeof(fa));
        snprintf(buf, len,
                 "network fault between server %s (%s) and server %s (%s): ranks %u and %u both "
                 "answer rank %u but not each other%s%s",
                 c->peers[silent_from].host, fa, c->peers[p].host, pa, silent_from, p, c->rank,
                 silent_said, path);
        return;
      }
      const char *mark = got == 1 && next < c->nranks ? strstr(answer, SILENT_MARK) : NULL;
      if (mark) {
        /* Its clause, from the "; " before the mark: "; rank q's host (...) has acknowledged
         * nothing on rank p's links for N s (...)". */
        const char *from = answer;
        for (const char *at = answer; (at = strstr(at, "; ")) && at < mark; at++)
          from = at;
        silent_from = p;
        silent_to = next;
        size_t k = strlen(from) < sizeof(silent_said) ? strlen(from) : sizeof(silent_said) - 1;
        memcpy(silent_said, from, k);
        silent_said[k] = '\0';
      }
      if (got > 0 && (again || next == UINT32_MAX || next >= c->nranks || next == c->rank)) {
        snprintf(buf, len, "%s%s%s", answer, *path ? " (seen from here:" : "", path);
        if (*path && strlen(buf) + 1 < len) strcat(buf, ")");
        return;
      }
      if (got > 0) {
        if (pn < sizeof(path))
          pn += (size_t)snprintf(path + pn, sizeof(path) - pn, "; rank %u reports: %s", p, answer);
        p = next;
        continue;
      }
    }
    if (!pg) {
      char pa[64];
      quiet_of(c, p, NULL, pa, sizeof(pa));
      if (out_of_reach) *out_of_reach = p;
      snprintf(buf, len,
               "the waits lead to rank %u on server %s (%s), which rank %u cannot ask (no link "
               "to it): it did not reach this call, or is stuck%s",
               p, c->peers[p].host, pa, c->rank, path);
      return;
    }
    uint64_t call = atomic_load_explicit(&pg->call, memory_order_relaxed);
    uint32_t inside = atomic_load_explicit(&pg->in_call, memory_order_acquire);
    uint32_t wf = atomic_load_explicit(&pg->waiting_for, memory_order_relaxed);
    int64_t beat = atomic_load_explicit(&pg->beat_ms, memory_order_relaxed);
    hccl__progress_call_name(pg, call, what, sizeof(what));
    if (!inside) {
      if (call >> 8 < seq)
        snprintf(buf, len, "rank %u is behind: it has not started call %llu; its last was %s%s", p,
                 (unsigned long long)seq, call ? what : "none", path);
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
    if (now_ms - beat > STALE_MS && p != c->rank) {
      snprintf(buf, len,
               "rank %u is behind: it is in %s, waiting for rank %u, but has not run for %.1f s "
               "(stopped?)%s",
               p, what, wf - 1, (double)(now_ms - beat) / 1000, path);
      return;
    }
    uint32_t next = wf - 1;
    int cycle = next == c->rank && p != c->rank;
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
  snprintf(buf, len, "rank %u did not reach this call, or is stuck", p);
}

void hccl__progress_explain(struct hccl_comm *c, uint32_t peer, char *buf, size_t len) {
  /* This rank's call number from its own record, not c->coll_seq: the point-to-point engine
   * explains its waits too, while the collective thread counts calls. */
  struct hccl_progress *self = hccl__progress_mine(c);
  walk(c, peer, atomic_load_explicit(&self->call, memory_order_relaxed) >> 8, true, buf, len, NULL);
}

void hccl__progress_report(struct hccl_comm *c, uint32_t seq, char *buf, size_t len,
                           uint32_t *next) {
  pthread_mutex_lock(&c->progress.report_lock);
  if (atomic_load(&c->broken)) {
    /* Its failure already says who was behind. */
    snprintf(buf, len, "rank %u failed: %s", c->rank, c->broken_msg);
    *next = UINT32_MAX;
  } else if (c->progress.closing) {
    snprintf(buf, len, "rank %u is destroying its communicator", c->rank);
    *next = UINT32_MAX;
  } else {
    walk(c, c->rank, seq, false, buf, len, next);
    char na[64];
    int64_t data, q = *next < c->nranks ? quiet_of(c, *next, &data, na, sizeof(na)) : -1;
    size_t n = strlen(buf);
    if (q >= QUIET_MS && n < len)
      snprintf(buf + n, len - n,
               "; rank %u's host (server %s, %s) " SILENT_MARK " rank %u's links for %.1f s "
               "(the last bytes from it came %.1f s ago)",
               *next, c->peers[*next].host, na, c->rank, (double)q / 1000, (double)data / 1000);
  }
  pthread_mutex_unlock(&c->progress.report_lock);
}

uint64_t hccl__progress_cycle(struct hccl_comm *c, uint32_t peer, char *buf, size_t len,
                              int64_t *oldest_beat_ms) {
  struct hccl_progress *self = c->progress.self;
  char what[96];
  hccl__progress_call_name(self, atomic_load_explicit(&self->call, memory_order_relaxed), what,
                           sizeof(what));
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
    hccl__progress_call_name(pg, atomic_load_explicit(&pg->call, memory_order_relaxed), what,
                             sizeof(what));
    if (n < len)
      n += (size_t)snprintf(buf + n, len - n, "; rank %u in %s waits for rank %u", p, what, wf - 1);
    p = wf - 1;
  }
  return 0; /* a cycle that does not pass through this rank: its members will see it */
}
