/*
 * zcopy.c - zero-copy allreduce, reduce-scatter, allgather and broadcast, for a group on one
 * server whose every member passes buffers from HcclMemAlloc (base/mem_region.c), as NCCL's
 * registered-buffer kernels. One path serves the four:
 *
 *   1. exchange: every member learns every member's send and receive windows (a Bruck
 *      allgather of 64-byte descriptors, log2(n) rounds of messages on the links). Having
 *      them also means every member has entered the call: its input is ready and its output
 *      may be written. If any member's buffers are not shared memory, every member sees it
 *      and the caller runs another algorithm (*ran = false), so all agree without another round.
 *      A round's message that repeats the last call's goes empty (struct hccl_zmemo, below).
 *   2. each member maps the others' windows (the link's map_window, kept for later calls) and
 *      moves its own share, chunk by chunk, so that a chunk read once is still in cache for
 *      the copies that follow it:
 *        allreduce       reduces its block (the ring's block cut) from the n inputs into its
 *                        own output, then copies it into the n-1 other outputs;
 *        reduce-scatter  reduces its block of the n inputs into its own output;
 *        allgather       copies its input into its block of every output;
 *        broadcast       copies its block (the even cut) of the root's buffer into every
 *                        other member's buffer.
 *      Every input byte is read once in all and every output byte written once, the floor
 *      of memory traffic. The pulling forms (each member copying what it needs: the whole
 *      root buffer, or every peer's block) would read each input byte n-1 times instead, and
 *      a broadcast's root would sit idle; pushing spreads the work over all n members.
 *   3. a dissemination barrier: nobody returns while another may still write its output or
 *      read its input.
 *
 * A block is reduced by one member, in the ring's order (ring.c's reduce-scatter: the member
 * after the owner on the ring first, the owner last, with prim_step's operand order), so the
 * result is the ring's bit for bit, whichever path ran. In place is safe: a block of an input
 * is read only by the member that owns it, which overwrites it (allreduce, reduce-scatter)
 * only after reading that chunk; an allgather's in-place input is its owner's block, which
 * only the owner writes and never onto itself; a broadcast never writes the root's buffer.
 * Waits happen only in the exchange and the barrier, ordinary messages with the call's stamp
 * and deadline.
 */
#include <string.h>

#include "algo.h"
#include "log.h"
#include "mem_region.h"
#include "zview.h"

/* Bruck allgather of one descriptor per member, indexed by ring position. */
static HcclResult exchange(const struct hccl_group *g, const struct hccl_prim *p,
                           struct zdesc *by_pos) {
  uint32_t np = g->n, pos = g->pos[g->me];
  struct hccl_zmemo *m = g->zmemo && g->zmemo->n == np ? g->zmemo : NULL;
  struct zdesc tmp[ZCOPY_MAX_MEMBERS];
  /* tmp[i] = descriptor of position pos + i (mod n); known for i < have. */
  tmp[0] = by_pos[pos];
  uint32_t have = 1;
  struct hccl_prim b = *p;
  b.esz = 1;
  b.reduce = NULL;
  for (uint32_t k = 1, s = 0; k < np; k <<= 1, s++) {
    struct hccl_link *to = hccl__group_link(g, hccl__group_at(g, (int64_t)pos - k));
    struct hccl_link *from = hccl__group_link(g, hccl__group_at(g, (int64_t)pos + k));
    uint32_t n = have < np - have ? have : np - have;
    size_t bytes = n * sizeof(struct zdesc);
    struct zdesc *sent = m ? m->sent + have - 1 : NULL, *got = m ? m->got + have - 1 : NULL;
    bool same = sent && m->to[s] == to->peer && memcmp(sent, tmp, bytes) == 0;
    HCCL_TRY(hccl__prim_step(&b, NULL, to, tmp, NULL, same ? 0 : bytes));
    if (sent && !same) {
      memcpy(sent, tmp, bytes);
      m->to[s] = to->peer;
    }
    bool empty;
    HCCL_TRY(hccl__prim_recv_or_empty(&b, from, tmp + have, bytes, &empty));
    if (empty && (!got || m->from[s] != from->peer))
      return hccl__fail(HCCL_E_INTERNAL,
                        "%s on rank %u: rank %u sent an empty exchange message where no earlier "
                        "one of its was kept",
                        p->w->what, p->w->rank, from->peer);
    if (empty) memcpy(tmp + have, got, bytes);
    else if (got) {
      memcpy(got, tmp + have, bytes);
      m->from[s] = from->peer;
    }
    have += n;
  }
  for (uint32_t i = 0; i < np; i++)
    by_pos[(pos + i) % np] = tmp[i];
  return HCCL_SUCCESS;
}

HcclResult hccl__zview_windows(const struct hccl_group *g, const struct hccl_prim *p,
                               const void *send, size_t send_bytes, void *recv, size_t recv_bytes,
                               struct zdesc by_member[], bool *ok) {
  uint32_t np = g->n;
  struct zdesc d[ZCOPY_MAX_MEMBERS];
  struct zdesc *mine = &d[g->pos[g->me]];
  memset(mine, 0, sizeof(*mine));
  bool usable = hccl__mem_window(send, send_bytes, &mine->send) &&
                hccl__mem_window(recv, recv_bytes, &mine->recv);
  for (uint32_t k = 0; usable && k < np; k++)
    if (k != g->me && !hccl__prim_can_map(hccl__group_link(g, k))) usable = false;
  if (!usable) mine->send.fd = mine->recv.fd = -1;
  *ok = false;
  HCCL_TRY(exchange(g, p, d));
  for (uint32_t i = 0; i < np; i++)
    if (d[i].send.fd < 0 || d[i].recv.fd < 0) return HCCL_SUCCESS;
  for (uint32_t k = 0; k < np; k++)
    by_member[k] = d[g->pos[k]];
  *ok = true;
  return HCCL_SUCCESS;
}

