/*
 * tcp_plain.c - a 2 x 1 allreduce across servers done the plain way, the reference
 * bench/multiserver.sh prints beside iperf3's link rate: two processes, one per server, over
 * one TCP connection, one
 * thread each that polls the socket, sends (1 MiB per call) and receives whatever it lets
 * through, with buffers as large as the allreduce's (64 MiB by default, not iperf3's 128 KiB
 * that never leaves the cache), the data checked. Nothing else: no framing, no flow control
 * of its own, no deadline per message. Two kinds of round:
 *   exchange   each side sends its `bytes` and receives the other's, both ways at once: what
 *              a 2 x 1 allreduce moves per call, without the reduction.
 *   allreduce  a 2 x 1 fp32 sum allreduce of `bytes`, the plainest way: each side sends the
 *              half it does not own, adds the other's copy of its own half into the output 1 MiB
 *              at a time as it arrives, sends each reduced MiB back at once, and receives the
 *              other half's sum straight into the output (out of place, like allreduce_perf).
 * Each process prints one line, e.g.
 *
 *   tcp_plain exchange bytes=67108864 gbs=1.31
 *
 * (bytes over the median time of a round: GB/s each way for an exchange, busbw for an
 * allreduce, which at 2 ranks is the same count; the round ends for a process when it has sent
 * its bytes and received the other's). It is what a program that owns the socket gets without
 * trying harder, not a bound: on pretend servers the link is the cores, and how a program
 * sleeps and wakes changes how much of them the copying gets (docs/multi-server.md).
 *
 *   tcp_plain serve ADDR PORT [bytes] [rounds] [exchange|allreduce]   (start it first; it
 *                                                    waits 10 s for the other side)
 *   tcp_plain connect ADDR PORT [bytes] [rounds] [exchange|allreduce] (retries for 10 s)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SEND_MAX (1u << 20)
#define CHUNK (1u << 20) /* the allreduce adds what arrived this much at a time */
#define ROUNDS_MAX 1000
#define CONNECT_S 10
#define ROUND_S 60 /* a round that takes longer: the other side is gone */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int usage(const char *why) {
  fprintf(stderr,
          "tcp_plain: %s\nusage: tcp_plain serve|connect ADDR PORT [bytes] [rounds] "
          "[exchange|allreduce] (bytes: 4096 to 1073741824, a multiple of 8, default 67108864; "
          "rounds: 1 to %d, default 10; default exchange)\n",
          why, ROUNDS_MAX);
  return 2;
}

static int open_socket(int serve, const struct sockaddr_in *sa) {
  if (serve) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (l < 0) return -1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, (const struct sockaddr *)sa, sizeof(*sa)) != 0 || listen(l, 1) != 0) {
      close(l);
      return -1;
    }
    /* The other side has CONNECT_S to come, as a connecting side has to find us. */
    struct pollfd p = {l, POLLIN, 0};
    int fd = -1;
    if (poll(&p, 1, CONNECT_S * 1000) == 1) fd = accept(l, NULL, NULL);
    else errno = ETIMEDOUT;
    int e = errno;
    close(l);
    errno = e;
    return fd;
  }
  double end = now_s() + CONNECT_S;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0) return fd;
    int e = errno;
    close(fd);
    if (now_s() > end) {
      errno = e;
      return -1;
    }
    usleep(50000);
  }
}

/* One side of a round. The stream carries two parts each way: what this side sends is
 * send[0] (send_len[0] bytes), then send[1] as far as `ready` allows; what it receives goes
 * to recv[0] (recv_len[0] bytes; with a stage, through it CHUNK at a time, each chunk added
 * to add_in into add_out, which makes that much of send[1] ready) and then to recv[1]. */
struct side {
  const char *send[2];
  size_t send_len[2], sent[2], ready;
  char *recv[2];
  size_t recv_len[2], got[2];
  float *stage;
  const float *add_in;
  float *add_out;
};

/* Receives what the socket has. 0, or -1 (message said). */
static int take(int fd, struct side *x) {
  for (;;) {
    int p = x->got[0] < x->recv_len[0] ? 0 : 1;
    if (x->got[p] == x->recv_len[p]) return 0;
    size_t want = x->recv_len[p] - x->got[p], at = x->got[p] % CHUNK;
    char *to = x->recv[p] + x->got[p];
    if (p == 0 && x->stage) {
      to = (char *)x->stage + at;
      if (want > CHUNK - at) want = CHUNK - at;
    }
    ssize_t k = recv(fd, to, want, MSG_DONTWAIT);
    if (k == 0) return fprintf(stderr, "tcp_plain: the other side closed\n"), -1;
    if (k < 0) {
      if (errno == EAGAIN || errno == EINTR) return 0;
      return perror("tcp_plain: recv"), -1;
    }
    x->got[p] += (size_t)k;
    if (p == 0 && x->stage && (size_t)k == want) { /* the stage is full: add it */
      size_t first = (x->got[0] - at - (size_t)k) / sizeof(float);
      size_t n = (at + (size_t)k) / sizeof(float);
      for (size_t i = 0; i < n; i++)
        x->add_out[first + i] = x->add_in[first + i] + x->stage[i];
      x->ready = x->got[0];
    }
  }
}

