/*
 * perf_common.c - the run every benchmark program shares, once its flags are read (perf_args.c):
 * the buffers, the size sweep's loop, timing, the data check and the table. See perf_common.h
 * for the flow, perf_coll.c for what differs between collectives and perf_data.c for the
 * checking data.
 *
 * Buffers. Each rank has a send and a receive buffer of -e bytes plus 64 guard bytes; every
 * collective's send and receive fit in -e bytes (perf_coll.c). In place, the receive buffer
 * is the one buffer, with the input at the collective's in-place offset.
 *
 * Timing. After -w warm-up calls and a barrier, -n calls are timed with CLOCK_MONOTONIC; the
 * per-call time is combined across ranks per -a with an allreduce of a float. The checked run
 * comes after, on freshly filled buffers: the receive buffer is first set to 0xA5 bytes (no
 * value ever has that pattern), 64 guard bytes after the data must stay untouched, and out of
 * place the send buffer must be unchanged. Every block of the result is compared with its
 * reference (perf_coll.c says which). Wrong elements (and changed guard bytes) are summed over
 * ranks with an int32 allreduce.
 */
#include "perf_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_args.h"
#include "perf_coll.h"
#include "perf_data.h"

#define GUARD_BYTES 64
#define GUARD_BYTE 0x5A

static const char *const avg_names[4] = {"rank0", "avg", "min", "max"};

struct run {
  const struct perf_backend *be;
  perf_coll coll;
  const struct perf_coll_desc *d;
  const struct perf_opts *o;
  struct perf_world w;
  unsigned char *send, *recv; /* max_bytes + GUARD_BYTES each */
  signed char asked[PERF_NTYPES][PERF_NOPS]; /* pair_refused: 0 not yet, 1 taken, -1 refused */
  struct perf_link_counts links; /* this rank's, over the timed calls (link_counts) */
};

