/*
 * perf_flags.h - the benchmark programs' flags, once, for all three readers: perf_args.c (the
 * driver of allreduce_perf and the other libhccl programs, their MPI twins and the oneCCL twin
 * bench/ccl_allreduce_perf.cpp) includes it as an X-macro list; bench/torch_allreduce_perf.py
 * reads this file's text (perf_flags.py). A flag added here is a flag of every program the row
 * names, with its usage line, its check and its default; tests/perf/test_flags.sh fails when a
 * program takes a letter that is not here, or refuses one that is.
 *
 * PERF_FLAG(letter, field, kind, lo, hi, shown, dflt, by, help)
 *   letter  the flag, a character literal (-b)
 *   field   where perf_args.c stores it in struct perf_opts (INT and SIZE kinds; else "none")
 *   kind    SIZE: bytes with an optional K, M or G (powers of 1024); INT: an integer from lo to
 *           hi; TYPE: a type name or all (-d); OP: an op name or all (-o); ONE: only "1"
 *           (nccl-tests' -g and -t); HELP: no value, prints the usage
 *   lo, hi  INT's range (plain numbers: the Python reader does no C arithmetic)
 *   shown   the usage's left column ("" for a flag shown on the line before: -t beside -g)
 *   dflt    the default as a user would type it, "" for none; it is parsed like a given value,
 *           so the usage and the program cannot disagree
 *   by      the programs that take it (perf_common.h): PERF_BY_HCCL (allreduce_perf ...),
 *           PERF_BY_MPI (the MPI twins), PERF_BY_CCL (ccl_allreduce_perf), PERF_BY_TORCH
 *           (torch_allreduce_perf.py), or PERF_BY_ALL; a program refuses the other letters as
 *           unknown flags
 *   help    the usage text; "\n" starts a continuation line; "default <dflt>" goes after the
 *           last line
 * PERF_FLAG_HELP(letter, by, help): another usage text of a flag for the programs in by, where
 *   it behaves differently there (the flag itself, its check and default, stay the row's).
 *
 * The rules between flags (-f or -i, -e >= -b, -i >= 1) are code: perf_args.c and
 * torch_allreduce_perf.py. Each row is one line with plain literals (no C arithmetic, no
 * macros but PERF_BY_*): perf_flags.py reads the rows line by line and refuses one it cannot
 * read.
 */
#ifndef PERF_FLAG_HELP
#define PERF_FLAG_HELP(letter, by, help)
#endif

/* clang-format off */
PERF_FLAG('b', min_bytes, SIZE, 0, 0, "-b <bytes>", "32M", PERF_BY_ALL, "smallest size (K, M, G = powers of 1024)")
PERF_FLAG('e', max_bytes, SIZE, 0, 0, "-e <bytes>", "32M", PERF_BY_ALL, "largest size, >= -b")
PERF_FLAG('f', step_factor, INT, 2, 1073741824, "-f <n>", "2", PERF_BY_ALL, "multiply the size by n (>= 2) each step")
PERF_FLAG('i', step_bytes, SIZE, 0, 0, "-i <bytes>", "", PERF_BY_ALL, "add this many bytes each step instead of -f")
PERF_FLAG('n', iters, INT, 1, 100000000, "-n <n>", "20", PERF_BY_ALL, "timed iterations per line (>= 1)")
PERF_FLAG('w', warmup, INT, 0, 100000000, "-w <n>", "1", PERF_BY_ALL, "warm-up iterations (>= 0)")
PERF_FLAG('c', check, INT, 0, 1, "-c <0|1>", "1", PERF_BY_ALL, "check the results")
PERF_FLAG('d', none, TYPE, 0, 0, "-d <type>", "float", PERF_BY_ALL, "int8, uint8, int16, uint16, int32, uint32, int64, uint64, half,\nbfloat16, float, double or all")
PERF_FLAG('o', none, OP, 0, 0, "-o <op>", "sum", PERF_BY_ALL, "sum, prod, max, min, avg or all (reductions)")
PERF_FLAG('r', root, INT, -1, 2147483647, "-r <rank>", "0", PERF_BY_HCCL | PERF_BY_MPI, "root of broadcast and reduce; -1: each in turn")
PERF_FLAG('a', avg_mode, INT, 0, 3, "-a <0-3>", "1", PERF_BY_ALL, "time across ranks: 0 rank 0, 1 average, 2 min, 3 max")
PERF_FLAG('z', blocking, INT, 0, 1, "-z <0|1>", "1", PERF_BY_ALL, "1: each call blocks; 0: the -n calls are queued, then waited for\ntogether")
PERF_FLAG('R', registered, INT, 0, 1, "-R <0|1>", "0", PERF_BY_HCCL | PERF_BY_MPI, "1: buffers from the library's allocator (HcclMemAlloc, MPI_Alloc_mem),\nwhich can run zero-copy; 0: ordinary memory")
PERF_FLAG('g', none, ONE, 0, 0, "-g 1, -t 1", "", PERF_BY_ALL, "accepted for nccl-tests command lines (one device, one thread)")
PERF_FLAG('t', none, ONE, 0, 0, "", "", PERF_BY_ALL, "")
PERF_FLAG('h', none, HELP, 0, 0, "-h, --help", "", PERF_BY_ALL, "this help")

PERF_FLAG_HELP('d', PERF_BY_TORCH, "int8, uint8, int16, uint16, int32, uint32, int64, uint64, half,\nbfloat16, float, double, bool (max, min), complex64, complex128\n(sum, avg) or all; uint16/32/64 where torch has them")
PERF_FLAG_HELP('o', PERF_BY_CCL | PERF_BY_TORCH, "sum, prod, max, min, avg or all")
PERF_FLAG_HELP('z', PERF_BY_CCL | PERF_BY_TORCH, "accepted and shown in the header; every call blocks")
/* clang-format on */

#undef PERF_FLAG
#undef PERF_FLAG_HELP
