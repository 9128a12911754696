/*
 * store_view.cpp - the c10d store behind libhccl's HcclStore (contract: store_view.hpp): set,
 * and get as a wait with the library's deadline then a read into memory the library frees.
 */
#include "store_view.hpp"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "errors.hpp"

namespace torch_hccl {
namespace {

HcclResult storeSet(void* ctx, const char* key, const void* val, size_t len) {
  try {
    auto* v = static_cast<StoreView*>(ctx);
    const auto* b = static_cast<const uint8_t*>(val);
    v->store->set(v->prefix + key, std::vector<uint8_t>(b, b + len));
    return HCCL_SUCCESS;
  } catch (const std::exception&) {
    return HCCL_E_NETWORK;
  }
}

HcclResult storeGet(void* ctx, const char* key_, void** val, size_t* len, int64_t timeoutMs) {
  auto* v = static_cast<StoreView*>(ctx);
  c10d::Store* s = v->store.get();
  std::string key = v->prefix + key_;
  try {
    s->wait({key}, std::chrono::milliseconds(timeoutMs));
  } catch (const std::exception& e) {
    std::string m = e.what();
    bool timeout = m.find("imeout") != std::string::npos || m.find("imed out") != std::string::npos;
    return timeout ? HCCL_E_TIMEOUT : HCCL_E_NETWORK;
  }
  try {
    std::vector<uint8_t> v = s->get(key);
    void* p = std::malloc(v.size() ? v.size() : 1);
    if (!p) return HCCL_E_MEMORY;
    if (!v.empty()) std::memcpy(p, v.data(), v.size());
    *val = p;
    *len = v.size();
    return HCCL_SUCCESS;
  } catch (const std::exception&) {
    return HCCL_E_NETWORK;
  }
}

}  // namespace

std::shared_ptr<StoreView> openStoreView(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int size) {
  int64_t instance = 0;
  try {
    instance = (store->add("hccl_instances", 1) - 1) / (size > 0 ? size : 1);
  } catch (const std::exception& e) {
    throwBackendError(std::string("hccl init (rank ") + std::to_string(rank) +
                      "): the store torch gave cannot count: " + e.what());
  }
  return std::make_shared<StoreView>(StoreView{store, "hccl" + std::to_string(instance) + "/"});
}

HcclStore hcclStoreOf(StoreView& view) {
  return HcclStore{&view, storeSet, storeGet};
}

}  // namespace torch_hccl