static void __attribute__((noreturn)) call_failed(const struct run *R) {
  fprintf(stderr, "%s: rank %d: %s\n", R->be->prog, R->w.rank, R->be->last_error());
  fflush(stdout);
  R->be->abort_run(1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run_or_die(const struct run *R, const struct perf_call *c, int blocking) {
  if (R->be->run(c, blocking) != 0) call_failed(R);
}

/* The sum of v over ranks (a blocking int32 allreduce). */
static int32_t sum_over_ranks(const struct run *R, int32_t v) {
  int32_t total = 0;
  struct perf_call c = {
      .coll = PERF_ALLREDUCE, .send = &v, .recv = &total, .count = 1, .type = PERF_INT32};
  run_or_die(R, &c, 1);
  return total;
}

/* One column group of a line: this rank's buffers for one call, in or out of place. */
struct perf_case {
  struct perf_shape sh;
  size_t es;
  int inplace;
  unsigned char *in, *out; /* where the input and the result start */
  size_t extent;           /* bytes of the receive buffer the call may write; guard after */
  struct perf_call call;
};

static void case_init(const struct run *R, struct perf_case *k, size_t size, perf_type t,
                      perf_op op, int root, int inplace) {
  size_t es = perf_type_size(t), rank = (size_t)R->w.rank;
  k->es = es;
  k->inplace = inplace;
  R->d->shape(size / es, es, R->w.nranks, &k->sh);
  const struct perf_shape *sh = &k->sh;
  if (inplace) {
    size_t in_end = rank * sh->send_at + sh->send, out_end = rank * sh->recv_at + sh->recv;
    k->in = R->recv + rank * sh->send_at * es;
    k->out = R->recv + rank * sh->recv_at * es;
    k->extent = (in_end > out_end ? in_end : out_end) * es;
  } else {
    k->in = R->send;
    k->out = R->recv;
    k->extent = sh->recv * es;
  }
  k->call = (struct perf_call){.coll = R->coll,
                               .send = k->in,
                               .recv = k->out,
                               .count = sh->count,
                               .type = t,
                               .op = op,
                               .root = root};
}

/* Receive side to the sentinel, this rank's input in place, guards after both buffers. */
static void case_fill(const struct run *R, const struct perf_case *k,
                      const struct perf_tables *tb) {
  struct perf_seq in = perf_seq_input(tb, R->w.rank);
  memset(R->recv, PERF_SENTINEL_BYTE, k->extent);
  memset(R->recv + k->extent, GUARD_BYTE, GUARD_BYTES);
  perf_fill(k->in, k->sh.send, &in, 0);
  if (!k->inplace) memset(R->send + k->sh.send * k->es, GUARD_BYTE, GUARD_BYTES);
}

static long long guard_changed(const unsigned char *g) {
  long long n = 0;
  for (int i = 0; i < GUARD_BYTES; i++)
    n += g[i] != GUARD_BYTE;
  return n;
}

/* This rank's wrong elements after the case's call: every block of the result against its
 * reference, the guards, and out of place the send buffer. */
static long long case_wrong(const struct run *R, const struct perf_case *k,
                            const struct perf_tables *tb) {
  int p = R->w.nranks;
  size_t nblocks = R->d->per_peer ? (size_t)p : 1, len = k->sh.recv / nblocks;
  long long wrong = guard_changed(R->recv + k->extent);
  for (size_t b = 0; b < nblocks; b++) {
    struct perf_block blk = R->d->block(R->w.rank, p, k->call.root, k->inplace, b, len);
    struct perf_seq ref = blk.src == PERF_SRC_RESULT  ? perf_seq_result(tb)
                          : blk.src == PERF_SRC_INPUT ? perf_seq_input(tb, blk.rank)
                                                      : perf_seq_untouched(tb);
    wrong += perf_count_wrong(k->out + b * len * k->es, len, &ref, blk.at);
  }
  if (!k->inplace) {
    struct perf_seq in = perf_seq_input(tb, R->w.rank);
    wrong += perf_count_wrong(R->send, k->sh.send, &in, 0);
    wrong += guard_changed(R->send + k->sh.send * k->es);
  }
  return wrong;
}

/* The transport's counters before the timed calls (into *at), and after them (the difference
 * added to R->links). */
static void links_mark(struct run *R, struct perf_link_counts *at, int after) {
  struct perf_link_counts now;
  memset(&now, 0, sizeof(now));
  if (!R->be->link_counts || R->be->link_counts(&now) != 0) return;
  if (!after) {
    *at = now;
    return;
  }
  memcpy(R->links.name, now.name, sizeof(now.name));
  R->links.links = now.links;
  R->links.sent += now.sent - at->sent;
  R->links.copied_send += now.copied_send - at->copied_send;
  R->links.copied_recv += now.copied_recv - at->copied_recv;
}

/* Time per call in microseconds, combined across ranks per -a. */
static double time_calls(struct run *R, const struct perf_call *c) {
  const struct perf_opts *o = R->o;
  struct perf_link_counts at;
  memset(&at, 0, sizeof(at));
  for (int i = 0; i < o->warmup; i++)
    run_or_die(R, c, o->blocking);
  if (R->be->wait_all() != 0 || R->be->barrier() != 0) call_failed(R);
  links_mark(R, &at, 0);
  double t0 = now_s();
  for (int i = 0; i < o->iters; i++)
    run_or_die(R, c, o->blocking);
  if (R->be->wait_all() != 0) call_failed(R);
  links_mark(R, &at, 1);
  float us = (float)((now_s() - t0) * 1e6 / o->iters), all = us;
  static const perf_op combine[4] = {PERF_SUM, PERF_SUM, PERF_MIN, PERF_MAX};
  struct perf_call comb = {.coll = PERF_ALLREDUCE,
                           .send = &us,
                           .recv = &all,
                           .count = 1,
                           .type = PERF_FLOAT,
                           .op = combine[o->avg_mode]};
  if (o->avg_mode != 0) run_or_die(R, &comb, 1);
  return o->avg_mode == 1 ? all / R->w.nranks : all;
}

/* One checked call on fresh data; returns the wrong elements summed over ranks. */
static long long check_call(const struct run *R, const struct perf_case *k,
                            const struct perf_tables *tb) {
  case_fill(R, k, tb);
  run_or_die(R, &k->call, 1);
  long long wrong = case_wrong(R, k, tb), cap = INT32_MAX / R->w.nranks;
  return sum_over_ranks(R, (int32_t)(wrong < cap ? wrong : cap));
}

static void format_time(char *buf, size_t n, double us) {
  if (us >= 10000.0)
    snprintf(buf, n, "%7.0f", us);
  else if (us >= 100.0)
    snprintf(buf, n, "%7.1f", us);
  else
    snprintf(buf, n, "%7.2f", us);
}

struct totals {
  double busbw_sum;
  long nbw;
  long long wrong;
};

/* One output line: out-of-place then in-place for (size, t, op, root). */
static void run_line(struct run *R, size_t size, perf_type t, perf_op op, int root,
                     const struct perf_tables *tb, struct totals *tot) {
  const struct perf_coll_desc *d = R->d;
  int p = R->w.nranks;
  struct perf_case k;
  case_init(R, &k, size, t, op, root, 0);
  size_t bytes = (k.sh.send > k.sh.recv ? k.sh.send : k.sh.recv) * k.es;
  char line[256];
  int len =
      snprintf(line, sizeof(line), "%12zu  %12zu  %8s  %6s  %6i", bytes, k.sh.count,
               perf_type_name(t), d->reduces ? perf_op_name(op) : "none", d->rooted ? root : -1);
  for (int inplace = 0; inplace <= 1; inplace++) {
    if (inplace && !d->inplace) {
      len += snprintf(line + len, sizeof(line) - (size_t)len, "  %7s  %6s  %6s  %5s", "N/A", "N/A",
                      "N/A", "N/A");
      continue;
    }
    case_init(R, &k, size, t, op, root, inplace);
    case_fill(R, &k, tb);
    double us = time_calls(R, &k.call);
    double algbw = us > 0 ? (double)bytes / us / 1e3 : 0; /* GB/s, 1 GB = 1e9 B */
    double busbw = d->bus_part ? algbw * d->bus_mul * (p - 1) / p : algbw * d->bus_mul;
    char ts[32], ws[32];
    format_time(ts, sizeof(ts), us);
    if (R->o->check) {
      long long wrong = check_call(R, &k, tb);
      tot->wrong += wrong;
      snprintf(ws, sizeof(ws), "%5lld", wrong);
    } else {
      snprintf(ws, sizeof(ws), "%5s", "N/A");
    }
    tot->busbw_sum += busbw;
    tot->nbw++;
    len += snprintf(line + len, sizeof(line) - (size_t)len, "  %7s  %6.2f  %6.2f  %5s", ts, algbw,
                    busbw, ws);
  }
  if (R->w.rank == 0) printf("%s\n", line);
}

/* Whether the backend refuses the reduction (t, op) (perf_backend.refuses), asked once per pair
 * before its first line. A refused pair is a "skipped" line where -d all or -o all chose it;
 * one that -d and -o both named fails the run (exit 1) on every rank. */
static int pair_refused(struct run *R, perf_type t, perf_op op) {
  signed char *asked = &R->asked[t][op];
  if (!R->be->refuses || !R->d->reduces) return 0;
  if (*asked == 0) {
    char why[256] = "";
    *asked = R->be->refuses(t, op, why, sizeof(why)) ? -1 : 1;
    if (*asked < 0 && R->o->ntypes == 1 && R->o->nops == 1) {
      fprintf(stderr, "%s: rank %d: %s of %s with %s: %s\n", R->be->prog, R->w.rank,
              perf_coll_name(R->coll), perf_type_name(t), perf_op_name(op), why);
      fflush(stdout);
      R->be->abort_run(1);
    }
    if (*asked < 0 && R->w.rank == 0)
      printf("# %s %s: skipped: %s\n", perf_type_name(t), perf_op_name(op), why);
  }
  return *asked < 0;
}

struct rank_info {
  int32_t rank, pid, device, pad;
  char host[64];
};

static void print_header(const struct run *R) {
  const struct perf_opts *o = R->o;
  const struct perf_coll_desc *d = R->d;
  int p = R->w.nranks;
  struct rank_info me = {.rank = R->w.rank, .pid = (int32_t)getpid(), .device = R->w.device};
  if (gethostname(me.host, sizeof(me.host) - 1) != 0) snprintf(me.host, sizeof(me.host), "?");
  struct rank_info *all = calloc((size_t)p, sizeof(*all));
  if (!all) {
    fprintf(stderr, "%s: out of memory for %d rank records\n", R->be->prog, p);
    R->be->abort_run(1);
  }
  struct perf_call c = {
      .coll = PERF_ALLGATHER, .send = &me, .recv = all, .count = sizeof(me), .type = PERF_INT8};
  run_or_die(R, &c, 1);
  if (R->w.rank == 0) {
    printf("# %s (%s) nranks %d\n", R->be->prog, R->w.impl, p);
    printf("# minBytes %zu maxBytes %zu step: ", o->min_bytes, o->max_bytes);
    if (o->step_factor > 1)
      printf("%ld(factor)", o->step_factor);
    else
      printf("%zu(bytes)", o->step_bytes);
    printf(" warmup iters: %d iters: %d validation: %d average: %d(%s) blocking: %d\n", o->warmup,
           o->iters, o->check, o->avg_mode, avg_names[o->avg_mode], o->blocking);
    printf("# Loop order: for each size, for each type%s%s; %s\n",
           d->reduces ? ", for each op" : "", d->rooted && o->root < 0 ? ", for each root" : "",
           d->inplace ? "out-of-place then in-place"
                      : "out-of-place (no in-place form: those columns read N/A)");
    if (R->be->note) printf("%s\n", R->be->note);
    printf("#\n# Using devices\n");
    for (int r = 0; r < p; r++) {
      all[r].host[sizeof(all[r].host) - 1] = '\0';
      printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d\n", (int)all[r].rank, (int)all[r].pid,
             all[r].host, (int)all[r].device);
    }
    printf("#\n");
    printf("#                                                              out-of-place          "
           "             in-place          \n");
    printf("#       size         count      type   redop    root     time   algbw   busbw #wrong "
           "    time   algbw   busbw #wrong\n");
    printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
           "     (us)  (GB/s)  (GB/s)       \n");
  }
  free(all);
}

