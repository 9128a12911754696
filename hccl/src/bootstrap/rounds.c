/*
 * rounds.c - the bootstrap's rounds (rounds.h): a server's identity, the binomial tree of
 * sockets the ranks meet in through the store, the allgather of one record per rank over it,
 * and the end of the store's part.
 */
#define _GNU_SOURCE
#include "rounds.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "store.h"
#include "wait.h"

/* The kernel's boot id (its text, "" when unreadable) in boot[64]. */
static void read_boot_id(char boot[64]) {
  boot[0] = '\0';
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return;
  if (!fgets(boot, 64, f)) boot[0] = '\0';
  fclose(f);
}

uint64_t hccl__boot_id_hash(void) {
  char boot[64];
  read_boot_id(boot);
  return boot[0] ? hccl__fnv1a(HCCL_FNV1A_SEED, boot, strlen(boot)) : 0;
}

/* Same value for every process of one server: host name, boot id and network namespace, so
 * that servers simulated by network namespaces count as different servers. */
uint64_t hccl__host_identity(char *host, size_t len) {
  uint64_t h = HCCL_FNV1A_SEED;
  if (gethostname(host, len) != 0) snprintf(host, len, "unknown");
  host[len - 1] = '\0';
  h = hccl__fnv1a(h, host, strlen(host));
  char boot[64];
  read_boot_id(boot);
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

/* After a timeout inside ranks [lo, hi): the first rank there that has not published its
 * tree record (UINT32_MAX if all have: one of them is slow, not missing). Costs one short GET
 * per rank, on the failure path only. */
static uint32_t first_missing(const struct hccl_rounds *rd, uint32_t lo, uint32_t hi) {
  char key[160];
  if (!rd->store) return UINT32_MAX; /* a round over a kept tree: every rank had joined */
  for (uint32_t k = lo; k < hi; k++) {
    void *val = NULL;
    size_t n;
    snprintf(key, sizeof(key), "%s/tree/%u", rd->key_prefix, k);
    hccl__log_quiet(1);
    HcclResult res = hccl__store_get(rd->store, key, &val, &n, 1);
    hccl__log_quiet(0);
    free(val);
    if (res != HCCL_SUCCESS) return k;
  }
  return UINT32_MAX;
}

/* The failure of a wait for ranks [lo, hi) (a tree record, a child, a subtree, the whole) in
 * round `round`: res is HCCL_E_TIMEOUT, or HCCL_E_TCP_TRANSFER when `peer` closed its socket
 * (it failed: the rank it waited for, if one is missing, is named then too). Sets rd->blame to
 * the rank named as failed (the missing one, or the peer), UINT32_MAX when none is. */
static HcclResult fail_wait(struct hccl_rounds *rd, const char *round, HcclResult res,
                            uint32_t peer, uint32_t lo, uint32_t hi) {
  if (res != HCCL_E_TIMEOUT && res != HCCL_E_TCP_TRANSFER) return res; /* rd->check's */
  /* A round over a kept tree: a neighbour that left it because its communicator failed (an
   * abort) closes its sockets, and the cause the check names says more than the socket. */
  HcclResult why = rd->check ? rd->check(rd->check_arg) : HCCL_SUCCESS;
  if (why != HCCL_SUCCESS) return why;
  uint32_t missing = first_missing(rd, lo, hi);
  if (res != HCCL_E_TIMEOUT && missing == UINT32_MAX) missing = first_missing(rd, 0, rd->nranks);
  /* A peer that closed without a failure record (frame_in reads one first) failed itself. */
  rd->blame = missing != UINT32_MAX ? missing : res != HCCL_E_TIMEOUT ? peer : UINT32_MAX;
  const char *how = rd->timeout_name       ? rd->timeout_name
                    : rd->store_external ? "the connect timeout"
                                         : "HCCL_CONNECT_TIMEOUT";
  const char *same = rd->store_external ? "world size and store" : "MASTER_ADDR/MASTER_PORT";
  if (missing != UINT32_MAX)
    return hccl__fail(HCCL_E_TIMEOUT,
                      "rank %u waited %lld s (%s) for rank %u to join the communicator of %u "
                      "ranks; check that every rank was started with the same %s and that rank "
                      "%u is running",
                      rd->rank, (long long)(rd->connect_timeout_ms / 1000), how, missing,
                      rd->nranks, same, missing);
  if (res != HCCL_E_TIMEOUT)
    return hccl__fail(HCCL_E_REMOTE,
                      "rank %u lost its bootstrap peer rank %u in round '%s' (rank %u failed or "
                      "ended; its log says why)",
                      rd->rank, peer, round, peer);
  return hccl__fail(res,
                    "rank %u waited %lld s (%s) for the '%s' records of ranks %u-%u of %u; "
                    "each has joined, but one of them did not pass its part on in time",
                    rd->rank, (long long)(rd->connect_timeout_ms / 1000), how, round, lo, hi - 1,
                    rd->nranks);
}

/* ---- the tree's sockets: blocking calls bounded by poll and a deadline ---- */

#define TREE_MAGIC 0x6565727474636368ULL /* "hccttree" in little-endian memory */
#define TREE_MAXCHILD 32

/* What a rank publishes at "<prefix>/tree/<rank>": where its listener is, and a nonce its
 * children present, so only a reader of the store (a holder of the job token) may join. */
struct tree_record {
  uint64_t magic, nonce;
  uint32_t rank, nranks;
  struct sockaddr_storage addr;
};

/* A child's first bytes to its parent. */
struct tree_hello {
  uint64_t magic, nonce;
  uint32_t rank, nranks;
};

/* Before each record set on a socket: the round's hash and the bytes that follow. */
struct tree_frame {
  uint32_t tag, len;
};

/* A frame of this tag (no round's: those are hashes of their names, and the length must match
 * too) carries a failure record instead of records: a rank whose round fails sends one to each
 * tree neighbour before it closes its sockets, and each passes it on unchanged, so every rank
 * names the rank that failed (blame) in the words of the rank that found it (text), not the
 * neighbour whose socket closed. */
#define TREE_FAIL_TAG 0xfa11fa11u
#define TREE_TEXT_MAX 512

struct tree_fail {
  uint32_t blame; /* the rank that failed; UINT32_MAX: text says (a timeout, an abort) */
  uint32_t finder;
  int32_t code; /* the finder's result, every rank's (HCCL_E_TIMEOUT for a rank not joined) */
  char text[TREE_TEXT_MAX]; /* the finder's message, NUL-terminated */
};

/* A round's failure as it leaves this rank: the record it got (passed on as it is) and the
 * sockets not to write it to (the one it came on; one a frame was cut short on). */
struct round_fail {
  bool have;
  struct tree_fail rec;
  int skip[2];
};

/* The kept tree's TCP keepalive (hccl__round_keep_tree; docs/starting.md): a probe after 10 idle
 * seconds, far below the idle timeouts of NATs, load balancers and stateful firewalls (minutes:
 * 4 on Azure's, 350 s on AWS's NAT gateway, 10 on GCP's firewall), so none of them sees the
 * tree idle and drops it; and a path that stops answering is failed by the kernel after 12
 * probes 5 s apart, 70 s after its last bytes: the next split over it fails at once, naming
 * the peer, instead of waiting out HCCL_EXEC_TIMEOUT. 60 s of silence is what the data links
 * tolerate too (transport/tcp/tcp.c): a network blip the collectives survive does not break
 * the parent's splits. The cost: a probe and its answer, two empty segments, a socket every
 * 10 idle seconds. */
#define TREE_KEEPIDLE_S 10
#define TREE_KEEPINTVL_S 5
#define TREE_KEEPCNT 12

struct hccl_tree {
  int parent;                  /* -1 on rank 0 */
  uint32_t nchild;
  uint32_t child[TREE_MAXCHILD]; /* their ranks, ascending */
  int child_fd[TREE_MAXCHILD];
};

/* 1 ready, 0 the deadline passed, -1 an error, -2 rd->check (if rd has one; asked every 100 ms)
 * failed, its result in *why. */
static int poll_fd(int fd, short ev, int64_t deadline_ns, const struct hccl_rounds *rd,
                   HcclResult *why) {
  int slice = rd && rd->check ? 100 : 1000;
  for (;;) {
    int64_t ms = (deadline_ns - hccl__now_ns() + 999999) / 1000000;
    if (rd && rd->check && (*why = rd->check(rd->check_arg)) != HCCL_SUCCESS) return -2;
    if (ms <= 0) return 0;
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, ms > slice ? slice : (int)ms);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

/* Moves all len bytes (wr: out, else in) by the deadline: HCCL_E_TIMEOUT, HCCL_E_TCP_TRANSFER
 * when the peer closed or reset it (errno: the socket's error, 0 for a close), or rd->check's
 * failure (rd may be NULL). Not logged: the
 * caller names the peer (a check's failure is logged by the check). */
static HcclResult sock_all(int fd, void *buf, size_t len, bool wr, int64_t deadline_ns,
                           const struct hccl_rounds *rd) {
  char *p = buf;
  while (len) {
    HcclResult why = HCCL_SUCCESS;
    int w = poll_fd(fd, wr ? POLLOUT : POLLIN, deadline_ns, rd, &why);
    if (w == 0) return HCCL_E_TIMEOUT;
    if (w == -2) return why;
    if (w < 0) return HCCL_E_TCP_TRANSFER;
    ssize_t k = wr ? send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL) : recv(fd, p, len, MSG_DONTWAIT);
    if (k == 0 && !wr) {
      errno = 0; /* closed, not failed: no stale errno for the caller to read (path_silent) */
      return HCCL_E_TCP_TRANSFER;
    }
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return HCCL_E_TCP_TRANSFER;
    }
    p += k;
    len -= (size_t)k;
  }
  return HCCL_SUCCESS;
}

