/*
 * ops_p2p.cpp - ProcessGroupHCCL's point-to-point ops: send, recv, and recv from any source.
 * See process_group.hpp.
 *
 * All three are one shape, the family's helper pointToPoint: one tensor, staged contiguous,
 * moved as bytes by one library call; a receive copies the staged bytes back on success. Tags
 * are accepted and not used: messages between two ranks match in the order they were posted,
 * as with NCCL.
 */
#include "process_group.hpp"

#include <optional>

#include <c10/util/Exception.h>

#include "staging.hpp"

namespace torch_hccl {

/* peer: the other rank (checked), or none for a receive from any source. call(buf, w, req)
 * makes the library call on the staged buffer. */
template <class Call>
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::pointToPoint(c10d::OpType type, const char* what,
                                                              std::vector<at::Tensor>& tensors,
                                                              std::optional<int> peer, bool receive,
                                                              Call call) {
  at::Tensor t = single(tensors, what);
  if (peer)
    TORCH_CHECK(*peer >= 0 && *peer < getSize() && *peer != getRank(), "hccl ", what, ": rank ",
                *peer, " is not another rank of this group of ", getSize(), " (this is rank ",
                getRank(), ")");
  at::Tensor buf = dense(t);
  auto w = newWork(type, what, {t});
  w->start(what, [&](HcclRequest* req) { return call(buf, *w, req); });
  w->keep(buf);
  if (receive) copyBack(*w, t, buf);
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors,
                                                      int dstRank, int) {
  return pointToPoint(c10d::OpType::SEND, "send", tensors, dstRank, false,
                      [&](at::Tensor& buf, HcclWork&, HcclRequest* req) {
                        return HcclSend(buf.data_ptr(), buf.nbytes(), HCCL_DATA_TYPE_INT8,
                                        static_cast<uint32_t>(dstRank), core_->comm(), req);
                      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors,
                                                      int srcRank, int) {
  return pointToPoint(c10d::OpType::RECV, "recv", tensors, srcRank, true,
                      [&](at::Tensor& buf, HcclWork&, HcclRequest* req) {
                        return HcclRecv(buf.data_ptr(), buf.nbytes(), HCCL_DATA_TYPE_INT8,
                                        static_cast<uint32_t>(srcRank), core_->comm(), req);
                      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int) {
  return pointToPoint(c10d::OpType::RECVANYSOURCE, "recv (any source)", tensors, std::nullopt, true,
                      [&](at::Tensor& buf, HcclWork& w, HcclRequest* req) {
                        return HcclRecvAny(buf.data_ptr(), buf.nbytes(), HCCL_DATA_TYPE_INT8,
                                           w.sourceSlot(), core_->comm(), req);
                      });
}

}  // namespace torch_hccl
