/*
 * process_group.cpp - ProcessGroupHCCL's methods: argument checks, staging, one libhccl call
 * each. See process_group.hpp.
 *
 * Staging: the library takes one contiguous buffer per side. A contiguous tensor is passed as
 * it is; a non-contiguous one (or a list of tensors) goes through a contiguous copy, and the
 * work's success step copies results back. Operations that only move bytes (broadcast,
 * gathers, scatter, all-to-all, send/recv) move any dtype as bytes; reductions are one library
 * call each on the tensor's own type, with the library's AVG and premul sum (reduce_route.hpp).
 * Tags of send/recv are accepted and not used: messages
 * between two ranks match in the order they were posted, as with NCCL.
 */
#include "process_group.hpp"

#include "reduce_route.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <c10/util/Exception.h>

namespace torch_hccl {
namespace {

void checkCpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "hccl ", what, ": tensor is on ", t.device().str(),
              "; hccl takes CPU tensors (a device is a rank here)");
  TORCH_CHECK(t.layout() == at::kStrided, "hccl ", what, ": sparse tensors are not supported");
}

const at::Tensor& single(std::vector<at::Tensor>& ts, const char* what) {
  TORCH_CHECK(ts.size() == 1, "hccl ", what, ": expected one tensor (one device per process), got ",
              ts.size());
  checkCpu(ts[0], what);
  return ts[0];
}

void checkSame(const at::Tensor& a, const at::Tensor& ref, const char* what, const char* name) {
  checkCpu(a, what);
  TORCH_CHECK(a.scalar_type() == ref.scalar_type(), "hccl ", what, ": ", name, " has dtype ",
              dtypeName(a.scalar_type()), " but the input has ", dtypeName(ref.scalar_type()),
              "; they must match");
  TORCH_CHECK(a.numel() == ref.numel(), "hccl ", what, ": ", name, " has ", a.numel(),
              " elements but the input has ", ref.numel(), "; they must match");
}

at::Tensor dense(const at::Tensor& t) {
  return t.is_contiguous() ? t : t.contiguous();
}

/* Copies the bytes of each tensor into one flat byte buffer, in order. */
at::Tensor packBytes(const std::vector<at::Tensor>& ts) {
  int64_t total = 0;
  for (const auto& t : ts) total += static_cast<int64_t>(t.nbytes());
  at::Tensor flat = at::empty({total}, at::TensorOptions().dtype(at::kByte));
  char* p = static_cast<char*>(flat.data_ptr());
  for (const auto& t : ts) {
    at::Tensor d = dense(t);
    if (d.nbytes()) std::memcpy(p, d.data_ptr(), d.nbytes());
    p += d.nbytes();
  }
  return flat;
}

/* The reverse: copies consecutive byte ranges of flat (from byte `off`) into each tensor. */
void unpackBytes(const at::Tensor& flat, int64_t off, const std::vector<at::Tensor>& ts) {
  const char* p = static_cast<const char*>(flat.data_ptr()) + off;
  for (const auto& t : ts) {
    size_t n = t.nbytes();
    if (t.is_contiguous()) {
      if (n) std::memcpy(t.data_ptr(), p, n);
    } else {
      at::Tensor tmp = at::empty(t.sizes(), t.options());
      if (n) std::memcpy(tmp.data_ptr(), p, n);
      const_cast<at::Tensor&>(t).copy_(tmp);
    }
    p += n;
  }
}

/* Whether ts[i] already sit back to back in one contiguous buffer, in order. */
bool adjacent(const std::vector<at::Tensor>& ts) {
  if (ts.empty()) return false;
  const char* base = static_cast<const char*>(ts[0].data_ptr());
  size_t n = ts[0].nbytes();
  for (size_t i = 0; i < ts.size(); i++)
    if (!ts[i].is_contiguous() || ts[i].nbytes() != n ||
        static_cast<const char*>(ts[i].data_ptr()) != base + i * n)
      return false;
  return n > 0;
}

/* The caller's c10d store as libhccl's HcclStore, its keys under a prefix of this
 * communicator's own. torch may hand a later group the same store and prefix as an earlier
 * one (after destroy_process_group, env:// keeps the TCPStore server, and its keys, in the
 * process), so each communicator made over a store takes the next number from the store's own
 * counter: ranks of one init add 1 each, so the numbers (v - 1) / size agree. */
struct StoreView {
  c10::intrusive_ptr<c10d::Store> store;
  std::string prefix;
};

