/*
 * shm.c - "device links" between the ranks of one server: shared memory between
 * their processes.
 *
 * Each rank owns one receive area, a memfd (never a name in /dev/shm, so nothing can be left
 * behind when a process dies), that every other local rank maps by opening
 * /proc/<owner pid>/fd/<n> during bootstrap. The area holds one FIFO per (channel, sender):
 *
 *   header | fifo[0] ... fifo[L-1] fifo[L] ... fifo[2L-1] | data[0][slot 0..7] data[1][...] ...
 *            channel 0 (collectives) channel 1 (p2p)
 *   fifo[s] = { recv_waiting, head (receiver's count of consumed slots), msgs[8] = each
 *               slot's sequence word, size and stamp, each slot's on a cache line of its own }
 *
 * A message is posted by storing its number (the sender's count, from 1) into its slot's
 * sequence word after the size and the stamp beside it: a receiver polls the one line that
 * tells it both that a message arrived and what it is, so a hop costs the data's lines and
 * one more (a shared tail counter beside the records cost two: the counter, then the record).
 *
 * A sender copies (or reduces) straight into the receiver's slot, so each hop moves the data
 * once. Waits are futex sleeps on a sequence word or on head (wait.c). HCCL_BUFFSIZE bounds
 * the area: each of the 2(L-1) FIFOs gets buffsize / (2(L-1)), as 8 slots of at most 128 KiB
 * and at least 4 KiB; both channels have the same layout.
 *
 * Failure: a rank that fails writes (origin, code, reason) into every local header and wakes
 * every sleeper; a waiter checks its own header, the peer's "destroyed" mark and the peer's
 * pidfd (exited, even if not yet reaped) every sleep slice.
 *
 * This file is the ops table over those areas; mapping a peer's HcclMemAlloc region for the
 * zero-copy collectives (the map_window op) is shm_window.c's; the link they both use is in
 * shm.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "shm.h"
#include "transport.h"
#include "wait.h"

#define SHM_NSLOTS 8
#define SHM_SLOT_MAX (128u << 10) /* docs/design.md: a ring round's chunks stay in L2 */
#define SHM_SLOT_MIN 4096u
#define SHM_MAGIC 0x68636c6c73686d31ULL
#define SHM_ALIVE 1u
#define SHM_DESTROYED 2u

struct shm_header {
  uint64_t magic;
  uint32_t nfifos;
  uint32_t nslots;
  uint64_t slot_bytes;
  _Atomic uint32_t state;
  _Atomic uint32_t abort_origin; /* origin rank + 1; 0 = no abort */
  _Atomic int32_t abort_code;
  _Atomic uint32_t abort_ready; /* reason written */
  char abort_reason[HCCL_REASON_MAX];
  alignas(64) struct hccl_progress progress; /* the owner's, read by peers after a timeout */
};

struct shm_fifo {
  alignas(64) _Atomic uint32_t recv_waiting; /* the receiver sleeps on a sequence word */
  alignas(64) _Atomic uint32_t head;
  _Atomic uint32_t send_waiting;
  /* Per slot, its message's number, size and stamp on one cache line, which the sender writes
   * just before the receiver reads it. */
  alignas(64) struct shm_msg {
    _Atomic uint32_t seq; /* number of the last message posted in this slot (from 1) */
    uint32_t size;
    struct hccl_stamp stamp;
    char pad[64 - 8 - sizeof(struct hccl_stamp)];
  } msgs[SHM_NSLOTS];
};

_Static_assert(sizeof(struct shm_msg) == 64, "a slot's record is one cache line");

/* This transport's blob in the peer info: the owner's memfd (opened by peers through
 * /proc/<pid>/fd) and the area's size; fd -1 when the owner has no area. */
struct shm_conn {
  int32_t fd;
  int32_t pad;
  uint64_t bytes;
};
_Static_assert(sizeof(struct shm_conn) <= HCCL_CONN_BYTES, "shm blob too large");

struct shm_state {
  int memfd;
  struct shm_area own;
  size_t slot_bytes;
  struct shm_link **by_rank; /* [nranks] */
};

static size_t round_up(size_t x, size_t a) {
  return (x + a - 1) / a * a;
}