HcclResult hccl__zview_open(const struct hccl_group *g, const struct hccl_prim *p, const void *send,
                            size_t send_bytes, void *recv, size_t recv_bytes, struct zview *v,
                            bool *ok) {
  struct zdesc d[ZCOPY_MAX_MEMBERS];
  HCCL_TRY(hccl__zview_windows(g, p, send, send_bytes, recv, recv_bytes, d, ok));
  if (!*ok) return HCCL_SUCCESS;
  *ok = false;
  for (uint32_t k = 0; k < g->n; k++) {
    if (k == g->me) {
      v->in[k] = send;
      v->out[k] = recv;
      continue;
    }
    struct hccl_link *l = hccl__group_link(g, k);
    void *a, *b;
    HCCL_TRY(hccl__prim_map(l, &d[k].send, &a));
    HCCL_TRY(hccl__prim_map(l, &d[k].recv, &b));
    v->in[k] = a;
    v->out[k] = b;
  }
  *ok = true;
  return HCCL_SUCCESS;
}

void hccl__zview_reduce(const struct hccl_group *g, const struct hccl_prim *p,
                        const char *const in[], uint32_t owner, size_t off, char *dst, size_t c) {
  int64_t pos = g->pos[owner];
  const void *src[ZCOPY_MAX_MEMBERS];
  for (uint32_t k = 0; k < g->n; k++)
    src[k] = in[hccl__group_at(g, pos + k + 1)] + off;
  hccl__red_fold(p->red, p->finish, dst, src, g->n, c);
}

/* Copies bytes from src to byte offset off of every member's output but member skip's (where
 * src already is: the own block of an allreduce or of an in-place allgather, the root's
 * buffer; n skips none). */
static void spread(uint32_t n, char *const out[], size_t off, const char *src, size_t bytes,
                   uint32_t skip) {
  for (uint32_t k = 0; k < n; k++)
    if (k != skip) memcpy(out[k] + off, src, bytes);
}

HcclResult hccl__zcopy(const struct hccl_group *g, const struct hccl_prim *p,
                       const struct hccl_zcopy_call *z, bool *ran) {
  uint32_t np = g->n, me = g->me;
  size_t es = p->esz, send_bytes, recv_bytes;
  *ran = false;
  if (np < 2 || np > ZCOPY_MAX_MEMBERS) return HCCL_SUCCESS;
  hccl__zcopy_shape(z, np, es, &send_bytes, &recv_bytes);
  struct zview v;
  bool ok;
  HCCL_TRY(hccl__zview_open(g, p, z->send, send_bytes, z->recv, recv_bytes, &v, &ok));
  if (!ok) return HCCL_SUCCESS;

  /* This member's share: elements [first, first + len) of the n-block buffer (the inputs of
   * an allreduce or reduce-scatter, the outputs of an allgather, every broadcast buffer);
   * element lo of the share is element lo of its own block-sized buffer (a reduce-scatter's
   * output, an allgather's input). */
  size_t first = (size_t)me * z->count, len = z->count;
  if (z->kind == HCCL_ZCOPY_ALLREDUCE || z->kind == HCCL_ZCOPY_BROADCAST)
    len = hccl__even_block(z->count, np, me, &first);
  /* An allgather in place: the input is the own block of the output. */
  uint32_t ag_skip = (const char *)z->send == v.out[me] + first * es ? me : np;
  size_t per = hccl__zview_per(g, p);
  if (z->kind == HCCL_ZCOPY_ALLREDUCE && z->between) {
    /* Reduce the whole block, hand it over, then spread it. No barrier is needed before the
     * spread: only this member reads its block of any input (in place too). `between`
     * finishes the reduction. */
    struct hccl_prim part = hccl__prim_partial(p);
    for (size_t lo = 0; lo < len; lo += per) {
      size_t c = len - lo < per ? len - lo : per, at = (first + lo) * es;
      hccl__zview_reduce(g, &part, v.in, me, at, v.out[me] + at, c);
    }
    HCCL_TRY(z->between(z->between_arg, v.out[me] + first * es, len));
    for (size_t lo = 0; lo < len; lo += per) {
      size_t c = len - lo < per ? len - lo : per, at = (first + lo) * es;
      spread(np, v.out, at, v.out[me] + at, c * es, me);
    }
    *ran = true;
    return hccl__dissemination_barrier(g, p);
  }
  for (size_t lo = 0; lo < len; lo += per) {
    size_t c = len - lo < per ? len - lo : per, at = (first + lo) * es, own = lo * es;
    switch (z->kind) {
    case HCCL_ZCOPY_ALLREDUCE:
      hccl__zview_reduce(g, p, v.in, me, at, v.out[me] + at, c);
      spread(np, v.out, at, v.out[me] + at, c * es, me);
      break;
    case HCCL_ZCOPY_REDUCE_SCATTER:
      hccl__zview_reduce(g, p, v.in, me, at, v.out[me] + own, c);
      break;
    case HCCL_ZCOPY_ALLGATHER:
      spread(np, v.out, at, v.in[me] + own, c * es, ag_skip);
      break;
    case HCCL_ZCOPY_BROADCAST:
      spread(np, v.out, at, v.in[z->root] + at, c * es, z->root);
      break;
    default: /* HCCL_ZCOPY_NKINDS counts the kinds */
      break;
    }
  }
  *ran = true;
  return hccl__dissemination_barrier(g, p);
}

