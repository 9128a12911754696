/*
 * ops_gather.cpp - ProcessGroupHCCL's collectives that move bytes without reducing:
 * broadcast, allgather and its tensor and coalesced forms, gather, scatter. See
 * process_group.hpp.
 *
 * Any dtype moves as bytes (HCCL_DATA_TYPE_INT8), each call named as the user's dtype for
 * the library's messages (callAs, reduce_route.hpp). A list of tensors goes through one flat
 * byte buffer the library fills, unpacked into the list on success, except an allgather's
 * output list that already sits back to back, which the library fills in place. The family's
 * helper is allgatherInto, one allgather of a tensor into a tensor added to a work.
 */
#include "process_group.hpp"

#include <c10/util/Exception.h>

#include "staging.hpp"

namespace torch_hccl {

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const char* what = "broadcast";
  at::Tensor tensor = single(tensors, what);
  checkRootTensor(opts.rootTensor, what);
  checkRoot(opts.rootRank, getSize(), what);
  at::Tensor buf = dense(tensor);
  auto w = newWork(c10d::OpType::BROADCAST, what, {tensor}, waitedAtOnce(opts));
  w->start(what, [&](HcclRequest* req) {
    callAs(buf.scalar_type());
    return HcclBroadcast(buf.data_ptr(), buf.nbytes(), HCCL_DATA_TYPE_INT8,
                         static_cast<uint32_t>(opts.rootRank), core_->comm(), req);
  });
  w->keep(buf);
  copyBack(*w, tensor, buf);
  return w;
}

/* One allgather of input into output (size x input's elements), added to work w. */
void ProcessGroupHCCL::allgatherInto(HcclWork& w, at::Tensor output, at::Tensor input,
                                     const char* what) {
  checkPair(output, input, what);
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "hccl ", what, ": output has ",
              output.numel(), " elements; it must have group size (", getSize(), ") x input (",
              input.numel(), ")");
  at::Tensor in = dense(input), out = dense(output);
  w.start(what, [&](HcclRequest* req) {
    callAs(in.scalar_type());
    return HcclAllGather(in.data_ptr(), out.data_ptr(), in.nbytes(), HCCL_DATA_TYPE_INT8,
                         core_->comm(), req);
  });
  w.keep(in);
  w.keep(out);
  copyBack(w, output, out);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const char* what = "_allgather_base";
  auto w = newWork(c10d::OpType::_ALLGATHER_BASE, what, {output}, waitedAtOnce(opts));
  allgatherInto(*w, output, input, what);
  return w;
}

