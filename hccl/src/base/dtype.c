/*
 * dtype.c - the facts of each element type and reduction: size and name; the caller's element
 * types, for messages. See dtype.h.
 */
#include "dtype.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

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

/* ---- the caller's element types ----
 * Written once under the lock, then read without it: `user_count` is published last (release)
 * and read first (acquire), so a reader sees only complete entries. */

#define USER_TYPES_MAX 255
#define USER_NAME_MAX 32

static struct {
  char name[USER_NAME_MAX];
  size_t size;
} user_types[USER_TYPES_MAX];
static _Atomic uint32_t user_count;
static pthread_mutex_t user_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether the table holds exactly types[0..count). */
static bool user_types_same(const HcclUserType *types, uint32_t count) {
  if (atomic_load_explicit(&user_count, memory_order_acquire) != count) return false;
  for (uint32_t i = 0; i < count; i++)
    if (user_types[i].size != types[i].size ||
        strncmp(user_types[i].name, types[i].name, USER_NAME_MAX - 1) != 0)
      return false;
  return true;
}

HcclResult hccl__user_types_set(const HcclUserType *types, uint32_t count) {
  if (count > USER_TYPES_MAX)
    return hccl__fail(HCCL_E_PARA, "HcclSetUserTypes: %u types; at most %d fit a fingerprint",
                      count, USER_TYPES_MAX);
  if (count && !types) return hccl__fail(HCCL_E_PTR, "HcclSetUserTypes: types is NULL");
  for (uint32_t i = 0; i < count; i++) {
    if (!types[i].name)
      return hccl__fail(HCCL_E_PTR, "HcclSetUserTypes: the name of type %u is NULL", i);
    if (types[i].size == 0)
      return hccl__fail(HCCL_E_PARA,
                        "HcclSetUserTypes: type %u (%s) has size 0; a size is the bytes of "
                        "one element, 1 or more",
                        i, types[i].name);
  }
  pthread_mutex_lock(&user_lock);
  HcclResult r = HCCL_SUCCESS;
  if (atomic_load_explicit(&user_count, memory_order_acquire) == 0) {
    for (uint32_t i = 0; i < count; i++) {
      snprintf(user_types[i].name, USER_NAME_MAX, "%s", types[i].name);
      user_types[i].size = types[i].size;
    }
    atomic_store_explicit(&user_count, count, memory_order_release);
  } else if (!user_types_same(types, count)) {
    r = hccl__fail(HCCL_E_PARA,
                   "HcclSetUserTypes: this process named its types already, as another list; "
                   "call it once, with the same list on every rank");
  }
  pthread_mutex_unlock(&user_lock);
  return r;
}

const char *hccl__user_type(uint32_t code, size_t *size) {
  if (code >= atomic_load_explicit(&user_count, memory_order_acquire)) return NULL;
  *size = user_types[code].size;
  return user_types[code].name;
}
