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
