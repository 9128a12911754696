/*
 * harness.c - forks ranks for the multi-process tests and reaps them under a deadline.
 * See harness.h for the contract.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Ports come from 20000-28999, below the kernel's ephemeral range (32768 and up), so no
 * socket the kernel numbers itself can take one between this check and rank 0's bind (binding
 * port 0 and closing it, as this did before, raced with exactly that). Each process starts at
 * its own place in the range, so tests running at once do not try the same ports. */
uint16_t harness_free_port(void) {
  static unsigned next;
  if (!next) next = ((unsigned)getpid() * 97u) % 9000u;
  for (int tries = 0; tries < 9000; tries++) {
    uint16_t port = (uint16_t)(20000 + next++ % 9000);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons(port)};
    int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    if (ok) return port;
  }
  return 0;
}

/* The names of what a destroyed communicator must have let go: device-link areas, and peers'
 * HcclMemAlloc regions it mapped (a rank's own regions are its test's to free first). */
static int is_link_memory(const char *s) {
  return strstr(s, "hccl-device-links") || strstr(s, "hccl-mem-");
}

int harness_links_left(void) {
  int n = 0;
  char line[512], path[300], target[256];
  FILE *m = fopen("/proc/self/maps", "r");
  if (m) {
    while (fgets(line, sizeof(line), m))
      if (is_link_memory(line)) n++;
    fclose(m);
  }
  DIR *d = opendir("/proc/self/fd");
  if (d) {
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
      snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
      ssize_t k = readlink(path, target, sizeof(target) - 1);
      if (k <= 0) continue;
      target[k] = '\0';
      if (is_link_memory(target)) n++;
    }
    closedir(d);
  }
  return n;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run(int nranks, int timeout_s, harness_rank_fn fn, void *arg, int victim,
               int kill_after_ms, int signo) {
  pid_t pids[64];
  int done[64] = {0};
  char port[16];
  snprintf(port, sizeof(port), "%u", harness_free_port());
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nranks; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      char buf[16];
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port, 1);
      snprintf(buf, sizeof(buf), "%d", r);
      setenv("RANK", buf, 1);
      setenv("LOCAL_RANK", buf, 1);
      snprintf(buf, sizeof(buf), "%d", nranks);
      setenv("WORLD_SIZE", buf, 1);
      setenv("LOCAL_WORLD_SIZE", buf, 1);
      alarm((unsigned)timeout_s + 5);
      int rc = fn(r, nranks, arg);
      /* A body that succeeded has destroyed its communicators: nothing of their device links
       * may still be open or mapped in this process. */
      int left_links = rc == 0 ? harness_links_left() : 0;
      if (left_links > 0) {
        fprintf(stderr,
                "harness: rank %d: %d device-link areas still open or mapped after its "
                "communicators were destroyed\n",
                r, left_links);
        rc = 1;
      }
      fflush(stdout);
      fflush(stderr);
      _exit(rc == 0 ? 0 : 1);
    }
    pids[r] = pid;
  }
  double start = now_s(), deadline = start + timeout_s;
  int left = nranks, failed = 0, killed_victim = victim < 0;
  while (left > 0) {
    if (!killed_victim && now_s() - start >= kill_after_ms / 1000.0) {
      kill(pids[victim], signo);
      killed_victim = 1;
    }
    /* A stopped victim outlives the others: end it once they are done. */
    if (victim >= 0 && killed_victim && !done[victim] && left == 1) kill(pids[victim], SIGKILL);
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < nranks; r++) {
        if (pids[r] != pid) continue;
        done[r] = 1;
        left--;
        if (r == victim) break;
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
          fprintf(stderr, "harness: rank %d exited with code %d\n", r, WEXITSTATUS(status));
          failed++;
        } else if (WIFSIGNALED(status)) {
          fprintf(stderr, "harness: rank %d killed by signal %d (%s)\n", r, WTERMSIG(status),
                  strsignal(WTERMSIG(status)));
          failed++;
        }
      }
      continue;
    }
    if (now_s() > deadline) {
      for (int r = 0; r < nranks; r++) {
        if (done[r]) continue;
        fprintf(stderr, "harness: rank %d still running after %d s: killed\n", r, timeout_s);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], NULL, 0);
        done[r] = 1;
        left--;
        if (r != victim) failed++;
      }
      break;
    }
    usleep(2000);
  }
  return failed;
}

int harness_run_ranks(int nranks, int timeout_s, harness_rank_fn fn, void *arg) {
  return run(nranks, timeout_s, fn, arg, -1, 0, 0);
}

int harness_run_ranks_kill(int nranks, int timeout_s, harness_rank_fn fn, void *arg, int victim,
                           int kill_after_ms) {
  return run(nranks, timeout_s, fn, arg, victim, kill_after_ms, SIGKILL);
}

int harness_run_ranks_signal(int nranks, int timeout_s, harness_rank_fn fn, void *arg, int victim,
                             int after_ms, int signo) {
  return run(nranks, timeout_s, fn, arg, victim, after_ms, signo);
}

void harness_base_env(void) {
  unsetenv("HCCL_ALGO");
  unsetenv("HCCL_BUFFSIZE");
  unsetenv("DEVICE_ID");
  setenv("HCCL_EXEC_TIMEOUT", "30", 1);
  setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
}
