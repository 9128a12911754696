/*
 * hash.h - FNV-1a, 64-bit: the one hash of the library, for ids that must be the same in every
 * process (a server's identity, a communicator's id, a job token's hash) and for the store
 * server's table. Not for anything an attacker could choose to collide on purpose where that
 * matters: ids are checked again where they are trusted.
 */
#ifndef HCCL_HASH_H
#define HCCL_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a's offset basis: the seed of a hash that starts from nothing. */
#define HCCL_FNV1A_SEED 0xcbf29ce484222325ULL

/* h folded with len bytes of data (chain calls to hash several fields). */
static inline uint64_t hccl__fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

#endif
