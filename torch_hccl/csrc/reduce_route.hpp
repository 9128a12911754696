/*
 * reduce_route.hpp - how a reduction on a torch dtype reaches libhccl, which reduces the card's
 * four types (int8, int32, float16, float32) and nothing else.
 *
 *   Direct  int8, int32, float16, float32 (and complex64 as float32 pairs, SUM/AVG): one
 *           library call on the tensor's own bytes.
 *   Widen   bfloat16 through float32, uint8 and int16 through int32 (SUM, MIN, MAX; bfloat16
 *           also PROD and AVG): the library reduces a widened copy, which is converted back
 *           once, so bfloat16 is rounded once (round to nearest even) after an fp32 sum, and
 *           small integers wrap exactly as torch's own arithmetic does.
 *   Bool    bool as int8 0/1: SUM and MAX are a logical or (the library's MAX), PROD and MIN a
 *           logical and (its MIN).
 *   Wide    int64, float64, complex128, uint8/int16 PROD, and BAND/BOR/BXOR on any integer
 *           type or bool: the library moves the data (an all-to-all of p blocks, so each rank
 *           holds every rank's copy of its block), torch reduces each block in rank order in
 *           the tensor's own type, and the library gathers the reduced blocks (allgather, or
 *           gather to the root). The bytes moved are a ring allreduce's, the result is exact
 *           and the same on every rank; the call blocks the caller's thread.
 *
 * AVG is SUM, then a division by the group size (rounded toward zero on integer types, as
 * NCCL's). Anything else (AVG on bool, PREMUL_SUM, other dtypes) is refused with a
 * RuntimeError naming the dtype and the op.
 */
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "hccl.h"

namespace torch_hccl {

enum class Route { Direct, Widen, Bool, Wide };

struct ReducePlan {
  Route route;
  HcclDataType dtype;    /* Direct, Widen, Bool: the library's element type */
  HcclReduceOp op;       /* Direct, Widen, Bool: the library's op */
  at::ScalarType via;    /* Widen: the type the library reduces in */
  c10d::ReduceOp::RedOpType torchOp;
  bool avg;              /* SUM, then divide by the group size (averageOf) */
};

const char* dtypeName(at::ScalarType t);
const char* opName(c10d::ReduceOp::RedOpType op);

/* The route for reducing t with op, or a RuntimeError naming the dtype and op ("hccl <what>:
 * ..."). */
ReducePlan planReduce(const at::Tensor& t, const c10d::ReduceOp& op, const char* what);

/* AVG's last step on a group's sum: a division by the group size; on integer types rounded
 * toward zero, as NCCL's integer average (and torch's `t.copy_(t / n)`) does. */
void averageOf(at::Tensor& sum, int size);

/* The library's element count and type for a Direct/Bool plan on a contiguous tensor. */
uint64_t directCount(const at::Tensor& t);

/* The Wide route, blocking: reduces the contiguous `buf` across the group in place (root < 0:
 * on every rank; else only root's buf changes). Throws on a library failure. */
void wideReduce(HcclComm comm, int rank, int size, at::Tensor& buf, const ReducePlan& plan,
                int64_t root, const char* what);

/* The Wide route's reduce-scatter: `in` holds size x out.numel() elements; out gets this rank's
 * reduced block. Blocking. */
void wideReduceScatter(HcclComm comm, int size, const at::Tensor& in, at::Tensor& out,
                       const ReducePlan& plan, const char* what);

}  // namespace torch_hccl
