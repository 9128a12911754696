/*
 * rdma_wire.h - the RDMA transport's pure steps: the conn blob a rank publishes (its port's GID,
 * its control queue pair, its MTU) and the control messages ranks send each other over it (a
 * link's hello: the RC queue pair number, PSN, MTU and the receive slots' address and rkey; an
 * abort; a goodbye), their encoding and checks; the immediates that name a message, a posted
 * receive or a credit; the slot and credit arithmetic; the posted receives (where a message may
 * land in the receiver's own buffer); the MTU agreed; the GID and the device chosen. No
 * verbs, no I/O, no state of a communicator: rdma_wire.c implements them whether or not
 * libibverbs is there, and tests/transport/test_rdma.c calls them directly. Internal to the RDMA
 * transport (rdma.h includes it).
 */
#ifndef HCCL_RDMA_WIRE_H
#define HCCL_RDMA_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"
#include "transport.h"

#define RDMA_NSLOTS 8          /* slots per direction per link (shm's and TCP's rule) */
#define RDMA_SLOT_MIN 4096u
#define RDMA_SLOT_MAX (512u << 10)
#define RDMA_HDR 32u           /* a slot's header: struct rdma_slot_hdr */
#define RDMA_NPOSTS 16         /* posted receives a sender may not have read yet, per link */
#define RDMA_POST_STRIDE 64u   /* a posted receive's entry in a link's region */
#define RDMA_BLOB_MAGIC 0x414d4452u /* "RDMA" in little-endian memory */
#define RDMA_MSG_MAGIC 0x314d4452u  /* "RDM1" */
#define RDMA_VERSION 3 /* 2: posted receives (zero copy at the receiving end); 3: with a step */
#define RDMA_CTL_MAX 1024u     /* largest control message (one UD datagram; MTU >= 1024) */
#define RDMA_CTL_MIN_MTU 256u  /* ... or 256 on a port whose MTU is 256 or 512 */

/* The conn blob (peer.h's conn[HCCL_TRANSPORT_RDMA]): how to reach this rank's control queue
 * pair (an unreliable datagram QP, one per communicator), through which each link's own RC
 * queue pair is then described (a hello). magic 0 (a zero blob): the rank has no RDMA state
 * (one server, HCCL_NET=tcp, or a split group's parent round, which carries TCP's blob only). */
struct rdma_blob {
  uint32_t magic;
  uint8_t version;
  uint8_t active; /* 1: a port is active; 0: no device (why: this rank's log) */
  uint8_t mtu;    /* enum ibv_mtu of the port: 1 = 256 ... 5 = 4096 */
  uint8_t port;
  uint32_t ud_qpn;
  uint16_t lid; /* the port's LID (InfiniBand; 0 on RoCE) */
  uint16_t pad;
  uint8_t gid[16];
};
_Static_assert(sizeof(struct rdma_blob) <= HCCL_CONN_BYTES, "rdma blob too large");

/* Writes b into conn (the rest zero). */
void hccl__rdma_blob_encode(const struct rdma_blob *b, uint8_t conn[HCCL_CONN_BYTES]);
/* Reads conn into *b. Returns whether it is an RDMA blob of this version with an active port
 * and an MTU of 256 to 4096 (false: the peer cannot be reached over RDMA). */
bool hccl__rdma_blob_decode(const uint8_t conn[HCCL_CONN_BYTES], struct rdma_blob *b);

/* ---- control messages (UD datagrams, host byte order as TCP's frames) ---- */

enum { RDMA_MSG_HELLO = 1, RDMA_MSG_ABORT = 2, RDMA_MSG_BYE = 3 };

/* HELLO: "here is my queue pair for our link on `channel`"; have_yours: the sender already
 * moved its queue pair to RTR with the receiver's (so the receiver may write to it).
 * ABORT: rank `origin` failed with `code`, text its reason. BYE: the sender destroyed its
 * communicator. */
struct rdma_msg {
  uint32_t magic;
  uint8_t type;
  uint8_t channel;
  uint8_t have_yours;
  uint8_t mtu;      /* HELLO: the sender's port MTU (enum ibv_mtu) */
  uint64_t comm_id; /* the communicator's identity (the same on every rank) */
  uint32_t from;    /* the sender's rank */
  uint32_t qpn;     /* HELLO: the RC queue pair */
  uint32_t psn;     /* HELLO: its first packet sequence number (24 bits) */
  uint32_t rkey;    /* HELLO: the receive slots' key */
  uint64_t raddr;   /* HELLO: the receive slots' address */
  uint32_t slot_bytes;
  uint32_t origin; /* ABORT */
  int32_t code;    /* ABORT */
  uint32_t len;    /* bytes of text that follow, NUL included (ABORT); 0 otherwise */
};
#define RDMA_MSG_TEXT_MAX(ctl) ((ctl) - sizeof(struct rdma_msg))

