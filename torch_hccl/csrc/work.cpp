/*
 * work.cpp - completion of torch_hccl's works (contract: work.hpp): on wait(), isCompleted()
 * or the core's finisher, exactly once; the post steps, the future, and the failure a work
 * reports when its requests failed or its communicator went first.
 */
#include "work.hpp"

#include <stdexcept>
#include <thread>

#include <ATen/core/jit_type.h>

namespace torch_hccl {

HcclWork::HcclWork(std::shared_ptr<Core> core, int rank, c10d::OpType type, std::string what,
                   std::vector<at::Tensor> outputs, bool blocking)
    : c10d::Work(rank, type), core_(std::move(core)), what_(std::move(what)), blocking_(blocking),
      outputs_(std::move(outputs)) {}

HcclWork::~HcclWork() {
  if (done_.load() || reqs_.empty()) return; /* nothing in flight (or refused before a call) */
  /* Dropped before it finished: the library still writes into these tensors, so they (and
   * the requests) go to the finisher, which waits for them. */
  auto reqs = std::move(reqs_);
  auto keep = std::move(keep_);
  auto outputs = std::move(outputs_);
  auto post = std::move(post_);
  core_->post([reqs, keep, outputs, post]() {
    bool ok = true;
    for (HcclRequest r : reqs)
      ok = HcclRequestWait(r) == HCCL_SUCCESS && ok;
    if (ok)
      for (auto& step : post) step();
  });
}

void HcclWork::completeNow() {
  complete();
}

void HcclWork::complete() {
  std::lock_guard<std::mutex> g(claim_);
  if (done_.load()) return;
  std::exception_ptr err;
  HcclResult first = HCCL_SUCCESS;
  std::string msg;
  auto held = core_->hold();
  if (!held.owns_lock() && !reqs_.empty()) {
    /* destroy_process_group (or shutdown) came first and freed the requests, which may
     * or may not have finished. */
    reqs_.clear();
    try {
      throwBackendError("hccl " + what_ + ": the process group was destroyed before this work "
                        "was waited for, so its result is unknown (wait for works before "
                        "destroy_process_group)");
    } catch (...) {
      err = std::current_exception();
    }
  }
  for (HcclRequest r : reqs_) {
    HcclResult res = HcclRequestWait(r);
    if (res != HCCL_SUCCESS && first == HCCL_SUCCESS) {
      first = res;
      msg = HcclGetLastErrorMessage();
    }
  }
  reqs_.clear();
  if (held.owns_lock()) held.unlock();
  if (first != HCCL_SUCCESS) {
    err = hcclError(first, what_, msg);
  } else if (!err) {
    try {
      for (auto& step : post_) step();
    } catch (...) {
      err = std::current_exception();
    }
  }
  post_.clear();
  keep_.clear();
  finish(err);
  /* done_ and future_ change under mutex_, so exactly one of complete() and getFuture() marks
   * the future. */
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    done_.store(true);
    fut = future_;
  }
  if (fut) markFuture(fut, err);
}

void HcclWork::markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& fut,
                          std::exception_ptr err) {
  if (err)
    fut->setError(err);
  else
    fut->markCompleted(c10::IValue(outputs_));
}

bool HcclWork::isCompleted() {
  if (done_.load()) return true;
  {
    auto held = core_->hold();
    if (held.owns_lock()) {
      for (HcclRequest r : reqs_) {
        int d = 0;
        if (HcclRequestTest(r, &d) != HCCL_SUCCESS || !d) return false;
      }
    } /* else closed: complete() below fails the work */
  }
  /* Every request is done, so completing now does not block (unless another thread is
   * already completing it: then report what we know). */
  std::unique_lock<std::mutex> g(claim_, std::try_to_lock);
  if (!g.owns_lock()) return done_.load();
  g.unlock();
  complete();
  return true;
}

bool HcclWork::wait(std::chrono::milliseconds timeout) {
  if (timeout != kNoTimeout && !done_.load()) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!isCompleted()) {
      if (std::chrono::steady_clock::now() >= deadline)
        throwBackendError("hccl " + what_ + ": Timed out waiting " +
                          std::to_string(timeout.count()) + " ms for the work to complete");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  complete();
  std::lock_guard<std::mutex> lk(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> HcclWork::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  bool finished;
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    if (future_) return future_;
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
    fut = future_;
    finished = done_.load();
    err = exception_;
  }
  if (finished)
    markFuture(fut, err); /* complete() ran before the future existed */
  else if (core_->onFinisher())
    /* Asked from a future's callback (PowerSGD's hook waits on a new allreduce's future inside
     * one): the finisher would be waiting for itself, so the work completes here, now. */
    complete();
  else if (!core_->post(
               [self = c10::intrusive_ptr<HcclWork>::reclaim_copy(this)]() { self->complete(); }))
    complete(); /* closed: nothing would run the job; the work fails now, naming why */
  return fut;
}

uint32_t* HcclWork::sourceSlot() {
  source_ = at::full({1}, -1, at::TensorOptions().dtype(at::kInt));
  keep(source_);
  return static_cast<uint32_t*>(source_.data_ptr());
}

int HcclWork::sourceRank() const {
  if (!source_.defined() || !done_.load() || source_.data_ptr<int32_t>()[0] < 0)
    throw std::runtime_error("hccl " + what_ + ": sourceRank() is only defined for a receive "
                             "from any source that has completed");
  return source_.data_ptr<int32_t>()[0];
}

std::vector<at::Tensor> HcclWork::result() {
  return outputs_;
}

}  // namespace torch_hccl