static size_t area_layout(uint32_t nfifos, size_t slot_bytes, size_t *fifo_off, size_t *data_off) {
  *fifo_off = round_up(sizeof(struct shm_header), 64);
  *data_off = round_up(*fifo_off + nfifos * sizeof(struct shm_fifo), 4096);
  return *data_off + (size_t)nfifos * SHM_NSLOTS * slot_bytes;
}

static void area_bind(struct shm_area *a, void *base, size_t bytes, uint32_t nfifos,
                      size_t slot_bytes) {
  size_t fo, doff;
  area_layout(nfifos, slot_bytes, &fo, &doff);
  a->hdr = base;
  a->fifos = (struct shm_fifo *)((char *)base + fo);
  a->data = (char *)base + doff;
  a->bytes = bytes;
}

static bool shm_can_connect(const struct hccl_tctx *tx, uint32_t peer) {
  return tx->peers[peer].host_hash == tx->peers[tx->rank].host_hash;
}

static HcclResult shm_setup(struct hccl_tctx *tx, struct hccl_peer_info *self) {
  struct shm_state *st = calloc(1, sizeof(*st));
  if (!st) return hccl__fail(HCCL_E_MEMORY, "out of memory for the shared-memory transport");
  st->memfd = -1;
  st->by_rank = calloc(tx->nranks, sizeof(*st->by_rank));
  if (!st->by_rank) {
    free(st);
    return hccl__fail(HCCL_E_MEMORY, "out of memory for the shared-memory transport");
  }
  tx->state[HCCL_TRANSPORT_SHM] = st;
  struct shm_conn conn = {.fd = -1};
  memcpy(self->conn[HCCL_TRANSPORT_SHM], &conn, sizeof(conn));
  uint32_t L = tx->local_nranks;
  if (L <= 1) return HCCL_SUCCESS;

  size_t slot = tx->cfg->buffsize / ((size_t)HCCL_NCHANNELS * (L - 1) * SHM_NSLOTS);
  if (slot > SHM_SLOT_MAX) slot = SHM_SLOT_MAX;
  slot = slot / 4096 * 4096;
  if (slot < SHM_SLOT_MIN) slot = SHM_SLOT_MIN;
  st->slot_bytes = slot;
  uint32_t nfifos = HCCL_NCHANNELS * L;
  size_t fo, doff, bytes = area_layout(nfifos, slot, &fo, &doff);

  int fd = memfd_create("hccl-device-links", MFD_CLOEXEC);
  if (fd < 0)
    return hccl__fail(HCCL_E_SYSCALL, "memfd_create for %zu bytes of device-link buffers: %s",
                      bytes, strerror(errno));
  if (ftruncate(fd, (off_t)bytes) != 0) {
    int e = errno;
    close(fd);
    return hccl__fail(HCCL_E_MEMORY, "cannot size the device-link area to %zu bytes: %s", bytes,
                      strerror(e));
  }
  void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int e = errno;
    close(fd);
    return hccl__fail(HCCL_E_MEMORY, "cannot map %zu bytes of device-link buffers: %s", bytes,
                      strerror(e));
  }
  st->memfd = fd;
  area_bind(&st->own, base, bytes, nfifos, slot);
  st->own.hdr->magic = SHM_MAGIC;
  st->own.hdr->nfifos = nfifos;
  st->own.hdr->nslots = SHM_NSLOTS;
  st->own.hdr->slot_bytes = slot;
  atomic_store(&st->own.hdr->state, SHM_ALIVE);
  conn.fd = fd;
  conn.bytes = bytes;
  memcpy(self->conn[HCCL_TRANSPORT_SHM], &conn, sizeof(conn));
  return HCCL_SUCCESS;
}

