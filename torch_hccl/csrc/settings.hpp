/*
 * settings.hpp - torch_hccl's own settings (TORCH_HCCL_*), read from the environment in this
 * one place and documented in one table (docs/settings.md), as libhccl reads HCCL_* in
 * base/settings.c: the allocator's two, the split switch, and a warning for any other
 * TORCH_HCCL_* name. A malformed value throws std::invalid_argument naming the variable, the
 * value and the rule (a ValueError in Python).
 */
#pragma once

#include <cstddef>

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

} // namespace torch_hccl
