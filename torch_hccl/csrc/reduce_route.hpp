/*
 * reduce_route.hpp - how a reduction on a torch dtype reaches libhccl: always one library call
 * on the tensor's own bytes, which the library reduces natively (every HcclDataType).
 *
 *   int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64, and torch 2.x's
 *   uint16, uint32, uint64: their own library type, every op.
 *   complex64, complex128: float32 / float64 pairs, with SUM, AVG and PREMUL_SUM (each part
 *   reduces alone; PROD, MIN and MAX of complex numbers are not element-wise on the parts).
 *   bool: uint8 0/1; SUM and MAX are a logical or (the library's MAX), PRODUCT and MIN a
 *   logical and (its MIN), BAND, BOR, BXOR the bitwise ops.
 *
 * AVG is the library's AVG (the sum divided by the group size, toward zero on integer types,
 * as NCCL's), PREMUL_SUM an op made with HcclRedOpCreatePreMulSum from the factor (a number or
 * a one-element tensor) in the tensor's type, applied once to the sum: nothing runs after the
 * library call. BAND, BOR and BXOR take integer types and bool. Anything else is refused with
 * a RuntimeError naming the dtype and the op. Also the dtype every call names to the library,
 * for its messages (callAs).
 */
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "hccl.h"

namespace torch_hccl {

struct ReducePlan {
  HcclDataType dtype; /* the library's element type */
  HcclReduceOp op;    /* a built-in op; with premul, the op the call makes */
  bool premul;        /* PREMUL_SUM: make an op from `scalar` for the call */
  uint64_t scalar;    /* PREMUL_SUM's factor, as one element of dtype */
  int64_t perElement; /* library elements per tensor element: 2 for complex, else 1 */
};

const char* dtypeName(at::ScalarType t);
const char* opName(c10d::ReduceOp::RedOpType op);

/* Names the dtype the user passed to the library call this thread makes next, so that a
 * mismatch between ranks names each call as the user made it ("broadcast (count 1000,
 * torch.float32, root 0)", not the bytes it went as): HcclSetCallUserType with the dtype's
 * code, after naming every torch dtype to the library once (HcclSetUserTypes: code = the
 * at::ScalarType value, the same on every rank of one torch). Call it right before the
 * collective call it names. */
void callAs(at::ScalarType t);

/* The route for reducing t with op, or a RuntimeError naming the dtype and op ("hccl <what>:
 * ..."). */
ReducePlan planReduce(const at::Tensor& t, const c10d::ReduceOp& op, const char* what);

/* The library's element count for a plan on a contiguous tensor. */
inline uint64_t libCount(const ReducePlan& p, const at::Tensor& t) {
  return static_cast<uint64_t>(t.numel() * p.perElement);
}

/* The op of one library call: plan.op, or a premul sum op made for the call and destroyed
 * when this goes (the library copies what a call needs when the call is made). */
class LibOp {
 public:
  LibOp(const ReducePlan& plan, HcclComm comm, const char* what);
  ~LibOp();
  LibOp(const LibOp&) = delete;
  LibOp& operator=(const LibOp&) = delete;
  HcclReduceOp get() const { return op_; }

 private:
  HcclComm comm_;
  HcclReduceOp op_;
  bool made_ = false;
};

}  // namespace torch_hccl
