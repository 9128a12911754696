/*
 * test_settings.c - hccl/src/base/settings.c: defaults, every HCCL_ALGO spelling, ranges and the
 * messages that name the variable, and the rank variables' fallbacks (RANK_ID/RANK_SIZE,
 * DEVICE_ID/ASCEND_DEVICE_ID), the warning about unknown HCCL_* names (run in a fresh copy of
 * this program, since it is once per process), and that every HCCL_* name the sources read is
 * in the known list and in docs/settings.md. One process; the environment is set per case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
                                       "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "OMPI_COMM_WORLD_LOCAL_SIZE",
                                       "PMI_RANK",
                                       "PMI_SIZE",
                                       "MPI_LOCALRANKID",
                                       "MPI_LOCALNRANKS",
                                       "SLURM_PROCID",
                                       "SLURM_NTASKS",
                                       "SLURM_LOCALID",
                                       "SLURM_NTASKS_PER_NODE",
                                       "SLURM_JOB_NODELIST",
                                       "HCCL_IF_BASE_PORT",
                                       "RANK_TABLE_FILE",
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
  assert_int_equal(s.algo.choice, HCCL_ALGO_AUTO);
  assert_false(s.algo.levels);
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
    enum hccl_algo_choice want, level0, level1;
    bool levels;
  } cases[] = {
      {"ring", HCCL_ALGO_RING, 0, 0, false},
      {"RING", HCCL_ALGO_RING, 0, 0, false},
      {"tree", HCCL_ALGO_HD, 0, 0, false},
      {"hd", HCCL_ALGO_HD, 0, 0, false},
      {"H-D_R", HCCL_ALGO_HD, 0, 0, false},
      {"auto", HCCL_ALGO_AUTO, 0, 0, false},
      {"oneshot", HCCL_ALGO_ONESHOT, 0, 0, false},
      {"level0:ring", HCCL_ALGO_RING, HCCL_ALGO_RING, HCCL_ALGO_AUTO, true},
      {"level0:NA;level1:ring", HCCL_ALGO_RING, HCCL_ALGO_AUTO, HCCL_ALGO_RING, true},
      {"level0:NA;level1:H-D_R", HCCL_ALGO_HD, HCCL_ALGO_AUTO, HCCL_ALGO_HD, true},
      /* inside a server level0 wins; between servers level1 */
      {"level0:tree;level1:ring", HCCL_ALGO_HD, HCCL_ALGO_HD, HCCL_ALGO_RING, true},
      {"level0:NA;level1:NA", HCCL_ALGO_AUTO, HCCL_ALGO_AUTO, HCCL_ALGO_AUTO, true},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct hccl_algo_setting got = {.choice = (enum hccl_algo_choice) - 1};
    assert_int_equal(hccl__settings_parse_algo(cases[i].text, &got), HCCL_SUCCESS);
    assert_int_equal(got.choice, cases[i].want);
    assert_int_equal(got.levels, cases[i].levels);
    assert_int_equal(got.level[0], cases[i].level0);
    assert_int_equal(got.level[1], cases[i].level1);
  }
  static const char *const bad[] = {"bogus",      "level2:ring", "level0:", "level0:pipelinex",
                                    "level0ring", ":ring"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct hccl_algo_setting got;
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
  /* A number's message says what it counts: HCCL_BUFFSIZE is MiB, the timeouts seconds. */
  static const struct {
    const char *var, *value, *rule;
  } units[] = {
      {"HCCL_BUFFSIZE", "lots", "an integer from 1 to 65536 MiB"},
      {"HCCL_CONNECT_TIMEOUT", "soon", "an integer from 1 to 7200 seconds"},
      {"HCCL_EXEC_TIMEOUT", "0", "an integer from 1 to 2147483 seconds"},
      {"HCCL_SPIN", "-1", "an integer from 0 to 1000000 microseconds"},
  };
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    clean_env(NULL);
    setenv(units[i].var, units[i].value, 1);
    struct hccl_settings s;
    assert_int_equal(hccl__settings_load(&s), HCCL_E_PARA);
    const char *m = HcclGetLastErrorMessage();
    if (!strstr(m, units[i].rule))
      fail_msg("%s=%s: message does not say '%s': %s", units[i].var, units[i].value,
               units[i].rule, m);
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

/* Slurm's compressed host lists: the first host, zero padding kept. */
static void test_slurm_nodelist(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"node[01-04,07],gpu3", "node01"},       {"gpu3", "gpu3"}, {"a[7]", "a7"},
      {"rack1-n[0003-0010]x", "rack1-n0003x"}, {"h1,h2", "h1"},  {"x[9,2-3]", "x9"}};
  char out[64];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(hccl__slurm_first_host(cases[i][0], out, sizeof(out)), HCCL_SUCCESS);
    assert_string_equal(out, cases[i][1]);
  }
  assert_int_equal(hccl__slurm_first_host("node[a-b]", out, sizeof(out)), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "SLURM_JOB_NODELIST='node[a-b]'"));
  assert_int_equal(hccl__slurm_first_host("node[01", out, sizeof(out)), HCCL_E_PARA);
  assert_int_equal(hccl__slurm_first_host("", out, sizeof(out)), HCCL_E_PARA);
}

