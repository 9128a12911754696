/*
 * tcp_wire.h - the TCP transport's pure steps on the bytes a peer controls: the hello (its
 * layout, reading it in pieces, its check) and the frames (their layout, the decoder of a link's
 * byte stream). No I/O, no state of a communicator: tcp_wire.c implements them, the acceptor
 * (tcp_sock.c) and a link's reader (tcp_read.c) feed them from sockets, and
 * tests/fuzz/fuzz_tcp_handshake.c and tests/transport/test_tcp_wire.c feed them directly,
 * including this header only. Internal to libhccl's TCP transport (tcp.h, what the TCP files
 * share, includes it).
 */
#ifndef HCCL_TCP_WIRE_H
#define HCCL_TCP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hccl.h"
#include "transport.h"

/* ---- the handshake ---- */

#define HCCL_TCP_MAGIC 0x31706374636c6368ULL /* "hccltcp1" in little-endian memory */
#define HCCL_TCP_VERSION 1

/* Added to a hello's channel by a higher rank that needs a link made on first use: "dial me on
 * channel (channel - HCCL_TCP_CALLBACK)". The socket carries nothing else and is closed. */
#define HCCL_TCP_CALLBACK 2

/* What the connecting (lower) rank sends first on each socket. Host byte order: the magic
 * reads differently in the other order, so such a peer is refused, never misread. */
struct hccl_tcp_hello {
  uint64_t magic;
  uint32_t version;
  uint32_t rank; /* the connecting rank */
  uint32_t channel;
  uint32_t slot_bytes;
  uint64_t comm_id;    /* the communicator's identity, the same on every rank */
  uint64_t token_hash; /* HCCL_JOB_TOKEN's hash */
};

/* An accepted socket whose hello is being read. */
struct hccl_tcp_greet {
  int fd;
  size_t got; /* bytes of h read */
  struct hccl_tcp_hello h;
  struct sockaddr_storage from;
  int64_t since_ns;
};

/* Where the next bytes of g's hello go: returns the address and sets *len to how many may be
 * written there (never past the hello; 0 once it is whole). The acceptor reads into it, so a
 * connection's bytes after its hello stay in the socket for the link. (tcp_wire.c) */
char *hccl__tcp_greet_space(struct hccl_tcp_greet *g, size_t *len);
/* n bytes (1 to the *len last given) were written there. Returns whether the hello is whole. */
bool hccl__tcp_greet_got(struct hccl_tcp_greet *g, size_t n);

/* Whether a whole hello may become a link on this rank. expect holds this rank's magic,
 * version, communicator id, token hash and slot size; may_connect[nranks] the ranks on other
 * servers. Accepted: the magic, version, token hash, communicator id and slot size are
 * expect's, rank < nranks with may_connect[rank], and either channel 0 or 1 from a lower rank
 * (a link) or channel 2 or 3 from a higher rank (a callback, HCCL_TCP_CALLBACK). Refused
 * (false): why[len] (len >= 64) holds a non-empty reason for the warning, the first rule broken
 * in that order. Whether (rank, channel) is already connected is the acceptor's own
 * check, after this one. Pure: no I/O, no logging. (tcp_wire.c) */
bool hccl__tcp_hello_check(const struct hccl_tcp_hello *got, const struct hccl_tcp_hello *expect,
                           const bool *may_connect, uint32_t nranks, char *why, size_t len);

/* ---- frames: shared by tcp.c, tcp_write.c, tcp_read.c, tcp_io_thread.c and tcp_wire.c ---- */

#define TCP_NSLOTS 8          /* slots per direction per link */
#define TCP_INBUF (64u << 10) /* staging for frame headers and small payloads */
#define TCP_DIRECT 8192u      /* payload left from which a read goes straight to the slot */
#define TCP_LOWAT (256u << 10) /* most bytes of a payload a reader is woken for at once */
#define TCP_CTL_BYTES 4096    /* queued control frames (ACK, ABORT, BYE) */

/* PROGQ {arg = the asker's call number}: "why are you not there?" (a timeout, progress.c);
 * PROGA {arg = the rank the answerer's chain of waits left its server for, + 1, or 0; a text}:
 * the answer, written by the I/O thread, so a rank whose threads are stopped says
 * nothing.
 * REACHQ {arg = a rank}: "does that rank's host answer you?" (a peer that answered no progress
 * query, progress.c); REACHA {arg = that rank, code = ms since its host last acknowledged
 * anything on the answerer's links to it, or -1: no link}: the answer, from the kernel's view
 * of the answerer's sockets (tcp_quiet_ms). */
enum { FRAME_DATA = 1, FRAME_ACK = 2, FRAME_ABORT = 3, FRAME_BYE = 4, FRAME_PROGQ = 5,
       FRAME_PROGA = 6, FRAME_REACHQ = 7, FRAME_REACHA = 8 };

struct tcp_frame {
  uint32_t type;
  uint32_t size;           /* bytes that follow: DATA payload, ABORT reason with its NUL */
  uint32_t arg;            /* ACK: released count; ABORT: origin rank */
  int32_t code;            /* ABORT: the failure's HcclResult */
  struct hccl_stamp stamp; /* DATA: carried unread */
};

/* ---- the frame decoder (tcp_wire.c) ----
 *
 * The receiving side of one link's byte stream, apart from its socket, as bootstrap/wire.c is for
 * the store: the I/O thread hands it every byte the socket gives, in whatever pieces, and acts
 * on the one event each call reports (publishing a message, an ACK, an abort, a BYE, or failing the
 * link). A DATA payload goes straight into its receive slot, never past slot_bytes; a call takes
 * bytes up to the end of the frame it reports and no further, and after an error it takes none; a
 * payload inside a receive posted in place (`post`) goes there instead, never past the post's chunk
 * for it. Rules (a broken one is HCCL_TCP_RX_ERROR): a known type; DATA of at most slot_bytes while
 * fewer than TCP_NSLOTS messages are unreleased; an ACK releasing no more than was written and no
 * fewer than the last ACK; an ABORT from a rank below nranks with a reason of 1 to HCCL_REASON_MAX
 * bytes; ACK and BYE of size 0 (size is the bytes that follow, so any other would put the reader
 * off the frames' boundaries). */

