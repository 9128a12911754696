/*
 * ops_barrier.cpp - ProcessGroupHCCL's barriers: barrier (the library's HcclBarrier) and
 * gloo's monitored barrier, built from point-to-point bytes to and from rank 0 so that rank 0
 * can name the ranks that did not arrive by the deadline. See process_group.hpp.
 */
#include "process_group.hpp"

#include <thread>

namespace torch_hccl {

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  auto w = newWork(c10d::OpType::BARRIER, "barrier", {}, waitedAtOnce(opts));
  w->start("barrier", [&](HcclRequest* req) {
    return HcclBarrier(core_->comm(), req);
  });
  return w;
}

void ProcessGroupHCCL::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  using Clock = std::chrono::steady_clock;
  const int n = getSize(), me = getRank();
  if (n == 1) return;
  auto timeout = opts.timeout.count() > 0 ? opts.timeout : timeout_;
  auto deadline = Clock::now() + timeout;
  HcclComm comm = core_->comm();
  /* The bytes live in tensors a work keeps: a peer that never came leaves a receive pending,
   * and a dropped work keeps its tensors until the library is done with them. */
  auto byteTensor = [] { return at::ones({1}, at::TensorOptions().dtype(at::kByte)); };
  /* Done by the deadline (a failed call counts as done: its work's wait raises the reason). */
  auto arrived = [&](HcclRequest r) {
    for (;;) {
      int done = 0;
      if (HcclRequestTest(r, &done) != HCCL_SUCCESS || done) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  };
  std::string ms = std::to_string(timeout.count()) + " ms";
  if (me != 0) {
    auto w = newWork(c10d::OpType::BARRIER, "monitored barrier", {});
    at::Tensor out = byteTensor(), in = byteTensor();
    w->keep(out);
    w->keep(in);
    HcclRequest s, r;
    checkHccl(HcclSend(out.data_ptr(), 1, HCCL_DATA_TYPE_INT8, 0, comm, &s), "monitored barrier");
    w->addRequest(s);
    checkHccl(HcclRecv(in.data_ptr(), 1, HCCL_DATA_TYPE_INT8, 0, comm, &r), "monitored barrier");
    w->addRequest(r);
    if (!arrived(s) || !arrived(r))
      throwBackendError("[Rank " + std::to_string(me) + "]: Rank 0 did not answer within " + ms +
                        " in monitoredBarrier (Timed out): rank 0 or another rank has not "
                        "reached it");
    w->wait();
    return;
  }
  std::vector<int> missing;
  std::vector<c10::intrusive_ptr<HcclWork>> works;
  std::vector<HcclRequest> reqs(n);
  for (int r = 1; r < n; r++) {
    auto w = newWork(c10d::OpType::BARRIER, "monitored barrier", {});
    at::Tensor in = byteTensor();
    w->keep(in);
    checkHccl(HcclRecv(in.data_ptr(), 1, HCCL_DATA_TYPE_INT8, static_cast<uint32_t>(r), comm,
                   &reqs[r]),
          "monitored barrier");
    w->addRequest(reqs[r]);
    works.push_back(w);
  }
  for (int r = 1; r < n; r++) {
    if (arrived(reqs[r])) continue;
    missing.push_back(r);
    if (!waitAllRanks) break;
  }
  if (!missing.empty()) {
    std::string who;
    for (size_t i = 0; i < missing.size(); i++)
      who += (i ? ", " : "") + std::to_string(missing[i]);
    throwBackendError("[Rank 0]: Rank" + std::string(missing.size() > 1 ? "s " : " ") + who +
                      " failed to pass monitoredBarrier in " + ms + " (Timed out)");
  }
  for (auto& w : works) w->wait();
  works.clear();
  for (int r = 1; r < n; r++) {
    auto w = newWork(c10d::OpType::BARRIER, "monitored barrier", {});
    at::Tensor out = byteTensor();
    w->keep(out);
    HcclRequest s;
    checkHccl(HcclSend(out.data_ptr(), 1, HCCL_DATA_TYPE_INT8, static_cast<uint32_t>(r), comm, &s),
          "monitored barrier");
    w->addRequest(s);
    works.push_back(w);
  }
  for (auto& w : works) w->wait();
}

}  // namespace torch_hccl
