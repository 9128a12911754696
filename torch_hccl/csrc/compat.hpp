/*
 * compat.hpp - the one place torch_hccl looks at torch's version. torch 1.13 (Debian 12) calls a
 * third-party library's collectives on a c10d::ProcessGroup subclass; torch 2.x keeps one
 * c10d::Backend per device type inside its own ProcessGroup and reaches it through the
 * dispatcher. The collective methods have the same names and arguments in both, so
 * ProcessGroupHCCL derives from BackendBase and overrides them once; what exists only in 2.x
 * (the coalesced tensor forms, options, sequence numbers, abort) sits under
 * TORCH_HCCL_BACKEND_API.
 */
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define TORCH_HCCL_BACKEND_API 1
namespace torch_hccl {
using BackendBase = c10d::Backend;
}
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define TORCH_HCCL_BACKEND_API 0
namespace torch_hccl {
using BackendBase = c10d::ProcessGroup;
}
#endif

/* Backend::shrink and supportsShrinking (dist.shrink_group) came with torch 2.10. */
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10)
#define TORCH_HCCL_SHRINK_API 1
#else
#define TORCH_HCCL_SHRINK_API 0
#endif

namespace torch_hccl {

/* Whether torch waits for a collective's work as soon as the backend returns it: torch 2.8 and
 * later set the options' asyncOp from the caller's async_op (False for a plain
 * dist.all_reduce(t)); older torches have no such field, and every call counts as async.
 * Found by overload rather than by version number, so a torch that has the field uses it. */
template <class Opts>
auto asyncOpOf(const Opts& o, int) -> decltype(static_cast<bool>(o.asyncOp)) {
  return o.asyncOp;
}
template <class Opts>
bool asyncOpOf(const Opts&, long) {
  return true;
}
template <class Opts>
bool waitedAtOnce(const Opts& o) {
  return !asyncOpOf(o, 0);
}

}  // namespace torch_hccl
