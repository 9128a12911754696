/*
 * fingerprint.c - packing a collective call into a stamp, and the message when two differ,
 * in the user's terms. See fingerprint.h.
 *
 * Layout: w[0] = sequence number (bits 0-39) | kind (40-43) | data type (44-47) | reduction
 * (48-55) | the user's type (56-63: HcclSetUserTypes' code + 1, 0 for none); w[1] = count
 * (bits 0-47) | root (48-63). A field a collective does not use holds NONE (all ones).
 * Counts above 2^48 and roots above 65534 are kept modulo the field: two calls that differ
 * only there are not told apart (no job comes near either). A premul sum's reduction byte is
 * 0x80 | 7 bits of its scalar's hash, and bits 40-47 of the count hold 8 more (its counts are
 * kept modulo 2^40).
 */
#include "fingerprint.h"

#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "log.h"
#include "reduce.h"

#define NONE 0xffu
#define NO_DT 0xfu
#define NO_ROOT 0xffffu
#define SEQ_MASK ((1ULL << 40) - 1)
#define COUNT_MASK ((1ULL << 48) - 1)

static int reduces(unsigned k) {
  return k == HCCL_K_ALLREDUCE || k == HCCL_K_REDUCE || k == HCCL_K_REDUCE_SCATTER;
}
static int rooted(unsigned k) {
  return k == HCCL_K_BROADCAST || k == HCCL_K_REDUCE || k == HCCL_K_GATHER || k == HCCL_K_SCATTER;
}
static int counted(unsigned k) {
  return k != HCCL_K_BARRIER && k != HCCL_K_ALLTOALLV;
}

#define PREMUL_BIT 0x80u
#define PREMUL_COUNT_MASK ((1ULL << 40) - 1)

