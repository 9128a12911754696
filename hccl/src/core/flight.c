/*
 * flight.c - the flight recorder: a fixed ring of entries per communicator, written as JSON
 * lines on failure or SIGUSR1. See flight.h; the format is docs/flight-recorder.md's.
 *
 * SIGUSR1: the handler only writes an eventfd (async-signal-safe); a thread of the library's,
 * started with the first recording communicator, reads it and writes every live recording
 * communicator's file. The live ones are in a list under g_lock, which destroy leaves before
 * freeing its ring, so a dump never reads a freed one.
 */
#define _GNU_SOURCE
#include "flight.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "dtype.h"
#include "fingerprint.h"
#include "log.h"
#include "progress.h"
#include "thread.h"

enum { FR_ENQUEUED = 0, FR_STARTED, FR_FINISHED, FR_FAILED };
static const char *const k_state[] = {"enqueued", "started", "finished", "failed"};

struct fr_entry {
  uint64_t id, seq, fp, count;
  int64_t t_enq_us, t_start_us, t_end_us;
  const char *algo;
  uint32_t root, peer;
  int32_t result;
  uint8_t kind, state;
  int8_t dt, op;
};

struct hccl_fr {
  pthread_mutex_t lock;
  uint32_t cap;
  uint64_t next; /* id of the next entry; entry id sits in slot id % cap */
  struct fr_entry *e;
  char path[640];
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hccl_comm **g_live;
static int g_nlive, g_caplive;
static int g_evfd = -1;

static int64_t real_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void on_usr1(int sig) {
  (void)sig;
  int saved = errno;
  uint64_t one = 1;
  ssize_t k = write(g_evfd, &one, sizeof(one));
  (void)k;
  errno = saved;
}

static void *dumper_main(void *arg) {
  (void)arg;
  for (;;) {
    uint64_t v;
    if (read(g_evfd, &v, sizeof(v)) != sizeof(v)) {
      if (errno == EINTR) continue;
      return NULL;
    }
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nlive; i++)
      hccl__fr_dump(g_live[i], "SIGUSR1");
    pthread_mutex_unlock(&g_lock);
  }
}

/* The first recording communicator: the eventfd, its thread, and SIGUSR1's handler when the
 * program left SIGUSR1 at its default (which would end the process). g_lock held. */
static void signal_setup(void) {
  if (g_evfd >= 0) return;
  g_evfd = eventfd(0, EFD_CLOEXEC);
  if (g_evfd < 0) return;
  pthread_t t;
  if (hccl__thread_start(&t, dumper_main, NULL) != 0) return;
  pthread_detach(t);
  struct sigaction old;
  if (sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
      !(old.sa_flags & SA_SIGINFO)) {
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
  } else {
    HCCL_INFO("flight recorder: SIGUSR1 has a handler of the program's; dumps come only on "
              "failure");
  }
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
  return h;
}

HcclResult hccl__fr_open(struct hccl_comm *c) {
  if (!c->cfg.fr_dir[0]) return HCCL_SUCCESS;
  struct hccl_fr *fr = calloc(1, sizeof(*fr));
  if (fr) fr->e = calloc(c->cfg.fr_entries, sizeof(*fr->e));
  if (!fr || !fr->e) {
    free(fr);
    return hccl__fail(HCCL_E_MEMORY, "out of memory for %u flight recorder entries",
                      c->cfg.fr_entries);
  }
  pthread_mutex_init(&fr->lock, NULL);
  fr->cap = c->cfg.fr_entries;
  fr->next = 1;
  /* The run first: the communicator's hash is the same in every job (its store keys are), so
   * without the run a reused folder or a restart would mix one job's files with another's. */
  snprintf(fr->path, sizeof(fr->path), "%s/hccl-fr-%016llx-%016llx-%u.jsonl", c->cfg.fr_dir,
           (unsigned long long)c->run, (unsigned long long)hash_str(c->key_prefix), c->rank);
  pthread_mutex_lock(&g_lock);
  if (g_nlive == g_caplive) {
    int cap = g_caplive ? 2 * g_caplive : 8;
    struct hccl_comm **n = realloc(g_live, (size_t)cap * sizeof(*n));
    if (!n) {
      pthread_mutex_unlock(&g_lock);
      free(fr->e);
      free(fr);
      return hccl__fail(HCCL_E_MEMORY, "out of memory for the flight recorder's list");
    }
    g_live = n;
    g_caplive = cap;
  }
  c->fr = fr;
  g_live[g_nlive++] = c;
  signal_setup();
  pthread_mutex_unlock(&g_lock);
  return HCCL_SUCCESS;
}

uint64_t hccl__fr_enqueue(struct hccl_fr *fr, unsigned kind, uint64_t count, HcclDataType dt,
                          int op, uint32_t root, uint32_t peer) {
  if (!fr) return 0;
  int64_t now = real_us();
  pthread_mutex_lock(&fr->lock);
  uint64_t id = fr->next++;
  fr->e[id % fr->cap] = (struct fr_entry){.id = id,
                                          .count = count,
                                          .t_enq_us = now,
                                          .root = root,
                                          .peer = peer,
                                          .kind = (uint8_t)kind,
                                          .state = FR_ENQUEUED,
                                          .dt = (int8_t)dt,
                                          .op = (int8_t)op};
  pthread_mutex_unlock(&fr->lock);
  return id;
}

/* Moves entry `id` to `state` (started: with its number and fingerprint; ended: with its
 * result and algorithm), unless the ring has moved past it. */