/* Writes m and (ABORT) its text, cut to fit, into buf[cap]. Returns the datagram's length. */
size_t hccl__rdma_msg_encode(const struct rdma_msg *m, const char *text, char *buf, size_t cap);
/* Checks a datagram of len bytes from buf: magic, type, comm_id = want_comm, from < nranks,
 * channel < HCCL_NCHANNELS, an ABORT's origin < nranks and its text NUL-terminated inside len.
 * On success fills *m and *text (into buf) and returns true; else why[len] names the rule. */
bool hccl__rdma_msg_decode(const char *buf, size_t len, uint64_t want_comm, uint32_t nranks,
                           struct rdma_msg *m, const char **text, char *why, size_t why_len);

/* ---- the data path's arithmetic ---- */

/* What leads each slot: the sender's byte count, sequence and stamp, written with the payload
 * in the same RDMA WRITE, or (a message written into a posted receive) by a WRITE of its own
 * just before the payload's. post: 0 the payload follows the header in the slot; k + 1 it went
 * to the place posted receive k gives it. posts_seen: the posted receives the sender had read
 * when it wrote this message (the receiver writes no more than RDMA_NPOSTS ahead of it). */
struct rdma_slot_hdr {
  uint32_t size;
  uint32_t seq;
  uint32_t post;
  uint32_t posts_seen;
  struct hccl_stamp stamp;
};
_Static_assert(sizeof(struct rdma_slot_hdr) == RDMA_HDR, "slot header");

/* The immediates: the top 2 bits say which, the low 30 bits carry a sequence or a count mod
 * 2^30. DATA (RDMA WRITE with immediate): message seq landed, its header in its slot. POST
 * (RDMA WRITE with immediate into the sender's posted-receive entries): posted receive `id`
 * was written there. CREDIT (SEND with immediate): the receiver released messages up to
 * `count`. */
#define RDMA_IMM_KIND 0xc0000000u
#define RDMA_IMM_DATA 0x00000000u
#define RDMA_IMM_POST 0x40000000u
#define RDMA_IMM_CREDIT 0x80000000u
#define RDMA_IMM_VALUE 0x3fffffffu
static inline uint32_t hccl__rdma_imm_data(uint32_t seq) { return seq & RDMA_IMM_VALUE; }
static inline uint32_t hccl__rdma_imm_post(uint32_t id) {
  return RDMA_IMM_POST | (id & RDMA_IMM_VALUE);
}
static inline uint32_t hccl__rdma_imm_credit(uint32_t count) {
  return RDMA_IMM_CREDIT | (count & RDMA_IMM_VALUE);
}
/* The 32-bit count a 30-bit value names, given the last count known (counts only grow, by
 * less than 2^30 between two values). */
static inline uint32_t hccl__rdma_widen(uint32_t last, uint32_t v30) {
  return last + ((v30 - last) & RDMA_IMM_VALUE);
}
/* A slot's stride in the link's region: the header and slot_bytes, rounded to 64 bytes. */
static inline size_t hccl__rdma_stride(size_t slot_bytes) {
  return (RDMA_HDR + slot_bytes + 63) / 64 * 64;
}
/* Where message seq lands: its slot's offset in a direction's half of the region. */
static inline size_t hccl__rdma_slot_off(uint32_t seq, size_t slot_bytes) {
  return (size_t)(seq % RDMA_NSLOTS) * hccl__rdma_stride(slot_bytes);
}
/* ---- posted receives (zero copy at the receiving end, NCCL net_ib's FIFO) ----
 *
 * A receiver whose buffer lies in registered memory tells the sender where coming messages
 * go: posted receive `id` says messages first, first + step, ..., first + (n - 1) * step land
 * at addr, addr + chunk, ..., in at most chunk bytes each and `bytes` in all, under rkey. Step
 * 1 is a run of consecutive messages (a chain's, a receive's); a larger step picks one block's
 * messages out of a ring's rounds, where each round brings one chunk of every block (ring.c),
 * so several entries are live at once. It is written (RDMA WRITE with immediate POST id) into
 * entry id % RDMA_NPOSTS of the sender's region, after its receive slots. The sender reads the
 * entries in order and keeps those with messages still to send; a message one of them covers
 * goes there (post = id + 1 in its header), any other into its slot as before. */
struct rdma_post {
  uint64_t addr, chunk, bytes;
  uint32_t rkey;
  uint32_t first; /* the first message it covers */
  uint32_t n;     /* messages it covers: ceil(bytes / chunk) */
  uint32_t id;    /* its number on the link: 0, 1, 2 ... */
  uint32_t step;  /* from one message it covers to the next: 1 or more */
};
_Static_assert(sizeof(struct rdma_post) <= RDMA_POST_STRIDE, "posted receive entry");

/* The entry of a receive posted at addr for messages first, first + step, ... (chunk, bytes
 * and step non-zero). */
struct rdma_post hccl__rdma_post_make(uint64_t addr, uint32_t rkey, size_t chunk, size_t bytes,
                                      uint32_t first, uint32_t step, uint32_t id);