HcclResult storeSet(void* ctx, const char* key, const void* val, size_t len) {
  try {
    auto* v = static_cast<StoreView*>(ctx);
    const auto* b = static_cast<const uint8_t*>(val);
    v->store->set(v->prefix + key, std::vector<uint8_t>(b, b + len));
    return HCCL_SUCCESS;
  } catch (const std::exception&) {
    return HCCL_E_NETWORK;
  }
}

HcclResult storeGet(void* ctx, const char* key_, void** val, size_t* len, int64_t timeoutMs) {
  auto* v = static_cast<StoreView*>(ctx);
  c10d::Store* s = v->store.get();
  std::string key = v->prefix + key_;
  try {
    s->wait({key}, std::chrono::milliseconds(timeoutMs));
  } catch (const std::exception& e) {
    std::string m = e.what();
    bool timeout = m.find("imeout") != std::string::npos || m.find("imed out") != std::string::npos;
    return timeout ? HCCL_E_TIMEOUT : HCCL_E_NETWORK;
  }
  try {
    std::vector<uint8_t> v = s->get(key);
    void* p = std::malloc(v.size() ? v.size() : 1);
    if (!p) return HCCL_E_MEMORY;
    if (!v.empty()) std::memcpy(p, v.data(), v.size());
    *val = p;
    *len = v.size();
    return HCCL_SUCCESS;
  } catch (const std::exception&) {
    return HCCL_E_NETWORK;
  }
}

/* Process groups alive in this process, and the device they drive (one per process). */
std::mutex g_device_mu;
int g_live_groups = 0;
int g_group_device = -1;

}  // namespace

void setDevice(int device) {
  std::lock_guard<std::mutex> lock(g_device_mu);
  TORCH_CHECK(g_live_groups == 0 || device == g_group_device, "torch_hccl.set_device(", device,
              "): this process's process groups already drive device ", g_group_device,
              "; a process drives one device: call set_device before "
              "dist.init_process_group");
  checkHccl(HcclSetDevice(device), "set_device");
}

int currentDevice() {
  int32_t d = -1;
  checkHccl(HcclGetDevice(&d), "current_device");
  return d;
}

ProcessGroupHCCL::ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout,
                                   const std::string& name)
    : BackendBase(rank, size), timeout_(timeout) {
  int64_t instance = 0;
  try {
    instance = (store->add("hccl_instances", 1) - 1) / (size > 0 ? size : 1);
  } catch (const std::exception& e) {
    throwBackendError(std::string("hccl init (rank ") + std::to_string(rank) +
                      "): the store torch gave cannot count: " + e.what());
  }
  /* Kept with the group: the library holds the HcclStore's ctx for the communicator's life. */
  auto view = std::make_shared<StoreView>(StoreView{store, "hccl" + std::to_string(instance) + "/"});
  store_ = view;
  HcclStore hs{view.get(), storeSet, storeGet};
  HcclCommConfig cfg = config(name);
  HcclComm comm = nullptr;
  HcclResult r = HcclCommInitStore(&hs, static_cast<uint32_t>(size), static_cast<uint32_t>(rank),
                                   &cfg, &comm);
  if (r != HCCL_SUCCESS) throwHccl(r, "init (rank " + std::to_string(rank) + " of " +
                                          std::to_string(size) + ")");
  adopt(comm);
}

ProcessGroupHCCL::ProcessGroupHCCL(ProcessGroupHCCL& parent, int rank, int size, int32_t color,
                                   std::chrono::milliseconds timeout, const std::string& name)
    : BackendBase(rank, size), timeout_(timeout), madeBy_("split") {
  HcclCommConfig cfg = config(name);
  HcclComm comm = nullptr;
  std::string what = "split (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
  {
    auto held = parent.core_->hold(); /* the parent stays open during the call */
    HcclComm pc = parent.core_->comm();
    if (!pc) throwBackendError("hccl " + what + ": the default group is shut down");
    HcclResult r = HcclCommSplit(pc, color, rank, &comm, &cfg);
    if (r != HCCL_SUCCESS) throwHccl(r, what);
  }
  uint32_t got = 0, n = 0;
  HcclGetRankId(comm, &got);
  HcclGetRankSize(comm, &n);
  if (got != static_cast<uint32_t>(rank) || n != static_cast<uint32_t>(size)) {
    HcclCommDestroy(comm);
    throwBackendError("hccl " + what + ": the split made rank " + std::to_string(got) + " of " +
                      std::to_string(n) + "; every rank of the default group must make the "
                      "same new_group calls in the same order");
  }
  adopt(comm);
}