/* The send and receive buffers: page-aligned ordinary memory, or the library's own (-R 1). */
static int buffers_alloc(struct run *R, size_t bytes) {
  R->send = R->recv = NULL;
  if (R->o->registered)
    return R->be->mem_alloc((void **)&R->send, bytes) || R->be->mem_alloc((void **)&R->recv, bytes);
  return posix_memalign((void **)&R->send, 4096, bytes) ||
         posix_memalign((void **)&R->recv, 4096, bytes);
}

static void buffers_free(struct run *R) {
  void (*f)(void *) = R->o->registered ? R->be->mem_free : free;
  if (R->send) f(R->send);
  if (R->recv) f(R->recv);
}

/* "# RDMA: N bytes sent, R bytes copied per byte sent (...)": the counters of the timed calls
 * summed over ranks (links, sent, copied into send slots, copied out of receive slots). */
static void print_links(const char *name, const uint64_t s[4]) {
  double per = s[1] ? (double)(s[2] + s[3]) / (double)s[1] : 0.0;
  printf("# %s: %llu bytes sent, %.2f bytes copied per byte sent", name[0] ? name : "network",
         (unsigned long long)s[1], per);
  if (s[1] && s[2] + s[3] == 0)
    printf(" (zero copy)\n");
  else if (s[1])
    printf(" (%.2f into send slots, %.2f out of receive slots)\n", (double)s[2] / (double)s[1],
           (double)s[3] / (double)s[1]);
  else
    printf("\n");
}

