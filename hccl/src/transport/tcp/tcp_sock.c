/*
 * tcp_sock.c - the socket steps of the TCP transport (tcp.c): which address a rank listens on
 * (HCCL_IF_IP, else HCCL_SOCKET_IFNAME in NCCL's syntax, else the first plain interface that
 * is up, else loopback), listening, connecting and writing under a deadline, the accepting
 * side of the hello (non-blocking steps the I/O thread takes whenever the listener or a
 * socket whose hello is still coming is readable, so a connection that says nothing delays
 * nobody; reading and judging a hello are tcp_wire.c's), and the system call table tests
 * replace. See tcp.h.
 */
#define _GNU_SOURCE
#include "tcp.h"
#include "tcp_sys.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"
#include "settings.h"
#include "trust.h"
#include "wait.h"

static ssize_t sys_recv(int fd, void *buf, size_t len, int flags) {
  return recv(fd, buf, len, flags);
}
static ssize_t sys_sendmsg(int fd, const struct msghdr *msg, int flags) {
  return sendmsg(fd, msg, flags);
}
static int sys_connect(int fd, const struct sockaddr *addr, socklen_t len) {
  return connect(fd, addr, len);
}
static int sys_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  return accept4(fd, addr, len, flags);
}

const struct hccl_tcp_sys hccl__tcp_sys_default = {
    .recv = sys_recv, .sendmsg = sys_sendmsg, .connect = sys_connect, .accept4 = sys_accept4};
struct hccl_tcp_sys hccl__tcp_sys = {
    .recv = sys_recv, .sendmsg = sys_sendmsg, .connect = sys_connect, .accept4 = sys_accept4};

/* ---- choosing the address ---- */

bool hccl__tcp_if_match(const char *spec, const char *name) {
  if (!spec || !*spec) return true;
  bool exclude = false, exact = false;
  if (*spec == '^') exclude = true, spec++;
  if (*spec == '=') exact = true, spec++;
  bool hit = false;
  while (*spec && !hit) {
    const char *comma = strchr(spec, ',');
    size_t n = comma ? (size_t)(comma - spec) : strlen(spec);
    if (n > 0)
      hit = exact ? strlen(name) == n && strncmp(name, spec, n) == 0 : strncmp(name, spec, n) == 0;
    spec += n;
    if (*spec == ',') spec++;
  }
  return exclude ? !hit : hit;
}

static bool usable_family(const struct sockaddr_storage *a, int family) {
  if (a->ss_family != family) return false;
  if (family == AF_INET6) {
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
    if (IN6_IS_ADDR_LINKLOCAL(a6)) return false;
  }
  return true;
}

int hccl__tcp_if_pick(const struct hccl_tcp_if *ifs, int n, const char *spec) {
  static const int families[2] = {AF_INET, AF_INET6};
  bool automatic = !spec || !*spec;
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < n; i++) {
      if (!ifs[i].up || !usable_family(&ifs[i].addr, families[f])) continue;
      if (automatic ? ifs[i].loopback || strncmp(ifs[i].name, "docker", 6) == 0
                    : !hccl__tcp_if_match(spec, ifs[i].name))
        continue;
      return i;
    }
  if (!automatic) return -1;
  /* Nothing but loopback: a single machine (or a namespace with only lo). */
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < n; i++)
      if (ifs[i].up && ifs[i].loopback && usable_family(&ifs[i].addr, families[f])) return i;
  return -1;
}

void hccl__tcp_addr_str(const struct sockaddr_storage *a, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *s = (const struct sockaddr_in *)a;
    inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
    snprintf(buf, len, "%s:%u", host, ntohs(s->sin_port));
  } else if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)a;
    inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
    snprintf(buf, len, "[%s]:%u", host, ntohs(s->sin6_port));
  } else {
    snprintf(buf, len, "(no address)");
  }
}

