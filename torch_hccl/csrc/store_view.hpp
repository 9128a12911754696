/*
 * store_view.hpp - torch's c10d store as libhccl's HcclStore (hccl.h), the rendezvous a
 * communicator is made over (HcclCommInitStore): env://, tcp:// and file:// all work, and no
 * port of torch_hccl's own is opened.
 *
 * Each view puts its keys under a prefix of its communicator's own. torch may hand a later
 * group the same store and prefix as an earlier one (after destroy_process_group, env:// keeps
 * the TCPStore server, and its keys, in the process), so each communicator made over a store
 * takes the next number from the store's own counter: ranks of one init add 1 each, so the
 * numbers (v - 1) / size agree.
 */
#pragma once

#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "hccl.h"

namespace torch_hccl {

struct StoreView {
  c10::intrusive_ptr<c10d::Store> store;
  std::string prefix;
};

/* The view of this rank's init of a communicator of size ranks over store (collective: every
 * rank of the init calls it once). Throws DistBackendError naming the rank when the store
 * cannot count. */
std::shared_ptr<StoreView> openStoreView(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int size);
/* The library's store over view, which must outlive the communicator made over it (the library
 * holds the ctx for the communicator's life). get answers HCCL_E_TIMEOUT when the key did not
 * come in time, HCCL_E_NETWORK for any other failure of the store. */
HcclStore hcclStoreOf(StoreView& view);

}  // namespace torch_hccl