void ProcessGroupHCCL::splitOut() {
  auto held = core_->hold();
  HcclComm none = nullptr;
  if (!core_->comm()) throwBackendError("hccl split (not a member): the default group is shut down");
  checkHccl(HcclCommSplit(core_->comm(), HCCL_SPLIT_NOCOLOR, 0, &none, nullptr),
            "split (not a member)");
}

bool ProcessGroupHCCL::agree(bool mine) {
  auto held = core_->hold();
  if (!core_->comm()) throwBackendError("hccl split vote: the default group is shut down");
  int32_t v = mine ? 1 : 0;
  checkHccl(HcclAllReduce(&v, &v, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MIN, core_->comm(), nullptr),
            "split vote");
  return v == 1;
}

HcclCommConfig ProcessGroupHCCL::config(const std::string& name) {
#if TORCH_HCCL_BACKEND_API
  options_ = c10::make_intrusive<Options>("hccl", timeout_);
  options_->group_name = name;
#endif
  HcclCommConfig cfg;
  HcclCommConfigInit(&cfg);
  int64_t ms = timeout_.count() > 0 ? timeout_.count() : 0;
  cfg.connectTimeoutMs = ms;
  cfg.execTimeoutMs = ms;
  std::snprintf(cfg.commName, sizeof(cfg.commName), "%s", name.empty() ? "" : ("pg" + name).c_str());
  return cfg;
}

void ProcessGroupHCCL::adopt(HcclComm comm) {
  core_ = std::make_shared<Core>(comm, getRank(), getSize());
  /* The first group fixes the process's device, so later groups (new_group, whose rank is not
   * the launcher's) drive the same one. */
  int32_t dev = -1, set = -1;
  HcclGetDeviceId(comm, &dev);
  HcclGetDevice(&set);
  std::lock_guard<std::mutex> lock(g_device_mu);
  if (set < 0) HcclSetDevice(dev);
  g_group_device = dev;
  g_live_groups++;
}

ProcessGroupHCCL::~ProcessGroupHCCL() {
  std::lock_guard<std::mutex> lock(g_device_mu);
  g_live_groups--;
}

c10::intrusive_ptr<HcclWork> ProcessGroupHCCL::newWork(c10d::OpType type, const char* what,
                                                       std::vector<at::Tensor> outputs,
                                                       bool blocking) {
  seq_++;
  return c10::make_intrusive<HcclWork>(core_, getRank(), type, what, std::move(outputs),
                                       blocking);
}

/* Starts `plan` on the contiguous buf (the caller's tensor or its staging copy) for work w:
 * one library call, its request added to w; the library's result is final (AVG and PREMUL_SUM
 * included). */
