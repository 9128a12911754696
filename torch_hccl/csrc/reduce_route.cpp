/*
 * reduce_route.cpp - the routes of reductions to libhccl (contract: reduce_route.hpp).
 */
#include "reduce_route.hpp"

#include <c10/util/Exception.h>

#include <cctype>
#include <string>

#include "work.hpp"

namespace torch_hccl {

const char* dtypeName(at::ScalarType t) {
  switch (t) {
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    case at::kComplexHalf: return "torch.complex32";
    case at::kBool: return "torch.bool";
    default: { /* torch 2.x's newer types: "UInt32" -> "torch.uint32" */
      thread_local std::string name;
      name = std::string("torch.") + c10::toString(t);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return name.c_str();
    }
  }
}

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

namespace {

HcclReduceOp libOp(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::PRODUCT: return HCCL_REDUCE_PROD;
    case c10d::ReduceOp::MIN: return HCCL_REDUCE_MIN;
    case c10d::ReduceOp::MAX: return HCCL_REDUCE_MAX;
    default: return HCCL_REDUCE_SUM; /* SUM, and AVG's sum */
  }
}

bool isBitwise(c10d::ReduceOp::RedOpType op) {
  return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
}

[[noreturn]] void refuse(const char* what, at::ScalarType t, c10d::ReduceOp::RedOpType op,
                         const char* rule) {
  TORCH_CHECK(false, "hccl ", what, ": ReduceOp.", opName(op), " on ", dtypeName(t),
              " is not supported; ", rule);
}

/* Folds the p rows of v ([p, blk]) into row 0's copy, in rank order, in v's own type. */
at::Tensor foldRows(const at::Tensor& v, c10d::ReduceOp::RedOpType op) {
  at::Tensor acc = v[0].clone();
  for (int64_t j = 1; j < v.size(0); j++) {
    at::Tensor row = v[j];
    switch (op) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::AVG: acc.add_(row); break;
      case c10d::ReduceOp::PRODUCT: acc.mul_(row); break;
      case c10d::ReduceOp::MIN: at::minimum_out(acc, acc, row); break;
      case c10d::ReduceOp::MAX: at::maximum_out(acc, acc, row); break;
      case c10d::ReduceOp::BAND: acc.bitwise_and_(row); break;
      case c10d::ReduceOp::BOR: acc.bitwise_or_(row); break;
      case c10d::ReduceOp::BXOR: acc.bitwise_xor_(row); break;
      default: TORCH_CHECK(false, "hccl: no fold for ReduceOp.", opName(op));
    }
  }
  return acc;
}

}  // namespace

ReducePlan planReduce(const at::Tensor& t, const c10d::ReduceOp& op, const char* what) {
  auto o = static_cast<c10d::ReduceOp::RedOpType>(op);
  at::ScalarType st = t.scalar_type();
  ReducePlan p{Route::Direct, HCCL_DATA_TYPE_FP32, libOp(o), st, o, o == c10d::ReduceOp::AVG};
  bool integral = at::isIntegralType(st, /*includeBool=*/true);
  if (o == c10d::ReduceOp::PREMUL_SUM || o == c10d::ReduceOp::UNUSED)
    refuse(what, st, o, "hccl reduces with SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR and BXOR");
  if (p.avg && st == at::kBool)
    refuse(what, st, o, "AVG takes numbers: use SUM (a logical or) or MIN (a logical and)");
  if (isBitwise(o)) {
    if (!integral) refuse(what, st, o, "bitwise reductions take integer types and torch.bool");
    p.route = Route::Wide;
    return p;
  }
  if (at::isComplexType(st) && o != c10d::ReduceOp::SUM && !p.avg)
    refuse(what, st, o, "complex tensors reduce with SUM and AVG");
  switch (st) {
    case at::kChar: p.dtype = HCCL_DATA_TYPE_INT8; return p;
    case at::kInt: p.dtype = HCCL_DATA_TYPE_INT32; return p;
    case at::kHalf: p.dtype = HCCL_DATA_TYPE_FP16; return p;
    case at::kFloat:
    case at::kComplexFloat: p.dtype = HCCL_DATA_TYPE_FP32; return p;
    case at::kBFloat16:
      p.route = Route::Widen;
      p.via = at::kFloat;
      p.dtype = HCCL_DATA_TYPE_FP32;
      return p;
    case at::kByte:
    case at::kShort:
      if (o == c10d::ReduceOp::PRODUCT) {
        p.route = Route::Wide;
      } else {
        p.route = Route::Widen;
        p.via = at::kInt;
        p.dtype = HCCL_DATA_TYPE_INT32;
      }
      return p;
    case at::kBool:
      p.route = Route::Bool;
      p.dtype = HCCL_DATA_TYPE_INT8;
      p.op = (o == c10d::ReduceOp::SUM || o == c10d::ReduceOp::MAX) ? HCCL_REDUCE_MAX
                                                                    : HCCL_REDUCE_MIN;
      return p;
    case at::kLong:
    case at::kDouble:
    case at::kComplexDouble: p.route = Route::Wide; return p;
    default:
      TORCH_CHECK(false, "hccl ", what, ": dtype ", dtypeName(st),
                  " is not supported for reductions; hccl reduces torch.int8, torch.uint8, "
                  "torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, "
                  "torch.float32, torch.float64, torch.complex64, torch.complex128 and "
                  "torch.bool");
  }
}

