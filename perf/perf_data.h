/*
 * perf_data.h - the checking data of the benchmarks (internal to perf/): the values each rank
 * puts in its input and the values a result must hold, kept as short periodic tables so that
 * filling and checking a buffer of any size is memcpy/memcmp over windows of a table. The
 * values themselves are described at the top of perf_data.c.
 */
#ifndef PERF_DATA_H
#define PERF_DATA_H

#include <stddef.h>

#include "perf_common.h"

/* Element x of a sequence is element (x + shift) % period of data. data holds 2 * period
 * elements, so a window of up to period elements from any start below period is contiguous. */
struct perf_seq {
  const unsigned char *data;
  size_t period, shift, es;
};

/* The tables of one rank for one (type, op) of a reduction or one type of a data-moving
 * collective. Built per line; freed once. */
struct perf_tables {
  int rank, nranks;
  int reduction; /* which build filled them last */
  size_t es;
  size_t red_period;          /* 105 * nranks (see perf_data.c) */
  unsigned char *mine, *want; /* 2 * red_period elements each */
  unsigned char *column;      /* one element of every rank, while a table is built */
  unsigned char copy[2 * 61 * 8];
  unsigned char sentinel[2 * 64 * 8];
};

/* Allocates the tables of rank of nranks; 0 on success, -1 when out of memory. */
int perf_tables_init(struct perf_tables *tb, int rank, int nranks);
void perf_tables_free(struct perf_tables *tb);
/* Fills the tables for a reduction (allreduce, reduce_scatter, reduce) of type t with op. */
void perf_tables_reduction(struct perf_tables *tb, perf_type t, perf_op op);
/* Fills the tables for a collective that moves data of type t without reducing it. */
void perf_tables_copy(struct perf_tables *tb, perf_type t);

/* The input rank `owner` puts in its send buffer. For a reduction only this rank's own input
 * is known (owner must be tb->rank). */
struct perf_seq perf_seq_input(const struct perf_tables *tb, int owner);
/* The reduction of every rank's input (reductions only). */
struct perf_seq perf_seq_result(const struct perf_tables *tb);
/* What a receive buffer holds before the call: SENTINEL bytes, which no value ever has. */
struct perf_seq perf_seq_untouched(const struct perf_tables *tb);

#define PERF_SENTINEL_BYTE 0xA5

/* Writes elements from .. from + n - 1 of s to buf. */
void perf_fill(void *buf, size_t n, const struct perf_seq *s, size_t from);
/* The number of elements of buf[0 .. n) that differ from elements from .. from + n - 1 of s. */
long long perf_count_wrong(const void *buf, size_t n, const struct perf_seq *s, size_t from);

#endif