static void update(struct hccl_fr *fr, uint64_t id, int state, uint64_t seq, uint64_t fp,
                   HcclResult result, const char *algo) {
  if (!fr || !id) return;
  int64_t now = real_us();
  pthread_mutex_lock(&fr->lock);
  struct fr_entry *e = &fr->e[id % fr->cap];
  if (e->id == id && state == FR_STARTED) {
    e->seq = seq;
    e->fp = fp;
    e->t_start_us = now;
  } else if (e->id == id) {
    if (!e->t_start_us) e->t_start_us = now;
    e->t_end_us = now;
    e->result = (int32_t)result;
    e->algo = algo;
  }
  if (e->id == id) e->state = (uint8_t)state;
  pthread_mutex_unlock(&fr->lock);
}

void hccl__fr_start(struct hccl_fr *fr, uint64_t id, uint64_t seq, uint64_t fp) {
  update(fr, id, FR_STARTED, seq, fp, HCCL_SUCCESS, NULL);
}

void hccl__fr_end(struct hccl_fr *fr, uint64_t id, HcclResult result, const char *algo) {
  update(fr, id, result == HCCL_SUCCESS ? FR_FINISHED : FR_FAILED, 0, 0, result, algo);
}

/* s as a JSON string's contents. */
static void json_str(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
}

void hccl__fr_dump(struct hccl_comm *c, const char *reason) {
  struct hccl_fr *fr = c->fr;
  if (!fr) return;
  char tmp[700];
  snprintf(tmp, sizeof(tmp), "%s.tmp", fr->path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    HCCL_WARN("flight recorder: rank %u cannot write %s: %s (HCCL_FLIGHT_RECORDER_DIR)", c->rank,
              tmp, strerror(errno));
    return;
  }
  struct hccl_progress *pg = hccl__progress_mine(c);
  uint32_t wf = atomic_load(&pg->waiting_for);
  fprintf(f,
          "{\"format\": \"hccl-flight-recorder\", \"version\": 2, \"run\": \"%016llx\", "
          "\"run_start_us\": %lld, \"rank\": %u, \"nranks\": %u, \"host\": \"",
          (unsigned long long)c->run, (long long)c->run_start_us, c->rank, c->nranks);
  json_str(f, c->peers ? c->peers[c->rank].host : "");
  fprintf(f, "\", \"pid\": %d, \"comm\": \"%016llx\", \"time_us\": %lld, \"reason\": \"",
          (int)getpid(), (unsigned long long)hash_str(c->key_prefix), (long long)real_us());
  json_str(f, reason);
  fprintf(f, "\", \"error\": \"");
  if (atomic_load(&c->broken)) json_str(f, c->broken_msg);
  fprintf(f, "\", \"calls_started\": %llu, \"in_call\": %s, \"waiting_for\": %d}\n",
          (unsigned long long)(atomic_load(&pg->call) >> 8),
          atomic_load(&pg->in_call) ? "true" : "false", wf ? (int)(wf - 1) : -1);
  pthread_mutex_lock(&fr->lock);
  uint64_t first = fr->next > fr->cap ? fr->next - fr->cap : 1;
  for (uint64_t id = first; id < fr->next; id++) {
    const struct fr_entry *e = &fr->e[id % fr->cap];
    if (e->id != id) continue;
    bool p2p = e->kind >= HCCL_FR_P2P_SEND;
    fprintf(f, "{\"id\": %llu, \"seq\": %llu, \"fp\": \"%016llx\", \"kind\": \"%s\", ",
            (unsigned long long)id, (unsigned long long)e->seq, (unsigned long long)e->fp,
            p2p ? (e->kind == HCCL_FR_P2P_SEND ? "send" : "recv")
                : hccl__coll_kind_name(e->kind));
    fprintf(f, "\"count\": %llu, \"dtype\": \"%s\", \"op\": \"%s\", ",
            (unsigned long long)e->count, hccl__dtype_name((HcclDataType)e->dt),
            e->op >= 0 ? hccl__op_name((HcclReduceOp)e->op) : "");
    fprintf(f, "\"root\": %d, \"peer\": %d, \"algo\": \"%s\", \"state\": \"%s\", \"result\": %d, ",
            e->root == UINT32_MAX ? -1 : (int)e->root, e->peer == UINT32_MAX ? -1 : (int)e->peer,
            e->algo ? e->algo : "", k_state[e->state], e->result);
    fprintf(f, "\"t_enqueued_us\": %lld, \"t_started_us\": %lld, \"t_finished_us\": %lld}\n",
            (long long)e->t_enq_us, (long long)e->t_start_us, (long long)e->t_end_us);
  }
  pthread_mutex_unlock(&fr->lock);
  if (fclose(f) != 0 || rename(tmp, fr->path) != 0) {
    HCCL_WARN("flight recorder: rank %u cannot write %s: %s", c->rank, fr->path, strerror(errno));
    return;
  }
  HCCL_INFO("flight recorder: rank %u wrote %s (%s)", c->rank, fr->path, reason);
}

void hccl__fr_close(struct hccl_comm *c) {
  struct hccl_fr *fr = c->fr;
  if (!fr) return;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_nlive; i++)
    if (g_live[i] == c) {
      g_live[i] = g_live[--g_nlive];
      break;
    }
  pthread_mutex_unlock(&g_lock);
  c->fr = NULL;
  pthread_mutex_destroy(&fr->lock);
  free(fr->e);
  free(fr);
}
