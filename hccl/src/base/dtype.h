/*
 * dtype.h - facts about the public element types (HcclDataType) and reductions (HcclReduceOp):
 * bytes per element and the names messages and traces use. The kernels that reduce them are
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

#endif
