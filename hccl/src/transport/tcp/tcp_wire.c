/*
 * tcp_wire.c - the TCP transport's pure steps on the bytes a remote peer controls: reading a
 * hello in pieces and judging it against what this rank expects (the acceptor in tcp_sock.c
 * calls them), and decoding a link's frame stream into its receive slots and state (the
 * I/O thread in tcp_read.c calls it for every byte it reads). No socket, no lock, no
 * log: each step only reads and writes the structures it is given, so a test or a fuzzer
 * (tests/fuzz/fuzz_tcp_handshake.c) feeds them exactly as the sockets do. See tcp.h for the
 * contracts and tcp.c for the protocol.
 */
#include <stdio.h>
#include <string.h>

#include "tcp_wire.h"

/* ---- the hello ---- */

char *hccl__tcp_greet_space(struct hccl_tcp_greet *g, size_t *len) {
  *len = sizeof(g->h) - g->got;
  return (char *)&g->h + g->got;
}

bool hccl__tcp_greet_got(struct hccl_tcp_greet *g, size_t n) {
  g->got += n;
  return g->got == sizeof(g->h);
}

bool hccl__tcp_hello_check(const struct hccl_tcp_hello *got, const struct hccl_tcp_hello *expect,
                           const bool *may_connect, uint32_t nranks, char *why, size_t len) {
  const struct hccl_tcp_hello *h = got, *e = expect;
  if (h->magic != e->magic)
    snprintf(why, len, "not a libhccl hello (magic 0x%016llx)", (unsigned long long)h->magic);
  else if (h->version != e->version)
    snprintf(why, len, "libhccl TCP protocol version %u, this rank speaks %u", h->version,
             e->version);
  else if (h->token_hash != e->token_hash)
    snprintf(why, len, "a different job token (HCCL_JOB_TOKEN): another job's process");
  else if (h->comm_id != e->comm_id)
    snprintf(why, len, "it belongs to another communicator");
  else if (h->rank >= nranks || h->channel >= 2 + HCCL_TCP_CALLBACK || !may_connect[h->rank] ||
           (h->channel < HCCL_TCP_CALLBACK ? h->rank >= e->rank : h->rank <= e->rank))
    snprintf(why, len, "it claims rank %u channel %u, which does not connect here", h->rank,
             h->channel);
  else if (h->slot_bytes != e->slot_bytes)
    snprintf(why, len, "its slots are %u bytes, this rank's %u (HCCL_BUFFSIZE differs?)",
             h->slot_bytes, e->slot_bytes);
  else
    return true;
  return false;
}

/* ---- the frame stream ---- */

void hccl__tcp_rx_init(struct hccl_tcp_rx *rx, char *slots, size_t slot_bytes, uint32_t nranks) {
  memset(rx, 0, sizeof(*rx));
  rx->slots = slots;
  rx->slot_bytes = slot_bytes;
  rx->nranks = nranks;
}

static enum hccl_tcp_rx_event rx_error(struct hccl_tcp_rx *rx) {
  rx->broken = true;
  rx->pay = NULL;
  return HCCL_TCP_RX_ERROR;
}

static char *slot_of(const struct hccl_tcp_rx *rx, uint32_t m) {
  return rx->slots + (size_t)(m % TCP_NSLOTS) * rx->slot_bytes;
}

/* Where the payload of message `arrived`, `size` bytes, goes: its place in the receive posted
 * in place if it is one of the post's messages and fits its chunk there, else its slot. */
static char *land(const struct hccl_tcp_rx *rx, uint32_t size) {
  const struct hccl_tcp_post *p = &rx->post;
  uint32_t k = rx->arrived - p->first;
  if (p->dst && k < p->n && (size_t)k * p->chunk < p->bytes) {
    size_t off = (size_t)k * p->chunk, room = p->bytes - off;
    if (size <= room && size <= p->chunk) return p->dst + off;
  }
  return slot_of(rx, rx->arrived);
}

/* rx->cur's header is whole: check it and act on it (ACK, BYE), or aim its payload. Returns the
 * frame's event, or MORE when its payload follows (rx->pay set). */
