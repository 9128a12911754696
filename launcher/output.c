/*
 * output.c - what npu-launch writes and where ranks' output goes: the launcher's own notes,
 * the --log-dir files, the --tag-output line pump, the log tail shown in the failure summary,
 * and signal names.
 *
 * Without --tag-output a rank's stdout and stderr are the launcher's own (or its log file), so
 * output passes through unchanged and the launcher never copies it. With --tag-output each
 * rank writes into pipes the launcher reads when poll() says they are readable; lines are
 * written whole, so ranks' lines never interleave mid-line.
 */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void launch_note(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "npu-launch: %s\n", msg);
  fflush(stderr);
}

int launch_make_log_dir(const char *dir, char *err, size_t errlen) {
  char path[4096];
  if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
    snprintf(err, errlen, "--log-dir path is longer than %zu characters", sizeof(path) - 1);
    return -1;
  }
  for (char *p = path + 1;; p++) {
    bool last = *p == '\0';
    if (*p == '/' || last) {
      char saved = *p;
      *p = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "--log-dir %s: cannot create %s: %s", dir, path, strerror(errno));
        return -1;
      }
      *p = saved;
    }
    if (last) break;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0) {
    snprintf(err, errlen, "--log-dir %s is not a directory npu-launch can write to", dir);
    return -1;
  }
  return 0;
}

void launch_log_path(const struct launch_job *j, int local_rank, char *buf, size_t len) {
  snprintf(buf, len, "%s/rank_%d.log", j->o.log_dir, j->ranks[local_rank].rank);
}

/* write() all of buf, retrying on EINTR and short writes; gives up on other errors (a closed
 * terminal must not stop the job). */
static void write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    buf += w;
    len -= (size_t)w;
  }
}

/* One line (without its newline) to the terminal with its tag, and to the log as is. */
static void emit_line(struct launch_stream *s, const char *line, size_t len) {
  char out[sizeof(s->buf) + 32];
  int pre = snprintf(out, sizeof(out), "[rank %d] ", s->rank);
  memcpy(out + pre, line, len);
  out[pre + len] = '\n';
  write_all(s->out_fd, out, (size_t)pre + len + 1);
  if (s->log_fd >= 0) {
    write_all(s->log_fd, line, len);
    write_all(s->log_fd, "\n", 1);
  }
}

void launch_stream_pump(struct launch_stream *s) {
  if (s->fd < 0) return;
  for (;;) {
    ssize_t r = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r <= 0) { /* EOF or error: the writers are gone */
      if (s->len > 0) emit_line(s, s->buf, s->len);
      s->len = 0;
      close(s->fd);
      s->fd = -1;
      return;
    }
    s->len += (size_t)r;
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++) {
      if (s->buf[i] != '\n') continue;
      emit_line(s, s->buf + start, i - start);
      start = i + 1;
    }
    if (start == 0 && s->len == sizeof(s->buf)) { /* a line longer than the buffer: split it */
      emit_line(s, s->buf, s->len);
      start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
  }
}

void launch_print_log_tail(const char *path, int n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    launch_note("(cannot read %s: %s)", path, strerror(errno));
    return;
  }
  /* Read the last 64 KiB at most; enough for 10 lines of any sane log. */
  static char buf[65536 + 1];
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  long from = size > 65536 ? size - 65536 : 0;
  fseek(f, from, SEEK_SET);
  size_t len = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[len] = '\0';
  if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
  size_t start = len;
  int lines = 1; /* the last line, which has no '\n' after the one removed above */
  while (start > 0) {
    if (buf[start - 1] == '\n' && lines == n) break;
    if (buf[start - 1] == '\n') lines++;
    start--;
  }
  if (len == 0) {
    launch_note("%s is empty", path);
    return;
  }
  if (lines == 1)
    launch_note("last line of %s:", path);
  else
    launch_note("last %d lines of %s:", lines, path);
  for (char *line = buf + start; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    fprintf(stderr, "npu-launch: | %s\n", line);
    line = nl ? nl + 1 : NULL;
  }
  fflush(stderr);
}

const char *launch_signal_name(int sig, char *buf, size_t len) {
  const char *abbrev = sigabbrev_np(sig);
  if (abbrev)
    snprintf(buf, len, "SIG%s", abbrev);
  else
    snprintf(buf, len, "signal %d", sig);
  return buf;
}