HcclResult hccl__tcp_local_addr(const struct hccl_settings *cfg, struct sockaddr_storage *out,
                                char *why, size_t why_len) {
  memset(out, 0, sizeof(*out));
  if (cfg->if_ip[0]) {
    struct sockaddr_in *a4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, cfg->if_ip, &a4->sin_addr) == 1) {
      a4->sin_family = AF_INET;
    } else if (inet_pton(AF_INET6, cfg->if_ip, &a6->sin6_addr) == 1) {
      a6->sin6_family = AF_INET6;
    } else {
      return hccl__fail(HCCL_E_PARA,
                        "HCCL_IF_IP='%s' is not an IPv4 or IPv6 address (or localhost); set it "
                        "to this server's address on the network the servers share",
                        cfg->if_ip);
    }
    snprintf(why, why_len, "HCCL_IF_IP");
    return HCCL_SUCCESS;
  }
  struct ifaddrs *list;
  if (getifaddrs(&list) != 0)
    return hccl__fail(HCCL_E_SYSCALL, "getifaddrs: %s; set HCCL_IF_IP to this server's address",
                      strerror(errno));
  int n = 0;
  for (struct ifaddrs *i = list; i; i = i->ifa_next)
    n++;
  struct hccl_tcp_if ifs[n > 0 ? n : 1];
  char names[256] = "";
  size_t nl = 0;
  n = 0;
  for (struct ifaddrs *i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
      continue;
    struct hccl_tcp_if *f = &ifs[n++];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", i->ifa_name);
    f->up = (i->ifa_flags & IFF_UP) != 0;
    f->loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    memcpy(&f->addr, i->ifa_addr,
           i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                             : sizeof(struct sockaddr_in6));
    if (!strstr(names, f->name) && nl + strlen(f->name) + 3 < sizeof(names))
      nl += (size_t)snprintf(names + nl, sizeof(names) - nl, "%s%s", nl ? ", " : "", f->name);
  }
  freeifaddrs(list);
  int k = hccl__tcp_if_pick(ifs, n, cfg->socket_ifname);
  if (k < 0)
    return cfg->socket_ifname[0]
               ? hccl__fail(HCCL_E_NOT_FOUND,
                            "HCCL_SOCKET_IFNAME='%s' matches no interface that is up with an "
                            "address; this host has: %s",
                            cfg->socket_ifname, names[0] ? names : "none")
               : hccl__fail(HCCL_E_NOT_FOUND,
                            "no network interface is up, not even loopback (interfaces: %s); "
                            "set HCCL_IF_IP or HCCL_SOCKET_IFNAME",
                            names[0] ? names : "none");
  *out = ifs[k].addr;
  snprintf(why, why_len, "interface %s%s", ifs[k].name,
           cfg->socket_ifname[0] ? " (HCCL_SOCKET_IFNAME)" : "");
  return HCCL_SUCCESS;
}

/* ---- sockets ---- */

static socklen_t addr_len(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

HcclResult hccl__tcp_listen(struct sockaddr_storage *addr, int backlog, int *fd_out) {
  char where[80];
  int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return hccl__fail(HCCL_E_SYSCALL, "socket for the TCP transport: %s", strerror(errno));
  if (addr->ss_family == AF_INET)
    ((struct sockaddr_in *)addr)->sin_port = 0;
  else
    ((struct sockaddr_in6 *)addr)->sin6_port = 0;
  socklen_t len = addr_len(addr);
  if (bind(fd, (struct sockaddr *)addr, len) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, (struct sockaddr *)addr, &len) != 0) {
    int e = errno;
    close(fd);
    hccl__tcp_addr_str(addr, where, sizeof(where));
    return hccl__fail(HCCL_E_TCP_CONNECT,
                      "the TCP transport cannot listen on %s: %s; check HCCL_IF_IP / "
                      "HCCL_SOCKET_IFNAME",
                      where, strerror(e));
  }
  *fd_out = fd;
  return HCCL_SUCCESS;
}

/* Waits until fd is ready for `events` or the deadline passes; EINTR restarts. Returns 1
 * ready, 0 timed out, -1 error (errno set). */