enum hccl_tcp_rx_event {
  HCCL_TCP_RX_MORE = 0, /* every byte given was taken; no frame completed */
  HCCL_TCP_RX_DATA,     /* message arrived - 1 landed in its slot, its header in hdr[] */
  HCCL_TCP_RX_ACK,      /* acked is the peer's new released count */
  HCCL_TCP_RX_ABORT,    /* abort_origin, abort_code and abort_text (NUL-terminated) are set */
  HCCL_TCP_RX_BYE,      /* the peer destroyed its communicator; bye is set */
  HCCL_TCP_RX_PROGQ,    /* the peer asks for this rank's progress report; progq_seq is set */
  HCCL_TCP_RX_PROGA,    /* the peer's progress report: report (NUL-terminated), report_next */
  HCCL_TCP_RX_REACHQ,   /* the peer asks how this rank's links to reach_rank are */
  HCCL_TCP_RX_REACHA,   /* the peer's answer: reach_rank, reach_quiet_ms */
  HCCL_TCP_RX_ERROR     /* the peer broke the protocol: why says how; the stream ends here */
};

/* A receive posted in place (the ops table's recv_post): messages [first, first + n) land at
 * dst + (m - first) * chunk, each in at most chunk bytes and within `bytes` in all, instead of
 * in their slot. dst NULL: none. */
struct hccl_tcp_post {
  char *dst;
  size_t chunk, bytes;
  uint32_t first, n;
};

struct hccl_tcp_rx {
  /* Bound by hccl__tcp_rx_init. */
  char *slots; /* TCP_NSLOTS x slot_bytes: message m lands in slot m % TCP_NSLOTS */
  size_t slot_bytes;
  uint32_t nranks; /* of the communicator: an ABORT's origin is below it */
  /* Set by the caller before each call: messages the algorithm has released (their slots may
   * be reused) and DATA frames this side has wholly written (the most an ACK may release). */
  uint32_t released, written;
  /* Set by the caller between calls: the receive posted in place, if any (a DATA payload that
   * begins inside it and fits lands there, its slot unused); hccl__tcp_rx_unpost drops it. */
  struct hccl_tcp_post post;
  /* What has arrived. */
  struct tcp_frame hdr[TCP_NSLOTS]; /* message m's header in hdr[m % TCP_NSLOTS] */
  char *at[TCP_NSLOTS];             /* where message m's payload landed: its slot or post */
  uint32_t arrived;                 /* messages landed */
  uint32_t acked;                   /* the count of the last ACK */
  bool bye;
  uint32_t abort_origin;
  int32_t abort_code;
  char abort_text[HCCL_REASON_MAX];
  uint32_t progq_seq;          /* PROGQ: the asker's call number */
  uint32_t report_next;        /* PROGA: arg */
  char report[HCCL_REASON_MAX]; /* PROGA: its text */
  uint32_t reach_rank;          /* REACHQ, REACHA: the rank asked about (< nranks) */
  int32_t reach_quiet_ms;       /* REACHA: code (-1: no link) */
  char why[160]; /* once ERROR: "broke the protocol (...)", said of the peer */
  /* The decoder's own: the frame being read, then its payload's destination. */
  struct tcp_frame cur;
  size_t cur_got;
  char *pay; /* NULL between payloads */
  size_t pay_len, pay_got;
  bool broken;
};

/* Readies rx for a link's first frame, its DATA payloads going to slots (TCP_NSLOTS x
 * slot_bytes, owned by the caller), in a communicator of nranks ranks. */
void hccl__tcp_rx_init(struct hccl_tcp_rx *rx, char *slots, size_t slot_bytes, uint32_t nranks);
/* Decodes from buf[0..len): takes bytes until a frame completes, the bytes run out, or a rule
 * is broken, and says which (MORE: all len taken). *used = the bytes taken: after ERROR, the
 * frame's header and nothing more, and 0 in every later call. */
enum hccl_tcp_rx_event hccl__tcp_rx_feed(struct hccl_tcp_rx *rx, const char *buf, size_t len,
                                         size_t *used);
/* Where the rest of the current payload goes, for a reader that writes it there itself (the
 * I/O thread reads large payloads from the socket straight into their slot): the address
 * and *len bytes, exactly to the payload's end; NULL and 0 outside a payload. */
char *hccl__tcp_rx_direct(struct hccl_tcp_rx *rx, size_t *len);
/* n bytes (1 to the *len last given) were written there. Returns the frame's event once its
 * payload is whole, else MORE. */
enum hccl_tcp_rx_event hccl__tcp_rx_direct_got(struct hccl_tcp_rx *rx, size_t n);
/* Drops the posted receive, and moves the rest of a payload under way into it (if any) to the
 * payload's slot: from now on nothing is written to the post's memory (an aborted call's
 * buffer is its caller's again). */
void hccl__tcp_rx_unpost(struct hccl_tcp_rx *rx);
/* How many bytes the reader can use at once next, for the socket's SO_RCVLOWAT: inside a
 * payload with at least TCP_DIRECT bytes left, that rest up to `cap`; else 1 (a frame header,
 * an ACK, a small payload must wake it at once). */
size_t hccl__tcp_rx_lowat(const struct hccl_tcp_rx *rx, size_t cap);
#endif