static HcclResult shm_connect(struct hccl_tctx *tx, uint32_t peer, int channel, int mode,
                              struct hccl_link **out) {
  (void)mode; /* the peer's area exists since setup: mapping it never waits for the peer */
  struct shm_state *st = tx->state[HCCL_TRANSPORT_SHM];
  const struct hccl_peer_info *pi = &tx->peers[peer];
  struct shm_conn conn;
  memcpy(&conn, pi->conn[HCCL_TRANSPORT_SHM], sizeof(conn));
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", pi->pid, conn.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return hccl__fail(HCCL_E_SYSCALL,
                      "rank %u cannot open the device-link area of rank %u (%s): %s; both must "
                      "run as the same user in the same PID namespace",
                      tx->rank, peer, path, strerror(errno));
  void *base = mmap(NULL, conn.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (base == MAP_FAILED)
    return hccl__fail(HCCL_E_MEMORY, "cannot map the device-link area of rank %u: %s", peer,
                      strerror(e));
  struct shm_link *l = calloc(1, sizeof(*l));
  if (!l) {
    munmap(base, conn.bytes);
    return hccl__fail(HCCL_E_MEMORY, "out of memory for a device link");
  }
  uint32_t L = tx->local_nranks;
  area_bind(&l->peer, base, conn.bytes, HCCL_NCHANNELS * L, st->slot_bytes);
  if (l->peer.hdr->magic != SHM_MAGIC || l->peer.hdr->slot_bytes != st->slot_bytes) {
    munmap(base, conn.bytes);
    free(l);
    return hccl__fail(HCCL_E_INTERNAL,
                      "the device-link area of rank %u does not match rank %u's layout "
                      "(different HCCL_BUFFSIZE or library version?)",
                      peer, tx->rank);
  }
  uint32_t me = channel * L + tx->local_index[tx->rank];
  uint32_t them = channel * L + tx->local_index[peer];
  l->channel = channel;
  l->sfifo = &l->peer.fifos[me];
  l->sdata = l->peer.data + (size_t)me * SHM_NSLOTS * st->slot_bytes;
  l->rfifo = &st->own.fifos[them];
  l->rdata = st->own.data + (size_t)them * SHM_NSLOTS * st->slot_bytes;
  l->pidfd = (int)syscall(SYS_pidfd_open, pi->pid, 0);
  l->base.ops = &hccl__transport_shm;
  l->base.tx = tx;
  l->base.peer = peer;
  l->base.slot_bytes = st->slot_bytes;
  /* The channel-0 link stands for the peer in abort marks and dead-peer checks; it is closed
   * last. */
  if (channel == HCCL_CHANNEL_COLL) st->by_rank[peer] = l;
  *out = &l->base;
  return HCCL_SUCCESS;
}

static void shm_connected(struct hccl_tctx *tx) {
  struct shm_state *st = tx->state[HCCL_TRANSPORT_SHM];
  if (st && st->memfd >= 0) {
    close(st->memfd);
    st->memfd = -1;
  }
}

static HcclResult shm_check_abort(struct hccl_tctx *tx, const char *what) {
  struct shm_state *st = tx->state[HCCL_TRANSPORT_SHM];
  if (!st || !st->own.hdr) return HCCL_SUCCESS;
  struct shm_header *h = st->own.hdr;
  return hccl__abort_mark_check(tx, what, &h->abort_origin, &h->abort_ready, h->abort_reason);
}

/* Called every sleep slice, after the wait has read every transport's abort mark
 * (hccl__check_aborts): the peer's own abort mark, its departure or death. */
static HcclResult shm_check(void *arg, const struct hccl_wait *w, uint32_t peer) {
  struct hccl_tctx *tx = ((struct hccl_link *)arg)->tx;
  struct shm_state *st = tx->state[HCCL_TRANSPORT_SHM];
  uint32_t origin;
  struct shm_link *l = st->by_rank[peer];
  if (!l) return HCCL_SUCCESS;
  struct shm_header *ph = l->peer.hdr;
  origin = atomic_load(&ph->abort_origin);
  if (origin != 0 && atomic_load(&ph->abort_ready))
    return hccl__fail(HCCL_E_REMOTE, "%s on rank %u stopped: rank %u failed: %s", w->what,
                      tx->rank, origin - 1, ph->abort_reason);
  if (atomic_load(&ph->state) == SHM_DESTROYED)
    return hccl__fail(HCCL_E_REMOTE,
                      "%s on rank %u: rank %u (device %d) destroyed its communicator while rank "
                      "%u waited for it",
                      w->what, tx->rank, peer, tx->peers[peer].device, tx->rank);
  if (l->pidfd >= 0) {
    struct pollfd p = {.fd = l->pidfd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0)
      return hccl__fail(HCCL_E_REMOTE,
                        "%s on rank %u: rank %u (pid %d, device %d) exited while rank %u waited "
                        "for it",
                        w->what, tx->rank, peer, tx->peers[peer].pid, tx->peers[peer].device,
                        tx->rank);
  }
  return HCCL_SUCCESS;
}

