/*
 * rdma_wire.c - the RDMA transport's pure steps (rdma_wire.h): the conn blob and the control
 * messages encoded and checked, the slot size, a posted receive's entry and where a message lands
 * under it, the MTU in bytes, and the choice of the GID and of the device. No verbs and no I/O, so
 * it is compiled whether or not <infiniband/verbs.h> is there, and tests/transport/test_rdma.c runs
 * it on machines without an RDMA device.
 */
#include "rdma_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hccl__rdma_blob_encode(const struct rdma_blob *b, uint8_t conn[HCCL_CONN_BYTES]) {
  memset(conn, 0, HCCL_CONN_BYTES);
  memcpy(conn, b, sizeof(*b));
}

bool hccl__rdma_blob_decode(const uint8_t conn[HCCL_CONN_BYTES], struct rdma_blob *b) {
  memcpy(b, conn, sizeof(*b));
  return b->magic == RDMA_BLOB_MAGIC && b->version == RDMA_VERSION && b->active == 1 &&
         hccl__rdma_mtu_bytes(b->mtu) != 0;
}

size_t hccl__rdma_msg_encode(const struct rdma_msg *m, const char *text, char *buf, size_t cap) {
  struct rdma_msg h = *m;
  h.magic = RDMA_MSG_MAGIC;
  h.len = 0;
  size_t room = cap > sizeof(h) ? cap - sizeof(h) : 0;
  if (h.type == RDMA_MSG_ABORT && room > 0) {
    size_t n = text ? strlen(text) : 0;
    if (n + 1 > room) n = room - 1;
    memcpy(buf + sizeof(h), text ? text : "", n);
    buf[sizeof(h) + n] = '\0';
    h.len = (uint32_t)(n + 1);
  }
  memcpy(buf, &h, sizeof(h));
  return sizeof(h) + h.len;
}

bool hccl__rdma_msg_decode(const char *buf, size_t len, uint64_t want_comm, uint32_t nranks,
                           struct rdma_msg *m, const char **text, char *why, size_t why_len) {
  *text = "";
  if (len < sizeof(*m)) {
    snprintf(why, why_len, "a control message of %zu bytes (at least %zu)", len, sizeof(*m));
    return false;
  }
  memcpy(m, buf, sizeof(*m));
  if (m->magic != RDMA_MSG_MAGIC)
    snprintf(why, why_len, "a control message of another protocol (magic 0x%08x)", m->magic);
  else if (m->comm_id != want_comm)
    snprintf(why, why_len, "a control message of another communicator");
  else if (m->from >= nranks)
    snprintf(why, why_len, "a control message from rank %u of %u", m->from, nranks);
  else if (m->type < RDMA_MSG_HELLO || m->type > RDMA_MSG_BYE)
    snprintf(why, why_len, "a control message of unknown type %u", m->type);
  else if (m->type == RDMA_MSG_HELLO && m->channel >= HCCL_NCHANNELS)
    snprintf(why, why_len, "a hello for channel %u", m->channel);
  else if (m->type == RDMA_MSG_HELLO && hccl__rdma_mtu_bytes(m->mtu) == 0)
    snprintf(why, why_len, "a hello with MTU code %u", m->mtu);
  else if (m->type == RDMA_MSG_ABORT && m->origin >= nranks)
    snprintf(why, why_len, "an abort from rank %u of %u", m->origin, nranks);
  else if (m->type == RDMA_MSG_ABORT &&
           (m->len == 0 || m->len > len - sizeof(*m) || buf[sizeof(*m) + m->len - 1] != '\0'))
    snprintf(why, why_len, "an abort whose reason (%u bytes) does not end inside its %zu bytes",
             m->len, len);
  else if (m->type != RDMA_MSG_ABORT && m->len != 0)
    snprintf(why, why_len, "a control message of type %u with %u bytes of text", m->type,
             m->len);
  else {
    if (m->type == RDMA_MSG_ABORT) *text = buf + sizeof(*m);
    return true;
  }
  return false;
}

size_t hccl__rdma_slot_bytes(size_t buffsize, uint32_t nremote) {
  if (nremote == 0) nremote = 1;
  size_t slot = buffsize / ((size_t)HCCL_NCHANNELS * nremote * RDMA_NSLOTS);
  if (slot > RDMA_SLOT_MAX) slot = RDMA_SLOT_MAX;
  slot = slot / 4096 * 4096;
  if (slot < RDMA_SLOT_MIN) slot = RDMA_SLOT_MIN;
  return slot;
}

struct rdma_post hccl__rdma_post_make(uint64_t addr, uint32_t rkey, size_t chunk, size_t bytes,
                                      uint32_t first, uint32_t step, uint32_t id) {
  size_t n = (bytes + chunk - 1) / chunk, most = (INT32_MAX - 1) / (step ? step : 1) + 1;
  return (struct rdma_post){.addr = addr,
                            .chunk = chunk,
                            .bytes = bytes,
                            .rkey = rkey,
                            .first = first,
                            .n = n > most ? (uint32_t)most : (uint32_t)n,
                            .id = id,
                            .step = step};
}

/* Which of p's messages seq is (0 .. n - 1), or -1: before, between or after them. The span
 * (n - 1) x step stays below 2^31 (post_make), so a signed distance tells before from after. */
