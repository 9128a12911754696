/*
 * tcp_sys.h - the TCP transport's test seam: system calls on its sockets go through
 * hccl__tcp_sys, as SQLite's aSyscall and Redis's connection types route theirs. A test
 * replaces an entry to inject short writes, EINTR, EAGAIN or a reset, and puts the real one
 * back. Only recv, sendmsg, connect and accept4 are routed; everything else (socket, bind,
 * poll, epoll) is called directly. Used by tcp_sock.c, tcp_write.c and tcp_read.c, and by the
 * tests.
 */
#ifndef HCCL_TCP_SYS_H
#define HCCL_TCP_SYS_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

struct hccl_tcp_sys {
  ssize_t (*recv)(int fd, void *buf, size_t len, int flags);
  ssize_t (*sendmsg)(int fd, const struct msghdr *msg, int flags);
  int (*connect)(int fd, const struct sockaddr *addr, socklen_t len);
  int (*accept4)(int fd, struct sockaddr *addr, socklen_t *len, int flags);
};

/* The table every socket call of the transport goes through; starts with the libc calls. */
extern struct hccl_tcp_sys hccl__tcp_sys;
/* The libc calls, for a test to restore or to call from its wrappers. */
extern const struct hccl_tcp_sys hccl__tcp_sys_default;

#endif