static HcclResult shm_send_acquire(struct hccl_link *base, void **buf, const struct hccl_wait *w) {
  struct shm_link *l = (struct shm_link *)base;
  while (l->sent - l->head_seen >= SHM_NSLOTS) {
    uint32_t head = atomic_load_explicit(&l->sfifo->head, memory_order_acquire);
    if (head != l->head_seen) {
      l->head_seen = head;
      continue;
    }
    HCCL_TRY(hccl__wait_change(&l->sfifo->head, &l->sfifo->send_waiting, head, base->peer, w,
                               shm_check, base));
  }
  *buf = l->sdata + (size_t)(l->sent % SHM_NSLOTS) * base->slot_bytes;
  return HCCL_SUCCESS;
}

static void shm_send_commit(struct hccl_link *base, size_t bytes, const struct hccl_stamp *stamp) {
  struct shm_link *l = (struct shm_link *)base;
  struct shm_msg *m = &l->sfifo->msgs[l->sent % SHM_NSLOTS];
  m->size = (uint32_t)bytes;
  m->stamp = *stamp;
  l->sent++;
  hccl__post(&m->seq, &l->sfifo->recv_waiting, l->sent);
}

/* The record of the next message to receive, or NULL when it has not been posted yet. */
static struct shm_msg *next_posted(struct shm_link *l, uint32_t *seq) {
  struct shm_msg *m = &l->rfifo->msgs[l->received % SHM_NSLOTS];
  *seq = atomic_load_explicit(&m->seq, memory_order_acquire);
  return *seq == l->received + 1 ? m : NULL;
}

static HcclResult shm_recv_acquire(struct hccl_link *base, const void **buf, size_t *bytes,
                                   struct hccl_stamp *stamp, const struct hccl_wait *w) {
  struct shm_link *l = (struct shm_link *)base;
  uint32_t seq;
  struct shm_msg *m;
  while (!(m = next_posted(l, &seq)))
    HCCL_TRY(hccl__wait_change(&l->rfifo->msgs[l->received % SHM_NSLOTS].seq,
                               &l->rfifo->recv_waiting, seq, base->peer, w, shm_check, base));
  *buf = l->rdata + (size_t)(l->received % SHM_NSLOTS) * base->slot_bytes;
  *bytes = m->size;
  *stamp = m->stamp;
  return HCCL_SUCCESS;
}

static void shm_recv_release(struct hccl_link *base) {
  struct shm_link *l = (struct shm_link *)base;
  l->received++;
  hccl__post(&l->rfifo->head, &l->rfifo->send_waiting, l->received);
}

static bool shm_send_ready(struct hccl_link *base) {
  struct shm_link *l = (struct shm_link *)base;
  if (l->sent - l->head_seen < SHM_NSLOTS) return true;
  l->head_seen = atomic_load_explicit(&l->sfifo->head, memory_order_acquire);
  return l->sent - l->head_seen < SHM_NSLOTS;
}

static bool shm_recv_ready(struct hccl_link *base) {
  uint32_t seq;
  return next_posted((struct shm_link *)base, &seq) != NULL;
}

static bool shm_send_drained(struct hccl_link *base) {
  struct shm_link *l = (struct shm_link *)base;
  if (l->head_seen != l->sent)
    l->head_seen = atomic_load_explicit(&l->sfifo->head, memory_order_acquire);
  return l->head_seen == l->sent;
}

static HcclResult shm_send_drain(struct hccl_link *base, const struct hccl_wait *w) {
  struct shm_link *l = (struct shm_link *)base;
  while (!shm_send_drained(base))
    HCCL_TRY(hccl__wait_change(&l->sfifo->head, &l->sfifo->send_waiting, l->head_seen, base->peer,
                               w, shm_check, base));
  return HCCL_SUCCESS;
}

static void wake_area(struct shm_area *a) {
  for (uint32_t i = 0; i < a->hdr->nfifos; i++) {
    for (uint32_t k = 0; k < SHM_NSLOTS; k++)
      hccl__wake_all(&a->fifos[i].msgs[k].seq);
    hccl__wake_all(&a->fifos[i].head);
  }
}

