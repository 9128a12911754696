/*
 * core.cpp - the finisher thread and the communicator's end (contract: core.hpp): the thread
 * is born with every signal blocked, and the communicator is destroyed only after the last
 * wait on its requests, with the GIL let go so the finisher's jobs can free Python tensors.
 */
#include <Python.h>

#include "core.hpp"

#include <pthread.h>
#include <signal.h>

namespace torch_hccl {

Core::~Core() {
  close();
}

void Core::close() {
  std::thread finisher;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) return;
    closed_ = stop_ = true;
    finisher = std::move(finisher_);
  }
  cv_.notify_all();
  /* Python drops the last reference with the GIL held, and the finisher may need the GIL to
   * free tensors that have Python objects: let go of it while joining and destroying. */
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) saved = PyEval_SaveThread();
  if (finisher.joinable()) {
    /* The last reference may be dropped by a job on the finisher itself. */
    if (finisher.get_id() == std::this_thread::get_id())
      finisher.detach();
    else
      finisher.join();
  }
  {
    std::unique_lock<std::shared_mutex> x(use_); /* after every wait on its requests */
    HcclComm comm = comm_;
    comm_ = nullptr;
    HcclCommDestroy(comm);
  }
  if (saved) PyEval_RestoreThread(saved);
}

bool Core::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) { /* the communicator is gone, and with it every request it had */
      jobs_.clear();
      return false;
    }
    jobs_.push_back(std::move(job));
    if (!finisher_.joinable()) {
      /* Born with every signal blocked, as libhccl's threads are (hccl/src/base/thread.h):
       * signals stay with the program's threads (a SIGCHLD this thread took would be lost). */
      struct AllBlocked {
        sigset_t old;
        AllBlocked() {
          sigset_t all;
          sigfillset(&all);
          pthread_sigmask(SIG_SETMASK, &all, &old);
        }
        ~AllBlocked() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
      } blocked;
      finisher_ = std::thread([this] { run(); });
      finisherId_.store(finisher_.get_id());
    }
  }
  cv_.notify_one();
  return true;
}

void Core::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return; /* stopping, and drained */
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lk.unlock();
    job();
    job = nullptr; /* may drop the last reference to a work, or to this core */
    lk.lock();
  }
}

}  // namespace torch_hccl
