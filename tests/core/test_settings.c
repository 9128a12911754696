/*
 * test_settings.c - hccl/src/core/settings.c: defaults, every HCCL_ALGO spelling, ranges and the
 * messages that name the variable, and the rank variables' fallbacks (RANK_ID/RANK_SIZE,
 * DEVICE_ID/ASCEND_DEVICE_ID). One process; the environment is set per case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "settings.h"

static const char *const all_vars[] = {"HCCL_CONNECT_TIMEOUT",
                                       "HCCL_EXEC_TIMEOUT",
                                       "HCCL_BUFFSIZE",
                                       "HCCL_ALGO",
                                       "HCCL_TOPO_FILE",
                                       "HCCL_IF_IP",
                                       "HCCL_LOG_LEVEL",
                                       "HCCL_SPIN",
                                       "RANK",
                                       "WORLD_SIZE",
                                       "RANK_ID",
                                       "RANK_SIZE",
                                       "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE",
                                       "DEVICE_ID",
                                       "ASCEND_DEVICE_ID",
                                       "MASTER_ADDR",
                                       "MASTER_PORT",
                                       NULL};

static int clean_env(void **state) {
  (void)state;
  for (int i = 0; all_vars[i]; i++)
    unsetenv(all_vars[i]);
  return 0;
}

static void test_defaults(void **state) {
  (void)state;
  struct hccl_settings s;
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.connect_timeout_ms, 120000);
  assert_int_equal(s.exec_timeout_ms, 1836000);
  assert_int_equal(s.buffsize, (size_t)200 << 20);
  assert_int_equal(s.algo, HCCL_ALGO_AUTO);
  assert_int_equal(s.spin, -1);
  assert_false(s.have_rank);
  assert_int_equal(s.world_size, 1);
  assert_int_equal(s.device_id, -1);
  assert_int_equal(s.local_rank, -1);
}

static void test_algo_spellings(void **state) {
  (void)state;
  static const struct {
    const char *text;
    enum hccl_algo_choice want;
  } cases[] = {
      {"ring", HCCL_ALGO_RING},
      {"RING", HCCL_ALGO_RING},
      {"tree", HCCL_ALGO_HD},
      {"hd", HCCL_ALGO_HD},
      {"H-D_R", HCCL_ALGO_HD},
      {"auto", HCCL_ALGO_AUTO},
      {"level0:ring", HCCL_ALGO_RING},
      {"level0:NA;level1:ring", HCCL_ALGO_RING},
      {"level0:NA;level1:H-D_R", HCCL_ALGO_HD},
      {"level0:tree;level1:ring", HCCL_ALGO_HD}, /* inside a server level0 wins */
      {"level0:NA;level1:NA", HCCL_ALGO_AUTO},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    enum hccl_algo_choice got = (enum hccl_algo_choice) - 1;
    assert_int_equal(hccl__settings_parse_algo(cases[i].text, &got), HCCL_SUCCESS);
    assert_int_equal(got, cases[i].want);
  }
  static const char *const bad[] = {"bogus",      "level2:ring", "level0:", "level0:pipelinex",
                                    "level0ring", ":ring"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    enum hccl_algo_choice got;
    assert_int_equal(hccl__settings_parse_algo(bad[i], &got), HCCL_E_PARA);
    assert_non_null(strstr(HcclGetLastErrorMessage(), bad[i]));
    assert_non_null(strstr(HcclGetLastErrorMessage(), "HCCL_ALGO"));
  }
}

/* Each bad value fails the load with HCCL_E_PARA and a message naming variable and value. */
static void test_bad_values_named(void **state) {
  (void)state;
  static const struct {
    const char *var, *value;
  } cases[] = {
      {"HCCL_CONNECT_TIMEOUT", "0"}, {"HCCL_CONNECT_TIMEOUT", "7201"},
      {"HCCL_EXEC_TIMEOUT", "-1"},   {"HCCL_BUFFSIZE", "0"},
      {"HCCL_BUFFSIZE", "12MB"},     {"HCCL_SPIN", "x"},
      {"HCCL_LOG_LEVEL", "loud"},    {"WORLD_SIZE", "0"},
      {"MASTER_PORT", "65536"},      {"DEVICE_ID", "-3"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    clean_env(NULL);
    setenv(cases[i].var, cases[i].value, 1);
    if (strcmp(cases[i].var, "WORLD_SIZE") == 0) setenv("RANK", "0", 1);
    struct hccl_settings s;
    assert_int_equal(hccl__settings_load(&s), HCCL_E_PARA);
    const char *m = HcclGetLastErrorMessage();
    if (!strstr(m, cases[i].var) || !strstr(m, cases[i].value))
      fail_msg("%s=%s: message does not name them: %s", cases[i].var, cases[i].value, m);
  }
}

static void test_rank_variables(void **state) {
  (void)state;
  struct hccl_settings s;
  /* torchrun's names, with the meeting point. */
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29688", 1);
  setenv("LOCAL_RANK", "3", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_true(s.have_rank);
  assert_int_equal(s.rank, 3);
  assert_int_equal(s.world_size, 8);
  assert_int_equal(s.master_port, 29688);
  assert_int_equal(s.local_rank, 3);
  /* A rank beyond the size is named. */
  setenv("RANK", "8", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "RANK=8"));
  /* Ascend's names when torchrun's are unset; ASCEND_DEVICE_ID when DEVICE_ID is unset. */
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  setenv("RANK_ID", "1", 1);
  setenv("RANK_SIZE", "2", 1);
  setenv("ASCEND_DEVICE_ID", "5", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.rank, 1);
  assert_int_equal(s.world_size, 2);
  assert_int_equal(s.device_id, 5);
  setenv("DEVICE_ID", "6", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.device_id, 6);
  /* Half a pair, or a missing meeting point, is refused and named. */
  unsetenv("RANK_SIZE");
  assert_int_equal(hccl__settings_load(&s), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "RANK_SIZE"));
  setenv("RANK_SIZE", "2", 1);
  unsetenv("MASTER_ADDR");
  assert_int_equal(hccl__settings_load(&s), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "MASTER_ADDR"));
}

static void test_units(void **state) {
  (void)state;
  struct hccl_settings s;
  setenv("HCCL_CONNECT_TIMEOUT", "7", 1);
  setenv("HCCL_EXEC_TIMEOUT", "9", 1);
  setenv("HCCL_BUFFSIZE", "3", 1);
  setenv("HCCL_SPIN", "12", 1);
  setenv("HCCL_LOG_LEVEL", "2", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.connect_timeout_ms, 7000);
  assert_int_equal(s.exec_timeout_ms, 9000);
  assert_int_equal(s.buffsize, (size_t)3 << 20);
  assert_int_equal(s.spin, 12);
}

int main(void) {
  alarm(30);
  hccl__log_set_level(HCCL_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_defaults, clean_env),
      cmocka_unit_test_setup(test_algo_spellings, clean_env),
      cmocka_unit_test_setup(test_bad_values_named, clean_env),
      cmocka_unit_test_setup(test_rank_variables, clean_env),
      cmocka_unit_test_setup(test_units, clean_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
