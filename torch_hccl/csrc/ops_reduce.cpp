/*
 * ops_reduce.cpp - ProcessGroupHCCL's reductions: allreduce (dense and sparse), reduce,
 * allreduce_coalesced, reduce_scatter and its tensor forms. See process_group.hpp.
 *
 * Each is one library call on the tensor's own type, routed by reduce_route.hpp (the library's
 * AVG and premul sum included, so nothing runs after the call but copying staged results
 * back). The family's helper is startReduce, which makes the call's op and starts it on a
 * contiguous buffer; reduceCall adds the staging of one tensor around it. The sparse
 * allreduce is gloo's: gathers of every rank's indices and values, summed by coalescing.
 */
#include "process_group.hpp"

#include <c10/util/Exception.h>

#include "reduce_route.hpp"
#include "staging.hpp"

namespace torch_hccl {

/* Starts `plan` on the contiguous buf (the caller's tensor or its staging copy) for work w:
 * one library call, its request added to w; the library's result is final (AVG and PREMUL_SUM
 * included). root < 0: an allreduce, else a reduce to root. */
void ProcessGroupHCCL::startReduce(HcclWork& w, const ReducePlan& plan, at::Tensor buf,
                                   int64_t root, const char* what) {
  HcclComm comm = core_->comm();
  LibOp op(plan, comm, what);
  uint64_t count = libCount(plan, buf);
  w.start(what, [&](HcclRequest* req) {
    callAs(buf.scalar_type());
    if (root < 0)
      return HcclAllReduce(buf.data_ptr(), buf.data_ptr(), count, plan.dtype, op.get(), comm, req);
    return HcclReduce(buf.data_ptr(), buf.data_ptr(), count, plan.dtype, op.get(),
                      static_cast<uint32_t>(root), comm, req);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduceCall(c10d::OpType type, const char* what,
                                                            at::Tensor& tensor,
                                                            const c10d::ReduceOp& op,
                                                            int64_t root, bool blocking) {
  ReducePlan plan = planReduce(tensor, op, what);
  at::Tensor buf = dense(tensor);
  auto w = newWork(type, what, {tensor}, blocking);
  bool mine = root < 0 || root == getRank();
  w->keep(buf);
  startReduce(*w, plan, buf, root, what);
  if (mine) copyBack(*w, tensor, buf);
  if (w->idle()) w->completeNow();
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].layout() == at::kSparse)
    return sparseAllreduce(tensors[0], opts.reduceOp);
  single(tensors, "allreduce");
  return reduceCall(c10d::OpType::ALLREDUCE, "allreduce", tensors[0], opts.reduceOp, -1,
                    waitedAtOnce(opts));
}

/* A sparse COO allreduce, as gloo does it: the library gathers every rank's nnz, then its
 * indices and values (padded to the largest nnz); each rank concatenates them and coalesces,
 * which sums the values of equal indices in rank order. Blocking. */
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::sparseAllreduce(at::Tensor& tensor,
                                                                 const c10d::ReduceOp& op) {
  const char* what = "allreduce (sparse)";
  TORCH_CHECK(tensor.device().is_cpu(), "hccl ", what, ": tensor is on ", tensor.device().str(),
              "; hccl takes CPU tensors");
  auto o = static_cast<c10d::ReduceOp::RedOpType>(op);
  TORCH_CHECK(o == c10d::ReduceOp::SUM, "hccl ", what, ": ReduceOp.", opName(o),
              " is not supported; sparse tensors reduce with SUM");
  HcclComm comm = core_->comm();
  int n = getSize();
  at::Tensor t = tensor.coalesce();
  at::Tensor idx = t._indices().contiguous(), val = t._values().contiguous();
  int64_t mine = idx.size(1);
  at::Tensor nnz = at::empty({n}, at::TensorOptions().dtype(at::kLong));
  checkHccl(HcclAllGather(&mine, nnz.data_ptr(), sizeof mine, HCCL_DATA_TYPE_INT8, comm, nullptr),
        what);
  int64_t most = nnz.max().item<int64_t>();
  auto padded = [most](const at::Tensor& x, int64_t dim) {
    if (x.size(dim) == most) return x;
    auto sizes = x.sizes().vec();
    sizes[dim] = most;
    at::Tensor p = at::zeros(sizes, x.options());
    p.narrow(dim, 0, x.size(dim)).copy_(x);
    return p;
  };
  at::Tensor pi = padded(idx, 1), pv = padded(val, 0);
  at::Tensor ai = at::empty({n, pi.size(0), most}, idx.options());
  auto vs = pv.sizes().vec();
  vs.insert(vs.begin(), n);
  at::Tensor av = at::empty(vs, val.options());
  checkHccl(HcclAllGather(pi.data_ptr(), ai.data_ptr(), pi.nbytes(), HCCL_DATA_TYPE_INT8, comm,
                      nullptr),
        what);
  checkHccl(HcclAllGather(pv.data_ptr(), av.data_ptr(), pv.nbytes(), HCCL_DATA_TYPE_INT8, comm,
                      nullptr),
        what);
  std::vector<at::Tensor> is, vals;
  for (int r = 0; r < n; r++) {
    int64_t k = nnz[r].item<int64_t>();
    is.push_back(ai[r].narrow(1, 0, k));
    vals.push_back(av[r].narrow(0, 0, k));
  }
  at::Tensor sum =
      at::sparse_coo_tensor(at::cat(is, 1), at::cat(vals, 0), t.sizes(), t.options()).coalesce();
  tensor.copy_(sum);
  auto w = newWork(c10d::OpType::ALLREDUCE, what, {tensor});
  w->completeNow();
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  single(tensors, "reduce");
  checkRootTensor(opts.rootTensor, "reduce");
  checkRoot(opts.rootRank, getSize(), "reduce");
  return reduceCall(c10d::OpType::REDUCE, "reduce", tensors[0], opts.reduceOp, opts.rootRank,
                    waitedAtOnce(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const char* what = "allreduce_coalesced";
  auto w = newWork(c10d::OpType::ALLREDUCE_COALESCED, what, tensors, waitedAtOnce(opts));
  if (tensors.empty()) {
    w->completeNow();
    return w;
  }
  for (auto& t : tensors) checkCpu(t, what);
  for (size_t i = 1; i < tensors.size(); i++)
    TORCH_CHECK(tensors[i].scalar_type() == tensors[0].scalar_type(), "hccl ", what,
                ": tensor ", i, " has dtype ", dtypeName(tensors[i].scalar_type()),
                " but tensor 0 has ", dtypeName(tensors[0].scalar_type()),
                "; a coalesced allreduce takes one dtype");
  ReducePlan plan = planReduce(tensors[0], opts.reduceOp, what);
  std::vector<at::Tensor> flat;
  for (auto& t : tensors) flat.push_back(t.reshape({-1}));
  at::Tensor buf = at::cat(flat);
  w->keep(buf);
  startReduce(*w, plan, buf, -1, what);
  std::vector<at::Tensor> outs = tensors;
  w->onSuccess([outs, buf]() mutable {
    int64_t off = 0;
    for (auto& t : outs) {
      t.copy_(buf.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  });
  if (w->idle()) w->completeNow();
  return w;
}

/* One reduce-scatter of input (size x output's elements) into output, added to work w. */
void ProcessGroupHCCL::reduceScatterInto(HcclWork& w, at::Tensor output, at::Tensor input,
                                         const c10d::ReduceOp& op, const char* what) {
  checkPair(output, input, what);
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "hccl ", what, ": input has ",
              input.numel(), " elements; it must have group size (", getSize(), ") x output (",
              output.numel(), ")");
  ReducePlan plan = planReduce(input, op, what);
  at::Tensor in = dense(input), out = dense(output);
  LibOp lop(plan, core_->comm(), what);
  w.start(what, [&](HcclRequest* req) {
    callAs(out.scalar_type());
    return HcclReduceScatter(in.data_ptr(), out.data_ptr(), libCount(plan, out), plan.dtype,
                             lop.get(), core_->comm(), req);
  });
  w.keep(in);
  w.keep(out);
  copyBack(w, output, out);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* what = "_reduce_scatter_base";
  auto w = newWork(c10d::OpType::_REDUCE_SCATTER_BASE, what, {output},
                   waitedAtOnce(opts));
  reduceScatterInto(*w, output, input, opts.reduceOp, what);
  if (w->idle()) w->completeNow();
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter";
  at::Tensor output = single(outputs, what);
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(getSize()),
              "hccl reduce_scatter: expected one input list of ", getSize(),
              " tensors (the group size)");
  for (auto& i : inputs[0]) checkSame(i, output, what, "an input tensor");
  at::Tensor packed = packBytes(inputs[0]).view(output.scalar_type());
  return _reduce_scatter_base(output, packed, opts);
}

#if TORCH_HCCL_BACKEND_API
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor_coalesced";
  checkPaired(outputs.size(), inputs.size(), what);
  auto w = newWork(c10d::OpType::COALESCED, what, outputs, waitedAtOnce(opts));
  for (size_t i = 0; i < inputs.size(); i++)
    reduceScatterInto(*w, outputs[i], inputs[i], opts.reduceOp, what);
  if (w->idle()) w->completeNow();
  return w;
}
#endif

}  // namespace torch_hccl