struct hccl_stamp hccl__fp_make(uint64_t seq, enum hccl_coll_kind kind, uint64_t count,
                                HcclDataType dt, HcclReduceOp op, uint64_t scalar, uint32_t root,
                                uint32_t user_type) {
  uint64_t d = kind == HCCL_K_BARRIER ? NO_DT : (uint64_t)dt & 0xf;
  uint64_t o = reduces(kind) ? (uint64_t)op & 0xff : NONE;
  uint64_t r = rooted(kind) ? (uint64_t)(root < NO_ROOT ? root : root % NO_ROOT) : NO_ROOT;
  uint64_t n = counted(kind) ? count & COUNT_MASK : 0;
  uint64_t u = kind == HCCL_K_BARRIER ? 0 : (uint64_t)user_type & 0xff;
  if (reduces(kind) && op == HCCL__RED_PREMUL_SUM) {
    uint64_t h = (scalar + 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL; /* splitmix64's mix */
    h ^= h >> 31;
    o = PREMUL_BIT | (h & 0x7f);
    n = (n & PREMUL_COUNT_MASK) | ((h >> 7) & 0xff) << 40;
  }
  struct hccl_stamp s = {{(seq & SEQ_MASK) | (uint64_t)(kind & 0xf) << 40 | d << 44 | o << 48 |
                              u << 56,
                          n | r << 48}};
  return s;
}

/* A stamp's fields, and the call as its user made it: the type's name (NULL for none, a
 * barrier) and the count in elements of that type. */
struct fields {
  uint64_t seq, count;
  unsigned kind, dt, op, root, user_type;
  unsigned scalar_hash; /* a premul sum's */
  const char *type;
  uint64_t user_count;
};

/* f named as the call was made, without the user's type. */
static void as_made(struct fields *f) {
  f->user_count = f->count;
  if (f->dt != NO_DT) f->type = hccl__dtype_name((HcclDataType)f->dt);
}

static struct fields unpack(const struct hccl_stamp *s) {
  struct fields f = {.seq = s->w[0] & SEQ_MASK,
                     .kind = (unsigned)(s->w[0] >> 40 & 0xf),
                     .dt = (unsigned)(s->w[0] >> 44 & 0xf),
                     .op = (unsigned)(s->w[0] >> 48 & 0xff),
                     .user_type = (unsigned)(s->w[0] >> 56),
                     .count = s->w[1] & COUNT_MASK,
                     .root = (unsigned)(s->w[1] >> 48)};
  if (f.op != NONE && (f.op & PREMUL_BIT)) {
    f.scalar_hash = (unsigned)(f.op & 0x7f) | (unsigned)(f.count >> 40 & 0xff) << 7;
    f.count &= PREMUL_COUNT_MASK;
  }
  /* The user's view: the framework's type and the call's bytes in its elements, where they
   * divide (they always do for a framework that passes its own tensors); else the call as
   * made. */
  as_made(&f);
  size_t usize = 0, lsize = f.dt != NO_DT ? hccl__dtype_size((HcclDataType)f.dt) : 0;
  const char *uname = f.user_type ? hccl__user_type(f.user_type - 1, &usize) : NULL;
  if (uname && lsize && (f.count * lsize) % usize == 0) {
    f.type = uname;
    f.user_count = f.count * lsize / usize;
  }
  return f;
}

/* Which of the six fields below differ between a and b, in the terms they are named in. A
 * field counts only where both collectives use it. Returns whether any does. */
static int differing(const struct fields *a, const struct fields *b, int differs[6]) {
  int both_counted = counted(a->kind) && counted(b->kind), both_typed = a->type && b->type;
  differs[0] = a->seq != b->seq;
  differs[1] = a->kind != b->kind;
  differs[2] = both_counted && a->user_count != b->user_count;
  differs[3] = both_typed && strcmp(a->type, b->type) != 0;
  differs[4] = a->op != NONE && b->op != NONE && (a->op != b->op || a->scalar_hash != b->scalar_hash);
  differs[5] = a->root != NO_ROOT && b->root != NO_ROOT && a->root != b->root;
  int any = 0;
  for (int i = 0; i < 6; i++) any |= differs[i];
  return any;
}

/* "allreduce (count 4096, float, sum)", "broadcast (count 1000, torch.float32, root 0)" */
static void describe(const struct fields *f, char *buf, size_t len) {
  int n = snprintf(buf, len, "%s (", hccl__coll_kind_name(f->kind));
  const char *sep = "";
  if (counted(f->kind)) {
    n += snprintf(buf + n, len - (size_t)n, "count %llu", (unsigned long long)f->user_count);
    sep = ", ";
  }
  if (f->type) {
    n += snprintf(buf + n, len - (size_t)n, "%s%s", sep, f->type);
    sep = ", ";
  }
  if (f->op != NONE && (f->op & PREMUL_BIT)) {
    n += snprintf(buf + n, len - (size_t)n, "%spremul_sum with scalar #%04x", sep, f->scalar_hash);
    sep = ", ";
  } else if (f->op != NONE) {
    n += snprintf(buf + n, len - (size_t)n, "%s%s", sep, hccl__op_name((HcclReduceOp)f->op));
    sep = ", ";
  }
  if (f->root != NO_ROOT) n += snprintf(buf + n, len - (size_t)n, "%sroot %u", sep, f->root);
  snprintf(buf + n, len - (size_t)n, ")");
}

HcclResult hccl__fp_mismatch(uint32_t rank, uint32_t peer,
                             const struct hccl_stamp *mine, const struct hccl_stamp *theirs) {
  struct fields a = unpack(mine), b = unpack(theirs);
  const char *names[6] = {"call number", "collective", "count", "data type", "reduction", "root"};
  /* In the user's terms first: a float32 broadcast the framework passed as bytes and an
   * allreduce of as many float32 differ only as collectives. Calls alike in those terms whose
   * stamps still differ were made differently by the framework: both are named as made. */
  int differs[6];
  if (!differing(&a, &b, differs)) {
    as_made(&a);
    as_made(&b);
    differing(&a, &b, differs);
  }
  char da[160], db[160], diff[96] = "";
  describe(&a, da, sizeof(da));
  describe(&b, db, sizeof(db));
  size_t n = 0;
  for (int i = 0; i < 6; i++)
    if (differs[i])
      n += (size_t)snprintf(diff + n, sizeof(diff) - n, "%s%s", n ? ", " : "", names[i]);
  return hccl__fail(HCCL_E_PARA,
                    "mismatched collectives: rank %u called %s as call %llu while rank %u called "
                    "%s as call %llu (they differ in %s); every rank must make the same "
                    "collective calls, with the same arguments, in the same order",
                    peer, db, (unsigned long long)b.seq, rank, da, (unsigned long long)a.seq,
                    diff);
}
