/*
 * errors.cpp - libhccl's failures as torch's errors (contract: errors.hpp). The one place
 * that knows which exception type torch raises for a backend's failure on each version.
 */
#include "errors.hpp"

#include "compat.hpp"

#include <stdexcept>

#include <c10/util/Exception.h>

namespace torch_hccl {

static std::string hcclErrorText(HcclResult r, const std::string& what, const std::string& msg) {
  std::string head = r == HCCL_E_TIMEOUT ? "hccl " + what + ": Timed out (" : "hccl " + what +
                                                                                 " failed (";
  return head + HcclGetErrorString(r) + "): " + (msg.empty() ? "no message" : msg);
}

std::exception_ptr hcclError(HcclResult r, const std::string& what, const std::string& msg) {
  try {
    throwBackendError(hcclErrorText(r, what, msg));
  } catch (...) {
    return std::current_exception();
  }
}

void throwHccl(HcclResult r, const std::string& what) {
  const char* msg = HcclGetLastErrorMessage();
  throwBackendError(hcclErrorText(r, what, msg ? msg : ""));
}

void throwBackendError(const std::string& msg) {
#if TORCH_HCCL_BACKEND_API
  C10_THROW_ERROR(DistBackendError, msg);
#else
  throw std::runtime_error(msg);
#endif
}

}  // namespace torch_hccl