static enum hccl_tcp_rx_event frame_begin(struct hccl_tcp_rx *rx) {
  const struct tcp_frame *f = &rx->cur;
  switch (f->type) {
  case FRAME_DATA:
    if (f->size > rx->slot_bytes || rx->arrived - rx->released >= TCP_NSLOTS) {
      snprintf(rx->why, sizeof(rx->why),
               "broke the protocol (a %u-byte message with %u unreleased; slots hold %zu)", f->size,
               rx->arrived - rx->released, rx->slot_bytes);
      return rx_error(rx);
    }
    rx->pay = land(rx, f->size);
    rx->pay_len = f->size;
    rx->pay_got = 0;
    return HCCL_TCP_RX_MORE;
  case FRAME_ACK:
    if (f->size != 0) break; /* nothing follows an ACK: a size would put the stream off */
    if (f->arg - rx->acked > rx->written - rx->acked) {
      snprintf(rx->why, sizeof(rx->why), "broke the protocol (released %u of %u messages sent)",
               f->arg, rx->written);
      return rx_error(rx);
    }
    rx->acked = f->arg;
    return HCCL_TCP_RX_ACK;
  case FRAME_ABORT:
    if (f->size == 0 || f->size > sizeof(rx->abort_text)) break;
    if (f->arg >= rx->nranks) {
      /* hccl__tcp_mark_abort keeps origin + 1, where 0 means "no abort". */
      snprintf(rx->why, sizeof(rx->why), "broke the protocol (an ABORT from rank %u of %u)", f->arg,
               rx->nranks);
      return rx_error(rx);
    }
    rx->pay = rx->abort_text;
    rx->pay_len = f->size;
    rx->pay_got = 0;
    return HCCL_TCP_RX_MORE;
  case FRAME_BYE:
    if (f->size != 0) break;
    rx->bye = true;
    return HCCL_TCP_RX_BYE;
  case FRAME_PROGQ:
    if (f->size != 0) break;
    rx->progq_seq = f->arg;
    return HCCL_TCP_RX_PROGQ;
  case FRAME_REACHQ:
  case FRAME_REACHA:
    if (f->size != 0) break;
    if (f->arg >= rx->nranks) {
      snprintf(rx->why, sizeof(rx->why), "broke the protocol (a reach query naming rank %u of %u)",
               f->arg, rx->nranks);
      return rx_error(rx);
    }
    rx->reach_rank = f->arg;
    rx->reach_quiet_ms = f->code;
    return f->type == FRAME_REACHQ ? HCCL_TCP_RX_REACHQ : HCCL_TCP_RX_REACHA;
  case FRAME_PROGA:
    if (f->size == 0 || f->size > sizeof(rx->report)) break;
    if (f->arg > rx->nranks) {
      snprintf(rx->why, sizeof(rx->why), "broke the protocol (a report naming rank %u of %u)",
               f->arg - 1, rx->nranks);
      return rx_error(rx);
    }
    rx->pay = rx->report;
    rx->pay_len = f->size;
    rx->pay_got = 0;
    return HCCL_TCP_RX_MORE;
  default:
    break;
  }
  snprintf(rx->why, sizeof(rx->why), "broke the protocol (frame type %u, %u bytes)", f->type,
           f->size);
  return rx_error(rx);
}

/* The payload of rx->cur is whole. */
static enum hccl_tcp_rx_event frame_end(struct hccl_tcp_rx *rx) {
  const struct tcp_frame *f = &rx->cur;
  char *pay = rx->pay;
  rx->pay = NULL;
  if (f->type == FRAME_DATA) {
    rx->hdr[rx->arrived % TCP_NSLOTS] = *f;
    rx->at[rx->arrived % TCP_NSLOTS] = pay;
    /* The post's last message: drop it, or after 2^32 more messages its numbers would come
     * round again, into a buffer long returned. */
    if (rx->post.dst && rx->arrived - rx->post.first == rx->post.n - 1)
      rx->post = (struct hccl_tcp_post){0};
    rx->arrived++;
    return HCCL_TCP_RX_DATA;
  }
  if (f->type == FRAME_PROGA) {
    rx->report[f->size - 1] = '\0';
    rx->report_next = f->arg;
    return HCCL_TCP_RX_PROGA;
  }
  rx->abort_text[f->size - 1] = '\0';
  rx->abort_origin = f->arg;
  rx->abort_code = f->code;
  return HCCL_TCP_RX_ABORT;
}

enum hccl_tcp_rx_event hccl__tcp_rx_feed(struct hccl_tcp_rx *rx, const char *buf, size_t len,
                                         size_t *used) {
  size_t off = 0;
  enum hccl_tcp_rx_event ev = HCCL_TCP_RX_MORE;
  if (rx->broken) {
    *used = 0;
    return HCCL_TCP_RX_ERROR;
  }
  while (off < len || (rx->pay && rx->pay_got == rx->pay_len)) {
    if (rx->pay) {
      size_t want = rx->pay_len - rx->pay_got, take = len - off < want ? len - off : want;
      memcpy(rx->pay + rx->pay_got, buf + off, take);
      rx->pay_got += take;
      off += take;
      if (rx->pay_got < rx->pay_len) break;
      ev = frame_end(rx);
      break;
    }
    size_t want = sizeof(rx->cur) - rx->cur_got, take = len - off < want ? len - off : want;
    memcpy((char *)&rx->cur + rx->cur_got, buf + off, take);
    rx->cur_got += take;
    off += take;
    if (rx->cur_got < sizeof(rx->cur)) break;
    rx->cur_got = 0;
    ev = frame_begin(rx);
    if (ev != HCCL_TCP_RX_MORE) break;
    /* A payload follows (an empty one completes at once, above). */
  }
  *used = off;
  return ev;
}

char *hccl__tcp_rx_direct(struct hccl_tcp_rx *rx, size_t *len) {
  if (!rx->pay) {
    *len = 0;
    return NULL;
  }
  *len = rx->pay_len - rx->pay_got;
  return rx->pay + rx->pay_got;
}

enum hccl_tcp_rx_event hccl__tcp_rx_direct_got(struct hccl_tcp_rx *rx, size_t n) {
  rx->pay_got += n;
  return rx->pay_got == rx->pay_len ? frame_end(rx) : HCCL_TCP_RX_MORE;
}

void hccl__tcp_rx_unpost(struct hccl_tcp_rx *rx) {
  const struct hccl_tcp_post *p = &rx->post;
  if (rx->pay && p->dst && rx->pay >= p->dst && rx->pay < p->dst + p->bytes)
    rx->pay = slot_of(rx, rx->arrived); /* its first pay_got bytes are lost: the call failed */
  rx->post = (struct hccl_tcp_post){0};
}

size_t hccl__tcp_rx_lowat(const struct hccl_tcp_rx *rx, size_t cap) {
  size_t left = rx->pay ? rx->pay_len - rx->pay_got : 0;
  if (left < TCP_DIRECT) return 1;
  return left < cap ? left : cap;
}
