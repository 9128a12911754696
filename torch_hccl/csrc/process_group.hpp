/*
 * process_group.hpp - ProcessGroupHCCL: torch.distributed's "hccl" backend over one libhccl
 * communicator per group; a c10d::Backend on torch 2.x, a c10d::ProcessGroup on 1.13
 * (compat.hpp).
 *
 * Thin by design: every method checks its arguments the way torch's gloo backend does (with
 * messages naming the value and the rule), stages non-contiguous or list-shaped tensors into
 * one contiguous buffer where the library needs one, and calls the one libhccl function that
 * does the work. No collective logic lives here. The communicator is made over the c10d store
 * torch passes to the creator (HcclCommInitStore), so env://, tcp:// and file:// all work and
 * no port of our own is opened; or, for a new_group when the default group is alive, split
 * from the default group's communicator (HcclCommSplit; torch_hccl/_split.py decides which).
 * The creator's timeout bounds every operation.
 *
 * Where the methods live: the group's life in process_group.cpp; the ops by family in
 * ops_reduce.cpp (reductions), ops_gather.cpp (broadcast, gathers, scatter), ops_alltoall.cpp,
 * ops_p2p.cpp (send, recv) and ops_barrier.cpp; the checks and staging they share in
 * staging.hpp.
 */
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "compat.hpp"
#include "reduce_route.hpp"
#include "work.hpp"

namespace torch_hccl {

class ProcessGroupHCCL : public BackendBase {
 public:
  /* Collective over the group's ranks: blocks until every rank joined or timeout passed;
   * throws RuntimeError with the library's reason (e.g. a group of 3 ranks on one server). */
  ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, const std::string& name);
  /* Split from parent's communicator (HcclCommSplit with color, key = rank): collective over
   * every rank of parent, whose ranks outside the new group call splitOut at the same point.
   * color (>= 0) names the group's rank list: ranks that make different groups at the same
   * call (torch's new_subgroups with a group) land in different communicators. No store.
   * Throws as the other constructor. */
  ProcessGroupHCCL(ProcessGroupHCCL& parent, int rank, int size, int32_t color,
                   std::chrono::milliseconds timeout, const std::string& name);
  ~ProcessGroupHCCL() override;

  /* A parent rank outside the group being split off (HcclCommSplit with
   * HCCL_SPLIT_NOCOLOR): its part of the collective call the members make in the constructor
   * above. Throws RuntimeError with the library's reason. */
  void splitOut();
  /* Collective over this group: true when every rank passes true (an allreduce MIN of one
   * int); how the ranks agree to split before anyone starts. Throws as a collective does. */
  bool agree(bool mine);
  /* Open and not broken (a failed call, a peer's failure, an abort): a new_group may split it. */
  bool alive() const {
    HcclResult broken = HCCL_SUCCESS;
    return core_->comm() != nullptr && HcclGetCommAsyncError(core_->comm(), &broken) == HCCL_SUCCESS &&
           broken == HCCL_SUCCESS;
  }
  /* How the communicator was made: "store" (HcclCommInitStore) or "split" (HcclCommSplit). */
  const std::string& madeBy() const { return madeBy_; }

  const std::string getBackendName() const override { return "hccl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  /* gloo's monitored barrier (reached as ProcessGroup.monitored_barrier; torch's
   * dist.monitored_barrier lets only gloo through): every rank sends rank 0 a byte and waits
   * for its answer, within opts.timeout (else the group's); rank 0 names the rank that did not
   * arrive (every such rank with waitAllRanks) in a DistBackendError. */
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

#if TORCH_HCCL_BACKEND_API
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  /* A count of this group's calls, as gloo keeps one (torch's debug tooling reads it). */
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  /* Fails every pending and later call of the group on every rank (HcclCommAbort). */
  void abort() override;
  void shutdown() override { core_->close(); }
#endif
#if TORCH_HCCL_SHRINK_API
  /* dist.shrink_group: the ranks that stay make a group without ranks_to_exclude
   * (HcclCommShrink; shrink_flags 1 = SHRINK_ABORT aborts this group's calls first), over
   * this group's store; opts_override's timeout, if given, replaces the group's. */
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
      const c10::intrusive_ptr<Options>& opts_override) override;

  /* A group over a communicator shrink made, keeping the store view it meets through (public
   * only for c10::make_intrusive). */
  ProcessGroupHCCL(HcclComm comm, std::shared_ptr<void> store, std::chrono::milliseconds timeout,
                   const std::string& name);
#endif

 private:
  /* The communicator's settings from torch's timeout and group name. */
  HcclCommConfig config(const std::string& name);
  /* Takes comm as this group's: its core, and the process's device (the first group's). */
  void adopt(HcclComm comm);
  /* blocking: torch waits for the work at once (waitedAtOnce(opts)); see HcclWork::start. */
  c10::intrusive_ptr<HcclWork> newWork(c10d::OpType type, const char* what,
                                       std::vector<at::Tensor> outputs, bool blocking = false);
  c10::intrusive_ptr<c10d::Work> reduceCall(c10d::OpType type, const char* what,
                                            at::Tensor& tensor, const c10d::ReduceOp& op,
                                            int64_t root, bool blocking);
  void startReduce(HcclWork& w, const ReducePlan& plan, at::Tensor buf, int64_t root,
                   const char* what);
  void allgatherInto(HcclWork& w, at::Tensor output, at::Tensor input, const char* what);
  void reduceScatterInto(HcclWork& w, at::Tensor output, at::Tensor input,
                         const c10d::ReduceOp& op, const char* what);
  c10::intrusive_ptr<c10d::Work> sparseAllreduce(at::Tensor& tensor, const c10d::ReduceOp& op);
  /* send, recv and recvAnysource (ops_p2p.cpp). */
  template <class Call>
  c10::intrusive_ptr<c10d::Work> pointToPoint(c10d::OpType type, const char* what,
                                              std::vector<at::Tensor>& tensors,
                                              std::optional<int> peer, bool receive, Call call);
  std::shared_ptr<Core> core_;
  std::shared_ptr<void> store_; /* the store view the communicator was made over */
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
  std::string madeBy_ = "store";
#if TORCH_HCCL_BACKEND_API
  c10::intrusive_ptr<Options> options_;
#endif
};

}  // namespace torch_hccl
