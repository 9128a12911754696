/*
 * work.hpp - what a torch_hccl call hands back to torch: a c10d::Work over one or more libhccl
 * requests, and the per-communicator core the works and the process group share.
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
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "hccl.h"

namespace torch_hccl {

/* The communicator and the finisher thread. Shared by the process group and its works, so a
 * work that outlives destroy_process_group still finds its communicator; the communicator is
 * destroyed with the last of them. */
class Core {
 public:
  Core(HcclComm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  ~Core();
  /* NULL once closed: the library then refuses every call (HCCL_E_PTR). */
  HcclComm comm() const { return comm_; }
  /* Waits for the finisher's jobs and destroys the communicator (torch 2.x's shutdown at
   * destroy_process_group, as NCCL's backend does, so its trace and flight-recorder files
   * are written then); the destructor does it otherwise. Idempotent. */
  void close();
  int rank() const { return rank_; }
  int size() const { return size_; }
  /* Runs job on the finisher thread (started on first use), in posting order. False, and
   * the job dropped, once closed. */
  bool post(std::function<void()> job);
  /* Keeps the communicator, and with it its requests, alive while the caller waits on them:
   * close() destroys it only once no one holds it. The lock is not owned when the
   * communicator is already closed (its requests are freed: do not touch them). */
  std::shared_lock<std::shared_mutex> hold() {
    std::shared_lock<std::shared_mutex> l(use_);
    if (!comm_) l.unlock();
    return l;
  }
  /* Whether the caller is the finisher thread (a future's callback runs there). */
  bool onFinisher() const { return finisherId_.load() == std::this_thread::get_id(); }

 private:
  void run();
  HcclComm comm_;
  int rank_, size_;
  std::mutex mu_;
  std::shared_mutex use_; /* shared: waiting on requests; exclusive: destroying */
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::thread finisher_;
  std::atomic<std::thread::id> finisherId_{};
  bool stop_ = false;
  bool closed_ = false;
};

/* The error torch's own backends raise for a failed call, carrying libhccl's message
 * (compat.hpp's throwBackendError): "hccl <what> failed (<code>): <reason>", and for a timeout
 * "hccl <what>: Timed out (<code>): <reason>". */
std::exception_ptr hcclError(HcclResult r, const std::string& what, const std::string& msg);
[[noreturn]] void throwHccl(HcclResult r, const std::string& what);
/* A library call's result: nothing on success, else throwHccl with the library's reason. */
inline void checkHccl(HcclResult r, const char* what) {
  if (r != HCCL_SUCCESS) throwHccl(r, what);
}

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
