/*
 * test_log.c - the failure-reporting contract of hccl/src/base/log.c: hccl__fail keeps the message
 * for HcclGetLastErrorMessage and returns the code; quiet failures (expected probes) neither
 * replace the last error nor are lost; every result code has a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static void test_fail_keeps_message(void **state) {
  (void)state;
  assert_int_equal(hccl__fail(HCCL_E_PARA, "value %d breaks rule %s", 3, "1, 2, 4 or 8"),
                   HCCL_E_PARA);
  assert_string_equal(HcclGetLastErrorMessage(), "value 3 breaks rule 1, 2, 4 or 8");
}

static void test_quiet_does_not_clobber(void **state) {
  (void)state;
  hccl__fail(HCCL_E_PARA, "the real reason");
  hccl__log_quiet(1);
  assert_int_equal(hccl__fail(HCCL_E_TCP_TRANSFER, "store went away"), HCCL_E_TCP_TRANSFER);
  hccl__log_quiet(0);
  assert_string_equal(HcclGetLastErrorMessage(), "the real reason");
  assert_string_equal(hccl__quiet_error(), "store went away");
  /* Quiet nests; after the last pop failures are reported again. */
  hccl__log_quiet(1);
  hccl__log_quiet(1);
  hccl__log_quiet(0);
  hccl__fail(HCCL_E_TIMEOUT, "still quiet");
  hccl__log_quiet(0);
  assert_string_equal(HcclGetLastErrorMessage(), "the real reason");
  hccl__fail(HCCL_E_TIMEOUT, "loud again");
  assert_string_equal(HcclGetLastErrorMessage(), "loud again");
}

static void test_set_last_error(void **state) {
  (void)state;
  hccl__set_last_error("from the worker thread");
  assert_string_equal(HcclGetLastErrorMessage(), "from the worker thread");
}

static void test_every_code_has_a_message(void **state) {
  (void)state;
#define CHECK_CODE(name, num, msg)                                                                 \
  assert_string_equal(HcclGetErrorString(name), msg);                                              \
  assert_int_equal((int)name, num);
  HCCL_RESULT_MAP(CHECK_CODE)
#undef CHECK_CODE
  assert_string_equal(HcclGetErrorString((HcclResult)999), "unknown result code");
}

int main(void) {
  alarm(30);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fail_keeps_message),
      cmocka_unit_test(test_quiet_does_not_clobber),
      cmocka_unit_test(test_set_last_error),
      cmocka_unit_test(test_every_code_has_a_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