static void mark_abort(struct shm_header *h, uint32_t origin, HcclResult code, const char *reason) {
  uint32_t expect = 0;
  if (!atomic_compare_exchange_strong(&h->abort_origin, &expect, origin + 1)) return;
  atomic_store(&h->abort_code, (int32_t)code);
  snprintf(h->abort_reason, sizeof(h->abort_reason), "%s", reason);
  atomic_store(&h->abort_ready, 1);
}

static void shm_abort(struct hccl_tctx *tx, uint32_t origin, HcclResult code) {
  struct shm_state *st = tx->state[HCCL_TRANSPORT_SHM];
  if (!st || !st->own.hdr) return;
  const char *reason = HcclGetLastErrorMessage();
  char copy[HCCL_REASON_MAX];
  /* If the failure came from another rank's abort, pass its words on unchanged. */
  if (atomic_load(&st->own.hdr->abort_origin) != 0) return;
  snprintf(copy, sizeof(copy), "%s", reason && *reason ? reason : HcclGetErrorString(code));
  /* Mark everyone before waking anyone: a woken peer may fail and destroy at once, and the
   * others must already know why. */
  mark_abort(st->own.hdr, origin, code, copy);
  for (uint32_t r = 0; r < tx->nranks; r++)
    if (st->by_rank[r]) mark_abort(st->by_rank[r]->peer.hdr, origin, code, copy);
  for (uint32_t r = 0; r < tx->nranks; r++)
    if (st->by_rank[r]) wake_area(&st->by_rank[r]->peer);
  wake_area(&st->own);
}

static struct hccl_progress *shm_progress(struct hccl_tctx *tx, uint32_t rank) {
  struct shm_state *st = tx->state[HCCL_TRANSPORT_SHM];
  if (!st || !st->own.hdr) return NULL;
  if (rank == tx->rank) return &st->own.hdr->progress;
  return st->by_rank[rank] ? &st->by_rank[rank]->peer.hdr->progress : NULL;
}

static void shm_close(struct hccl_link *base) {
  struct shm_link *l = (struct shm_link *)base;
  for (int i = 0; i < SHM_WINDOWS; i++)
    if (l->win[i].serial) munmap(l->win[i].base, l->win[i].bytes);
  struct shm_state *st = base->tx->state[HCCL_TRANSPORT_SHM];
  if (st && l->channel == HCCL_CHANNEL_COLL) st->by_rank[base->peer] = NULL;
  if (l->pidfd >= 0) close(l->pidfd);
  munmap(l->peer.hdr, l->peer.bytes);
  free(l);
}

static void shm_teardown(struct hccl_tctx *tx) {
  struct shm_state *st = tx->state[HCCL_TRANSPORT_SHM];
  if (!st) return;
  if (st->own.hdr) {
    atomic_store(&st->own.hdr->state, SHM_DESTROYED);
    wake_area(&st->own);
    munmap(st->own.hdr, st->own.bytes);
  }
  if (st->memfd >= 0) close(st->memfd);
  free(st->by_rank);
  free(st);
  tx->state[HCCL_TRANSPORT_SHM] = NULL;
}

const struct hccl_transport_ops hccl__transport_shm = {
    .name = "shm",
    .index = HCCL_TRANSPORT_SHM,
    .can_connect = shm_can_connect,
    .setup = shm_setup,
    .connect = shm_connect,
    .connected = shm_connected,
    .send_acquire = shm_send_acquire,
    .send_commit = shm_send_commit,
    .recv_acquire = shm_recv_acquire,
    .recv_release = shm_recv_release,
    .send_ready = shm_send_ready,
    .recv_ready = shm_recv_ready,
    .send_drained = shm_send_drained,
    .send_drain = shm_send_drain,
    .abort = shm_abort,
    .check_abort = shm_check_abort,
    .progress = shm_progress,
    .map_window = hccl__shm_map_window,
    .wait_check = shm_check,
    .close = shm_close,
    .teardown = shm_teardown,
    /* Fitted on 2-core, 8-rank runs of allreduce_perf (HCCL_ALGO=ring against tree). */
    .alpha_ns = 3700.0,
    .beta_ns = 0.5,
};