static socklen_t sa_len(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* Connects to `to` by the deadline, retrying refusals (a listener's full backlog). -1 on
 * failure, errno set. */
static int sock_connect(const struct sockaddr_storage *to, int64_t deadline_ns) {
  for (;;) {
    int fd = socket(to->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int rc = connect(fd, (const struct sockaddr *)to, sa_len(to));
    if (rc != 0 && errno == EINPROGRESS && poll_fd(fd, POLLOUT, deadline_ns, NULL, NULL) == 1) {
      socklen_t el = sizeof(rc);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &el) != 0) rc = errno;
      errno = rc;
    } else if (rc != 0 && errno == EINPROGRESS) {
      errno = ETIMEDOUT;
      rc = -1;
    }
    if (rc == 0) return fd;
    int e = errno;
    close(fd);
    errno = e;
    if ((e != ECONNREFUSED && e != EAGAIN) || hccl__now_ns() >= deadline_ns) return -1;
    usleep(10000);
  }
}

void hccl__tree_close(struct hccl_tree *t) {
  if (!t) return;
  if (t->parent >= 0) close(t->parent);
  for (uint32_t i = 0; i < t->nchild; i++)
    if (t->child_fd[i] >= 0) close(t->child_fd[i]);
  free(t);
}

/* Accepts this rank's children on lfd by the deadline: a connection that does not present the
 * nonce and a child's rank in time is closed (one WARN); a child started for another world
 * size fails this rank. */
static HcclResult accept_children(struct hccl_rounds *rd, struct hccl_tree *t, int lfd,
                                  uint64_t nonce, int64_t deadline_ns) {
  uint32_t got = 0, span = subtree_span(rd->rank, rd->nranks);
  while (got < t->nchild) {
    int w = poll_fd(lfd, POLLIN, deadline_ns, NULL, NULL);
    if (w <= 0) {
      for (uint32_t i = 0; i < t->nchild; i++)
        if (t->child_fd[i] < 0)
          return fail_wait(rd, "info", HCCL_E_TIMEOUT, t->child[i], t->child[i],
                           rd->rank + span);
    }
    struct sockaddr_storage from;
    socklen_t fl = sizeof(from);
    int fd = accept4(lfd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
    if (fd < 0) continue;
    struct tree_hello h;
    int64_t hello_dl = hccl__now_ns() + 1000000000LL;
    HcclResult r =
        sock_all(fd, &h, sizeof(h), false, hello_dl < deadline_ns ? hello_dl : deadline_ns, NULL);
    uint32_t i = 0;
    while (r == HCCL_SUCCESS && i < t->nchild && t->child[i] != h.rank)
      i++;
    if (r != HCCL_SUCCESS || h.magic != TREE_MAGIC || h.nonce != nonce || i == t->nchild ||
        t->child_fd[i] >= 0) {
      HCCL_WARN("rank %u's bootstrap listener refused a connection that is not one of its "
                "children of this communicator (%s)",
                rd->rank, r != HCCL_SUCCESS ? "no hello in time" : "wrong hello, rank or job");
      close(fd);
      continue;
    }
    if (h.nranks != rd->nranks) {
      close(fd);
      return hccl__fail(HCCL_E_PARA,
                        "rank %u was started for %u ranks but rank %u for %u; every rank must "
                        "be given the same world size",
                        h.rank, h.nranks, rd->rank, rd->nranks);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    t->child_fd[i] = fd;
    got++;
  }
  return HCCL_SUCCESS;
}

/* The rank's place in the tree: a listener on rd->bind, its record in the store, a socket to
 * its parent (me with its lowest set bit cleared, whatever the world size) and one from each
 * child; the listener is closed once every child is in. */
static HcclResult tree_open(struct hccl_rounds *rd, int64_t deadline_ns) {
  uint32_t me = rd->rank, n = rd->nranks, span = subtree_span(me, n);
  struct hccl_tree *t = calloc(1, sizeof(*t));
  if (!t) return hccl__fail(HCCL_E_MEMORY, "out of memory in bootstrap");
  t->parent = -1;
  for (uint32_t step = 1; step < span && t->nchild < TREE_MAXCHILD; step <<= 1) {
    t->child_fd[t->nchild] = -1;
    t->child[t->nchild++] = me + step;
  }
  struct tree_record rec = {.magic = TREE_MAGIC, .rank = me, .nranks = n};
  if (getrandom(&rec.nonce, sizeof(rec.nonce), GRND_NONBLOCK) != sizeof(rec.nonce))
    rec.nonce = (uint64_t)hccl__now_ns() ^ (uint64_t)getpid() << 40;
  rec.addr = rd->bind;
  if (rec.addr.ss_family != AF_INET && rec.addr.ss_family != AF_INET6) {
    struct sockaddr_in *a4 = (struct sockaddr_in *)&rec.addr;
    memset(&rec.addr, 0, sizeof(rec.addr));
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  ((struct sockaddr_in *)&rec.addr)->sin_port = 0; /* the same place in sockaddr_in6 */
  int lfd = -1;
  HcclResult r = HCCL_SUCCESS;
  if (t->nchild) {
    socklen_t al = sa_len(&rec.addr);
    lfd = socket(rec.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&rec.addr, al) != 0 || listen(lfd, 128) != 0 ||
        getsockname(lfd, (struct sockaddr *)&rec.addr, &al) != 0) {
      char a[80] = "?";
      getnameinfo((struct sockaddr *)&rec.addr, sa_len(&rec.addr), a, sizeof(a), NULL, 0,
                  NI_NUMERICHOST);
      r = hccl__fail(HCCL_E_SYSCALL,
                     "rank %u cannot listen for its bootstrap peers on %s: %s; set HCCL_IF_IP "
                     "or HCCL_SOCKET_IFNAME to this server's address",
                     me, a, strerror(errno));
      goto out;
    }
  }
  char key[160];
  snprintf(key, sizeof(key), "%s/tree/%u", rd->key_prefix, me);
  r = hccl__store_set(rd->store, key, &rec, sizeof(rec));
  if (r != HCCL_SUCCESS) goto out;
  if (me != 0) {
    uint32_t pr = me & (me - 1);
    struct tree_record prec;
    void *val = NULL;
    size_t got = 0;
    snprintf(key, sizeof(key), "%s/tree/%u", rd->key_prefix, pr);
    hccl__log_quiet(1); /* the store's own message lacks the bootstrap's context */
    r = hccl__store_get(rd->store, key, &val, &got, left_ms(deadline_ns));
    hccl__log_quiet(0);
    if (r == HCCL_SUCCESS && got == sizeof(prec)) memcpy(&prec, val, sizeof(prec));
    free(val);
    if (r == HCCL_E_TIMEOUT) {
      r = fail_wait(rd, "info", r, pr, pr, pr + 1);
      goto out;
    }
    if (r != HCCL_SUCCESS) {
      char why[1024];
      snprintf(why, sizeof(why), "%s", hccl__quiet_error());
      r = hccl__fail(r, "rank %u lost the bootstrap store while waiting for '%s': %s", me, key,
                     why);
      goto out;
    }
    if (got != sizeof(prec) || prec.magic != TREE_MAGIC) {
      r = hccl__fail(HCCL_E_INTERNAL,
                     "rank %u read a %zu-byte '%s' where %zu were expected (a different "
                     "libhccl version?)",
                     me, got, key, sizeof(prec));
      goto out;
    }
    if (prec.nranks != n) {
      r = hccl__fail(HCCL_E_PARA,
                     "rank %u was started for %u ranks but rank %u for %u; every rank must be "
                     "given the same world size",
                     me, n, pr, prec.nranks);
      goto out;
    }
    t->parent = sock_connect(&prec.addr, deadline_ns);
    struct tree_hello h = {TREE_MAGIC, prec.nonce, me, n};
    if (t->parent < 0 ||
        sock_all(t->parent, &h, sizeof(h), true, deadline_ns, NULL) != HCCL_SUCCESS) {
      char a[80] = "?";
      getnameinfo((struct sockaddr *)&prec.addr, sa_len(&prec.addr), a, sizeof(a), NULL, 0,
                  NI_NUMERICHOST);
      r = hccl__fail(HCCL_E_TCP_CONNECT,
                     "rank %u cannot reach its bootstrap peer rank %u at %s port %u: %s; check "
                     "that the servers reach each other on that address (HCCL_IF_IP, "
                     "HCCL_SOCKET_IFNAME)",
                     me, pr, a, ntohs(((struct sockaddr_in *)&prec.addr)->sin_port),
                     strerror(errno));
      goto out;
    }
  }
  if (t->nchild) r = accept_children(rd, t, lfd, rec.nonce, deadline_ns);
out:
  if (lfd >= 0) close(lfd);
  if (r != HCCL_SUCCESS) {
    hccl__tree_close(t);
    return r;
  }
  rd->tree = t;
  return HCCL_SUCCESS;
}

/* A failure record from fd, whose frame header f was read: the failure it names, logged, with
 * rd->blame and *fail set (the record is passed on from here). */
static HcclResult fail_record(struct hccl_rounds *rd, const char *round, int fd, uint32_t peer,
                              struct round_fail *fail) {
  struct tree_fail rec;
  int64_t dl = hccl__now_ns() + 1000000000LL; /* sent whole: the rest is on its way */
  if (sock_all(fd, &rec, sizeof(rec), false, dl, NULL) != HCCL_SUCCESS)
    return fail_wait(rd, round, HCCL_E_TCP_TRANSFER, peer, peer, peer + 1);
  rec.text[sizeof(rec.text) - 1] = '\0';
  fail->have = true;
  fail->rec = rec;
  fail->skip[0] = fd;
  rd->blame = rec.blame;
  HcclResult code = rec.code > 0 && rec.code < HCCL_E_RESERVED ? (HcclResult)rec.code
                                                                : HCCL_E_REMOTE;
  if (rec.blame != UINT32_MAX)
    return hccl__fail(code, "rank %u stopped in round '%s': rank %u failed: %s", rd->rank, round,
                      rec.blame, rec.text);
  return hccl__fail(code, "rank %u stopped in round '%s' as rank %u did: %s", rd->rank, round,
                    rec.finder, rec.text);
}

/* A socket to peer the kernel failed with ETIMEDOUT: its keepalive probes (or a frame's
 * retransmissions) went unanswered, so the path or the peer's host is gone, not (as far as
 * this rank can tell) the peer's process alone: no rank is blamed, the message says so. */
static HcclResult path_silent(struct hccl_rounds *rd, const char *round, uint32_t peer) {
  rd->blame = UINT32_MAX;
  return hccl__fail(HCCL_E_REMOTE,
                    "rank %u lost its bootstrap peer rank %u in round '%s': the connection went "
                    "silent (%d keepalive probes %d s apart unanswered): a network fault between "
                    "their servers (a firewall or NAT dropping it), or rank %u's host is down",
                    rd->rank, peer, round, TREE_KEEPCNT, TREE_KEEPINTVL_S, peer);
}

/* One frame of `want` bytes from peer (fd) into buf; failures named (a failure record in its
 * place, fail_wait, or a frame of another round or size). */
static HcclResult frame_in(struct hccl_rounds *rd, const char *round, uint32_t tag, int fd,
                           uint32_t peer, void *buf, size_t want, uint32_t lo, uint32_t hi,
                           int64_t deadline_ns, struct round_fail *fail) {
  struct tree_frame f;
  HcclResult r = sock_all(fd, &f, sizeof(f), false, deadline_ns, rd);
  if (r == HCCL_SUCCESS && f.tag == TREE_FAIL_TAG && f.len == sizeof(struct tree_fail))
    return fail_record(rd, round, fd, peer, fail);
  if (r == HCCL_SUCCESS && (f.tag != tag || f.len != want))
    return hccl__fail(HCCL_E_INTERNAL,
                      "rank %u read %u bytes of round %08x from rank %u where %zu of round '%s' "
                      "were expected (a different libhccl version?)",
                      rd->rank, f.len, f.tag, peer, want, round);
  if (r == HCCL_SUCCESS) r = sock_all(fd, buf, want, false, deadline_ns, rd);
  if (r == HCCL_E_TCP_TRANSFER && errno == ETIMEDOUT) return path_silent(rd, round, peer);
  return r == HCCL_SUCCESS ? r : fail_wait(rd, round, r, peer, lo, hi);
}

/* One frame to peer (fd). A peer that failed has sent its failure record before it closed
 * (tree_tell): a send that finds the socket closed reads it, so the failure is named as the
 * peer named it. */
static HcclResult frame_out(struct hccl_rounds *rd, const char *round, uint32_t tag, int fd,
                            uint32_t peer, const void *buf, size_t len, int64_t deadline_ns,
                            struct round_fail *fail) {
  struct tree_frame f = {tag, (uint32_t)len};
  HcclResult r = sock_all(fd, &f, sizeof(f), true, deadline_ns, rd);
  if (r == HCCL_SUCCESS) r = sock_all(fd, (void *)buf, len, true, deadline_ns, rd);
  if (r == HCCL_SUCCESS) return r;
  fail->skip[1] = fd; /* maybe cut inside a frame: a record there would be read as its bytes */
  if (r == HCCL_E_TCP_TRANSFER && errno == ETIMEDOUT) return path_silent(rd, round, peer);
  if (r == HCCL_E_TCP_TRANSFER &&
      sock_all(fd, &f, sizeof(f), false, hccl__now_ns() + 100000000LL, NULL) == HCCL_SUCCESS &&
      f.tag == TREE_FAIL_TAG && f.len == sizeof(struct tree_fail))
    return fail_record(rd, round, fd, peer, fail);
  return fail_wait(rd, round, r, peer, peer, peer + 1);
}

/* Before a failed round closes the tree: this rank's failure record (or the one it got,
 * unchanged) to every neighbour but those in fail->skip and the rank blamed, each send bounded
 * by 100 ms; then what the neighbours sent is read away, so the close sends a FIN after the
 * record rather than a reset that could overtake it. Best effort: a neighbour that misses it
 * names this rank, as before. */
static void tree_tell(struct hccl_rounds *rd, struct hccl_tree *t, struct round_fail *fail,
                      HcclResult code) {
  if (!fail->have) {
    fail->rec.blame = rd->blame;
    fail->rec.code = (int32_t)code;
    fail->rec.finder = rd->rank;
    snprintf(fail->rec.text, sizeof(fail->rec.text), "%s", HcclGetLastErrorMessage());
  }
  struct tree_frame f = {TREE_FAIL_TAG, sizeof(struct tree_fail)};
  int64_t dl = hccl__now_ns() + 100000000LL;
  for (uint32_t i = 0; i <= t->nchild; i++) {
    int fd = i < t->nchild ? t->child_fd[i] : t->parent;
    uint32_t peer = i < t->nchild ? t->child[i] : rd->rank & (rd->rank - 1);
    if (fd < 0 || fd == fail->skip[0] || fd == fail->skip[1] || peer == fail->rec.blame) continue;
    if (sock_all(fd, &f, sizeof(f), true, dl, NULL) == HCCL_SUCCESS)
      sock_all(fd, &fail->rec, sizeof(fail->rec), true, dl, NULL);
    shutdown(fd, SHUT_WR);
    char sink[4096];
    for (int k = 0; k < 64 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; k++) {
    }
  }
}

/* A gather up the binomial tree and a broadcast of the whole down it, over the tree's
 * sockets: the store serves only the first round's two small requests a rank. A rank sends
 * its subtree's records up and the whole down to its children (rank 0 sends n records to
 * each of its log2(n) children), so no one link carries more than log2(n) whole tables. */
HcclResult hccl__round_allgather(struct hccl_rounds *rd, const char *round, const void *mine,
                                 size_t len, void *all) {
  uint32_t me = rd->rank, n = rd->nranks;
  int64_t deadline = hccl__now_ns() + rd->connect_timeout_ms * 1000000LL;
  rd->blame = UINT32_MAX;
  memcpy((char *)all + (size_t)me * len, mine, len);
  if (n == 1) return HCCL_SUCCESS;
  if (!rd->tree && !rd->store)
    return hccl__fail(HCCL_E_INTERNAL, "rank %u has no bootstrap tree for round '%s'", me, round);
  if (!rd->tree) HCCL_TRY(tree_open(rd, deadline));
  struct hccl_tree *t = rd->tree;
  uint32_t tag = (uint32_t)hccl__fnv1a(HCCL_FNV1A_SEED, round, strlen(round));
  struct round_fail fail = {.have = false, .skip = {-1, -1}};
  HcclResult r = HCCL_SUCCESS;
  for (uint32_t i = 0; i < t->nchild && r == HCCL_SUCCESS; i++) {
    uint32_t c = t->child[i], cspan = subtree_span(c, n);
    r = frame_in(rd, round, tag, t->child_fd[i], c, (char *)all + (size_t)c * len,
                 (size_t)cspan * len, c, c + cspan, deadline, &fail);
  }
  if (r == HCCL_SUCCESS && me != 0) {
    uint32_t pr = me & (me - 1);
    r = frame_out(rd, round, tag, t->parent, pr, (char *)all + (size_t)me * len,
                  (size_t)subtree_span(me, n) * len, deadline, &fail);
    if (r == HCCL_SUCCESS)
      r = frame_in(rd, round, tag, t->parent, pr, all, (size_t)n * len, 0, n, deadline, &fail);
  }
  /* The largest subtree first: the broadcast's critical path is log2(n) sends, not the sum */
  for (uint32_t i = t->nchild; i-- > 0 && r == HCCL_SUCCESS;)
    r = frame_out(rd, round, tag, t->child_fd[i], t->child[i], all, (size_t)n * len, deadline,
                  &fail);
  if (r != HCCL_SUCCESS) {
    /* Its neighbours read why, then see the sockets close, and fail at once naming the rank
     * this rank named (every rank of the tree names the same one). */
    tree_tell(rd, t, &fail, r);
    hccl__tree_close(rd->tree);
    rd->tree = NULL;
  }
  return r;
}

/* TCP keepalive on one kept socket (TREE_KEEP*). Best effort: a socket without it still works,
 * and only a dropped idle path goes unnoticed until a round's deadline. */
static void keepalive_on(int fd) {
  int on = 1, idle = TREE_KEEPIDLE_S, intvl = TREE_KEEPINTVL_S, cnt = TREE_KEEPCNT;
  if (fd < 0) return;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

struct hccl_tree *hccl__round_keep_tree(struct hccl_rounds *rd) {
  struct hccl_tree *t = rd->tree;
  rd->tree = NULL;
  for (uint32_t i = 0; t && i <= t->nchild; i++)
    keepalive_on(i < t->nchild ? t->child_fd[i] : t->parent);
  return t;
}

int hccl__tree_fds(const struct hccl_tree *t, int *fds, int max) {
  int n = 0;
  for (uint32_t i = 0; t && i <= t->nchild; i++) {
    int fd = i < t->nchild ? t->child_fd[i] : t->parent;
    if (fd >= 0 && n < max) fds[n++] = fd;
  }
  return n;
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
        HCCL_WARN("rank %u did not finish bootstrap within %s", r,
                  rd->timeout_name ? rd->timeout_name : "HCCL_CONNECT_TIMEOUT");
        break;
      }
    }
  }
  hccl__tree_close(rd->tree);
  rd->tree = NULL;
  hccl__store_close(rd->store);
  rd->store = NULL;
  hccl__store_server_stop(rd->server);
  rd->server = NULL;
}
