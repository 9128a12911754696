/*
 * zview.h - what the zero-copy collectives (zcopy.c) and the staged ones (staged.c) share:
 * every member's buffers mapped into this process after one descriptor exchange, and the
 * reduction of one block in the ring's order straight from those mappings; and the memo of a
 * group's last exchange (struct hccl_zmemo), which the group carries.
 */
#ifndef HCCL_ZVIEW_H
#define HCCL_ZVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "group.h"
#include "mem_region.h"
#include "prims.h"

/* Bytes per chunk (reduce.h's fold chunk), never more than the group's scratch (chunk_bytes, at
 * least 4 KiB), where a reduction keeps its partial result; members a view holds. */
#define ZCOPY_CHUNK_BYTES HCCL_FOLD_CHUNK_BYTES
#define ZCOPY_MAX_MEMBERS HCCL_FOLD_MAX_INPUTS

static inline size_t hccl__zview_chunk(const struct hccl_group *g) {
  return ZCOPY_CHUNK_BYTES < g->chunk_bytes ? ZCOPY_CHUNK_BYTES : g->chunk_bytes;
}

/* Elements per chunk of a call: the chunk's bytes over the element size (a partial result in
 * the scratch has the type's size; float16 and bfloat16 keep theirs in registers). */
static inline size_t hccl__zview_per(const struct hccl_group *g, const struct hccl_prim *p) {
  return hccl__zview_chunk(g) / p->esz;
}

/* One member's windows, as the exchange (zcopy.c) carries them. */
struct zdesc {
  struct hccl_window send, recv;
};

/* A group's last exchange, kept for the next: a member's buffers are mostly the same from call
 * to call (a training loop's tensors, a benchmark's), and so then is every message of the
 * exchange. A message the same as the one sent on the same step to the same member last time
 * goes empty, and its receiver takes the copy it kept: the hop then crosses one cache line
 * (the slot's record, shm.c) instead of that and the descriptors' lines (what it saved:
 * docs/performance.md, "Measurements behind the code"). Both ends of a
 * step update their copies on every message, and every exchange of a group runs every step on
 * every member, so the two copies agree as the messages would; the peer's rank is checked all
 * the same. zcopy.c reads and writes it; group.c makes it with the group (struct hccl_group's
 * zmemo) and frees it, so that making a group calls nothing of zcopy.c's. */
#define ZCOPY_MAX_STEPS 6 /* ceil(log2(ZCOPY_MAX_MEMBERS)) */
struct hccl_zmemo {
  uint32_t n;
  uint32_t to[ZCOPY_MAX_STEPS], from[ZCOPY_MAX_STEPS]; /* global ranks; UINT32_MAX: none yet */
  /* Step s's message covers descriptors [have - 1, have - 1 + m) of these, as in exchange(). */
  struct zdesc sent[ZCOPY_MAX_MEMBERS - 1], got[ZCOPY_MAX_MEMBERS - 1];
};

/* Every member's send and receive buffer as this process sees them (member index). */
struct zview {
  const char *in[ZCOPY_MAX_MEMBERS];
  char *out[ZCOPY_MAX_MEMBERS];
};

/* The exchange (zcopy.c's step 1) and the mappings: *ok = true and v filled when every
 * member's buffers are HcclMemAlloc memory that every link can map; *ok = false on every member
 * alike otherwise. Either way every member has entered the call when it returns. */
HcclResult hccl__zview_open(const struct hccl_group *g, const struct hccl_prim *p, const void *send,
                            size_t send_bytes, void *recv, size_t recv_bytes, struct zview *v,
                            bool *ok);

/* The exchange alone: by_member[k] = member k's windows, *ok as hccl__zview_open says, for a
 * caller that keeps them and maps them itself (oneshot.c: its areas, once per communicator). */
HcclResult hccl__zview_windows(const struct hccl_group *g, const struct hccl_prim *p,
                               const void *send, size_t send_bytes, void *recv, size_t recv_bytes,
                               struct zdesc by_member[], bool *ok);

/* dst = the c elements at byte offset off of every input, reduced in the ring's order for the
 * block of member `owner`: acc = in[ring pos+1]; acc = in[ring pos+k] (op) acc for k = 2..n,
 * the owner's own input last, with the call's finishing kernel when p->finish
 * (hccl__red_fold). Partial results stay in registers (dst, which in place is the owner's
 * input, is written once, after that input's element is read); a float16 or bfloat16 sum or
 * product keeps them in float32 and rounds once, at the end. */
void hccl__zview_reduce(const struct hccl_group *g, const struct hccl_prim *p,
                        const char *const in[], uint32_t owner, size_t off, char *dst, size_t c);

#endif
