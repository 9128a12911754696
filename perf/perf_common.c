/*
 * perf_common.c - flags, size sweep, data fill and check, timing and the nccl-tests-shaped
 * output that allreduce_perf and mpi_allreduce_perf share. See perf_common.h for the flow.
 *
 * Checking data. Rank r's element e holds a small integer v(op, r, e) chosen so that the exact
 * result is the same in every reduction order, for every type, with any number of ranks:
 *   sum       v = ((7r + e) mod 5) - 2, in [-2, 2]; |sum| <= 2p, exact in half up to p = 1024.
 *   prod      v in {1, 2, -1} by (r + e) mod 3, where 2 is only used on ranks 0..7, so
 *             |product| <= 2^8 (exact in half and float; int8 wraps, e.g. 128 -> -128, 256 -> 0,
 *             and wrapping multiplication is associative, so the order does not matter).
 *   max/min   v = ((r + e) mod p) + (e mod 7) - 3: distinct across ranks for each element,
 *             and the answer moves with e.
 * Values are stored in the element type (int8 wraps), and the expected result is computed from
 * the stored values, in the same type. v only depends on e modulo 105 * p (5, 3, 7 and p all
 * divide it), so one period of this rank's values and one of the expected result are built
 * per (type, op); filling and checking are memcpy/memcmp over that period.
 *
 * Timing. After -w warm-up calls and a barrier, -n calls are timed with CLOCK_MONOTONIC; the
 * per-call time is combined across ranks per -a with an allreduce of a float. The checked run
 * comes after, on freshly filled buffers: the receive buffer is first set to 0xA5 bytes (no
 * expected value has that pattern), 64 guard bytes after the data must stay untouched, and
 * out-of-place the send buffer must be unchanged. Wrong elements (and changed guard bytes)
 * are summed over ranks with an int32 allreduce.
 */
#include "perf_common.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GUARD_BYTES 64
#define GUARD_BYTE 0x5A
#define SENTINEL_BYTE 0xA5

static const char *const type_names[PERF_NTYPES] = {"int8", "int32", "half", "float"};
static const size_t type_sizes[PERF_NTYPES] = {1, 4, 2, 4};
static const char *const op_names[PERF_NOPS] = {"sum", "prod", "max", "min"};
static const char *const avg_names[4] = {"rank0", "avg", "min", "max"};

const char *perf_type_name(perf_type t) {
  return (unsigned)t < PERF_NTYPES ? type_names[t] : "unknown";
}

const char *perf_op_name(perf_op op) {
  return (unsigned)op < PERF_NOPS ? op_names[op] : "unknown";
}

size_t perf_type_size(perf_type t) {
  return (unsigned)t < PERF_NTYPES ? type_sizes[t] : 0;
}

/* ---- float16 ---- */

uint16_t perf_half_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu, e = absx >> 23;
  if (absx >= 0x7f800000u) /* inf stays inf; NaN stays a (quiet) NaN */
    return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) /* >= 65520 rounds to infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (e < 113) { /* below 2^-14: a half subnormal, in units of 2^-24 */
    if (e < 102) return (uint16_t)sign;
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14..24 */
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((e - 112) << 10) | ((absx & 0x7fffffu) >> 13), rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* a carry may reach inf: right */
  return (uint16_t)(sign | h);
}

float perf_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0) {
    float f = (float)m * (1.0f / 16777216.0f); /* m * 2^-24, exact */
    return sign ? -f : f;
  }
  if (e == 31)
    x = sign | 0x7f800000u | (m << 13);
  else
    x = sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, sizeof(f));
  return f;
}

/* ---- flags ---- */

struct perf_opts {
  size_t min_bytes, max_bytes, step_bytes;
  long step_factor; /* > 1: multiply; 0: add step_bytes */
  int iters, warmup, check, avg_mode, blocking;
  int ntypes, nops;
  perf_type types[PERF_NTYPES];
  perf_op ops[PERF_NOPS];
};

/* True when this process is the first of its job (or not under a launcher), so that a usage
 * error under a launcher is printed once rather than once per rank. */