/* Where message seq of `bytes` (> 0) lands under p: true and *addr when p covers seq and the
 * message fits its chunk (and the posted bytes); false: into its slot. */
bool hccl__rdma_post_place(const struct rdma_post *p, uint32_t seq, size_t bytes,
                           uint64_t *addr);
/* Whether p covers no message from seq on (every message it covers was sent), so the sender
 * drops it; an empty p (n = 0: none made yet) is spent. A p whose first is after seq is not
 * (the receiver posts ahead: a skip, a ring's later blocks). */
bool hccl__rdma_post_spent(const struct rdma_post *p, uint32_t seq);
/* Whether p covers message seq (whether or not it would fit). */
bool hccl__rdma_post_covers(const struct rdma_post *p, uint32_t seq);
/* How long a message may wait for a posted receive (rdma_data.c's wait_post), given what such
 * waits took lately (an average; 0: none yet): 8 times that, from min_ns to max_ns; first_ns
 * before any. */
static inline int64_t hccl__rdma_post_limit(int64_t recent_ns, int64_t min_ns, int64_t first_ns,
                                            int64_t max_ns) {
  if (recent_ns <= 0) return first_ns;
  int64_t limit = recent_ns > max_ns / 8 ? max_ns : 8 * recent_ns;
  return limit < min_ns ? min_ns : limit;
}
/* Whether the receiver may write entry `id` while the sender has read `seen` entries: fewer
 * than RDMA_NPOSTS unread, across the 2^32 wrap. */
static inline bool hccl__rdma_post_window_open(uint32_t id, uint32_t seen) {
  return id - seen < RDMA_NPOSTS;
}
/* The bytes of a link's registered region: send slots, receive slots (RDMA_NSLOTS strides
 * each), the posted receives the peer writes (RDMA_NPOSTS entries), the ones this side writes
 * from (as many). The peer's entries start right after its receive slots. */
static inline size_t hccl__rdma_region_bytes(size_t slot_bytes) {
  return 2 * (size_t)RDMA_NSLOTS * hccl__rdma_stride(slot_bytes) +
         2 * (size_t)RDMA_NPOSTS * RDMA_POST_STRIDE;
}

/* The slot size of links to nremote ranks on other servers: HCCL_BUFFSIZE split over them and
 * the 2 channels, 8 slots each (TCP's split), in 4 KiB steps from 4 KiB to 512 KiB. */
size_t hccl__rdma_slot_bytes(size_t buffsize, uint32_t nremote);

/* enum ibv_mtu (1-5) to bytes, 0 outside; the MTU two ports agree on: the smaller. */
uint32_t hccl__rdma_mtu_bytes(int mtu);
static inline int hccl__rdma_mtu_agree(int a, int b) { return a < b ? a : b; }

/* ---- choosing the device, the port and the GID ---- */

/* One GID table entry: its type as sysfs names it (gid_attrs/types/<i>). */
enum { RDMA_GID_NONE = 0, RDMA_GID_IB = 1, RDMA_GID_ROCE_V1 = 2, RDMA_GID_ROCE_V2 = 3 };
struct rdma_gid_entry {
  uint8_t raw[16];
  int type;
};
/* "RoCE v2" -> RDMA_GID_ROCE_V2, "IB/RoCE v1" -> RDMA_GID_ROCE_V1 (on an Ethernet port) or
 * RDMA_GID_IB; anything else RDMA_GID_NONE. */
int hccl__rdma_gid_type(const char *sysfs_text, bool ethernet);
/* Whether a GID is an IPv4-mapped address (::ffff:a.b.c.d). */
bool hccl__rdma_gid_ipv4(const uint8_t raw[16]);
/* The GID index to use among g[0..n): `want` (>= 0, HCCL_RDMA_GID_INDEX) if it is a non-zero
 * entry; else the first RoCE v2 IPv4-mapped one, the first RoCE v2 one, the first non-zero one.
 * -1: none (why[len] says which). */
int hccl__rdma_gid_pick(const struct rdma_gid_entry *g, int n, int want, char *why, size_t len);

/* What a rank found of one device's ports. */
#define RDMA_MAX_PORTS 4
struct rdma_dev_desc {
  char name[64];
  int nports;
  bool active[RDMA_MAX_PORTS]; /* port i + 1 */
};
/* Splits an HCCL_RDMA_DEVICE value into a name and a port (0: any). false when the port part
 * is not 1 to RDMA_MAX_PORTS. */
bool hccl__rdma_device_spec(const char *spec, char *name, size_t name_len, int *port);
/* The device and port to open among d[0..n): the one `spec` names (HCCL_RDMA_DEVICE; "": the
 * first active port of any). Returns the device's index and sets *port; -1 when none fits, with
 * why[len] naming what was found ("no RDMA device: ibv_get_device_list found none", "RDMA
 * devices found: rxe0 (port 1 down); none has an active port", ...). */
int hccl__rdma_device_pick(const struct rdma_dev_desc *d, int n, const char *spec, int *port,
                           char *why, size_t len);

#endif