/* Which starter's variables win, and what mpirun / srun runs get without MASTER_*. */
static void test_job_starters(void **state) {
  (void)state;
  struct hccl_settings s;
  /* Open MPI on one host: this host, HCCL's base port. */
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.rank, 3);
  assert_int_equal(s.world_size, 4);
  assert_int_equal(s.local_rank, 3);
  assert_string_equal(s.master_addr, "127.0.0.1");
  assert_int_equal(s.master_port, 60000);
  setenv("HCCL_IF_BASE_PORT", "61000", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.master_port, 61000);
  /* On several hosts nobody knows rank 0's: say what to set. */
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "MASTER_ADDR is not set"));
  assert_non_null(strstr(HcclGetLastErrorMessage(), "Open MPI"));
  setenv("MASTER_ADDR", "10.1.1.1", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_string_equal(s.master_addr, "10.1.1.1");
  /* Explicit RANK/WORLD_SIZE win over mpirun's. */
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_PORT", "1234", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.rank, 1);
  assert_int_equal(s.world_size, 2);
  clean_env(NULL);
  /* MPICH (PMI). */
  setenv("PMI_RANK", "1", 1);
  setenv("PMI_SIZE", "2", 1);
  setenv("MPI_LOCALNRANKS", "2", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.rank, 1);
  assert_string_equal(s.master_addr, "127.0.0.1");
  clean_env(NULL);
  /* Slurm: the first host of the node list, whatever the local counts. */
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NTASKS_PER_NODE", "4", 1);
  setenv("SLURM_JOB_NODELIST", "gpu[07-08]", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.rank, 5);
  assert_int_equal(s.world_size, 8);
  assert_int_equal(s.local_rank, 1);
  assert_int_equal(s.local_world_size, 4);
  assert_string_equal(s.master_addr, "gpu07");
  assert_int_equal(s.master_port, 60000);
  assert_non_null(strstr(s.starter, "srun"));
  /* "4(x2)" is not a plain count: left unknown. */
  setenv("SLURM_NTASKS_PER_NODE", "4(x2)", 1);
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.local_world_size, -1);
  /* A rank table makes the rank alone enough. */
  clean_env(NULL);
  setenv("RANK_ID", "2", 1);
  assert_int_equal(hccl__settings_load_no_master(&s), HCCL_E_PARA);
  setenv("RANK_TABLE_FILE", "/t.json", 1);
  assert_int_equal(hccl__settings_load_no_master(&s), HCCL_SUCCESS);
  assert_int_equal(s.rank, 2);
  assert_string_equal(s.rank_table, "/t.json");
}

