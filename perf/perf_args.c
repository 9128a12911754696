/*
 * perf_args.c - the benchmark programs' flags (contract: perf_args.h): nccl-tests' single
 * letters plus --help, each value checked against its rule with a message that names the flag,
 * the value and what to give instead; sizes with K, M and G suffixes; and the next size of the
 * sweep. Under a launcher only the job's first process prints a usage error, so a bad flag
 * reads once, not once per rank; every process exits 2.
 *
 * The flags themselves (letter, kind, range, default, usage text, which programs take them)
 * are perf_flags.h's table, which bench/torch_allreduce_perf.py reads too: the usage, the
 * getopt string, the defaults and the switch that stores a value are all made from it here.
 * What is code is each kind's check and the rules between flags (perf_parse_args' end).
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

/* -g and -t: nccl-tests' GPUs and threads per process; only 1 makes sense here. */
static void one_only(const char *prog, int c, const char *s) {
  if (strcmp(s, "1") != 0)
    usage_error(prog,
                "-%c '%s' is not supported: this benchmark runs one device and one "
                "thread per process; start one process per device instead (-%c 1)",
                c, s, c);
}

/* ---- the table (perf_flags.h) ---- */

enum flag_kind { KIND_SIZE, KIND_INT, KIND_TYPE, KIND_OP, KIND_ONE, KIND_HELP };

struct flag {
  char letter;
  enum flag_kind kind;
  const char *shown, *dflt;
  unsigned by;
  const char *help;
};

static const struct flag flags[] = {
#define PERF_FLAG(letter, field, kind, lo, hi, shown, dflt, by, help)                              \
  {letter, KIND_##kind, shown, dflt, by, help},
#include "perf_flags.h"
};
#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

/* Another usage text of a flag for some programs (PERF_FLAG_HELP). */
static const struct flag_help {
  char letter;
  unsigned by;
  const char *help;
} flag_helps[] = {
#define PERF_FLAG(...)
#define PERF_FLAG_HELP(letter, by, help) {letter, by, help},
#include "perf_flags.h"
};

/* The column of "default ..." in the usage (at least 2 spaces after the text; 3 after one
 * that reaches past the column). */
#define DEFAULT_COL 62

static void usage(FILE *f, const struct perf_backend *be) {
  fprintf(f, "Usage: %s [flags]   (one process per rank; rank 0 prints)\n", be->prog);
  for (size_t i = 0; i < NFLAGS; i++) {
    const struct flag *fl = &flags[i];
    if (!(fl->by & be->by) || fl->shown[0] == '\0') continue;
    const char *help = fl->help;
    for (size_t h = 0; h < sizeof(flag_helps) / sizeof(flag_helps[0]); h++)
      if (flag_helps[h].letter == fl->letter && (flag_helps[h].by & be->by))
        help = flag_helps[h].help;
    const char *shown = fl->shown;
    for (;;) { /* one usage line per line of help */
      size_t n = strcspn(help, "\n");
      int len = fprintf(f, "  %-10s  %.*s", shown, (int)n, help);
      shown = "";
      if (help[n] == '\0') {
        if (fl->dflt[0])
          fprintf(f, "%*sdefault %s", len <= DEFAULT_COL - 2 ? DEFAULT_COL - len : 3, "", fl->dflt);
        fputc('\n', f);
        break;
      }
      fputc('\n', f);
      help += n + 1;
    }
  }
  fputs("Loop order with all: for each size, for each type, for each op, for each root;\n"
        "each line has out-of-place then in-place. Exit code: 0 ok, 1 wrong results or a\n"
        "failed call, 2 bad flags.\n",
        f);
  if (be->usage_note) fprintf(f, "%s\n", be->usage_note);
}

/* Stores the value s of flag c (a letter of the table) after its kind's check. */
static void set_flag(int c, const char *s, const struct perf_backend *be,
                     const struct perf_coll_desc *d, struct perf_opts *o) {
  const char *prog = be->prog;
#define SET_SIZE(field, lo, hi) o->field = parse_size(prog, (char)c, s)
#define SET_INT(field, lo, hi) o->field = parse_int(prog, (char)c, s, lo, hi)
#define SET_TYPE(field, lo, hi) parse_types(prog, s, d->reduces, o)
#define SET_OP(field, lo, hi) parse_ops(prog, s, be->has_avg, o)
#define SET_ONE(field, lo, hi) one_only(prog, c, s)
#define SET_HELP(field, lo, hi) (usage(stdout, be), exit(0))
  switch (c) {
#define PERF_FLAG(letter, field, kind, lo, hi, shown, dflt, by, help)                              \
  case letter:                                                                                     \
    SET_##kind(field, lo, hi);                                                                     \
    break;
#include "perf_flags.h"
  default:
    break;
  }
}

void perf_parse_args(int argc, char **argv, const struct perf_backend *be,
                     const struct perf_coll_desc *d, struct perf_opts *o) {
  const char *prog = be->prog;
  /* The defaults are the table's, read like given values. */
  *o = (struct perf_opts){0};
  for (size_t i = 0; i < NFLAGS; i++)
    if ((flags[i].by & be->by) && flags[i].dflt[0])
      set_flag(flags[i].letter, flags[i].dflt, be, d, o);
  /* ":b:e:..." for the letters this program takes; --help is the one long flag (getopt alone
   * read it as -- and failed); the rest are nccl-tests' single letters. */
  char optstring[2 * NFLAGS + 2] = ":";
  size_t n = 1;
  for (size_t i = 0; i < NFLAGS; i++) {
    if (!(flags[i].by & be->by)) continue;
    optstring[n++] = flags[i].letter;
    if (flags[i].kind != KIND_HELP) optstring[n++] = ':';
  }
  optstring[n] = '\0';
  static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int seen_f = 0, seen_i = 0, c;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
    switch (c) {
    case ':':
      usage_error(prog, "flag -%c needs a value", optopt);
    case '?':
      if (optopt >= 0x20 && optopt < 0x7f && strncmp(argv[optind - 1], "--", 2) != 0)
        usage_error(prog, "unknown flag -%c", optopt);
      usage_error(prog, "unknown flag '%s'", argv[optind - 1]);
    default:
      set_flag(c, optarg, be, d, o);
      seen_f |= c == 'f';
      seen_i |= c == 'i';
      if (c == 'i' && o->step_bytes == 0)
        usage_error(prog, "-i '%s' is not valid: the increment must be at least 1 byte", optarg);
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
