/*
 * perf_args.c - the benchmark programs' flags (contract: perf_args.h): nccl-tests' single
 * letters plus --help, each value checked against its rule with a message that names the flag,
 * the value and what to give instead; sizes with K, M and G suffixes; and the next size of the
 * sweep. Under a launcher only the job's first process prints a usage error, so a bad flag
 * reads once, not once per rank; every process exits 2.
 */
#include "perf_args.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
          "  -d <type>   int8, uint8, int16, uint16, int32, uint32, int64, uint64, half,\n"
          "              bfloat16, float, double or all                  default float\n"
          "  -o <op>     sum, prod, max, min, avg or all (reductions)    default sum\n"
          "  -r <rank>   root of broadcast and reduce; -1: each in turn  default 0\n"
          "  -a <0-3>    time across ranks: 0 rank 0, 1 average, 2 min, 3 max   default 1\n"
          "  -z <0|1>    1: each call blocks; 0: the -n calls are queued, then waited for\n"
          "              together                                        default 1\n"
          "  -R <0|1>    1: buffers from the library's allocator (HcclMemAlloc, MPI_Alloc_mem),\n"
          "              which can run zero-copy; 0: ordinary memory        default 0\n"
          "  -g 1, -t 1  accepted for nccl-tests command lines (one device, one thread)\n"
          "  -h, --help  this help\n"
          "Loop order with all: for each size, for each type, for each op, for each root;\n"
          "each line has out-of-place then in-place. Exit code: 0 ok, 1 wrong results or a\n"
          "failed call, 2 bad flags.\n",
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
    fprintf(stderr, "\nRun '%s --help' for the list of flags.\n", prog);
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

#define TYPE_LIST                                                                                  \
  "int8, uint8, int16, uint16, int32, uint32, int64, uint64, half, bfloat16, float, double"

static void parse_types(const char *prog, const char *s, int reduces, struct perf_opts *o) {
  o->ntypes = 0;
  for (int t = 0; t < PERF_NTYPES; t++)
    if (strcmp(s, "all") == 0 || strcmp(s, perf_type_name(t)) == 0) o->types[o->ntypes++] = t;
  if (o->ntypes == 0)
    usage_error(prog, "-d '%s' is not a type this benchmark %s: expected " TYPE_LIST " or all", s,
                reduces ? "reduces" : "moves");
}

/* -o all runs avg only when the backend has it. */
static void parse_ops(const char *prog, const char *s, int has_avg, struct perf_opts *o) {
  o->nops = 0;
  for (int op = 0; op < PERF_NOPS; op++)
    if ((strcmp(s, "all") == 0 && (op != PERF_AVG || has_avg)) || strcmp(s, perf_op_name(op)) == 0)
      o->ops[o->nops++] = op;
  if (o->nops == 1 && o->ops[0] == PERF_AVG && !has_avg)
    usage_error(prog,
                "-o 'avg' is not available: the library this program was built with has no "
                "average op (hccl.h without HCCL_HAVE_REDUCE_AVG); expected sum, prod, max, min "
                "or all");
  if (o->nops == 0)
    usage_error(prog, "-o '%s' is not an op: expected sum, prod, max, min, avg or all", s);
}

void perf_parse_args(int argc, char **argv, const struct perf_backend *be,
                     const struct perf_coll_desc *d, struct perf_opts *o) {
  const char *prog = be->prog;
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
                          .ops = {PERF_SUM},
                          .root = 0};
  /* --help is the one long flag (getopt alone read it as -- and failed); the rest are
   * nccl-tests' single letters. */
  static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int seen_f = 0, seen_i = 0, c;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:d:o:r:a:z:R:g:t:h", longopts, NULL)) !=
         -1) {
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
      parse_types(prog, optarg, d->reduces, o);
      break;
    case 'o':
      parse_ops(prog, optarg, be->has_avg, o);
      break;
    case 'r':
      o->root = (int)parse_int(prog, 'r', optarg, -1, INT_MAX);
      break;
    case 'a':
      o->avg_mode = (int)parse_int(prog, 'a', optarg, 0, 3);
      break;
    case 'z':
      o->blocking = (int)parse_int(prog, 'z', optarg, 0, 1);
      break;
    case 'R':
      o->registered = (int)parse_int(prog, 'R', optarg, 0, 1);
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
      if (optopt >= 0x20 && optopt < 0x7f && strncmp(argv[optind - 1], "--", 2) != 0)
        usage_error(prog, "unknown flag -%c", optopt);
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

size_t perf_next_size(const struct perf_opts *o, size_t size) {
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
