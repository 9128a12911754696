/*
 * test_dtype.c - hccl/src/base/dtype.c and coll_kind.c: the size and name of every element
 * type, the name of every reduction and collective, and what an out-of-range value gives
 * (the enums come from users and may hold any int).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "coll_kind.h"
#include "dtype.h"

static void test_dtype_facts(void **state) {
  (void)state;
  static const struct {
    HcclDataType dt;
    size_t size;
    const char *name;
  } want[] = {
      {HCCL_DATA_TYPE_INT8, 1, "int8"},     {HCCL_DATA_TYPE_INT16, 2, "int16"},
      {HCCL_DATA_TYPE_INT32, 4, "int32"},   {HCCL_DATA_TYPE_FP16, 2, "half"},
      {HCCL_DATA_TYPE_FP32, 4, "float"},    {HCCL_DATA_TYPE_INT64, 8, "int64"},
      {HCCL_DATA_TYPE_UINT64, 8, "uint64"}, {HCCL_DATA_TYPE_UINT8, 1, "uint8"},
      {HCCL_DATA_TYPE_UINT16, 2, "uint16"}, {HCCL_DATA_TYPE_UINT32, 4, "uint32"},
      {HCCL_DATA_TYPE_FP64, 8, "double"},   {HCCL_DATA_TYPE_BFP16, 2, "bfloat16"},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    assert_int_equal(hccl__dtype_size(want[i].dt), want[i].size);
    assert_string_equal(hccl__dtype_name(want[i].dt), want[i].name);
  }
  assert_int_equal(hccl__dtype_size(HCCL_DATA_TYPE_RESERVED), 0);
  assert_int_equal(hccl__dtype_size((HcclDataType)-1), 0);
  assert_string_equal(hccl__dtype_name((HcclDataType)-1), "unknown");
  assert_string_equal(hccl__dtype_name(HCCL_DATA_TYPE_RESERVED), "unknown");
}

static void test_op_facts(void **state) {
  (void)state;
  assert_string_equal(hccl__op_name(HCCL_REDUCE_SUM), "sum");
  assert_string_equal(hccl__op_name(HCCL_REDUCE_PROD), "prod");
  assert_string_equal(hccl__op_name(HCCL_REDUCE_MAX), "max");
  assert_string_equal(hccl__op_name(HCCL_REDUCE_MIN), "min");
  assert_true(hccl__op_valid(HCCL_REDUCE_MIN));
  assert_false(hccl__op_valid(HCCL_REDUCE_RESERVED));
  assert_false(hccl__op_valid((HcclReduceOp)-1));
  assert_string_equal(hccl__op_name((HcclReduceOp)-1), "unknown");
  assert_string_equal(hccl__op_name(HCCL_REDUCE_RESERVED), "unknown");
}

static void test_coll_kind_names(void **state) {
  (void)state;
  assert_string_equal(hccl__coll_kind_name(HCCL_K_ALLREDUCE), "allreduce");
  assert_string_equal(hccl__coll_kind_name(HCCL_K_REDUCE_SCATTER), "reduce-scatter");
  assert_string_equal(hccl__coll_kind_name(HCCL_K_ALLTOALLV), "alltoallv");
  for (unsigned k = 0; k < HCCL_K_NKINDS; k++)
    assert_string_not_equal(hccl__coll_kind_name(k), "?");
  assert_string_equal(hccl__coll_kind_name(HCCL_K_NKINDS), "?");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_facts),
      cmocka_unit_test(test_op_facts),
      cmocka_unit_test(test_coll_kind_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
