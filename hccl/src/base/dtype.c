/*
 * dtype.c - the facts of each element type and reduction: size and name. See dtype.h.
 */
#include "dtype.h"

static const struct {
  size_t size;
  const char *name;
} dtype_info[HCCL_DATA_TYPE_RESERVED] = {
    [HCCL_DATA_TYPE_INT8] = {1, "int8"},     [HCCL_DATA_TYPE_INT16] = {2, "int16"},
    [HCCL_DATA_TYPE_INT32] = {4, "int32"},   [HCCL_DATA_TYPE_FP16] = {2, "half"},
    [HCCL_DATA_TYPE_FP32] = {4, "float"},    [HCCL_DATA_TYPE_INT64] = {8, "int64"},
    [HCCL_DATA_TYPE_UINT64] = {8, "uint64"}, [HCCL_DATA_TYPE_UINT8] = {1, "uint8"},
    [HCCL_DATA_TYPE_UINT16] = {2, "uint16"}, [HCCL_DATA_TYPE_UINT32] = {4, "uint32"},
    [HCCL_DATA_TYPE_FP64] = {8, "double"},   [HCCL_DATA_TYPE_BFP16] = {2, "bfloat16"},
};

static const char *const op_names[HCCL_REDUCE_RESERVED] = {
    [HCCL_REDUCE_SUM] = "sum",   [HCCL_REDUCE_PROD] = "prod", [HCCL_REDUCE_MAX] = "max",
    [HCCL_REDUCE_MIN] = "min",   [HCCL_REDUCE_AVG] = "avg",   [HCCL_REDUCE_BAND] = "band",
    [HCCL_REDUCE_BOR] = "bor",   [HCCL_REDUCE_BXOR] = "bxor",
};

/* The enums may hold any int (they come from users); compare as unsigned so negative values
 * are out of range too. */
static bool dtype_valid(HcclDataType dt) {
  return (unsigned)dt < (unsigned)HCCL_DATA_TYPE_RESERVED;
}
bool hccl__op_valid(HcclReduceOp op) {
  return (unsigned)op < (unsigned)HCCL_REDUCE_RESERVED;
}

size_t hccl__dtype_size(HcclDataType dt) {
  return dtype_valid(dt) ? dtype_info[dt].size : 0;
}

const char *hccl__dtype_name(HcclDataType dt) {
  return dtype_valid(dt) ? dtype_info[dt].name : "unknown";
}

const char *hccl__op_name(HcclReduceOp op) {
  if (op == HCCL__RED_PREMUL_SUM) return "premul_sum";
  return hccl__op_valid(op) ? op_names[op] : "unknown";
}