static int wait_fd(int fd, short events, int64_t deadline_ns) {
  for (;;) {
    int64_t left = deadline_ns - hccl__now_ns();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int ms = (int)((left + 999999) / 1000000);
    int r = poll(&p, 1, ms > 1000 ? 1000 : ms);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

HcclResult hccl__tcp_connect(const struct sockaddr_storage *to, int64_t deadline_ns, int *fd_out,
                             int *err) {
  int last = ETIMEDOUT;
  while (hccl__now_ns() < deadline_ns) {
    int fd = socket(to->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last = errno;
      break;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int r = hccl__tcp_sys.connect(fd, (const struct sockaddr *)to, addr_len(to));
    if (r != 0 && (errno == EINPROGRESS || errno == EINTR)) {
      int w = wait_fd(fd, POLLOUT, deadline_ns);
      int e = w > 0 ? 0 : w == 0 ? ETIMEDOUT : errno;
      socklen_t el = sizeof(e);
      if (w > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0) e = errno;
      r = e ? -1 : 0;
      errno = e;
    }
    if (r == 0) {
      *fd_out = fd;
      return HCCL_SUCCESS;
    }
    last = errno;
    close(fd);
    /* A listener whose backlog overflowed or a route still coming up: try again. */
    if (last != ECONNREFUSED && last != ETIMEDOUT && last != EAGAIN && last != ENETUNREACH &&
        last != EHOSTUNREACH)
      break;
    usleep(20000);
  }
  *err = last;
  return HCCL_E_TCP_CONNECT;
}

HcclResult hccl__tcp_write_all(int fd, const void *buf, size_t len, int64_t deadline_ns) {
  size_t off = 0;
  while (off < len) {
    struct iovec v = {.iov_base = (char *)buf + off, .iov_len = len - off};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
    ssize_t k = hccl__tcp_sys.sendmsg(fd, &m, MSG_NOSIGNAL);
    if (k > 0) {
      off += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno == EAGAIN && wait_fd(fd, POLLOUT, deadline_ns) > 0) continue;
    return HCCL_E_TCP_TRANSFER;
  }
  return HCCL_SUCCESS;
}

/* ---- the accepting side of the hello ---- */

HcclResult hccl__tcp_acceptor_init(struct hccl_tcp_acceptor *a, uint32_t nranks) {
  memset(a, 0, sizeof(*a));
  a->listen_fd = -1;
  a->epfd = -1;
  a->nranks = nranks;
  a->may_connect = calloc(nranks, sizeof(bool));
  a->pending = malloc(2 * sizeof(int) * nranks);
  a->taken = calloc(2 * (size_t)nranks, sizeof(bool));
  a->callback = calloc(2 * (size_t)nranks, sizeof(bool));
  if (!a->may_connect || !a->pending || !a->taken || !a->callback)
    return hccl__fail(HCCL_E_MEMORY, "out of memory for the TCP transport's listener");
  for (uint32_t i = 0; i < 2 * nranks; i++)
    a->pending[i] = -1;
  return HCCL_SUCCESS;
}

static void greet_drop(struct hccl_tcp_acceptor *a, int i, bool close_fd) {
  if (close_fd) close(a->greet[i].fd);
  else if (a->epfd >= 0) epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->greet[i].fd, NULL);
  a->greet[i] = a->greet[--a->ngreet];
}

static void greet_refuse(struct hccl_tcp_acceptor *a, int i, const char *why) {
  char from[80];
  hccl__tcp_addr_str(&a->greet[i].from, from, sizeof(from));
  HCCL_WARN("rank %u refused a connection from %s: %s", a->expect.rank, from, why);
  greet_drop(a, i, true);
}

static void greet_read(struct hccl_tcp_acceptor *a, int i);

/* A full greet table: reads the hellos that have arrived (a burst of ranks connecting at once
 * fills the table before its hellos are read), then refuses the oldest connection still silent
 * after GREET_EVICT_AGE_NS. False when every one is younger: further connections wait in the
 * kernel's backlog (2 per peer) until a slot frees. Evicting at once had refused real ranks
 * whose hello was already in the socket: at 64 servers x 2, the 45th rank refused 44 ranks'
 * connections and then waited HCCL_CONNECT_TIMEOUT for them. */
#define GREET_EVICT_AGE_NS 1000000000LL
static bool greet_make_room(struct hccl_tcp_acceptor *a) {
  for (int i = a->ngreet - 1; i >= 0; i--)
    greet_read(a, i);
  if (a->ngreet < HCCL_TCP_GREET_MAX) return true;
  int oldest = 0;
  for (int i = 1; i < a->ngreet; i++)
    if (a->greet[i].since_ns < a->greet[oldest].since_ns) oldest = i;
  if (hccl__now_ns() - a->greet[oldest].since_ns < GREET_EVICT_AGE_NS) return false;
  greet_refuse(a, oldest, "no hello within 1 s while the table of connections without one is full");
  return true;
}

/* Listens or not: the listener stays in the epoll set only while the greet table has room (a
 * full table leaves connections in the backlog, and a readable listener would spin). */
static void listen_watch(struct hccl_tcp_acceptor *a) {
  if (a->epfd < 0 || a->listen_fd < 0) return;
  struct epoll_event ev = {.events = a->ngreet < HCCL_TCP_GREET_MAX ? EPOLLIN : 0,
                           .data.ptr = a->ep_tag};
  epoll_ctl(a->epfd, EPOLL_CTL_MOD, a->listen_fd, &ev);
}

static void accept_some(struct hccl_tcp_acceptor *a) {
  for (;;) {
    if (a->ngreet == HCCL_TCP_GREET_MAX && !greet_make_room(a)) return;
    struct sockaddr_storage from;
    socklen_t len = sizeof(from);
    int fd = hccl__tcp_sys.accept4(a->listen_fd, (struct sockaddr *)&from, &len,
                                   SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return; /* EAGAIN, or a transient error: poll again */
    }
    if (!hccl__whitelist_allows(a->whitelist, (const struct sockaddr *)&from)) {
      char addr[80];
      hccl__tcp_addr_str(&from, addr, sizeof(addr));
      HCCL_WARN("rank %u refused a connection from %s: not in HCCL_WHITELIST_FILE %s",
                a->expect.rank, addr, hccl__whitelist_file(a->whitelist));
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (a->epfd >= 0) {
      struct epoll_event ev = {.events = EPOLLIN, .data.ptr = a->ep_tag};
      epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    a->greet[a->ngreet++] =
        (struct hccl_tcp_greet){.fd = fd, .from = from, .since_ns = hccl__now_ns()};
  }
}

/* A whole hello arrived on greet[i]: keep its socket as pending, note a callback, or refuse. */
static void greet_done(struct hccl_tcp_acceptor *a, int i) {
  const struct hccl_tcp_hello *h = &a->greet[i].h;
  char why[160];
  if (!hccl__tcp_hello_check(h, &a->expect, a->may_connect, a->nranks, why, sizeof(why))) {
    greet_refuse(a, i, why);
    return;
  }
  if (h->channel >= HCCL_TCP_CALLBACK) {
    uint32_t k = h->rank * 2 + h->channel - HCCL_TCP_CALLBACK;
    if (!a->callback[k]) a->ncallback++;
    a->callback[k] = true;
    greet_drop(a, i, true);
    return;
  }
  int *slot = &a->pending[h->rank * 2 + h->channel];
  if (*slot >= 0 || a->taken[h->rank * 2 + h->channel]) {
    snprintf(why, sizeof(why), "rank %u channel %u is already connected", h->rank, h->channel);
    greet_refuse(a, i, why);
    return;
  }
  *slot = a->greet[i].fd;
  greet_drop(a, i, false);
}

static void greet_read(struct hccl_tcp_acceptor *a, int i) {
  struct hccl_tcp_greet *g = &a->greet[i];
  size_t want;
  char *to = hccl__tcp_greet_space(g, &want);
  ssize_t k = hccl__tcp_sys.recv(g->fd, to, want, 0);
  if (k > 0) {
    if (hccl__tcp_greet_got(g, (size_t)k)) greet_done(a, i);
  } else if (k == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
    char why[80];
    snprintf(why, sizeof(why), "it closed after %zu of %zu hello bytes", g->got, sizeof(g->h));
    greet_refuse(a, i, why);
  }
}

void hccl__tcp_acceptor_step(struct hccl_tcp_acceptor *a) {
  int64_t now = hccl__now_ns();
  for (int i = a->ngreet - 1; i >= 0; i--)
    if (now - a->greet[i].since_ns > a->greet_timeout_ns) {
      char why[96];
      snprintf(why, sizeof(why), "no hello within %s",
               a->greet_timeout_name ? a->greet_timeout_name : "HCCL_CONNECT_TIMEOUT");
      greet_refuse(a, i, why);
    }
  /* Hellos first, from the last (a dropped one is replaced by the last, already read). */
  for (int i = a->ngreet - 1; i >= 0; i--)
    greet_read(a, i);
  if (a->listen_fd >= 0) accept_some(a);
  for (int i = a->ngreet - 1; i >= 0; i--)
    greet_read(a, i);
  listen_watch(a);
}

int hccl__tcp_acceptor_take(struct hccl_tcp_acceptor *a, uint32_t peer, uint32_t channel) {
  int *slot = &a->pending[peer * 2 + channel];
  int fd = *slot;
  if (fd >= 0) {
    *slot = -1;
    a->taken[peer * 2 + channel] = true;
  }
  return fd;
}

void hccl__tcp_acceptor_close(struct hccl_tcp_acceptor *a) {
  if (a->listen_fd >= 0) close(a->listen_fd);
  a->listen_fd = -1;
  while (a->ngreet > 0)
    greet_drop(a, a->ngreet - 1, true);
  for (uint32_t i = 0; a->pending && i < 2 * a->nranks; i++)
    if (a->pending[i] >= 0) {
      /* A link made for a first use that never came (a callback's, or a peer that stopped). */
      HCCL_INFO("rank %u closed a connection of rank %u channel %u that no link took",
                a->expect.rank, i / 2, i % 2);
      close(a->pending[i]);
      a->pending[i] = -1;
    }
}

void hccl__tcp_acceptor_free(struct hccl_tcp_acceptor *a) {
  hccl__tcp_acceptor_close(a);
  hccl__whitelist_free(a->whitelist);
  a->whitelist = NULL;
  free(a->may_connect);
  free(a->pending);
  free(a->taken);
  free(a->callback);
  a->callback = NULL;
  a->may_connect = NULL;
  a->pending = NULL;
  a->taken = NULL;
}
