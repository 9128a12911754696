/*
 * ops_alltoall.cpp - ProcessGroupHCCL's all-to-alls: alltoall_base (one tensor each way, even
 * blocks or split sizes along dim 0) and alltoall (a list of tensors each way). See
 * process_group.hpp.
 *
 * Any dtype moves as bytes. Even blocks are one HcclAlltoAll; anything else is HcclAlltoAllV
 * over byte counts and displacements, which the family's helpers lay out (Blocks: rows of a
 * split, or whole tensors of a list) and pass (alltoallBytes).
 */
#include "process_group.hpp"

#include <c10/util/Exception.h>

#include "staging.hpp"

namespace torch_hccl {
namespace {

/* The byte counts and displacements of HcclAlltoAllV's one side: blocks laid back to back. */
struct Blocks {
  std::vector<uint64_t> counts, displs;
  uint64_t total = 0;
  void add(uint64_t bytes) {
    counts.push_back(bytes);
    displs.push_back(total);
    total += bytes;
  }
};

/* The blocks of t cut along dim 0 by splits (n equal parts when empty), or a RuntimeError
 * naming the side and the rule. */
Blocks splitRows(const at::Tensor& t, std::vector<int64_t>& splits, int n, const char* side,
                 const char* what) {
  int64_t rows = t.dim() > 0 ? t.size(0) : 0;
  if (splits.empty()) splits.assign(n, rows / n);
  TORCH_CHECK(splits.size() == static_cast<size_t>(n), "hccl ", what, ": ", side,
              " split sizes have ", splits.size(), " entries; the group has ", n);
  int64_t sum = 0;
  for (int64_t s : splits) {
    TORCH_CHECK(s >= 0, "hccl ", what, ": ", side, " split size ", s, " is negative");
    sum += s;
  }
  TORCH_CHECK(sum == rows, "hccl ", what, ": ", side, " split sizes add up to ", sum,
              " but the ", side, " has ", rows, " rows (dim 0)");
  uint64_t rowBytes = rows ? t.nbytes() / rows : 0;
  Blocks b;
  for (int64_t s : splits) b.add(static_cast<uint64_t>(s) * rowBytes);
  return b;
}

/* HcclAlltoAllV of in's send blocks into out's recv blocks, as bytes. */
HcclResult alltoallBytes(const at::Tensor& in, const Blocks& send, const at::Tensor& out,
                         const Blocks& recv, HcclComm comm, HcclRequest* req) {
  return HcclAlltoAllV(in.data_ptr(), send.counts.data(), send.displs.data(), HCCL_DATA_TYPE_INT8,
                       out.data_ptr(), recv.counts.data(), recv.displs.data(),
                       HCCL_DATA_TYPE_INT8, comm, req);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  const char* what = "alltoall_base";
  checkPair(output, input, what);
  int n = getSize();
  at::Tensor in = dense(input), out = dense(output);
  auto w = newWork(c10d::OpType::ALLTOALL_BASE, what, {output}, waitedAtOnce(opts));
  bool even = outputSplits.empty() && inputSplits.empty();
  uint64_t block = 0;
  Blocks send, recv;
  if (even) {
    TORCH_CHECK(in.dim() > 0 && in.size(0) % n == 0 && out.dim() > 0 && out.size(0) % n == 0 &&
                    in.numel() == out.numel(),
                "hccl ", what, ": without split sizes, input and output must have the same "
                "size with dim 0 divisible by the group size ", n, " (input ", in.sizes(),
                ", output ", out.sizes(), ")");
    block = in.nbytes() / n;
  } else {
    send = splitRows(in, inputSplits, n, "input", what);
    recv = splitRows(out, outputSplits, n, "output", what);
  }
  w->start(what, [&](HcclRequest* req) {
    callAs(in.scalar_type());
    if (even)
      return HcclAlltoAll(in.data_ptr(), block, HCCL_DATA_TYPE_INT8, out.data_ptr(), block,
                          HCCL_DATA_TYPE_INT8, core_->comm(), req);
    return alltoallBytes(in, send, out, recv, core_->comm(), req);
  });
  w->keep(in);
  w->keep(out);
  copyBack(*w, output, out);
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  const char* what = "alltoall";
  int n = getSize();
  TORCH_CHECK(inputs.size() == static_cast<size_t>(n) && outputs.size() == static_cast<size_t>(n),
              "hccl alltoall: expected ", n, " input and ", n, " output tensors (the group "
              "size), got ", inputs.size(), " and ", outputs.size());
  for (int i = 0; i < n; i++) {
    checkCpu(inputs[i], what);
    checkCpu(outputs[i], what);
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                    outputs[i].scalar_type() == inputs[0].scalar_type(),
                "hccl alltoall: every tensor must have one dtype (", dtypeName(inputs[0].scalar_type()),
                ")");
  }
  Blocks send, recv;
  for (int i = 0; i < n; i++) {
    send.add(inputs[i].nbytes());
    recv.add(outputs[i].nbytes());
  }
  at::Tensor in = packBytes(inputs);
  at::Tensor flat = byteBuffer(static_cast<int64_t>(recv.total));
  auto w = newWork(c10d::OpType::ALLTOALL, what, outputs, waitedAtOnce(opts));
  w->start(what, [&](HcclRequest* req) {
    callAs(inputs[0].scalar_type());
    return alltoallBytes(in, send, flat, recv, core_->comm(), req);
  });
  w->keep(in);
  w->keep(flat);
  unpackBack(*w, flat, outputs);
  return w;
}

}  // namespace torch_hccl