static int64_t index_of(const struct rdma_post *p, uint32_t seq) {
  int32_t k = (int32_t)(seq - p->first);
  if (k < 0 || p->step == 0 || (uint32_t)k % p->step != 0) return -1;
  uint32_t i = (uint32_t)k / p->step;
  return i < p->n ? (int64_t)i : -1;
}

bool hccl__rdma_post_covers(const struct rdma_post *p, uint32_t seq) {
  return index_of(p, seq) >= 0;
}

bool hccl__rdma_post_place(const struct rdma_post *p, uint32_t seq, size_t bytes,
                           uint64_t *addr) {
  int64_t i = index_of(p, seq);
  if (bytes == 0 || i < 0 || bytes > p->chunk) return false;
  uint64_t off = (uint64_t)i * p->chunk;
  if (off + bytes > p->bytes) return false;
  *addr = p->addr + off;
  return true;
}

bool hccl__rdma_post_spent(const struct rdma_post *p, uint32_t seq) {
  int32_t k = (int32_t)(seq - p->first);
  return p->n == 0 || (k >= 0 && (uint64_t)k > (uint64_t)(p->n - 1) * p->step);
}

uint32_t hccl__rdma_mtu_bytes(int mtu) { return mtu >= 1 && mtu <= 5 ? 128u << mtu : 0; }

int hccl__rdma_gid_type(const char *t, bool ethernet) {
  if (!t) return RDMA_GID_NONE;
  if (strncmp(t, "RoCE v2", 7) == 0) return RDMA_GID_ROCE_V2;
  if (strncmp(t, "IB/RoCE v1", 10) == 0) return ethernet ? RDMA_GID_ROCE_V1 : RDMA_GID_IB;
  return RDMA_GID_NONE;
}

bool hccl__rdma_gid_ipv4(const uint8_t g[16]) {
  static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g, pre, 12) == 0;
}

static bool gid_zero(const uint8_t g[16]) {
  for (int i = 0; i < 16; i++)
    if (g[i]) return false;
  return true;
}

int hccl__rdma_gid_pick(const struct rdma_gid_entry *g, int n, int want, char *why, size_t len) {
  if (want >= 0) {
    if (want < n && !gid_zero(g[want].raw)) return want;
    snprintf(why, len, "HCCL_RDMA_GID_INDEX=%d names no GID of the port (its table has %d entries%s)",
             want, n, want < n ? "; that one is empty" : "");
    return -1;
  }
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < n; i++) {
      if (gid_zero(g[i].raw)) continue;
      if (pass == 0 && g[i].type == RDMA_GID_ROCE_V2 && hccl__rdma_gid_ipv4(g[i].raw)) return i;
      if (pass == 1 && g[i].type == RDMA_GID_ROCE_V2) return i;
      if (pass == 2) return i;
    }
  snprintf(why, len, "the port's GID table (%d entries) has no address: give the port's "
           "network device an IP address", n);
  return -1;
}

bool hccl__rdma_device_spec(const char *spec, char *name, size_t name_len, int *port) {
  const char *colon = strchr(spec, ':');
  size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
  if (n >= name_len) n = name_len - 1;
  memcpy(name, spec, n);
  name[n] = '\0';
  *port = 0;
  if (!colon) return true;
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (end == colon + 1 || *end || p < 1 || p > RDMA_MAX_PORTS) return false;
  *port = (int)p;
  return true;
}

/* "rxe0 (port 1 active), mlx5_0 (port 1 down)" into buf. */
static void list_found(const struct rdma_dev_desc *d, int n, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && at < len; i++) {
    at += (size_t)snprintf(buf + at, len - at, "%s%s (", i ? ", " : "", d[i].name);
    for (int p = 0; p < d[i].nports && at < len; p++)
      at += (size_t)snprintf(buf + at, len - at, "%sport %d %s", p ? ", " : "", p + 1,
                             d[i].active[p] ? "active" : "down");
    if (d[i].nports == 0 && at < len) at += (size_t)snprintf(buf + at, len - at, "no port");
    if (at < len) at += (size_t)snprintf(buf + at, len - at, ")");
  }
}

int hccl__rdma_device_pick(const struct rdma_dev_desc *d, int n, const char *spec, int *port,
                           char *why, size_t len) {
  char name[64], found[256];
  int want_port = 0;
  if (n == 0) {
    snprintf(why, len, "no RDMA device: ibv_get_device_list found none");
    return -1;
  }
  list_found(d, n, found, sizeof(found));
  if (spec && *spec && !hccl__rdma_device_spec(spec, name, sizeof(name), &want_port)) {
    snprintf(why, len, "HCCL_RDMA_DEVICE='%s' is not valid: use a device name, or name:port "
             "with a port from 1 to %d; found %s", spec, RDMA_MAX_PORTS, found);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    if (spec && *spec && strcmp(d[i].name, name) != 0) continue;
    for (int p = 0; p < d[i].nports; p++)
      if (d[i].active[p] && (want_port == 0 || want_port == p + 1)) {
        *port = p + 1;
        return i;
      }
    if (spec && *spec) {
      snprintf(why, len, "HCCL_RDMA_DEVICE='%s': that port is not active; RDMA devices found: %s",
               spec, found);
      return -1;
    }
  }
  if (spec && *spec)
    snprintf(why, len, "HCCL_RDMA_DEVICE='%s' names no device; RDMA devices found: %s", spec,
             found);
  else
    snprintf(why, len, "no RDMA port is active; RDMA devices found: %s", found);
  return -1;
}