void ProcessGroupHCCL::startReduce(HcclWork& w, const ReducePlan& plan, at::Tensor buf,
                                   int64_t root, const char* what) {
  HcclComm comm = core_->comm();
  LibOp op(plan, comm, what);
  uint64_t count = libCount(plan, buf);
  w.start(what, [&](HcclRequest* req) {
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
  if (mine && !buf.is_same(tensor)) w->onSuccess([tensor, buf]() mutable { tensor.copy_(buf); });
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
  TORCH_CHECK(opts.rootTensor == 0, "hccl reduce: rootTensor ", opts.rootTensor,
              " is not valid; one tensor per process means rootTensor 0");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "hccl reduce: root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
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

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const char* what = "broadcast";
  at::Tensor tensor = single(tensors, what);
  TORCH_CHECK(opts.rootTensor == 0, "hccl broadcast: rootTensor ", opts.rootTensor,
              " is not valid; one tensor per process means rootTensor 0");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "hccl broadcast: root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  at::Tensor buf = dense(tensor);
  auto w = newWork(c10d::OpType::BROADCAST, what, {tensor}, waitedAtOnce(opts));
  w->start(what, [&](HcclRequest* req) {
    return HcclBroadcast(buf.data_ptr(), buf.nbytes(), HCCL_DATA_TYPE_INT8,
                         static_cast<uint32_t>(opts.rootRank), core_->comm(), req);
  });
  w->keep(buf);
  if (!buf.is_same(tensor)) w->onSuccess([tensor, buf]() mutable { tensor.copy_(buf); });
  return w;
}

/* One allgather of input into output (size x input's elements), added to work w. */
void ProcessGroupHCCL::allgatherInto(HcclWork& w, at::Tensor output, at::Tensor input,
                                     const char* what) {
  checkCpu(input, what);
  checkCpu(output, what);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccl ", what, ": output dtype ",
              dtypeName(output.scalar_type()), " differs from input dtype ",
              dtypeName(input.scalar_type()));
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "hccl ", what, ": output has ",
              output.numel(), " elements; it must have group size (", getSize(), ") x input (",
              input.numel(), ")");
  at::Tensor in = dense(input), out = dense(output);
  w.start(what, [&](HcclRequest* req) {
    return HcclAllGather(in.data_ptr(), out.data_ptr(), in.nbytes(), HCCL_DATA_TYPE_INT8,
                         core_->comm(), req);
  });
  w.keep(in);
  w.keep(out);
  if (!out.is_same(output)) w.onSuccess([output, out]() mutable { output.copy_(out); });
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
  TORCH_CHECK(outputs.size() == inputs.size(), "hccl ", what, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs; they must pair up");
  auto w = newWork(c10d::OpType::COALESCED, what, outputs, waitedAtOnce(opts));
  for (size_t i = 0; i < inputs.size(); i++) allgatherInto(*w, outputs[i], inputs[i], what);
  if (w->idle()) w->completeNow();
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "hccl ", what, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs; they must pair up");
  auto w = newWork(c10d::OpType::COALESCED, what, outputs, waitedAtOnce(opts));
  for (size_t i = 0; i < inputs.size(); i++)
    reduceScatterInto(*w, outputs[i], inputs[i], opts.reduceOp, what);
  if (w->idle()) w->completeNow();
  return w;
}

void ProcessGroupHCCL::abort() {
  HcclCommAbort(core_->comm());
}
#endif

#if TORCH_HCCL_SHRINK_API
static int rankOf(HcclComm comm, bool size) {
  uint32_t v = 0;
  if (size) HcclGetRankSize(comm, &v);
  else HcclGetRankId(comm, &v);
  return static_cast<int>(v);
}

ProcessGroupHCCL::ProcessGroupHCCL(HcclComm comm, std::shared_ptr<void> store,
                                   std::chrono::milliseconds timeout, const std::string& name)
    : BackendBase(rankOf(comm, false), rankOf(comm, true)), store_(std::move(store)),
      timeout_(timeout), madeBy_("shrink") {
  options_ = c10::make_intrusive<Options>("hccl", timeout);
  options_->group_name = name;
  adopt(comm);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupHCCL::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<Options>& opts_override) {
  std::vector<int> excl;
  for (int64_t r : ranks_to_exclude) {
    TORCH_CHECK(r >= 0 && r < getSize(), "hccl shrink: rank ", r,
                " is not a rank of this group of ", getSize(), " (0-", getSize() - 1, ")");
    excl.push_back(static_cast<int>(r));
  }
  std::chrono::milliseconds timeout = opts_override ? opts_override->timeout : timeout_;
  HcclCommConfig cfg;
  HcclCommConfigInit(&cfg);
  cfg.connectTimeoutMs = timeout.count() > 0 ? timeout.count() : 0;
  cfg.execTimeoutMs = cfg.connectTimeoutMs;
  HcclComm comm = core_->comm(), small = nullptr;
  HcclResult r = HcclCommShrink(comm, excl.data(), static_cast<int>(excl.size()), &small, &cfg,
                                shrink_flags);
  if (r != HCCL_SUCCESS) throwHccl(r, "shrink (rank " + std::to_string(getRank()) + ")");
  /* The new communicator meets again through this group's store view: it keeps it. */
  return c10::make_intrusive<ProcessGroupHCCL>(small, store_, timeout,
                                               options_->group_name + ":shrunk");
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
  at::Tensor flat = direct ? at::Tensor()
                           : at::empty({static_cast<int64_t>(in.nbytes()) * getSize()},
                                       at::TensorOptions().dtype(at::kByte));
  void* dst = direct ? outputs[0][0].data_ptr() : flat.data_ptr();
  w->start(what, [&](HcclRequest* req) {
    return HcclAllGather(in.data_ptr(), dst, in.nbytes(), HCCL_DATA_TYPE_INT8, core_->comm(), req);
  });
  w->keep(in);
  if (!direct) {
    w->keep(flat);
    std::vector<at::Tensor> outs = outputs[0];
    w->onSuccess([flat, outs]() { unpackBytes(flat, 0, outs); });
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
  at::Tensor flat = at::empty({in.numel() * getSize()}, at::TensorOptions().dtype(at::kByte));
  w->start(what, [&](HcclRequest* req) {
    return HcclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(), HCCL_DATA_TYPE_INT8,
                         core_->comm(), req);
  });
  w->keep(in);
  w->keep(flat);
  w->onSuccess([flat, all]() { unpackBytes(flat, 0, all); });
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* what = "gather";
  const at::Tensor& input = single(inputs, what);
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "hccl gather: root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
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
  if (root)
    flat = at::empty({static_cast<int64_t>(in.nbytes()) * getSize()},
                     at::TensorOptions().dtype(at::kByte));
  w->start(what, [&](HcclRequest* req) {
    return HcclGather(in.data_ptr(), root ? flat.data_ptr() : nullptr, in.nbytes(),
                      HCCL_DATA_TYPE_INT8, static_cast<uint32_t>(opts.rootRank), core_->comm(),
                      req);
  });
  w->keep(in);
  if (root) {
    w->keep(flat);
    std::vector<at::Tensor> outs = outputs[0];
    w->onSuccess([flat, outs]() { unpackBytes(flat, 0, outs); });
  }
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* what = "scatter";
  at::Tensor output = single(outputs, what);
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "hccl scatter: root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
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
    return HcclScatter(root ? flat.data_ptr() : nullptr, out.data_ptr(), out.nbytes(),
                       HCCL_DATA_TYPE_INT8, static_cast<uint32_t>(opts.rootRank), core_->comm(),
                       req);
  });
  w->keep(out);
  if (root) w->keep(flat);
  if (!out.is_same(output)) w->onSuccess([output, out]() mutable { output.copy_(out); });
  return w;
}

