/*
 * prims.c - one-message steps over the transport ops table, and the whole-buffer loops built
 * from them. See prims.h.
 */
#include "prims.h"

#include <string.h>

#include "comm.h"
#include "log.h"

HcclResult hccl__prim_step(const struct hccl_prim *p, struct hccl_link *recv_from,
                           struct hccl_link *send_to, const void *local, void *out, size_t bytes) {
  const void *src = NULL;
  void *dst = NULL;
  size_t count = bytes / p->esz;
  if (recv_from) {
    size_t got;
    HCCL_TRY(recv_from->ops->recv_acquire(recv_from, &src, &got, p->w));
    if (got != bytes)
      return hccl__fail(HCCL_E_INTERNAL,
                        "%s on rank %u: rank %u sent a message of %zu bytes where %zu were "
                        "expected; every rank must make the same calls with the same counts",
                        p->w->what, p->w->comm->rank, recv_from->peer, got, bytes);
  }
  if (send_to) HCCL_TRY(send_to->ops->send_acquire(send_to, &dst, p->w));

  if (bytes == 0) {
    /* A zero-byte message still keeps both sides in step. */
  } else if (src && local) {
    /* Reduce once, into whichever destination exists, then copy to the other. */
    void *first = out ? out : dst;
    if (first) p->reduce(first, local, src, count);
    if (out && dst) memcpy(dst, out, bytes);
  } else {
    const void *v = src ? src : local;
    if (out && out != v) memcpy(out, v, bytes);
    if (dst) memcpy(dst, v, bytes);
  }

  if (send_to) send_to->ops->send_commit(send_to, bytes);
  if (recv_from) recv_from->ops->recv_release(recv_from);
  return HCCL_SUCCESS;
}

static size_t chunk_of(const struct hccl_prim *p, const struct hccl_link *l) {
  return l->slot_bytes / p->esz * p->esz;
}

HcclResult hccl__prim_send(const struct hccl_prim *p, struct hccl_link *to, const void *buf,
                           size_t bytes) {
  size_t c = chunk_of(p, to);
  size_t off = 0;
  do {
    size_t n = bytes - off < c ? bytes - off : c;
    HCCL_TRY(hccl__prim_step(p, NULL, to, (const char *)buf + off, NULL, n));
    off += n;
  } while (off < bytes);
  return HCCL_SUCCESS;
}

HcclResult hccl__prim_recv(const struct hccl_prim *p, struct hccl_link *from, void *buf,
                           size_t bytes) {
  size_t c = chunk_of(p, from);
  size_t off = 0;
  do {
    size_t n = bytes - off < c ? bytes - off : c;
    HCCL_TRY(hccl__prim_step(p, from, NULL, NULL, (char *)buf + off, n));
    off += n;
  } while (off < bytes);
  return HCCL_SUCCESS;
}

HcclResult hccl__prim_exchange(const struct hccl_prim *p, struct hccl_link *l, const void *sbuf,
                               size_t send_bytes, const void *local, void *out, size_t recv_bytes) {
  size_t c = chunk_of(p, l);
  size_t ns = send_bytes ? (send_bytes + c - 1) / c : 1;
  size_t nr = recv_bytes ? (recv_bytes + c - 1) / c : 1;
  size_t n = ns > nr ? ns : nr;
  for (size_t i = 0; i < n; i++) {
    if (i < ns) {
      size_t off = i * c, len = send_bytes - off < c ? send_bytes - off : c;
      HCCL_TRY(hccl__prim_step(p, NULL, l, (const char *)sbuf + off, NULL, len));
    }
    if (i < nr) {
      size_t off = i * c, len = recv_bytes - off < c ? recv_bytes - off : c;
      HCCL_TRY(hccl__prim_step(p, l, NULL, local ? (const char *)local + off : NULL,
                               (char *)out + off, len));
    }
  }
  return HCCL_SUCCESS;
}