static int first_process(void) {
  const char *vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK_ID"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return strcmp(v, "0") == 0;
  }
  return 1;
}

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "Usage: %s [flags]   (one process per rank; rank 0 prints)\n"
          "  -b <bytes>  smallest size (K, M, G = powers of 1024)        default 32M\n"
          "  -e <bytes>  largest size, >= -b                             default 32M\n"
          "  -f <n>      multiply the size by n (>= 2) each step         default 2\n"
          "  -i <bytes>  add this many bytes each step instead of -f\n"
          "  -n <n>      timed iterations per line (>= 1)                default 20\n"
          "  -w <n>      warm-up iterations (>= 0)                       default 1\n"
          "  -c <0|1>    check the results                               default 1\n"
          "  -d <type>   int8, int32, half, float or all                 default float\n"
          "  -o <op>     sum, prod, max, min or all                      default sum\n"
          "  -a <0-3>    time across ranks: 0 rank 0, 1 average, 2 min, 3 max   default 1\n"
          "  -z <0|1>    1: each call blocks; 0: the -n calls are queued, then waited for\n"
          "              together                                        default 1\n"
          "  -g 1, -t 1  accepted for nccl-tests command lines (one device, one thread)\n"
          "  -h          this help\n"
          "Loop order with all: for each size, for each type, for each op; each line has\n"
          "out-of-place then in-place. Exit code: 0 ok, 1 wrong results or a failed call,\n"
          "2 bad flags.\n",
          prog);
}

static void __attribute__((noreturn, format(printf, 2, 3)))
usage_error(const char *prog, const char *fmt, ...) {
  if (first_process()) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun '%s -h' for the list of flags.\n", prog);
  }
  exit(2);
}

/* "64", "4K", "32M", "1G" (powers of 1024; lower case accepted). */
static size_t parse_size(const char *prog, char flag, const char *s) {
  char *end;
  if (*s < '0' || *s > '9')
    usage_error(prog,
                "-%c '%s' is not a size: expected a number of bytes with an optional K, "
                "M or G suffix (powers of 1024), e.g. 8, 4K, 64M",
                flag, s);
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned shift = 0;
  switch (*end) {
  case 'k':
  case 'K':
    shift = 10;
    end++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    end++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    end++;
    break;
  default:
    break;
  }
  if (*end != '\0')
    usage_error(prog,
                "-%c '%s' is not a size: expected a number of bytes with an optional K, "
                "M or G suffix (powers of 1024), e.g. 8, 4K, 64M",
                flag, s);
  if (errno == ERANGE || v > (SIZE_MAX >> 1) >> shift)
    usage_error(prog, "-%c '%s' is too large", flag, s);
  return (size_t)v << shift;
}

static long parse_int(const char *prog, char flag, const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    usage_error(prog, "-%c '%s' is not valid: expected an integer from %ld to %ld", flag, s, lo,
                hi);
  return v;
}

static void parse_types(const char *prog, const char *s, struct perf_opts *o) {
  o->ntypes = 0;
  for (int t = 0; t < PERF_NTYPES; t++)
    if (strcmp(s, "all") == 0 || strcmp(s, type_names[t]) == 0) o->types[o->ntypes++] = t;
  if (o->ntypes == 0)
    usage_error(prog,
                "-d '%s' is not a type this benchmark reduces: expected int8, int32, "
                "half, float or all",
                s);
}

static void parse_ops(const char *prog, const char *s, struct perf_opts *o) {
  o->nops = 0;
  for (int op = 0; op < PERF_NOPS; op++)
    if (strcmp(s, "all") == 0 || strcmp(s, op_names[op]) == 0) o->ops[o->nops++] = op;
  if (o->nops == 0)
    usage_error(prog, "-o '%s' is not an op: expected sum, prod, max, min or all", s);
}

