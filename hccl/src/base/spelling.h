/*
 * spelling.h - how far apart two words are, for the "did you mean" of an unknown setting
 * (settings.c) or npu-launch option (launcher/options.c). No logging of its own; linked into
 * hccl_topo too, as hostlist.c is, so npu-launch needs no more of the library.
 */
#ifndef HCCL_SPELLING_H
#define HCCL_SPELLING_H

#include <stddef.h>

/* Edit distance between a[0..n) and b[0..m): insertions, deletions, substitutions and swaps
 * of two neighbours, letters compared without case. n and m are at most 63; a longer word is
 * HCCL_SPELLING_FAR from everything. */
#define HCCL_SPELLING_FAR 1000
int hccl__edit_distance(const char *a, size_t n, const char *b, size_t m);

#endif
