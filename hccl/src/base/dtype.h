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

/* Bytes per element, or 0 for a value outside HcclDataType. */
size_t hccl__dtype_size(HcclDataType dt);
/* nccl-tests' spelling: "int8", "int16", "int32", "half", "float", "int64", "uint64", "uint8",
 * "uint16", "uint32", "double", "bfloat16"; "unknown" otherwise. */
const char *hccl__dtype_name(HcclDataType dt);
/* "sum", "prod", "max", "min"; "unknown" otherwise. */
const char *hccl__op_name(HcclReduceOp op);
/* Whether op is one of HcclReduceOp's values (the enums may hold any int: they come from
 * users). */
bool hccl__op_valid(HcclReduceOp op);

#endif