/* A caller that gives the rank (HcclCommInitStore, torch's mp.spawn): a parent's variables
 * are never an error, and name the device only when they were set for this very rank. */
static void test_given_rank(void **state) {
  (void)state;
  static const struct {
    const char *why, *env[8]; /* NAME=value pairs */
    uint32_t rank, size;
    int32_t device; /* -1: the rank's index on its server, decided at init */
    const char *src;
  } cases[] = {
      {"a Slurm allocation the spawning parent ran in: rank 0 of 1 describes the parent",
       {"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", "SLURM_JOB_NODELIST=vm"},
       2,
       4,
       -1,
       NULL},
      {"an exported WORLD_SIZE alone (PyTorch's MultiProcessTestCase) describes nobody",
       {"WORLD_SIZE=4", "LOCAL_RANK=0"},
       1,
       4,
       -1,
       NULL},
      {"mpirun -np 1 around the spawning script, with a DEVICE_ID for its one rank",
       {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", "DEVICE_ID=0"},
       0,
       4,
       -1,
       NULL},
      {"not numbers: not ours to judge, since the caller gave the rank",
       {"RANK=x", "WORLD_SIZE=y"},
       0,
       2,
       -1,
       NULL},
      {"set for this rank (env://, a launcher per process): the local rank",
       {"RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2"},
       2,
       4,
       2,
       "LOCAL_RANK"},
      {"set for this rank: DEVICE_ID first",
       {"RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2", "DEVICE_ID=6"},
       2,
       4,
       6,
       "DEVICE_ID"},
      {"a subgroup, whose rank is not the launcher's",
       {"RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2", "DEVICE_ID=6"},
       0,
       2,
       -1,
       NULL},
      {"srun's own variables for this rank",
       {"SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_LOCALID=1"},
       3,
       4,
       1,
       "SLURM_LOCALID"},
      {"DEVICE_ID with no rank variable (a per-process shell loop)",
       {"DEVICE_ID=5"},
       1,
       2,
       5,
       "DEVICE_ID"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    clean_env(NULL);
    for (int k = 0; cases[i].env[k]; k++)
      assert_int_equal(putenv((char *)cases[i].env[k]), 0);
    struct hccl_settings s;
    print_message("case: %s\n", cases[i].why);
    assert_int_equal(hccl__settings_load_given(&s, cases[i].rank, cases[i].size), HCCL_SUCCESS);
    assert_true(s.have_rank);
    assert_int_equal(s.rank, cases[i].rank);
    assert_int_equal(s.world_size, cases[i].size);
    assert_int_equal(s.device_id, cases[i].device);
    if (cases[i].src)
      assert_string_equal(s.device_src, cases[i].src);
    else
      assert_null(s.device_src);
  }
  /* A bad DEVICE_ID that would be read is named. */
  clean_env(NULL);
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("DEVICE_ID", "-3", 1);
  struct hccl_settings s;
  assert_int_equal(hccl__settings_load_given(&s, 3, 4), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "DEVICE_ID='-3'"));
}

/* HcclSetDevice beats every variable, for every loader. Last: it cannot be unset. */
static void test_set_device(void **state) {
  (void)state;
  struct hccl_settings s;
  int32_t d = 7;
  assert_int_equal(HcclGetDevice(&d), HCCL_SUCCESS);
  assert_int_equal(d, -1);
  assert_int_equal(HcclSetDevice(-1), HCCL_E_PARA);
  assert_non_null(strstr(HcclGetLastErrorMessage(), "HcclSetDevice(-1)"));
  assert_int_equal(HcclSetDevice(HCCL_MAX_DEVICE_ID + 1), HCCL_E_PARA);
  assert_int_equal(HcclGetDevice(NULL), HCCL_E_PTR);
  assert_int_equal(HcclSetDevice(3), HCCL_SUCCESS);
  assert_int_equal(HcclGetDevice(&d), HCCL_SUCCESS);
  assert_int_equal(d, 3);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("DEVICE_ID", "6", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  assert_int_equal(hccl__settings_load_given(&s, 1, 2), HCCL_SUCCESS);
  assert_int_equal(s.device_id, 3);
  assert_string_equal(s.device_src, "HcclSetDevice");
  assert_int_equal(hccl__settings_load(&s), HCCL_SUCCESS);
  assert_int_equal(s.device_id, 3);
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

static void test_closest_name(void **state) {
  (void)state;
  static const struct {
    const char *typed, *want; /* want NULL: no suggestion */
  } cases[] = {
      {"HCCL_BUFSIZE", "HCCL_BUFFSIZE"},
      {"HCCL_CONECT_TIMEOUT", "HCCL_CONNECT_TIMEOUT"},
      {"HCCL_EXEC_TIEMOUT", "HCCL_EXEC_TIMEOUT"},
      {"HCCL_buffsize", "HCCL_BUFFSIZE"},
      {"HCCL_ALOG", "HCCL_ALGO"},
      {"HCCL_TOPO", NULL},
      {"HCCL_TIMEOUT", NULL},
      {"HCCL_RDMA_TCC", "HCCL_RDMA_TC"},
      {"HCCL_RDMA_QOS", NULL},
      {"HCCL_FROBNICATE_WIDGETS", NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *got = hccl__settings_closest(cases[i].typed, strlen(cases[i].typed));
    if (cases[i].want == NULL && got != NULL)
      fail_msg("%s: suggested %s, expected no suggestion", cases[i].typed, got);
    if (cases[i].want != NULL && (got == NULL || strcmp(got, cases[i].want) != 0))
      fail_msg("%s: suggested %s, expected %s", cases[i].typed, got ? got : "nothing",
               cases[i].want);
  }
  char *env[] = {"HCCL_BUFFSIZE=1", "PATH=/bin", "HCCL_BUFSIZE=2", "HCCL_JOB_TOKEN=a=b",
                 "HCCL_TEST_INIT=env", "HCCL_X=", NULL};
  assert_int_equal(hccl__settings_warn_unknown(env), 2);
}

/* In a fresh process (argv[1] "unknown-names"): the environment has only the HCCL_* names below;
 * stderr goes to `path`; two loads, as two communicators would. */
static int unknown_names_child(const char *path) {
  for (int again = 1; again;) {
    extern char **environ;
    again = 0;
    for (char **e = environ; *e; e++)
      if (strncmp(*e, "HCCL_", 5) == 0) {
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
        unsetenv(name);
        again = 1;
        break;
      }
  }
  setenv("HCCL_LOG_LEVEL", "warn", 1);
  setenv("HCCL_BUFFSIZE", "64", 1);
  setenv("HCCL_BUFSIZE", "64", 1);
  setenv("HCCL_FROBNICATE_WIDGETS", "1", 1);
  if (!freopen(path, "w", stderr)) return 3;
  struct hccl_settings s;
  if (hccl__settings_load(&s) != HCCL_SUCCESS) return 4;
  if (hccl__settings_load_given(&s, 0, 1) != HCCL_SUCCESS) return 4;
  return s.buffsize == (size_t)64 << 20 ? 0 : 5;
}

static void test_unknown_names_warn_once(void **state) {
  (void)state;
  char path[] = "/tmp/hccl-test-settings-XXXXXX", cmd[512], text[4096] = "";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  snprintf(cmd, sizeof(cmd), "/proc/%d/exe unknown-names %s", (int)getpid(), path);
  int rc = system(cmd);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  unlink(path);
  if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) fail_msg("child failed (%d): %s", rc, text);
  print_message("%s", text);
  int lines = 0;
  for (char *p = text; (p = strchr(p, '\n')); p++)
    lines++;
  if (lines != 2) fail_msg("expected 2 warning lines, got %d:\n%s", lines, text);
  const char *typo = strstr(text, "WARN: HCCL_BUFSIZE is not a setting of this library (did you "
                                  "mean HCCL_BUFFSIZE?); it is ignored\n");
  assert_non_null(typo);
  /* once, not once per load */
  assert_null(strstr(typo + strlen("WARN: HCCL_BUFSIZE"), "HCCL_BUFSIZE"));
  const char *far = strstr(text, "WARN: HCCL_FROBNICATE_WIDGETS is not a setting of this library; "
                                 "it is ignored (docs/settings.md lists the settings)\n");
  assert_non_null(far);
  assert_null(strstr(text, "HCCL_BUFFSIZE is not"));
  assert_null(strstr(text, "HCCL_LOG_LEVEL"));
}

static bool known(const char *name) {
  for (int i = 0; hccl__settings_known[i]; i++)
    if (strcmp(hccl__settings_known[i], name) == 0) return true;
  return false;
}

/* A variable cannot be added silently: every HCCL_* name the sources read (C getenv and the
 * settings readers, the launcher's exported variables, Python's os.environ, shell $NAME) is in
 * the known list, and every known name is in docs/settings.md's tables. */
static void test_known_names_complete(void **state) {
  (void)state;
  char cmd[2048], name[256], *docs = NULL;
  snprintf(cmd, sizeof(cmd),
           "cd '%s' && grep -rhoE --include='*.c' --include='*.h' --include='*.cpp' "
           "--include='*.hpp' --include='*.py' --include='*.sh' "
           "'((getenv|env_int_unit|env_int|env_str|environ\\.get|environ\\[|name =) ?\\(?\"|\\$\\{?)"
           "HCCL_[A-Z0-9_]+' "
           "hccl launcher torch_hccl ddp perf tests scripts bench examples setup.py "
           "| grep -oE 'HCCL_[A-Z0-9_]+' | sort -u",
           HCCL_SOURCE_DIR);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  int found = 0, missing = 0;
  while (fscanf(p, "%255s", name) == 1) {
    found++;
    if (!known(name)) {
      print_error("%s is read in the sources but not in hccl__settings_known (settings.c)\n", name);
      missing++;
    }
  }
  assert_int_equal(pclose(p), 0);
  assert_true(found >= 16); /* the grep itself works */

  snprintf(cmd, sizeof(cmd), "%s/docs/settings.md", HCCL_SOURCE_DIR);
  FILE *f = fopen(cmd, "r");
  assert_non_null(f);
  size_t cap = 1 << 20, n;
  docs = malloc(cap);
  n = fread(docs, 1, cap - 1, f);
  docs[n] = '\0';
  fclose(f);
  for (int i = 0; hccl__settings_known[i]; i++) {
    snprintf(name, sizeof(name), "`%s`", hccl__settings_known[i]);
    if (!strstr(docs, name)) {
      print_error("%s is a known name but docs/settings.md does not document it\n",
                  hccl__settings_known[i]);
      missing++;
    }
  }
  free(docs);
  assert_int_equal(missing, 0);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "unknown-names") == 0) return unknown_names_child(argv[2]);
  alarm(30);
  hccl__log_set_level(HCCL_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_defaults, clean_env),
      cmocka_unit_test_setup(test_algo_spellings, clean_env),
      cmocka_unit_test_setup(test_bad_values_named, clean_env),
      cmocka_unit_test_setup(test_rank_variables, clean_env),
      cmocka_unit_test_setup(test_units, clean_env),
      cmocka_unit_test_setup(test_slurm_nodelist, clean_env),
      cmocka_unit_test_setup(test_job_starters, clean_env),
      cmocka_unit_test_setup(test_given_rank, clean_env),
      cmocka_unit_test_setup(test_set_device, clean_env),
      cmocka_unit_test_setup(test_closest_name, clean_env),
      cmocka_unit_test_setup(test_unknown_names_warn_once, clean_env),
      cmocka_unit_test(test_known_names_complete),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