int perf_main(int argc, char **argv, perf_coll coll, const struct perf_backend *be) {
  struct perf_opts o;
  struct run R = {.be = be, .coll = coll, .d = &perf_colls[coll], .o = &o};
  perf_parse_args(argc, argv, be, R.d, &o);

  if (be->init(&R.w) != 0) {
    fprintf(stderr, "%s: cannot join the job: %s\n", be->prog, be->last_error());
    return 1;
  }
  size_t alloc = o.max_bytes + GUARD_BYTES;
  if (buffers_alloc(&R, alloc) != 0) {
    fprintf(stderr, "%s: cannot allocate 2 %sbuffers of %zu bytes for -e %zu; lower -e\n",
            be->prog, o.registered ? "-R 1 " : "", alloc, o.max_bytes);
    be->abort_run(1);
  }
  memset(R.send, 0, alloc); /* touch every page now, not in the first timed loop */
  memset(R.recv, 0, alloc);

  int p = R.w.nranks;
  if (R.d->rooted && o.root >= p) { /* every rank sees it: all leave, none waits */
    if (R.w.rank == 0)
      fprintf(stderr,
              "%s: -r %d is not a rank of this %d-rank job: expected 0 .. %d, or -1 for each "
              "rank in turn\nRun '%s -h' for the list of flags.\n",
              be->prog, o.root, p, p - 1, be->prog);
    buffers_free(&R);
    be->finalize();
    return 2;
  }
  if (R.w.rank == 0) setvbuf(stdout, NULL, _IOLBF, 0);
  print_header(&R);

  struct perf_tables tb;
  if (perf_tables_init(&tb, R.w.rank, p) != 0) {
    fprintf(stderr, "%s: out of memory for the check pattern of %d ranks\n", be->prog, p);
    be->abort_run(1);
  }
  int root_lo = R.d->rooted && o.root >= 0 ? o.root : 0;
  int root_hi = R.d->rooted && o.root < 0 ? p - 1 : root_lo;
  int nops = R.d->reduces ? o.nops : 1;

  struct totals tot = {0};
  for (size_t size = o.min_bytes, more = 1; more; more = (size = perf_next_size(&o, size)) != 0) {
    for (int ti = 0; ti < o.ntypes; ti++) {
      perf_type t = o.types[ti];
      if (!R.d->reduces) perf_tables_copy(&tb, t);
      for (int oi = 0; oi < nops; oi++) {
        perf_op op = R.d->reduces ? o.ops[oi] : PERF_SUM;
        if (pair_refused(&R, t, op)) continue;
        if (R.d->reduces) perf_tables_reduction(&tb, t, op);
        for (int root = root_lo; root <= root_hi; root++)
          run_line(&R, size, t, op, root, &tb, &tot);
      }
    }
  }

  uint64_t links[4] = {0};
  if (be->link_counts) { /* every rank: the sums are an allreduce */
    uint64_t mine[4] = {R.links.links, R.links.sent, R.links.copied_send, R.links.copied_recv};
    struct perf_call c = {.coll = PERF_ALLREDUCE, .send = mine, .recv = links, .count = 4,
                          .type = PERF_UINT64, .op = PERF_SUM};
    run_or_die(&R, &c, 1);
  }
  if (R.w.rank == 0) {
    printf("# Out of bounds values : %lld %s\n", tot.wrong, tot.wrong ? "FAILED" : "OK");
    /* nccl-tests prints "%g %s" here, the word after the number being "" or, with its -G,
     * OK/FAILED; the unit takes that place, so parsers that read the 6th field or the number
     * after the colon still do (docs/perf_programs.md, "Every line of the output"). */
    printf("# Avg bus bandwidth    : %g GB/s\n",
           tot.nbw ? tot.busbw_sum / (double)tot.nbw : 0.0);
    if (links[0] > 0) print_links(R.links.name, links);
    printf("#\n");
    fflush(stdout);
  }
  perf_tables_free(&tb);
  buffers_free(&R);
  be->finalize();
  return tot.wrong ? 1 : 0;
}
