/*
 * work.hpp - what a torch_hccl call hands back to torch: a c10d::Work over one or more libhccl
 * requests, over the per-communicator core the works and the process group share (core.hpp).
 *
 * A work completes when every library request it holds has finished; then, on success, its
 * post step runs (copying staged results into non-contiguous outputs, dividing for AVG), and
 * its future, if anyone asked for one, is marked. Completion happens on whichever thread gets
 * there first: the user's wait() (the library then runs a not-yet-started call on that very
 * thread, so a blocking torch call costs no thread switch), isCompleted() once the requests
 * are done, or the core's finisher thread, which serves getFuture() (DDP's hooks wait on the
 * future, not the work) and works dropped before they finished (their tensors stay alive until
 * the library is done with them).
 */
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "core.hpp"
#include "errors.hpp"
#include "hccl.h"

namespace torch_hccl {

class HcclWork : public c10d::Work {
 public:
  /* blocking: torch waits for the work as soon as it is returned (async_op=False, see
   * compat.hpp's waitedAtOnce), so start() runs each call to its end on the caller's thread. */
  HcclWork(std::shared_ptr<Core> core, int rank, c10d::OpType type, std::string what,
           std::vector<at::Tensor> outputs, bool blocking = false);
  ~HcclWork() override;

  /* Before the work is returned: the requests to wait for, tensors to keep alive, and the step
   * to run after success. */
  void addRequest(HcclRequest r) { reqs_.push_back(r); }
  /* Starts one library call: call(HcclRequest* out) with out = where its request goes, or
   * nullptr for a blocking work, which makes the library run the call here and now instead of
   * handing it to its worker thread and waking it (two thread switches per call, which on
   * cores shared by several ranks cost more than a small call itself). */
  template <class Call>
  void start(const char* what, Call call) {
    HcclRequest req = nullptr;
    checkHccl(call(blocking_ ? nullptr : &req), what);
    if (req) reqs_.push_back(req);
  }
  void keep(at::Tensor t) { keep_.push_back(std::move(t)); }
  void onSuccess(std::function<void()> fn) { post_.push_back(std::move(fn)); }
  /* Whether no library request was added (the work is done once its steps run). */
  bool idle() const { return reqs_.empty(); }
  /* Where a receive from any source writes its source: a tensor, so that it stays alive with
   * the work's other tensors even if the work is dropped first. */
  uint32_t* sourceSlot();
  /* A work with nothing to wait for (count 0, or a call that finished at once). */
  void completeNow();

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;

 private:
  /* Waits for every request, runs the post step, finishes the work and its future. Runs once;
   * a second caller blocks until the first is done. */
  void complete();
  void markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& fut, std::exception_ptr err);

  std::shared_ptr<Core> core_;
  std::string what_;
  bool blocking_;
  std::vector<HcclRequest> reqs_;
  std::vector<at::Tensor> keep_;
  std::vector<at::Tensor> outputs_;
  std::vector<std::function<void()>> post_; /* in order */
  at::Tensor source_;
  std::mutex claim_;
  std::atomic<bool> done_{false};
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace torch_hccl
