/*
 * reduce_route.cpp - the routes of reductions to libhccl (contract: reduce_route.hpp).
 */
#include "reduce_route.hpp"

#include <c10/util/Exception.h>

#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "compat.hpp"
#include "errors.hpp"

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

namespace {

/* Every torch dtype by its at::ScalarType value, with its name and element size, named to the
 * library; once per process (HcclSetUserTypes keeps a copy). */
bool nameUserTypes() {
  constexpr int n = static_cast<int>(at::ScalarType::NumOptions);
  static_assert(n <= 255, "HcclSetUserTypes takes at most 255 types");
  std::vector<std::string> names;
  std::vector<HcclUserType> types;
  for (int i = 0; i < n; i++) names.emplace_back(dtypeName(static_cast<at::ScalarType>(i)));
  for (int i = 0; i < n; i++) {
    size_t size = 1;
    try {
      size = c10::elementSize(static_cast<at::ScalarType>(i));
    } catch (const std::exception&) { /* a type of no fixed size: named, counted as bytes */
    }
    types.push_back({names[i].c_str(), static_cast<uint32_t>(size ? size : 1)});
  }
  return HcclSetUserTypes(types.data(), static_cast<uint32_t>(n)) == HCCL_SUCCESS;
}

}  // namespace

void callAs(at::ScalarType t) {
  static const bool named = nameUserTypes();
  if (named) HcclSetCallUserType(static_cast<uint32_t>(t));
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
    case c10d::ReduceOp::AVG: return HCCL_REDUCE_AVG;
    case c10d::ReduceOp::BAND: return HCCL_REDUCE_BAND;
    case c10d::ReduceOp::BOR: return HCCL_REDUCE_BOR;
    case c10d::ReduceOp::BXOR: return HCCL_REDUCE_BXOR;
    default: return HCCL_REDUCE_SUM; /* SUM, and PREMUL_SUM's sum */
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

/* The library type of a real torch type (complex: its parts'), or RESERVED for none. */
HcclDataType libType(at::ScalarType st) {
  switch (st) {
    case at::kChar: return HCCL_DATA_TYPE_INT8;
    case at::kByte:
    case at::kBool: return HCCL_DATA_TYPE_UINT8;
    case at::kShort: return HCCL_DATA_TYPE_INT16;
    case at::kInt: return HCCL_DATA_TYPE_INT32;
    case at::kLong: return HCCL_DATA_TYPE_INT64;
    case at::kHalf: return HCCL_DATA_TYPE_FP16;
    case at::kBFloat16: return HCCL_DATA_TYPE_BFP16;
    case at::kFloat:
    case at::kComplexFloat: return HCCL_DATA_TYPE_FP32;
    case at::kDouble:
    case at::kComplexDouble: return HCCL_DATA_TYPE_FP64;
#if TORCH_VERSION_MAJOR >= 2
    case at::ScalarType::UInt16: return HCCL_DATA_TYPE_UINT16;
    case at::ScalarType::UInt32: return HCCL_DATA_TYPE_UINT32;
    case at::ScalarType::UInt64: return HCCL_DATA_TYPE_UINT64;
#endif
    default: return HCCL_DATA_TYPE_RESERVED;
  }
}

/* PREMUL_SUM's factor, as a double (torch gives a number or a one-element tensor). */
double premulFactor(const c10d::ReduceOp& op, const char* what) {
  auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(sup != nullptr, "hccl ", what, ": ReduceOp.PREMUL_SUM carries no factor");
#if TORCH_VERSION_MAJOR >= 2
  if (sup->tensor_factor.defined()) return sup->tensor_factor.item<double>();
#else
  if (!sup->tensor_factors.empty()) return sup->tensor_factors[0].item<double>();
#endif
  return sup->double_factor;
}

/* f as one element of dt (the bytes HcclRedOpCreatePreMulSum reads). */
uint64_t scalarBits(HcclDataType dt, double f) {
  uint64_t bits = 0;
  auto put = [&bits](auto v) { std::memcpy(&bits, &v, sizeof(v)); };
  switch (dt) {
    case HCCL_DATA_TYPE_FP16: put(c10::Half(static_cast<float>(f)).x); break;
    case HCCL_DATA_TYPE_BFP16: put(c10::BFloat16(static_cast<float>(f)).x); break;
    case HCCL_DATA_TYPE_FP32: put(static_cast<float>(f)); break;
    case HCCL_DATA_TYPE_FP64: put(f); break;
    default: put(static_cast<int64_t>(f)); break; /* integers: the low bytes are read */
  }
  return bits;
}

}  // namespace

ReducePlan planReduce(const at::Tensor& t, const c10d::ReduceOp& op, const char* what) {
  auto o = static_cast<c10d::ReduceOp::RedOpType>(op);
  at::ScalarType st = t.scalar_type();
  bool complex = at::isComplexType(st), integral = at::isIntegralType(st, /*includeBool=*/true);
  ReducePlan p{libType(st), libOp(o), o == c10d::ReduceOp::PREMUL_SUM, 0, complex ? 2 : 1};
  if (p.dtype == HCCL_DATA_TYPE_RESERVED)
    TORCH_CHECK(false, "hccl ", what, ": dtype ", dtypeName(st),
                " is not supported for reductions; hccl reduces torch.bool, torch.int8, "
                "torch.int16, torch.int32, torch.int64, torch.uint8 (and torch.uint16, "
                "torch.uint32, torch.uint64 on torch 2.x), torch.float16, torch.bfloat16, "
                "torch.float32, torch.float64, torch.complex64 and torch.complex128");
  if (o == c10d::ReduceOp::UNUSED)
    refuse(what, st, o, "hccl reduces with SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR and "
                        "PREMUL_SUM");
  if (isBitwise(o) && !integral)
    refuse(what, st, o, "bitwise reductions take integer types and torch.bool");
  if (complex && o != c10d::ReduceOp::SUM && o != c10d::ReduceOp::AVG && !p.premul)
    refuse(what, st, o, "complex tensors reduce with SUM, AVG and PREMUL_SUM");
  if (st == at::kBool) {
    if (o == c10d::ReduceOp::AVG || p.premul)
      refuse(what, st, o, "torch.bool takes SUM or MAX (a logical or), PRODUCT or MIN (a "
                          "logical and) and the bitwise ops");
    if (o == c10d::ReduceOp::SUM) p.op = HCCL_REDUCE_MAX;
    if (o == c10d::ReduceOp::PRODUCT) p.op = HCCL_REDUCE_MIN;
  }
  if (p.premul) p.scalar = scalarBits(p.dtype, premulFactor(op, what));
  return p;
}

LibOp::LibOp(const ReducePlan& plan, HcclComm comm, const char* what)
    : comm_(comm), op_(plan.op) {
  if (!plan.premul) return;
  uint64_t scalar = plan.scalar;
  checkHccl(HcclRedOpCreatePreMulSum(&op_, &scalar, plan.dtype, HCCL_SCALAR_HOST_IMMEDIATE, comm),
            what);
  made_ = true;
}

LibOp::~LibOp() {
  if (made_) HcclRedOpDestroy(op_, comm_);
}

}  // namespace torch_hccl