static int run_round(int fd, struct side *x) {
  x->sent[0] = x->sent[1] = x->got[0] = x->got[1] = 0;
  x->ready = x->stage ? 0 : x->send_len[1];
  double end = now_s() + ROUND_S;
  for (;;) {
    int p = x->sent[0] < x->send_len[0] ? 0 : 1;
    size_t can = p == 0 ? x->send_len[0] - x->sent[0] : x->ready - x->sent[1];
    bool more_in = x->got[0] < x->recv_len[0] || x->got[1] < x->recv_len[1];
    if (!more_in && x->sent[1] == x->send_len[1] && p == 1) return 0;
    struct pollfd pf = {fd, (short)((more_in ? POLLIN : 0) | (can ? POLLOUT : 0)), 0};
    if (poll(&pf, 1, 1000) < 0 && errno != EINTR) return perror("tcp_plain: poll"), -1;
    if (now_s() > end) return fprintf(stderr, "tcp_plain: a round took over %d s\n", ROUND_S), -1;
    if (can) {
      ssize_t k = send(fd, x->send[p] + x->sent[p], can < SEND_MAX ? can : SEND_MAX,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) x->sent[p] += (size_t)k;
      else if (k < 0 && errno != EAGAIN && errno != EINTR) return perror("tcp_plain: send"), -1;
    }
    if (more_in && take(fd, x)) return -1;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Side s's input word i: an exchange sends uint32 patterns of its own; an allreduce sums
 * floats that are small integers (exact). */
static uint32_t word_of(int s, size_t i) { return (s ? 0xc0ec0000u : 0x5e7e0000u) ^ (uint32_t)i; }
static float value_of(int s, size_t i) { return (float)(i % 1024) + (s ? 4096.0f : 0.0f); }

int main(int argc, char **argv) {
  if (argc < 4 || argc > 7) return usage("wrong number of arguments");
  int serve = strcmp(argv[1], "serve") == 0, me = serve ? 0 : 1;
  if (!serve && strcmp(argv[1], "connect") != 0)
    return usage("the first argument is serve or connect");
  struct sockaddr_in sa = {.sin_family = AF_INET};
  char *end;
  long port = strtol(argv[3], &end, 10);
  if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) return usage("ADDR is not an IPv4 address");
  if (*end || port < 1 || port > 65535) return usage("PORT is not 1 to 65535");
  sa.sin_port = htons((uint16_t)port);
  long long bytes = argc > 4 ? strtoll(argv[4], &end, 10) : 64LL << 20;
  if (argc > 4 && (*end || bytes < 4096 || bytes > (1LL << 30) || bytes % 8))
    return usage("bytes is out of range");
  long rounds = argc > 5 ? strtol(argv[5], &end, 10) : 10;
  if (argc > 5 && (*end || rounds < 1 || rounds > ROUNDS_MAX))
    return usage("rounds is out of range");
  bool allreduce = argc > 6 && strcmp(argv[6], "allreduce") == 0;
  if (argc > 6 && !allreduce && strcmp(argv[6], "exchange") != 0)
    return usage("the kind of round is exchange or allreduce");

  size_t n = (size_t)bytes, words = n / 4, h = n / 2;
  uint32_t *in = malloc(n), *out = malloc(n);
  float *stage = allreduce ? malloc(CHUNK) : NULL;
  if (!in || !out || (allreduce && !stage))
    return fprintf(stderr, "tcp_plain: out of memory for 2 x %zu bytes\n", n), 1;
  float *fin = (float *)in, *fout = (float *)out;
  for (size_t i = 0; i < words; i++) {
    if (allreduce)
      fin[i] = value_of(me, i);
    else
      in[i] = word_of(me, i);
  }
  memset(out, 0, n);
  if (stage) memset(stage, 0, CHUNK);
  struct side x = {0};
  if (allreduce) { /* side s owns half s */
    size_t mine = me ? h : 0, other = me ? 0 : h;
    x = (struct side){.send = {(char *)in + other, (char *)out + mine},
                      .send_len = {h, h},
                      .recv = {(char *)out + mine, (char *)out + other},
                      .recv_len = {h, h},
                      .stage = stage,
                      .add_in = (const float *)((char *)in + mine),
                      .add_out = (float *)((char *)out + mine)};
  } else {
    x = (struct side){.send = {(char *)in, NULL}, .send_len = {n, 0}, .recv = {(char *)out, NULL},
                      .recv_len = {n, 0}};
  }

  int fd = open_socket(serve, &sa);
  if (fd < 0) {
    fprintf(stderr, "tcp_plain: cannot %s %s:%ld: %s\n",
            serve ? "be reached on" : "connect to", argv[2], port, strerror(errno));
    return 1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  double took[ROUNDS_MAX];
  if (run_round(fd, &x)) return 1; /* warm-up */
  for (long r = 0; r < rounds; r++) {
    double t0 = now_s();
    if (run_round(fd, &x)) return 1;
    took[r] = now_s() - t0;
  }
  for (size_t i = 0; i < words; i++) {
    bool ok = allreduce ? fout[i] == value_of(0, i) + value_of(1, i) : out[i] == word_of(!me, i);
    if (!ok && allreduce) {
      fprintf(stderr, "tcp_plain: element %zu of the last round's sum is %g, not %g\n", i,
              (double)fout[i], (double)(value_of(0, i) + value_of(1, i)));
      return 1;
    }
    if (!ok) {
      fprintf(stderr, "tcp_plain: word %zu of the last round is 0x%08x, not 0x%08x as sent\n", i,
              out[i], word_of(!me, i));
      return 1;
    }
  }
  shutdown(fd, SHUT_WR);
  char c;
  while (recv(fd, &c, 1, 0) > 0) {
  }
  close(fd);
  qsort(took, (size_t)rounds, sizeof(double), cmp_double);
  printf("tcp_plain %s bytes=%zu gbs=%.2f\n", allreduce ? "allreduce" : "exchange", n,
         (double)n / took[(rounds - 1) / 2] / 1e9);
  free(in);
  free(out);
  free(stage);
  return 0;
}
