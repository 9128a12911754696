/*
 * master.c - checks made before anything starts about where the job meets and what it runs:
 * the master address resolved to IPv4 (the docs list the hang at init when `localhost` becomes
 * ::1), the master port free on server 0 (a clear "already in use" instead of a rank failing
 * to bind later), and the program found on PATH (one message instead of one per rank).
 */
#include "launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int launch_resolve_master(const char *addr, char *out, size_t outlen, char *err, size_t errlen) {
  struct in_addr a;
  if (inet_pton(AF_INET, addr, &a) == 1) {
    snprintf(out, outlen, "%s", addr);
    return 0;
  }
  struct in6_addr a6;
  if (inet_pton(AF_INET6, addr, &a6) == 1) {
    snprintf(err, errlen,
             "--master-addr %s is an IPv6 address; give server 0's IPv4 address (e.g. 127.0.0.1 "
             "on one server)",
             addr);
    return -1;
  }
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(addr, NULL, &hints, &res);
  if (rc != 0 || !res) {
    snprintf(err, errlen,
             "--master-addr %s does not resolve to an IPv4 address (%s: host not found?); give "
             "server 0's IPv4 address",
             addr, rc ? gai_strerror(rc) : "no address");
    if (res) freeaddrinfo(res);
    return -1;
  }
  const struct sockaddr_in *sin = (const struct sockaddr_in *)res->ai_addr;
  inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)outlen);
  freeaddrinfo(res);
  if (strcmp(addr, "localhost") == 0)
    launch_note("master address localhost taken as %s (IPv4), never ::1", out);
  return 0;
}

int launch_probe_master_port(const char *addr, int port, char *err, size_t errlen) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "cannot make a socket to check master port %d: %s", port,
             strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, addr, &sa.sin_addr);
  int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
  int e = errno;
  close(fd); /* rank 0 of the job binds it later */
  if (rc == 0) {
    /* Rank 0's store may listen on every address (torch's TCPStore binds [::] and 0.0.0.0):
     * the port must be free on all of them, not only on the master address. A connection's
     * local end on another address holds the port too. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0; /* the master address's own check passed */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_ANY)};
    rc = bind(fd, (struct sockaddr *)&any, sizeof(any));
    e = errno;
    close(fd);
    if (rc == 0 || e != EADDRINUSE) return 0;
    snprintf(err, errlen,
             "master port %d is free on %s but held on another address of this server (a "
             "connection's local end, or a listener); rank 0's store listens on every address: "
             "choose another with --master-port",
             port, addr);
    return -1;
  }
  if (e == EADDRINUSE)
    snprintf(err, errlen,
             "master port %d on %s is already in use (another job?); choose another with "
             "--master-port",
             port, addr);
  else if (e == EADDRNOTAVAIL)
    snprintf(err, errlen,
             "master address %s is not an address of this server, yet this is server 0 "
             "(--node-rank 0), where the master listens; give this server's own IPv4 address",
             addr);
  else if (e == EACCES)
    snprintf(err, errlen,
             "master port %d on %s needs privileges to bind; choose a port above 1023 with "
             "--master-port",
             port, addr);
  else
    snprintf(err, errlen, "cannot bind master port %d on %s: %s", port, addr, strerror(e));
  return -1;
}

static bool runnable(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int launch_find_program(const char *prog, char *err, size_t errlen) {
  if (strchr(prog, '/')) {
    if (runnable(prog)) return 0;
    snprintf(err, errlen, "cannot run program '%s': %s", prog,
             access(prog, F_OK) == 0 ? "not an executable file" : "no such file");
    return -1;
  }
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  char buf[4096];
  for (const char *p = path;;) {
    size_t len = strcspn(p, ":");
    int w = len ? snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, p, prog)
                : snprintf(buf, sizeof(buf), "./%s", prog);
    if (w > 0 && (size_t)w < sizeof(buf) && runnable(buf)) return 0;
    if (p[len] == '\0') break;
    p += len + 1;
  }
  snprintf(err, errlen, "cannot run program '%s': not found in PATH (%s)", prog, path);
  return -1;
}
