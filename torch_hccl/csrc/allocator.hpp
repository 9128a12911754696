/*
 * allocator.hpp - torch's CPU allocator while torch_hccl is loaded: a caching allocator whose
 * memory comes from HcclMemAlloc, so that every large CPU tensor (a DDP bucket, a plain
 * torch.ones) can take the zero-copy allreduce (docs/pytorch.md, "Shared-memory allocator").
 *
 * Requests of at least TORCH_HCCL_ALLOCATOR_MIN_BYTES are served from a few large arenas
 * (HcclMemAlloc regions, each one memfd, pages made on first touch), carved into blocks: best
 * fit, split, neighbours coalesced on free, freed blocks kept for reuse. Smaller requests go to
 * the allocator that was current before. After fork the child allocates from new arenas of
 * its own; the arenas it inherited are copy-on-write there (base/mem_region.c) and released once the
 * child has freed every block it inherited in them.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torch_hccl {

/* The allocator's two settings, read from the environment in one place (docs/settings.md). */
struct AllocatorSettings {
  bool enabled;     /* TORCH_HCCL_ALLOCATOR: 1 (default) or 0 */
  size_t min_bytes; /* TORCH_HCCL_ALLOCATOR_MIN_BYTES: smaller requests are delegated */
};

/* Reads both variables; throws std::invalid_argument naming the variable, the value and the
 * rule when one is malformed. */
AllocatorSettings read_allocator_settings();

/* TORCH_HCCL_SPLIT: 1 (default), new_group splits the default group's communicator when it
 * can (torch_hccl/_split.py); 0, every group is made over torch's store. Throws
 * std::invalid_argument naming the value and the rule. Read here beside the allocator's, so
 * that torch_hccl's settings are read in one file. */
bool read_split_setting();

/* Warns on stderr, one line each, of every TORCH_HCCL_* name in env that torch_hccl does not
 * read, naming the nearest known one when it looks like a typo; HCCL_LOG_LEVEL=error
 * silences it. Returns how many names are unknown. install_allocator calls it once. */
int warn_unknown_settings(char* const* env);

/* Warns of unknown TORCH_HCCL_* names, reads the settings and, when enabled, makes the allocator torch's CPU allocator (once per
 * process; later calls return the first answer). Returns whether it is installed. Throws as
 * read_allocator_settings. */
bool install_allocator();

/* Whether torch's current CPU allocator is this one. */
bool allocator_is_current();

/* Counters of this process (a forked child starts its own), as name/value pairs, in a fixed
 * order; all zero when the allocator is not installed. Names: docs/pytorch.md. */
std::vector<std::pair<std::string, int64_t>> allocator_stats();

/* Returns the pages of every free block to the system (madvise MADV_REMOVE on the memfd);
 * blocks and arenas stay, so later tensors reuse the same windows. Returns the bytes given
 * back by this call. */
size_t allocator_empty_cache();

/* This process's own arenas as (address, bytes), for tests. */
std::vector<std::pair<uintptr_t, size_t>> allocator_arenas();

} // namespace torch_hccl
