/*
 * prims.c - one-message steps over the transport ops table, and the whole-buffer loops built
 * from them. See prims.h.
 */
#include "prims.h"

#include <string.h>

#include "fingerprint.h"
#include "log.h"

/* The next message from `from`, of `bytes` or (where empty_ok) of none: its stamp checked. */
static HcclResult take(const struct hccl_prim *p, struct hccl_link *from, size_t bytes,
                       bool empty_ok, const void **src, size_t *got) {
  struct hccl_stamp st;
  HCCL_TRY(from->ops->recv_acquire(from, src, got, &st, p->w));
  if (!hccl__fp_match(&p->stamp, &st))
    return hccl__fp_mismatch(p->w->rank, from->peer, &p->stamp, &st);
  if (*got != bytes && !(empty_ok && *got == 0))
    return hccl__fail(HCCL_E_INTERNAL,
                      "%s on rank %u: rank %u sent a message of %zu bytes where %zu were "
                      "expected; every rank must make the same calls with the same counts",
                      p->w->what, p->w->rank, from->peer, *got, bytes);
  return HCCL_SUCCESS;
}

void hccl__prim_write_out(const struct hccl_prim *p, void *out, const void *v, size_t bytes) {
  if (p->stream_out)
    hccl__copy_stream(out, v, bytes);
  else
    memcpy(out, v, bytes);
}

HcclResult hccl__prim_step(const struct hccl_prim *p, struct hccl_link *recv_from,
                           struct hccl_link *send_to, const void *local, void *out, size_t bytes) {
  const void *src = NULL;
  void *dst = NULL;
  size_t count = bytes / p->esz;
  if (recv_from) {
    size_t got;
    HCCL_TRY(take(p, recv_from, bytes, false, &src, &got));
  }
  /* By reference when the value to send will be in a caller's buffer: the input as it is, or
   * the output this step writes. */
  bool ref = send_to && p->by_ref && send_to->ops->send_ref && bytes > 0 &&
             (src ? out != NULL : local != NULL);
  if (send_to && !ref) HCCL_TRY(send_to->ops->send_acquire(send_to, &dst, p->w));

  if (bytes == 0) {
    /* A zero-byte message still keeps both sides in step. */
  } else if (src && local) {
    /* Reduce once, then copy to the other destination. A streamed output is written last,
     * from the slot the reduction just wrote; otherwise the slot is copied from the output. */
    if (dst && (!out || p->stream_out)) {
      p->reduce(dst, local, src, count, &p->red->s);
      if (out) hccl__prim_write_out(p, out, dst, bytes);
    } else if (out) {
      p->reduce(out, local, src, count, &p->red->s);
      if (dst) memcpy(dst, out, bytes);
    }
  } else {
    const void *v = src ? src : local;
    if (out && out != v) hccl__prim_write_out(p, out, v, bytes);
    if (dst) memcpy(dst, v, bytes);
  }

  if (ref) {
    HCCL_TRY(send_to->ops->send_ref(send_to, src ? out : local, bytes, &p->stamp, p->w));
  } else if (send_to) {
    send_to->ops->send_commit(send_to, bytes, &p->stamp);
  }
  if (recv_from) recv_from->ops->recv_release(recv_from);
  return HCCL_SUCCESS;
}

HcclResult hccl__prim_recv_or_empty(const struct hccl_prim *p, struct hccl_link *from, void *out,
                                    size_t bytes, bool *empty) {
  const void *src;
  size_t got;
  HCCL_TRY(take(p, from, bytes, true, &src, &got));
  *empty = got == 0 && bytes > 0;
  if (!*empty && bytes > 0) memcpy(out, src, bytes);
  from->ops->recv_release(from);
  return HCCL_SUCCESS;
}

HcclResult hccl__prim_flush(const struct hccl_prim *p, struct hccl_link *to) {
  if (!to || !to->ops->send_flush) return HCCL_SUCCESS;
  return to->ops->send_flush(to, p->w);
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

void hccl__prim_post_every(struct hccl_link *from, void *buf, size_t chunk, size_t bytes,
                           uint32_t skip, uint32_t step) {
  if (from && from->ops->recv_post && buf && bytes > 0 && chunk > 0 && step > 0)
    from->ops->recv_post(from, buf, chunk, bytes, skip, step);
}

void hccl__prim_post(struct hccl_link *from, void *buf, size_t chunk, size_t bytes) {
  hccl__prim_post_every(from, buf, chunk, bytes, 0, 1);
}

HcclResult hccl__prim_recv(const struct hccl_prim *p, struct hccl_link *from, void *buf,
                           size_t bytes) {
  size_t c = chunk_of(p, from);
  size_t off = 0;
  hccl__prim_post(from, buf, c, bytes);
  do {
    size_t n = bytes - off < c ? bytes - off : c;
    HCCL_TRY(hccl__prim_step(p, from, NULL, NULL, (char *)buf + off, n));
    off += n;
  } while (off < bytes);
  return HCCL_SUCCESS;
}

/* buf + off, leaving NULL alone (a zero-byte message may have no buffer). */
static char *at(const void *buf, size_t off) {
  return buf ? (char *)buf + off : NULL;
}

size_t hccl__prim_chunk(const struct hccl_prim *p, const struct hccl_link *l) {
  return chunk_of(p, l);
}

HcclResult hccl__prim_sendrecv(const struct hccl_prim *p, struct hccl_link *send_to,
                               const void *sbuf, size_t send_bytes, struct hccl_link *recv_from,
                               const void *local, void *out, size_t recv_bytes) {
  size_t cs = send_to ? chunk_of(p, send_to) : 1, cr = recv_from ? chunk_of(p, recv_from) : 1;
  size_t ns = send_to ? hccl__prim_nchunks(send_bytes, cs) : 0;
  size_t nr = recv_from ? hccl__prim_nchunks(recv_bytes, cr) : 0;
  size_t n = ns > nr ? ns : nr;
  if (!local) hccl__prim_post(recv_from, out, cr, recv_bytes);
  for (size_t i = 0; i < n; i++) {
    if (i < ns)
      HCCL_TRY(hccl__prim_step(p, NULL, send_to, at(sbuf, i * cs), NULL,
                               hccl__prim_chunk_len(send_bytes, cs, i)));
    if (i < nr) {
      HCCL_TRY(hccl__prim_step(p, recv_from, NULL, at(local, i * cr), at(out, i * cr),
                               hccl__prim_chunk_len(recv_bytes, cr, i)));
    }
  }
  return HCCL_SUCCESS;
}

HcclResult hccl__prim_exchange(const struct hccl_prim *p, struct hccl_link *l, const void *sbuf,
                               size_t send_bytes, const void *local, void *out, size_t recv_bytes) {
  return hccl__prim_sendrecv(p, l, sbuf, send_bytes, l, local, out, recv_bytes);
}

HcclResult hccl__prim_drain(const struct hccl_prim *p, struct hccl_link *to) {
  return to->ops->send_drain(to, p->w);
}