/* Fills *o from argv; exits 2 on a bad flag, 0 after -h. */
static void parse_args(int argc, char **argv, const char *prog, struct perf_opts *o) {
  *o = (struct perf_opts){.min_bytes = 32u << 20,
                          .max_bytes = 32u << 20,
                          .step_factor = 2,
                          .iters = 20,
                          .warmup = 1,
                          .check = 1,
                          .avg_mode = 1,
                          .blocking = 1,
                          .ntypes = 1,
                          .types = {PERF_FLOAT},
                          .nops = 1,
                          .ops = {PERF_SUM}};
  int seen_f = 0, seen_i = 0, c;
  opterr = 0;
  optind = 1;
  while ((c = getopt(argc, argv, ":b:e:f:i:n:w:c:d:o:a:z:g:t:h")) != -1) {
    switch (c) {
    case 'b':
      o->min_bytes = parse_size(prog, 'b', optarg);
      break;
    case 'e':
      o->max_bytes = parse_size(prog, 'e', optarg);
      break;
    case 'f':
      o->step_factor = parse_int(prog, 'f', optarg, 2, 1 << 30);
      seen_f = 1;
      break;
    case 'i':
      o->step_bytes = parse_size(prog, 'i', optarg);
      if (o->step_bytes == 0)
        usage_error(prog, "-i '%s' is not valid: the increment must be at least 1 byte", optarg);
      seen_i = 1;
      break;
    case 'n':
      o->iters = (int)parse_int(prog, 'n', optarg, 1, 100000000);
      break;
    case 'w':
      o->warmup = (int)parse_int(prog, 'w', optarg, 0, 100000000);
      break;
    case 'c':
      o->check = (int)parse_int(prog, 'c', optarg, 0, 1);
      break;
    case 'd':
      parse_types(prog, optarg, o);
      break;
    case 'o':
      parse_ops(prog, optarg, o);
      break;
    case 'a':
      o->avg_mode = (int)parse_int(prog, 'a', optarg, 0, 3);
      break;
    case 'z':
      o->blocking = (int)parse_int(prog, 'z', optarg, 0, 1);
      break;
    case 'g':
    case 't':
      if (strcmp(optarg, "1") != 0)
        usage_error(prog,
                    "-%c '%s' is not supported: this benchmark runs one device and one "
                    "thread per process; start one process per device instead (-%c 1)",
                    c, optarg, c);
      break;
    case 'h':
      usage(stdout, prog);
      exit(0);
    case ':':
      usage_error(prog, "flag -%c needs a value", optopt);
    default:
      if (optopt >= 0x20 && optopt < 0x7f) usage_error(prog, "unknown flag -%c", optopt);
      usage_error(prog, "unknown flag '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc)
    usage_error(prog, "unexpected argument '%s': every setting is a flag with a value",
                argv[optind]);
  if (seen_f && seen_i)
    usage_error(prog, "-f and -i both given: the size either grows by a factor (-f) or by a "
                      "fixed step (-i), choose one");
  if (seen_i) o->step_factor = 0;
  if (o->max_bytes < o->min_bytes)
    usage_error(prog,
                "-e %zu is smaller than -b %zu: the largest size must be at least the "
                "smallest",
                o->max_bytes, o->min_bytes);
}

/* The next size of the sweep, or 0 when past max (or on overflow). */
static size_t next_size(const struct perf_opts *o, size_t size) {
  size_t next;
  if (o->step_factor > 1) {
    if (size == 0) return 0; /* 0 * f never grows: stop after one line */
    if (size > o->max_bytes / (size_t)o->step_factor) return 0;
    next = size * (size_t)o->step_factor;
  } else {
    if (size > o->max_bytes - o->step_bytes) return 0;
    next = size + o->step_bytes;
  }
  return next <= o->max_bytes ? next : 0;
}

/* ---- checking data ---- */

static long long pattern_value(perf_op op, int r, size_t e, int p) {
  switch (op) {
  case PERF_SUM:
    return (long long)((7 * (size_t)r + e) % 5) - 2;
  case PERF_PROD: {
    size_t k = ((size_t)r + e) % 3;
    return k == 0 ? 1 : k == 1 ? (r < 8 ? 2 : 1) : -1;
  }
  default:
    return (long long)(((size_t)r + e) % (size_t)p) + (long long)(e % 7) - 3;
  }
}

static void store_value(perf_type t, void *dst, double v) {
  switch (t) {
  case PERF_INT8:
    *(int8_t *)dst = (int8_t)(long long)v;
    break;
  case PERF_INT32:
    *(int32_t *)dst = (int32_t)(long long)v;
    break;
  case PERF_HALF:
    *(uint16_t *)dst = perf_half_from_float((float)v);
    break;
  default:
    *(float *)dst = (float)v;
    break;
  }
}

static double load_value(perf_type t, const void *src) {
  switch (t) {
  case PERF_INT8:
    return *(const int8_t *)src;
  case PERF_INT32:
    return *(const int32_t *)src;
  case PERF_HALF:
    return perf_half_to_float(*(const uint16_t *)src);
  default:
    return *(const float *)src;
  }
}

/* One period of this rank's values (mine) and of the expected result (want). Integer sums
 * and products are done in 64 bits and wrapped to the type once at the end, which equals
 * wrapping after every step. */
struct pattern {
  size_t period;
  unsigned char *mine, *want;
};

static void pattern_build(struct pattern *pt, perf_type t, perf_op op, int rank, int p) {
  size_t es = type_sizes[t];
  unsigned char tmp[8];
  for (size_t i = 0; i < pt->period; i++) {
    double acc = 0;
    for (int r = 0; r < p; r++) {
      store_value(t, tmp, (double)pattern_value(op, r, i, p));
      double v = load_value(t, tmp);
      if (r == rank) memcpy(pt->mine + i * es, tmp, es);
      if (r == 0)
        acc = v;
      else if (op == PERF_SUM)
        acc += v;
      else if (op == PERF_PROD)
        acc *= v;
      else if (op == PERF_MAX)
        acc = v > acc ? v : acc;
      else
        acc = v < acc ? v : acc;
    }
    store_value(t, pt->want + i * es, acc);
  }
}

static void fill_pattern(void *buf, size_t count, size_t es, const unsigned char *tab,
                         size_t period) {
  unsigned char *b = buf;
  for (size_t off = 0; off < count; off += period) {
    size_t n = count - off < period ? count - off : period;
    memcpy(b + off * es, tab, n * es);
  }
}

static long long count_wrong(const void *buf, size_t count, size_t es, const unsigned char *tab,
                             size_t period) {
  const unsigned char *b = buf;
  long long wrong = 0;
  for (size_t off = 0; off < count; off += period) {
    size_t n = count - off < period ? count - off : period;
    if (memcmp(b + off * es, tab, n * es) == 0) continue;
    for (size_t i = 0; i < n; i++)
      wrong += memcmp(b + (off + i) * es, tab + i * es, es) != 0;
  }
  return wrong;
}

static long long guard_changed(const void *buf, size_t bytes) {
  const unsigned char *g = (const unsigned char *)buf + bytes;
  long long n = 0;
  for (int i = 0; i < GUARD_BYTES; i++)
    n += g[i] != GUARD_BYTE;
  return n;
}

/* ---- running ---- */

struct run {
  const struct perf_backend *be;
  const struct perf_opts *o;
  struct perf_world w;
  unsigned char *send, *recv; /* max_bytes + GUARD_BYTES each */
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

static void allreduce_or_die(const struct run *R, void *s, void *r, size_t count, perf_type t,
                             perf_op op, int blocking) {
  if (R->be->allreduce(s, r, count, t, op, blocking) != 0) call_failed(R);
}

/* Time per call in microseconds, combined across ranks per -a. */
static double time_calls(const struct run *R, void *dst, size_t count, perf_type t, perf_op op) {
  const struct perf_opts *o = R->o;
  for (int i = 0; i < o->warmup; i++)
    allreduce_or_die(R, R->send, dst, count, t, op, o->blocking);
  if (R->be->wait_all() != 0 || R->be->barrier() != 0) call_failed(R);
  double t0 = now_s();
  for (int i = 0; i < o->iters; i++)
    allreduce_or_die(R, R->send, dst, count, t, op, o->blocking);
  if (R->be->wait_all() != 0) call_failed(R);
  float us = (float)((now_s() - t0) * 1e6 / o->iters), all = us;
  static const perf_op combine[4] = {PERF_SUM, PERF_SUM, PERF_MIN, PERF_MAX};
  if (o->avg_mode != 0) allreduce_or_die(R, &us, &all, 1, PERF_FLOAT, combine[o->avg_mode], 1);
  return o->avg_mode == 1 ? all / R->w.nranks : all;
}

/* One checked call on fresh data; returns the wrong elements summed over ranks. */
static long long check_call(const struct run *R, int inplace, size_t count, perf_type t, perf_op op,
                            const struct pattern *pt) {
  size_t es = type_sizes[t], bytes = count * es;
  unsigned char *dst = inplace ? R->send : R->recv;
  fill_pattern(R->send, count, es, pt->mine, pt->period);
  memset(R->send + bytes, GUARD_BYTE, GUARD_BYTES);
  if (!inplace) {
    memset(R->recv, SENTINEL_BYTE, bytes);
    memset(R->recv + bytes, GUARD_BYTE, GUARD_BYTES);
  }
  allreduce_or_die(R, R->send, dst, count, t, op, 1);
  long long wrong = count_wrong(dst, count, es, pt->want, pt->period) + guard_changed(dst, bytes);
  if (!inplace)
    wrong += count_wrong(R->send, count, es, pt->mine, pt->period) + guard_changed(R->send, bytes);
  long long cap = INT32_MAX / R->w.nranks;
  int32_t mine = (int32_t)(wrong < cap ? wrong : cap), total = 0;
  allreduce_or_die(R, &mine, &total, 1, PERF_INT32, PERF_SUM, 1);
  return total;
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

/* One output line: out-of-place then in-place for (count, t, op). */
static void run_line(const struct run *R, size_t count, perf_type t, perf_op op,
                     const struct pattern *pt, struct totals *tot) {
  size_t es = type_sizes[t], bytes = count * es;
  int p = R->w.nranks;
  char line[256];
  int len = snprintf(line, sizeof(line), "%12zu  %12zu  %8s  %6s  %6i", bytes, count, type_names[t],
                     op_names[op], -1);
  for (int inplace = 0; inplace <= 1; inplace++) {
    unsigned char *dst = inplace ? R->send : R->recv;
    fill_pattern(R->send, count, es, pt->mine, pt->period);
    double us = time_calls(R, dst, count, t, op);
    double algbw = us > 0 ? (double)bytes / us / 1e3 : 0; /* GB/s, 1 GB = 1e9 B */
    double busbw = algbw * 2.0 * (p - 1) / p;
    char ts[32], ws[32];
    format_time(ts, sizeof(ts), us);
    if (R->o->check) {
      long long wrong = check_call(R, inplace, count, t, op, pt);
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

struct rank_info {
  int32_t rank, pid, device, pad;
  char host[64];
};

static void print_header(const struct run *R) {
  const struct perf_opts *o = R->o;
  int p = R->w.nranks;
  struct rank_info me = {.rank = R->w.rank, .pid = (int32_t)getpid(), .device = R->w.device};
  if (gethostname(me.host, sizeof(me.host) - 1) != 0) snprintf(me.host, sizeof(me.host), "?");
  struct rank_info *all = calloc((size_t)p, sizeof(*all));
  if (!all) {
    fprintf(stderr, "%s: out of memory for %d rank records\n", R->be->prog, p);
    R->be->abort_run(1);
  }
  if (R->be->allgather(&me, all, sizeof(me)) != 0) call_failed(R);
  if (R->w.rank == 0) {
    printf("# %s (%s) nranks %d\n", R->be->prog, R->w.impl, p);
    printf("# minBytes %zu maxBytes %zu step: ", o->min_bytes, o->max_bytes);
    if (o->step_factor > 1)
      printf("%ld(factor)", o->step_factor);
    else
      printf("%zu(bytes)", o->step_bytes);
    printf(" warmup iters: %d iters: %d validation: %d average: %d(%s) blocking: %d\n", o->warmup,
           o->iters, o->check, o->avg_mode, avg_names[o->avg_mode], o->blocking);
    printf("# Loop order: for each size, for each type, for each op; out-of-place then "
           "in-place\n");
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

int perf_main(int argc, char **argv, const struct perf_backend *be) {
  struct perf_opts o;
  struct run R = {.be = be, .o = &o};
  parse_args(argc, argv, be->prog, &o);

  size_t alloc = o.max_bytes + GUARD_BYTES;
  if (posix_memalign((void **)&R.send, 4096, alloc) != 0 ||
      posix_memalign((void **)&R.recv, 4096, alloc) != 0) {
    fprintf(stderr, "%s: cannot allocate 2 buffers of %zu bytes for -e %zu; lower -e\n", be->prog,
            alloc, o.max_bytes);
    free(R.send);
    return 1;
  }
  memset(R.send, 0, alloc); /* touch every page now, not in the first timed loop */
  memset(R.recv, 0, alloc);

  if (be->init(&R.w) != 0) {
    fprintf(stderr, "%s: cannot join the job: %s\n", be->prog, be->last_error());
    free(R.send);
    free(R.recv);
    return 1;
  }
  if (R.w.rank == 0) setvbuf(stdout, NULL, _IOLBF, 0);
  print_header(&R);

  int p = R.w.nranks;
  struct pattern pt = {.period = 105 * (size_t)p};
  pt.mine = malloc(pt.period * 4);
  pt.want = malloc(pt.period * 4);
  if (!pt.mine || !pt.want) {
    fprintf(stderr, "%s: out of memory for the check pattern of %d ranks\n", be->prog, p);
    be->abort_run(1);
  }

  struct totals tot = {0};
  for (size_t size = o.min_bytes, more = 1; more; more = (size = next_size(&o, size)) != 0) {
    for (int ti = 0; ti < o.ntypes; ti++) {
      perf_type t = o.types[ti];
      for (int oi = 0; oi < o.nops; oi++) {
        pattern_build(&pt, t, o.ops[oi], R.w.rank, p);
        run_line(&R, size / type_sizes[t], t, o.ops[oi], &pt, &tot);
      }
    }
  }

  if (R.w.rank == 0) {
    printf("# Out of bounds values : %lld %s\n", tot.wrong, tot.wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n", tot.nbw ? tot.busbw_sum / (double)tot.nbw : 0.0);
    printf("#\n");
    fflush(stdout);
  }
  free(pt.mine);
  free(pt.want);
  free(R.send);
  free(R.recv);
  be->finalize();
  return tot.wrong ? 1 : 0;
}
