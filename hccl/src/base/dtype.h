/*
 * dtype.h - facts about the public element types (HcclDataType) and reductions (HcclReduceOp):
 * bytes per element and the names messages and traces use; and the element types of a framework
 * over the library (HcclSetUserTypes, whose entry point is core/coll.c), by which a mismatch is
 * named in its user's terms (algo/fingerprint.c). The kernels that reduce them are
 * algo/reduce.h.
 */
#ifndef HCCL_DTYPE_H
#define HCCL_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "hccl.h"

/* The op a call made with an HcclRedOpCreatePreMulSum op runs as (its scalar travels beside
 * it): the sum of the inputs times the scalar. Not a value users pass. */
#define HCCL__RED_PREMUL_SUM ((HcclReduceOp)0x7f)

/* Bytes per element, or 0 for a value outside HcclDataType. */
size_t hccl__dtype_size(HcclDataType dt);
/* nccl-tests' spelling: "int8", "int16", "int32", "half", "float", "int64", "uint64", "uint8",
 * "uint16", "uint32", "double", "bfloat16"; "unknown" otherwise. */
const char *hccl__dtype_name(HcclDataType dt);
/* "sum", "prod", "max", "min", "avg", "band", "bor", "bxor", "premul_sum"; "unknown"
 * otherwise. */
const char *hccl__op_name(HcclReduceOp op);
/* Whether op is one of HcclReduceOp's built-in values (the enums may hold any int: they come
 * from users). */
bool hccl__op_valid(HcclReduceOp op);

/* The caller's element types (HcclSetUserTypes' contract): copied into a table of the process,
 * once; a second call with the same list succeeds, with another fails. */
HcclResult hccl__user_types_set(const HcclUserType *types, uint32_t count);
/* The name of the caller's type `code` and its bytes per element (*size), or NULL when no such
 * type was named. Any thread, once hccl__user_types_set returned. */
const char *hccl__user_type(uint32_t code, size_t *size);

#endif
