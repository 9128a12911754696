/*
 * staging.hpp - the argument checks every op shares, and staging: how tensors torch hands over
 * become the one contiguous buffer per side the library takes, and how results go back.
 *
 * Checks are as gloo's, each a RuntimeError "hccl <what>: ..." naming the value and the rule.
 * Staging: a contiguous tensor is passed as it is; a non-contiguous one (or a list of tensors)
 * goes through a contiguous copy (dense, packBytes), and the work's success step copies
 * results back (copyBack, unpackBack). Ops that only move bytes pass byte buffers.
 */
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "work.hpp"

namespace torch_hccl {

/* t is a dense CPU tensor (a device is a rank here). */
void checkCpu(const at::Tensor& t, const char* what);
/* The one tensor of ts (one device per process), checked by checkCpu. */
const at::Tensor& single(std::vector<at::Tensor>& ts, const char* what);
/* a (named `name` in the message) has ref's dtype and element count. */
void checkSame(const at::Tensor& a, const at::Tensor& ref, const char* what, const char* name);
/* output and input are CPU tensors of one dtype. */
void checkPair(const at::Tensor& output, const at::Tensor& input, const char* what);
/* The coalesced tensor forms: as many outputs as inputs. */
void checkPaired(size_t outputs, size_t inputs, const char* what);
/* root is a rank of a group of size ranks. */
void checkRoot(int64_t root, int size, const char* what);
/* rootTensor is 0: one tensor per process. */
void checkRootTensor(int64_t rootTensor, const char* what);

/* t itself when contiguous, else a contiguous copy. */
inline at::Tensor dense(const at::Tensor& t) {
  return t.is_contiguous() ? t : t.contiguous();
}
/* An uninitialised buffer of n bytes. */
at::Tensor byteBuffer(int64_t n);
/* The bytes of each tensor, in order, in one flat byte buffer. */
at::Tensor packBytes(const std::vector<at::Tensor>& ts);
/* The reverse: copies consecutive byte ranges of flat (from byte `off`) into each tensor. */
void unpackBytes(const at::Tensor& flat, int64_t off, const std::vector<at::Tensor>& ts);
/* Whether ts[i] already sit back to back in one contiguous buffer, in order. */
bool adjacent(const std::vector<at::Tensor>& ts);

/* On w's success: staged's contents into dst, unless staged is dst. */
void copyBack(HcclWork& w, const at::Tensor& dst, const at::Tensor& staged);
/* On w's success: flat's bytes into outs, in order (unpackBytes from 0). */
void unpackBack(HcclWork& w, const at::Tensor& flat, const std::vector<at::Tensor>& outs);

}  // namespace torch_hccl
