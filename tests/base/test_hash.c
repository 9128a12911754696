/*
 * test_hash.c - hccl/src/base/hash.h: FNV-1a 64 gives the published test vectors, and hashing
 * in pieces gives the same as hashing at once (ids are built field by field).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hash.h"

static void test_vectors(void **state) {
  (void)state;
  assert_true(hccl__fnv1a(HCCL_FNV1A_SEED, "", 0) == 0xcbf29ce484222325ULL);
  assert_true(hccl__fnv1a(HCCL_FNV1A_SEED, "a", 1) == 0xaf63dc4c8601ec8cULL);
  assert_true(hccl__fnv1a(HCCL_FNV1A_SEED, "foobar", 6) == 0x85944171f73967e8ULL);
}

static void test_pieces(void **state) {
  (void)state;
  uint64_t h = hccl__fnv1a(HCCL_FNV1A_SEED, "foo", 3);
  assert_true(hccl__fnv1a(h, "bar", 3) == hccl__fnv1a(HCCL_FNV1A_SEED, "foobar", 6));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vectors),
      cmocka_unit_test(test_pieces),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
