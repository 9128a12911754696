/*
 * fingerprint.h - what a collective call is, in the 16-byte stamp every message of it carries
 * (struct hccl_stamp, transport.h): its sequence number on the communicator, the collective,
 * the count, the data type, the reduction and the root. A receiver compares each message's
 * stamp with its own call's before it reads the data, so ranks that called different
 * collectives, or the same one with different arguments, fail at the first message between
 * them, before any data is mixed, naming both ranks and the fields that differ. The failing
 * rank's abort carries the message to every other rank.
 *
 * In the user's words: a framework may pass its users' data as other types (torch_hccl: a
 * broadcast as bytes). The stamp also carries the type the user passed (HcclSetCallUserType,
 * base/dtype.h's table of the framework's types), so both calls are named as the user made
 * them ("broadcast (count 1000, torch.float32, root 0)", the count in the user's elements), and
 * only the fields that differ in those terms are listed.
 *
 * Cost: two words written with each message and two compared on receipt.
 */
#ifndef HCCL_FINGERPRINT_H
#define HCCL_FINGERPRINT_H

#include <stdint.h>

#include "coll_kind.h"
#include "hccl.h"
#include "transport.h"

/* The stamp of call number seq (from 1) of this kind; user_type: the type the user passed
 * (struct hccl_op's user_type: a code of HcclSetUserTypes + 1; 0 when the call is named as
 * made). Fields a collective does not use (the
 * reduction of a broadcast, the root of an allreduce, the counts of an alltoallv, which
 * differ per rank) are left out, so they never cause a difference. A premul sum
 * (HCCL__RED_PREMUL_SUM, reduce.h) stamps a 15-bit hash of its scalar's bits (`scalar`, read
 * only then) in place of the op and the top of the count, so ranks whose scalars differ fail
 * like any other mismatch (two scalars escape with a chance of 2^-15). */
struct hccl_stamp hccl__fp_make(uint64_t seq, enum hccl_coll_kind kind, uint64_t count,
                                HcclDataType dt, HcclReduceOp op, uint64_t scalar, uint32_t root,
                                uint32_t user_type);

/* Whether a message stamped `theirs` belongs to the call stamped `mine`. An all-zero `mine`
 * (point-to-point messages) accepts anything. */
static inline int hccl__fp_match(const struct hccl_stamp *mine, const struct hccl_stamp *theirs) {
  return mine->w[0] == 0 || (mine->w[0] == theirs->w[0] && mine->w[1] == theirs->w[1]);
}

/* Fails with HCCL_E_PARA naming this rank's (`rank`) call and rank `peer`'s (from its stamp),
 * each as its user made it, and the fields that differ in those terms:
 * "mismatched collectives: rank 3 called broadcast (count 1000, torch.float32, root 0) as call
 * 2 while rank 0 called allreduce (count 1000, torch.float32, sum) as call 2 (they differ in
 * collective); ..." */
HcclResult hccl__fp_mismatch(uint32_t rank, uint32_t peer,
                             const struct hccl_stamp *mine, const struct hccl_stamp *theirs);

#endif
