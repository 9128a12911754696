/*
 * staging.cpp - argument checks and staging of tensors (contract: staging.hpp).
 */
#include "staging.hpp"

#include <cstring>

#include <c10/util/Exception.h>

#include "reduce_route.hpp"

namespace torch_hccl {

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

void checkPair(const at::Tensor& output, const at::Tensor& input, const char* what) {
  checkCpu(input, what);
  checkCpu(output, what);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccl ", what, ": output dtype ",
              dtypeName(output.scalar_type()), " differs from input dtype ",
              dtypeName(input.scalar_type()));
}

void checkPaired(size_t outputs, size_t inputs, const char* what) {
  TORCH_CHECK(outputs == inputs, "hccl ", what, ": ", outputs, " outputs for ", inputs,
              " inputs; they must pair up");
}

void checkRoot(int64_t root, int size, const char* what) {
  TORCH_CHECK(root >= 0 && root < size, "hccl ", what, ": root ", root,
              " is not a rank of this group of ", size);
}

void checkRootTensor(int64_t rootTensor, const char* what) {
  TORCH_CHECK(rootTensor == 0, "hccl ", what, ": rootTensor ", rootTensor,
              " is not valid; one tensor per process means rootTensor 0");
}

at::Tensor byteBuffer(int64_t n) {
  return at::empty({n}, at::TensorOptions().dtype(at::kByte));
}

at::Tensor packBytes(const std::vector<at::Tensor>& ts) {
  int64_t total = 0;
  for (const auto& t : ts) total += static_cast<int64_t>(t.nbytes());
  at::Tensor flat = byteBuffer(total);
  char* p = static_cast<char*>(flat.data_ptr());
  for (const auto& t : ts) {
    at::Tensor d = dense(t);
    if (d.nbytes()) std::memcpy(p, d.data_ptr(), d.nbytes());
    p += d.nbytes();
  }
  return flat;
}

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

void copyBack(HcclWork& w, const at::Tensor& dst, const at::Tensor& staged) {
  if (!staged.is_same(dst)) w.onSuccess([dst, staged]() mutable { dst.copy_(staged); });
}

void unpackBack(HcclWork& w, const at::Tensor& flat, const std::vector<at::Tensor>& outs) {
  w.onSuccess([flat, outs]() { unpackBytes(flat, 0, outs); });
}

}  // namespace torch_hccl
