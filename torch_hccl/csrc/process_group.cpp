/*
 * process_group.cpp - a ProcessGroupHCCL's life: its communicator made over torch's store or
 * split from a parent's (and a non-member's part of that split), the vote before a split, the
 * communicator's settings from torch's timeout and name, its works' numbering, abort, and
 * shrink. See process_group.hpp; the ops live in ops_*.cpp, one family each.
 */
#include "process_group.hpp"

#include <cstdio>

#include <c10/util/Exception.h>

#include "device.hpp"
#include "store_view.hpp"

namespace torch_hccl {

ProcessGroupHCCL::ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout,
                                   const std::string& name)
    : BackendBase(rank, size), timeout_(timeout) {
  /* Kept with the group: the library holds the HcclStore's ctx for the communicator's life. */
  auto view = openStoreView(store, rank, size);
  store_ = view;
  HcclStore hs = hcclStoreOf(*view);
  HcclCommConfig cfg = config(name);
  HcclComm comm = nullptr;
  HcclResult r = HcclCommInitStore(&hs, static_cast<uint32_t>(size), static_cast<uint32_t>(rank),
                                   &cfg, &comm);
  if (r != HCCL_SUCCESS) throwHccl(r, "init (rank " + std::to_string(rank) + " of " +
                                          std::to_string(size) + ")");
  adopt(comm);
}

ProcessGroupHCCL::ProcessGroupHCCL(ProcessGroupHCCL& parent, int rank, int size, int32_t color,
                                   std::chrono::milliseconds timeout, const std::string& name)
    : BackendBase(rank, size), timeout_(timeout), madeBy_("split") {
  HcclCommConfig cfg = config(name);
  HcclComm comm = nullptr;
  std::string what = "split (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
  {
    auto held = parent.core_->hold(); /* the parent stays open during the call */
    HcclComm pc = parent.core_->comm();
    if (!pc) throwBackendError("hccl " + what + ": the default group is shut down");
    HcclResult r = HcclCommSplit(pc, color, rank, &comm, &cfg);
    if (r != HCCL_SUCCESS) throwHccl(r, what);
  }
  uint32_t got = 0, n = 0;
  HcclGetRankId(comm, &got);
  HcclGetRankSize(comm, &n);
  if (got != static_cast<uint32_t>(rank) || n != static_cast<uint32_t>(size)) {
    HcclCommDestroy(comm);
    throwBackendError("hccl " + what + ": the split made rank " + std::to_string(got) + " of " +
                      std::to_string(n) + "; every rank of the default group must make the "
                      "same new_group calls in the same order");
  }
  adopt(comm);
}

void ProcessGroupHCCL::splitOut() {
  auto held = core_->hold();
  HcclComm none = nullptr;
  if (!core_->comm()) throwBackendError("hccl split (not a member): the default group is shut down");
  checkHccl(HcclCommSplit(core_->comm(), HCCL_SPLIT_NOCOLOR, 0, &none, nullptr),
            "split (not a member)");
}

bool ProcessGroupHCCL::agree(bool mine) {
  auto held = core_->hold();
  if (!core_->comm()) throwBackendError("hccl split vote: the default group is shut down");
  int32_t v = mine ? 1 : 0;
  checkHccl(HcclAllReduce(&v, &v, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MIN, core_->comm(), nullptr),
            "split vote");
  return v == 1;
}

/* A communicator's config for a group of this timeout (both of the library's deadlines; 0, the
 * library's default, for none) and communicator name. A timeout's message names the timeout as
 * the torch user set it (timeoutSource), not as the config field they never wrote. */
static HcclCommConfig commConfig(std::chrono::milliseconds timeout, const std::string& commName) {
  HcclCommConfig cfg;
  HcclCommConfigInit(&cfg);
  int64_t ms = timeout.count() > 0 ? timeout.count() : 0;
  cfg.connectTimeoutMs = ms;
  cfg.execTimeoutMs = ms;
  std::snprintf(cfg.timeoutSource, sizeof(cfg.timeoutSource), "%s",
                "timeout= of init_process_group / new_group");
  std::snprintf(cfg.commName, sizeof(cfg.commName), "%s", commName.c_str());
  return cfg;
}

HcclCommConfig ProcessGroupHCCL::config(const std::string& name) {
#if TORCH_HCCL_BACKEND_API
  options_ = c10::make_intrusive<Options>("hccl", timeout_);
  options_->group_name = name;
#endif
  return commConfig(timeout_, name.empty() ? "" : "pg" + name);
}

void ProcessGroupHCCL::adopt(HcclComm comm) {
  core_ = std::make_shared<Core>(comm, getRank(), getSize());
  /* The first group fixes the process's device, so later groups (new_group, whose rank is not
   * the launcher's) drive the same one. */
  deviceGroupOpened(comm);
}

ProcessGroupHCCL::~ProcessGroupHCCL() {
  deviceGroupClosed();
}

c10::intrusive_ptr<HcclWork> ProcessGroupHCCL::newWork(c10d::OpType type, const char* what,
                                                       std::vector<at::Tensor> outputs,
                                                       bool blocking) {
  seq_++;
  return c10::make_intrusive<HcclWork>(core_, getRank(), type, what, std::move(outputs),
                                       blocking);
}

#if TORCH_HCCL_BACKEND_API
void ProcessGroupHCCL::abort() {
  HcclCommAbort(core_->comm());
}
#endif

#if TORCH_HCCL_SHRINK_API
static int rankOf(HcclComm comm, bool size) {
  uint32_t v = 0;
  if (size) HcclGetRankSize(comm, &v);
  else HcclGetRankId(comm, &v);
  return static_cast<int>(v);
}

ProcessGroupHCCL::ProcessGroupHCCL(HcclComm comm, std::shared_ptr<void> store,
                                   std::chrono::milliseconds timeout, const std::string& name)
    : BackendBase(rankOf(comm, false), rankOf(comm, true)), store_(std::move(store)),
      timeout_(timeout), madeBy_("shrink") {
  options_ = c10::make_intrusive<Options>("hccl", timeout);
  options_->group_name = name;
  adopt(comm);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupHCCL::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<Options>& opts_override) {
  std::vector<int> excl;
  for (int64_t r : ranks_to_exclude) {
    TORCH_CHECK(r >= 0 && r < getSize(), "hccl shrink: rank ", r,
                " is not a rank of this group of ", getSize(), " (0-", getSize() - 1, ")");
    excl.push_back(static_cast<int>(r));
  }
  std::chrono::milliseconds timeout = opts_override ? opts_override->timeout : timeout_;
  HcclCommConfig cfg = commConfig(timeout, "");
  HcclComm comm = core_->comm(), small = nullptr;
  HcclResult r = HcclCommShrink(comm, excl.data(), static_cast<int>(excl.size()), &small, &cfg,
                                shrink_flags);
  if (r != HCCL_SUCCESS) throwHccl(r, "shrink (rank " + std::to_string(getRank()) + ")");
  /* The new communicator meets again through this group's store view: it keeps it. */
  return c10::make_intrusive<ProcessGroupHCCL>(small, store_, timeout,
                                               options_->group_name + ":shrunk");
}
#endif

}  // namespace torch_hccl
