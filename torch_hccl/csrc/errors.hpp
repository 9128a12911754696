/*
 * errors.hpp - libhccl's failures as torch's errors: the one way every file of torch_hccl's
 * binding turns a library result, or a failure of its own, into the exception torch's own
 * backends raise (torch.distributed.DistBackendError on torch 2.x, RuntimeError on 1.13).
 * Argument errors are not here: they are TORCH_CHECKs where the argument is read (a
 * RuntimeError naming the value and the rule).
 */
#pragma once

#include <exception>
#include <string>

#include "hccl.h"

namespace torch_hccl {

/* Throws msg as torch's own backends throw a failure: torch.distributed.DistBackendError where
 * torch has it (2.x), else RuntimeError. A timeout's message carries " Timed out ", the phrase
 * torch's tests and users match. */
[[noreturn]] void throwBackendError(const std::string& msg);

/* The error for a failed call, carrying libhccl's message: "hccl <what> failed (<code>):
 * <reason>", and for a timeout "hccl <what>: Timed out (<code>): <reason>". hcclError hands
 * it back (for a future), throwHccl throws it with the library's last message. */
std::exception_ptr hcclError(HcclResult r, const std::string& what, const std::string& msg);
[[noreturn]] void throwHccl(HcclResult r, const std::string& what);
/* A library call's result: nothing on success, else throwHccl with the library's reason. */
inline void checkHccl(HcclResult r, const char* what) {
  if (r != HCCL_SUCCESS) throwHccl(r, what);
}

}  // namespace torch_hccl
