/*
 * zcopy.c - zero-copy allreduce, for a group on one server whose every member passes buffers
 * from HcclMemAlloc (core/mem.c), as NCCL's registered-buffer kernels.
 *
 *   1. exchange: every member learns every member's send and receive windows (a Bruck
 *      allgather of 64-byte descriptors, log2(n) rounds of messages on the links). Having
 *      them also means every member has entered the call: its input is ready and its output
 *      may be written. If any member's buffers are not shared memory, every member sees it
 *      and the caller runs the ring instead (*ran = false), so all agree without another round.
 *   2. each member maps the others' windows (the link's map_window, kept for later calls) and,
 *      for its own block (the ring's block k), chunk by chunk: reduces the n inputs into its
 *      own output, then copies the chunk, still in cache, into every other member's output.
 *      Per rank that reads the input once and writes the output once, the memory limit's
 *      count, where the ring reads and writes each byte about five times.
 *   3. a dissemination barrier: nobody returns while another may still write its output or
 *      read its input.
 * Each block is reduced by one member in one order, so every rank gets the same bits. In
 * place is safe: a block of any input is read only by the member that owns it, and overwritten
 * only by that member after reading it. Waits happen only in the exchange and the barrier,
 * which are ordinary messages with the call's stamp and deadline.
 */
#include <string.h>

#include "algo.h"
#include "log.h"
#include "mem.h"

/* Elements per chunk: the n inputs' pieces stream through while the output chunk stays in L1/L2. */
#define ZCOPY_CHUNK_BYTES (32u << 10)
#define ZCOPY_MAX_MEMBERS 64

struct zdesc {
  struct hccl_window send, recv;
};

/* Bruck allgather of one descriptor per member, indexed by ring position. */
static HcclResult exchange(const struct hccl_group *g, const struct hccl_prim *p,
                           struct zdesc *by_pos) {
  uint32_t np = g->n, pos = g->pos[g->me];
  struct zdesc tmp[ZCOPY_MAX_MEMBERS];
  /* tmp[i] = descriptor of position pos + i (mod n); known for i < have. */
  tmp[0] = by_pos[pos];
  uint32_t have = 1;
  struct hccl_prim b = *p;
  b.esz = 1;
  b.reduce = NULL;
  for (uint32_t k = 1; k < np; k <<= 1) {
    struct hccl_link *to = hccl__group_link(g, hccl__group_at(g, (int64_t)pos - k));
    struct hccl_link *from = hccl__group_link(g, hccl__group_at(g, (int64_t)pos + k));
    uint32_t n = have < np - have ? have : np - have;
    HCCL_TRY(hccl__prim_step(&b, NULL, to, tmp, NULL, n * sizeof(struct zdesc)));
    HCCL_TRY(hccl__prim_step(&b, from, NULL, NULL, tmp + have, n * sizeof(struct zdesc)));
    have += n;
  }
  for (uint32_t i = 0; i < np; i++)
    by_pos[(pos + i) % np] = tmp[i];
  return HCCL_SUCCESS;
}

HcclResult hccl__zcopy_allreduce(const struct hccl_group *g, const struct hccl_prim *p,
                                 const void *send, void *recv, size_t count, bool *ran) {
  uint32_t np = g->n;
  size_t es = p->esz, bytes = count * es;
  *ran = false;
  if (np < 2 || np > ZCOPY_MAX_MEMBERS) return HCCL_SUCCESS;
  struct zdesc d[ZCOPY_MAX_MEMBERS];
  struct zdesc *mine = &d[g->pos[g->me]];
  memset(mine, 0, sizeof(*mine));
  bool ok = hccl__mem_window(send, bytes, &mine->send) && hccl__mem_window(recv, bytes, &mine->recv);
  for (uint32_t k = 0; ok && k < np; k++)
    if (k != g->me && !hccl__group_link(g, k)->ops->map_window) ok = false;
  if (!ok) mine->send.fd = mine->recv.fd = -1;
  HCCL_TRY(exchange(g, p, d));
  for (uint32_t i = 0; i < np; i++)
    if (d[i].send.fd < 0 || d[i].recv.fd < 0) return HCCL_SUCCESS;

  const char *in[ZCOPY_MAX_MEMBERS];
  char *out[ZCOPY_MAX_MEMBERS];
  for (uint32_t k = 0; k < np; k++) {
    if (k == g->me) {
      in[k] = send;
      out[k] = recv;
      continue;
    }
    struct hccl_link *l = hccl__group_link(g, k);
    const struct zdesc *z = &d[g->pos[k]];
    void *a, *b;
    HCCL_TRY(hccl__prim_map(l, &z->send, &a));
    HCCL_TRY(hccl__prim_map(l, &z->recv, &b));
    in[k] = a;
    out[k] = b;
  }

  /* This member's block, as the ring cuts it. */
  uint32_t me = g->me;
  size_t first, n = hccl__even_block(count, np, me, &first);
  size_t per = ZCOPY_CHUNK_BYTES / es;
  uint32_t other = me + 1 < np ? me + 1 : 0;
  for (size_t lo = 0; lo < n; lo += per) {
    size_t c = n - lo < per ? n - lo : per, off = (first + lo) * es;
    char *dst = out[me] + off;
    /* The own input first: in place, dst is that input. */
    p->reduce(dst, in[me] + off, in[other] + off, c);
    for (uint32_t k = 0; k < np; k++)
      if (k != me && k != other) p->reduce(dst, dst, in[k] + off, c);
    for (uint32_t k = 0; k < np; k++)
      if (k != me) memcpy(out[k] + off, dst, c * es);
  }
  *ran = true;
  return hccl__dissemination_barrier(g, p);
}