void averageOf(at::Tensor& sum, int size) {
  if (at::isFloatingType(sum.scalar_type()) || at::isComplexType(sum.scalar_type()))
    sum.div_(size);
  else
    sum.div_(size, "trunc");
}

uint64_t directCount(const at::Tensor& t) {
  return static_cast<uint64_t>(at::isComplexType(t.scalar_type()) ? 2 * t.numel() : t.numel());
}

namespace {

/* The Wide route's first half: `send` holds size blocks of blk elements (of opts' type), block
 * j for rank j; returns this rank's block reduced over every rank's copy of it. */
at::Tensor reduceMyBlock(HcclComm comm, int size, const at::Tensor& send, int64_t blk,
                         const ReducePlan& plan, const char* what) {
  at::Tensor recv = at::empty({size, blk}, send.options());
  uint64_t bytes = static_cast<uint64_t>(blk) * send.element_size();
  checkHccl(HcclAlltoAll(send.data_ptr(), bytes, HCCL_DATA_TYPE_INT8, recv.data_ptr(), bytes,
                     HCCL_DATA_TYPE_INT8, comm, nullptr),
        what);
  at::Tensor mine = foldRows(recv, plan.torchOp);
  if (plan.avg) averageOf(mine, size);
  return mine;
}

}  // namespace

void wideReduce(HcclComm comm, int rank, int size, at::Tensor& buf, const ReducePlan& plan,
                int64_t root, const char* what) {
  int64_t n = buf.numel();
  if (n == 0) return;
  int64_t blk = (n + size - 1) / size;
  at::Tensor flat = buf.view({-1});
  at::Tensor send = flat;
  if (blk * size != n) {
    send = at::zeros({blk * size}, buf.options());
    send.narrow(0, 0, n).copy_(flat);
  }
  at::Tensor mine = reduceMyBlock(comm, size, send, blk, plan, what);
  uint64_t bytes = static_cast<uint64_t>(blk) * buf.element_size();
  at::Tensor all = (root < 0 || root == rank) ? at::empty({blk * size}, buf.options())
                                              : at::Tensor();
  if (root < 0)
    checkHccl(HcclAllGather(mine.data_ptr(), all.data_ptr(), bytes, HCCL_DATA_TYPE_INT8, comm,
                        nullptr),
          what);
  else
    checkHccl(HcclGather(mine.data_ptr(), all.defined() ? all.data_ptr() : nullptr, bytes,
                     HCCL_DATA_TYPE_INT8, static_cast<uint32_t>(root), comm, nullptr),
          what);
  if (all.defined()) flat.copy_(all.narrow(0, 0, n));
}

void wideReduceScatter(HcclComm comm, int size, const at::Tensor& in, at::Tensor& out,
                       const ReducePlan& plan, const char* what) {
  if (out.numel() == 0) return;
  out.view({-1}).copy_(reduceMyBlock(comm, size, in, out.numel(), plan, what));
}

}  // namespace torch_hccl