#if TORCH_HCCL_BACKEND_API
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* what = "allgather_into_tensor_coalesced";
  checkPaired(outputs.size(), inputs.size(), what);
  auto w = newWork(c10d::OpType::COALESCED, what, outputs, waitedAtOnce(opts));
  for (size_t i = 0; i < inputs.size(); i++) allgatherInto(*w, outputs[i], inputs[i], what);
  if (w->idle()) w->completeNow();
  return w;
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* what = "allgather";
  const at::Tensor& input = single(inputs, what);
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(getSize()),
              "hccl allgather: expected one output list of ", getSize(),
              " tensors (the group size), got ",
              outputs.size() == 1 ? outputs[0].size() : outputs.size());
  for (auto& o : outputs[0]) checkSame(o, input, what, "an output tensor");
  at::Tensor in = dense(input);
  auto w = newWork(c10d::OpType::ALLGATHER, what, outputs[0], waitedAtOnce(opts));
  bool direct = adjacent(outputs[0]);
  at::Tensor flat =
      direct ? at::Tensor() : byteBuffer(static_cast<int64_t>(in.nbytes()) * getSize());
  void* dst = direct ? outputs[0][0].data_ptr() : flat.data_ptr();
  w->start(what, [&](HcclRequest* req) {
    callAs(in.scalar_type());
    return HcclAllGather(in.data_ptr(), dst, in.nbytes(), HCCL_DATA_TYPE_INT8, core_->comm(), req);
  });
  w->keep(in);
  if (!direct) {
    w->keep(flat);
    unpackBack(*w, flat, outputs[0]);
  } else {
    for (auto& o : outputs[0]) w->keep(o);
  }
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* what = "allgather_coalesced";
  TORCH_CHECK(outputLists.size() == static_cast<size_t>(getSize()), "hccl ", what,
              ": expected ", getSize(), " output lists (one per rank), got ", outputLists.size());
  for (auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "hccl ", what, ": an output list has ",
                list.size(), " tensors but there are ", inputs.size(), " inputs");
    for (size_t i = 0; i < list.size(); i++) checkSame(list[i], inputs[i], what, "an output");
  }
  std::vector<at::Tensor> all;
  for (auto& list : outputLists) all.insert(all.end(), list.begin(), list.end());
  auto w = newWork(c10d::OpType::ALLGATHER_COALESCED, what, all, waitedAtOnce(opts));
  at::Tensor in = packBytes(inputs);
  at::Tensor flat = byteBuffer(in.numel() * getSize());
  w->start(what, [&](HcclRequest* req) {
    return HcclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(), HCCL_DATA_TYPE_INT8,
                         core_->comm(), req);
  });
  w->keep(in);
  w->keep(flat);
  unpackBack(*w, flat, all);
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* what = "gather";
  const at::Tensor& input = single(inputs, what);
  checkRoot(opts.rootRank, getSize(), what);
  bool root = opts.rootRank == getRank();
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(getSize()),
                "hccl gather: the root expects one output list of ", getSize(), " tensors");
    for (auto& o : outputs[0]) checkSame(o, input, what, "an output tensor");
  } else {
    TORCH_CHECK(outputs.empty(), "hccl gather: only the root (rank ", opts.rootRank,
                ") takes an output list; rank ", getRank(), " passed ", outputs.size());
  }
  at::Tensor in = dense(input);
  auto w = newWork(c10d::OpType::GATHER, what,
                   root ? outputs[0] : std::vector<at::Tensor>{}, waitedAtOnce(opts));
  at::Tensor flat;
  if (root) flat = byteBuffer(static_cast<int64_t>(in.nbytes()) * getSize());
  w->start(what, [&](HcclRequest* req) {
    callAs(in.scalar_type());
    return HcclGather(in.data_ptr(), root ? flat.data_ptr() : nullptr, in.nbytes(),
                      HCCL_DATA_TYPE_INT8, static_cast<uint32_t>(opts.rootRank), core_->comm(),
                      req);
  });
  w->keep(in);
  if (root) {
    w->keep(flat);
    unpackBack(*w, flat, outputs[0]);
  }
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* what = "scatter";
  at::Tensor output = single(outputs, what);
  checkRoot(opts.rootRank, getSize(), what);
  bool root = opts.rootRank == getRank();
  at::Tensor flat;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(getSize()),
                "hccl scatter: the root expects one input list of ", getSize(), " tensors");
    for (auto& i : inputs[0]) checkSame(i, output, what, "an input tensor");
    flat = packBytes(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty(), "hccl scatter: only the root (rank ", opts.rootRank,
                ") takes an input list; rank ", getRank(), " passed ", inputs.size());
  }
  at::Tensor out = dense(output);
  auto w = newWork(c10d::OpType::SCATTER, what, {output}, waitedAtOnce(opts));
  w->start(what, [&](HcclRequest* req) {
    callAs(out.scalar_type());
    return HcclScatter(root ? flat.data_ptr() : nullptr, out.data_ptr(), out.nbytes(),
                       HCCL_DATA_TYPE_INT8, static_cast<uint32_t>(opts.rootRank), core_->comm(),
                       req);
  });
  w->keep(out);
  if (root) w->keep(flat);
  copyBack(*w, output, out);
  return w;
}

}  // namespace torch_hccl