/* One reduce-scatter of input (size x output's elements) into output, added to work w. */
void ProcessGroupHCCL::reduceScatterInto(HcclWork& w, at::Tensor output, at::Tensor input,
                                         const c10d::ReduceOp& op, const char* what) {
  checkCpu(input, what);
  checkCpu(output, what);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccl ", what, ": output dtype ",
              dtypeName(output.scalar_type()), " differs from input dtype ",
              dtypeName(input.scalar_type()));
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "hccl ", what, ": input has ",
              input.numel(), " elements; it must have group size (", getSize(), ") x output (",
              output.numel(), ")");
  ReducePlan plan = planReduce(input, op, what);
  at::Tensor in = dense(input), out = dense(output);
  LibOp lop(plan, core_->comm(), what);
  w.start(what, [&](HcclRequest* req) {
    return HcclReduceScatter(in.data_ptr(), out.data_ptr(), libCount(plan, out), plan.dtype,
                             lop.get(), core_->comm(), req);
  });
  w.keep(in);
  w.keep(out);
  if (!out.is_same(output)) w.onSuccess([output, out]() mutable { output.copy_(out); });
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

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  const char* what = "alltoall_base";
  checkCpu(input, what);
  checkCpu(output, what);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccl ", what, ": output dtype ",
              dtypeName(output.scalar_type()), " differs from input dtype ",
              dtypeName(input.scalar_type()));
  int n = getSize();
  at::Tensor in = dense(input), out = dense(output);
  auto w = newWork(c10d::OpType::ALLTOALL_BASE, what, {output}, waitedAtOnce(opts));
  bool even = outputSplits.empty() && inputSplits.empty();
  uint64_t block = 0;
  std::vector<uint64_t> sc, sd, rc, rd;
  if (even) {
    TORCH_CHECK(in.dim() > 0 && in.size(0) % n == 0 && out.dim() > 0 && out.size(0) % n == 0 &&
                    in.numel() == out.numel(),
                "hccl ", what, ": without split sizes, input and output must have the same "
                "size with dim 0 divisible by the group size ", n, " (input ", in.sizes(),
                ", output ", out.sizes(), ")");
    block = in.nbytes() / n;
  } else {
    auto plan = [&](const at::Tensor& t, std::vector<int64_t>& splits, const char* side,
                    std::vector<uint64_t>& counts, std::vector<uint64_t>& displs) {
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
      uint64_t off = 0;
      for (int64_t s : splits) {
        counts.push_back(static_cast<uint64_t>(s) * rowBytes);
        displs.push_back(off);
        off += static_cast<uint64_t>(s) * rowBytes;
      }
    };
    plan(in, inputSplits, "input", sc, sd);
    plan(out, outputSplits, "output", rc, rd);
  }
  w->start(what, [&](HcclRequest* req) {
    if (even)
      return HcclAlltoAll(in.data_ptr(), block, HCCL_DATA_TYPE_INT8, out.data_ptr(), block,
                          HCCL_DATA_TYPE_INT8, core_->comm(), req);
    return HcclAlltoAllV(in.data_ptr(), sc.data(), sd.data(), HCCL_DATA_TYPE_INT8, out.data_ptr(),
                         rc.data(), rd.data(), HCCL_DATA_TYPE_INT8, core_->comm(), req);
  });
  w->keep(in);
  w->keep(out);
  if (!out.is_same(output)) w->onSuccess([output, out]() mutable { output.copy_(out); });
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
  std::vector<uint64_t> sc, sd, rc, rd;
  uint64_t so = 0, ro = 0;
  for (int i = 0; i < n; i++) {
    sc.push_back(inputs[i].nbytes());
    sd.push_back(so);
    so += inputs[i].nbytes();
    rc.push_back(outputs[i].nbytes());
    rd.push_back(ro);
    ro += outputs[i].nbytes();
  }
  at::Tensor in = packBytes(inputs);
  at::Tensor flat = at::empty({static_cast<int64_t>(ro)}, at::TensorOptions().dtype(at::kByte));
  auto w = newWork(c10d::OpType::ALLTOALL, what, outputs, waitedAtOnce(opts));
  w->start(what, [&](HcclRequest* req) {
    return HcclAlltoAllV(in.data_ptr(), sc.data(), sd.data(), HCCL_DATA_TYPE_INT8, flat.data_ptr(),
                         rc.data(), rd.data(), HCCL_DATA_TYPE_INT8, core_->comm(), req);
  });
  w->keep(in);
  w->keep(flat);
  std::vector<at::Tensor> outs = outputs;
  w->onSuccess([flat, outs]() { unpackBytes(flat, 0, outs); });
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors,
                                                      int dstRank, int) {
  const char* what = "send";
  at::Tensor t = single(tensors, what);
  TORCH_CHECK(dstRank >= 0 && dstRank < getSize() && dstRank != getRank(), "hccl send: rank ",
              dstRank, " is not another rank of this group of ", getSize(), " (this is rank ",
              getRank(), ")");
  at::Tensor buf = dense(t);
  auto w = newWork(c10d::OpType::SEND, what, {t});
  w->start(what, [&](HcclRequest* req) {
    return HcclSend(buf.data_ptr(), buf.nbytes(), HCCL_DATA_TYPE_INT8,
                    static_cast<uint32_t>(dstRank), core_->comm(), req);
  });
  w->keep(buf);
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors,
                                                      int srcRank, int) {
  const char* what = "recv";
  at::Tensor t = single(tensors, what);
  TORCH_CHECK(srcRank >= 0 && srcRank < getSize() && srcRank != getRank(), "hccl recv: rank ",
              srcRank, " is not another rank of this group of ", getSize(), " (this is rank ",
              getRank(), ")");
  at::Tensor buf = dense(t);
  auto w = newWork(c10d::OpType::RECV, what, {t});
  w->start(what, [&](HcclRequest* req) {
    return HcclRecv(buf.data_ptr(), buf.nbytes(), HCCL_DATA_TYPE_INT8,
                    static_cast<uint32_t>(srcRank), core_->comm(), req);
  });
  w->keep(buf);
  if (!buf.is_same(t)) w->onSuccess([t, buf]() mutable { t.copy_(buf); });
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int) {
  const char* what = "recv (any source)";
  at::Tensor t = single(tensors, what);
  at::Tensor buf = dense(t);
  auto w = newWork(c10d::OpType::RECVANYSOURCE, what, {t});
  w->start(what, [&](HcclRequest* req) {
    return HcclRecvAny(buf.data_ptr(), buf.nbytes(), HCCL_DATA_TYPE_INT8, w->sourceSlot(),
                       core_->comm(), req);
  });
  w->keep(buf);
  if (!buf.is_same(t)) w->onSuccess([t, buf]() mutable { t.copy_(buf); });
  return w;
}

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
