/*
 * core.hpp - the per-communicator core a process group and its works share: the libhccl
 * communicator, held open while anyone waits on its requests, and the finisher thread.
 *
 * The finisher runs jobs in posting order: completing a work whose future someone asked for
 * (getFuture; DDP's hooks wait on the future, not the work), and waiting out a work dropped
 * before it finished, whose tensors the library still writes (work.hpp). Shared by the
 * process group and its works, so a work that outlives destroy_process_group still finds its
 * communicator; the communicator is destroyed with the last of them, or at close().
 */
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "hccl.h"

namespace torch_hccl {

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

}  // namespace torch_hccl
