/*
 * allocator.cpp - the shared-memory caching CPU allocator (contract: allocator.hpp; guide:
 * docs/pytorch.md).
 *
 * Layout: an arena is one HcclMemAlloc region; its blocks tile it in address order (a doubly
 * linked list per arena), each in use or free. Free blocks of the process's own arenas sit in
 * one set ordered by (size, address): the first one not smaller than a request is its best
 * fit. Every size is a multiple of 512 bytes, so every block starts 512-aligned (torch asks for
 * 64). One mutex guards it all: torch frees tensors from any thread, and a block's work is a
 * few set operations. The live blocks are found by address (a hash map), so the DataPtr's
 * context is the data pointer itself and raw_allocate/raw_deallocate work as torch expects.
 *
 * Arenas: the first is 1 GiB, each later one at least as large as all before it together (and
 * always large enough for the request), so a process that uses M bytes has about log2(M/1GiB)
 * + 1 arenas. That keeps every tensor of a training job within the few regions a peer keeps
 * mapped per link (transport/shm/shm.c's SHM_WINDOWS, 8: up to 128 GiB before windows churn), and
 * costs nothing up front: memfd pages exist once touched.
 *
 * fork: prepare takes the mutex (before base/mem_region.c takes its own, the order used everywhere:
 * this file calls HcclMemAlloc under its mutex); the parent releases it; the child marks every
 * arena inherited, forgets the free set and the counters, releases arenas with nothing in use,
 * and allocates from new arenas from then on. Blocks it inherited are dropped when freed (their
 * copy-on-write pages returned at once), and an inherited arena is released with its last one.
 */
#include "allocator.hpp"
#include "compat.hpp"
#include "settings.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>
#include <set>
#include <unordered_map>

#include <hccl.h>

namespace torch_hccl {
namespace {

constexpr size_t kAlign = 512;                  /* block sizes and addresses */
constexpr size_t kArenaAlign = size_t(2) << 20; /* arena sizes */
constexpr size_t kFirstArena = size_t(1) << 30;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

struct Arena;
struct Block {
  char* ptr;
  size_t size;
  size_t requested; /* while in use: the bytes asked for */
  bool used;
  Block* prev; /* address neighbours in the arena */
  Block* next;
  Arena* arena;
};

struct Arena {
  char* base;
  size_t bytes;
  bool inherited; /* made by the parent before fork: never allocated from again */
  size_t live;    /* blocks in use */
  Block* first;
};

struct BySizeThenAddress {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};

/* [*lo, *lo + return) = the whole pages inside [p, p + n). */
size_t inner_pages(char* p, size_t n, char** lo) {
  static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t a = round_up((uintptr_t)p, page), b = ((uintptr_t)p + n) / page * page;
  *lo = (char*)a;
  return b > a ? b - a : 0;
}

class Cache {
 public:
  Cache() = default;

  /* A block of at least n bytes, or nullptr when no arena could be made (the caller
   * delegates; why is warned once). */
  void* alloc(size_t n);
  /* Frees what alloc returned; false (nothing done) for any other pointer. */
  bool free(void* p);
  size_t empty_cache();
  std::vector<std::pair<std::string, int64_t>> stats();
  std::vector<std::pair<uintptr_t, size_t>> arenas();

  void fork_prepare() { mu_.lock(); }
  void fork_parent() { mu_.unlock(); }
  void fork_child();

  std::atomic<uint64_t> delegated{0};

 private:
  Block* grow(size_t size);
  void release_arena(Arena* a);
  void drop_inherited(Block* b);

  std::mutex mu_;
  std::set<Block*, BySizeThenAddress> free_;
  std::unordered_map<void*, Block*> live_;
  std::vector<Arena*> arenas_; /* own arenas; inherited ones are reached through their blocks */
  size_t reserved_ = 0, allocated_ = 0, requested_ = 0, peak_ = 0;
  size_t inherited_blocks_ = 0, inherited_bytes_ = 0, released_ = 0;
  uint64_t allocations_ = 0, frees_ = 0, fallbacks_ = 0;
  /* An arena could not be made (out of descriptors, maps or address space): later requests
   * that fit no free block go to the previous allocator at once, without a new attempt and
   * libhccl's error line each time. */
  bool cannot_grow_ = false;
};

Block* Cache::grow(size_t size) {
  size_t bytes = std::max(std::max(kFirstArena, reserved_), round_up(size, kArenaAlign));
  void* base = nullptr;
  if (cannot_grow_) return nullptr;
  if (HcclMemAlloc(&base, bytes) != HCCL_SUCCESS) {
    cannot_grow_ = true;
    return nullptr;
  }
  auto* a = new Arena{static_cast<char*>(base), bytes, false, 0, nullptr};
  a->first = new Block{a->base, bytes, 0, false, nullptr, nullptr, a};
  arenas_.push_back(a);
  reserved_ += bytes;
  return a->first;
}

void* Cache::alloc(size_t n) {
  if (n > SIZE_MAX / 2) return nullptr; /* no arena could hold it; torch's allocator says so */
  size_t size = round_up(n, kAlign);
  std::unique_lock<std::mutex> lock(mu_);
  Block key{nullptr, size, 0, false, nullptr, nullptr, nullptr};
  auto it = free_.lower_bound(&key);
  Block* b;
  if (it != free_.end()) {
    b = *it;
    free_.erase(it);
  } else if (!(b = grow(size))) {
    fallbacks_++;
    lock.unlock();
    TORCH_WARN_ONCE("torch_hccl allocator: cannot make a shared arena for a ", n, "-byte tensor (",
                    HcclGetLastErrorMessage(),
                    "); from now on tensors that fit no free block of the existing arenas use "
                    "torch's allocator, and their allreduces the ring");
    return nullptr;
  }
  if (b->size - size >= kAlign) {
    auto* rest = new Block{b->ptr + size, b->size - size, 0, false, b, b->next, b->arena};
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    free_.insert(rest);
  }
  b->used = true;
  b->requested = n;
  b->arena->live++;
  live_.emplace(b->ptr, b);
  allocated_ += b->size;
  requested_ += n;
  peak_ = std::max(peak_, allocated_);
  allocations_++;
  return b->ptr;
}

bool Cache::free(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return false;
  Block* b = it->second;
  live_.erase(it);
  b->used = false;
  b->arena->live--;
  if (b->arena->inherited) {
    drop_inherited(b);
    return true;
  }
  allocated_ -= b->size;
  requested_ -= b->requested;
  frees_++;
  for (Block* n : {b->prev, b->next}) { /* coalesce: b absorbs a free neighbour, or joins it */
    if (!n || n->used) continue;
    free_.erase(n);
    Block *lo = n == b->prev ? n : b, *hi = n == b->prev ? b : n;
    lo->size += hi->size;
    lo->next = hi->next;
    if (hi->next) hi->next->prev = lo;
    delete hi;
    b = lo;
  }
  free_.insert(b);
  return true;
}

/* In a forked child: an inherited block is never reused; its copy-on-write pages go back at
 * once, and the arena with the last one. */
void Cache::drop_inherited(Block* b) {
  inherited_blocks_--;
  inherited_bytes_ -= b->size;
  if (b->arena->live == 0) {
    release_arena(b->arena);
    return;
  }
  char* lo;
  size_t len = inner_pages(b->ptr, b->size, &lo);
  if (len) madvise(lo, len, MADV_DONTNEED);
}

void Cache::release_arena(Arena* a) {
  for (Block *b = a->first, *next; b; b = next) {
    next = b->next;
    delete b;
  }
  HcclMemFree(a->base);
  delete a;
}

/* Counts the resident pages first (mincore), so that the bytes reported are the memory
 * really given back, not the untouched or already-returned pages of a large free block. */
size_t Cache::empty_cache() {
  static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  std::lock_guard<std::mutex> lock(mu_);
  size_t given = 0;
  std::vector<unsigned char> in;
  for (Block* b : free_) {
    char* lo;
    size_t len = inner_pages(b->ptr, b->size, &lo), resident = 0;
    if (!len) continue;
    in.resize(len / page);
    if (mincore(lo, len, in.data()) == 0)
      for (unsigned char c : in)
        resident += c & 1;
    /* HcclMemDiscard, not madvise: libhccl's RDMA transport drops its registrations of these
     * pages first (a registration keeps the old pages). */
    if (HcclMemDiscard(lo, len) == HCCL_SUCCESS) given += resident * page;
  }
  released_ += given;
  return given;
}

void Cache::fork_child() {
  for (Arena* a : arenas_) {
    a->inherited = true;
    if (a->live == 0) {
      release_arena(a);
      continue;
    }
    for (Block* b = a->first; b; b = b->next)
      if (b->used) inherited_blocks_++, inherited_bytes_ += b->size;
  }
  arenas_.clear();
  free_.clear();
  reserved_ = allocated_ = requested_ = peak_ = released_ = 0;
  allocations_ = frees_ = fallbacks_ = 0;
  cannot_grow_ = false;
  delegated = 0;
  mu_.unlock();
}

std::vector<std::pair<std::string, int64_t>> Cache::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  auto i = [](uint64_t v) { return static_cast<int64_t>(v); };
  return {{"allocated_bytes", i(allocated_)},
          {"requested_bytes", i(requested_)},
          {"peak_allocated_bytes", i(peak_)},
          {"reserved_bytes", i(reserved_)},
          {"cached_bytes", i(reserved_ - allocated_)},
          {"largest_free_bytes", i(free_.empty() ? 0 : (*free_.rbegin())->size)},
          {"arenas", i(arenas_.size())},
          {"allocations", i(allocations_)},
          {"frees", i(frees_)},
          {"delegated", i(delegated.load())},
          {"fallbacks", i(fallbacks_)},
          {"released_bytes", i(released_)},
          {"inherited_blocks", i(inherited_blocks_)},
          {"inherited_bytes", i(inherited_bytes_)}};
}

std::vector<std::pair<uintptr_t, size_t>> Cache::arenas() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<uintptr_t, size_t>> out;
  for (Arena* a : arenas_)
    out.emplace_back(reinterpret_cast<uintptr_t>(a->base), a->bytes);
  return out;
}

/* Never destroyed: tensors may be freed during interpreter shutdown, after static
 * destructors would have run. */
Cache* g_cache;
size_t g_min_bytes;
c10::DeleterFnPtr g_prev_raw_deleter;

/* The deleter of every block, and the raw deleter: a pointer that is not a block is a
 * delegated request that raw_allocate returned, freed by the previous allocator. */
void free_block(void* p) {
  if (g_cache->free(p)) {
    c10::profiledCPUMemoryReporter().Delete(p);
    return;
  }
  TORCH_INTERNAL_ASSERT(g_prev_raw_deleter, "torch_hccl allocator: asked to free ", p,
                        ", which it did not allocate, and the previous allocator has no raw "
                        "deleter");
  g_prev_raw_deleter(p);
}

class SharedCpuAllocator final : public c10::Allocator {
 public:
  explicit SharedCpuAllocator(c10::Allocator* prev) : prev_(prev) {}

  /* torch 2.x made allocate non-const and added copy_data. */
#if TORCH_HCCL_BACKEND_API
  c10::DataPtr allocate(size_t n) override {
#else
  c10::DataPtr allocate(size_t n) const override {
#endif
    if (n >= g_min_bytes && n > 0) {
      if (void* p = g_cache->alloc(n)) {
        c10::profiledCPUMemoryReporter().New(p, n);
        return {p, p, &free_block, c10::Device(c10::DeviceType::CPU)};
      }
    } else {
      g_cache->delegated.fetch_add(1, std::memory_order_relaxed);
    }
    return prev_->allocate(n);
  }

  /* Frees both kinds: a block of ours, or (by the previous allocator's raw deleter) a
   * delegated request that raw_allocate returned. */
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
#if TORCH_HCCL_BACKEND_API
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

 private:
  c10::Allocator* prev_;
};

SharedCpuAllocator* g_allocator;

} // namespace

bool install_allocator() {
  static std::once_flag once;
  static bool installed = false;
  static std::exception_ptr failed;
  std::call_once(once, [] {
    AllocatorSettings s;
    warn_unknown_settings(environ);
    try {
      s = read_allocator_settings();
    } catch (...) {
      failed = std::current_exception();
      return;
    }
    g_min_bytes = s.min_bytes;
    if (!s.enabled) return;
    c10::Allocator* prev = c10::GetCPUAllocator();
    g_prev_raw_deleter = prev->raw_deleter();
    g_cache = new Cache();
    g_allocator = new SharedCpuAllocator(prev);
    pthread_atfork([] { g_cache->fork_prepare(); }, [] { g_cache->fork_parent(); },
                   [] { g_cache->fork_child(); });
    c10::SetCPUAllocator(g_allocator, /*priority=*/1); /* torch's own is registered at 0 */
    installed = allocator_is_current();
    if (!installed)
      TORCH_WARN("torch_hccl allocator: not installed: another CPU allocator of higher "
                 "priority is in place");
  });
  if (failed) std::rethrow_exception(failed);
  return installed;
}

bool allocator_is_current() {
  return g_allocator && c10::GetCPUAllocator() == g_allocator;
}

std::vector<std::pair<std::string, int64_t>> allocator_stats() {
  std::vector<std::pair<std::string, int64_t>> s = {
      {"enabled", allocator_is_current()}, {"min_bytes", static_cast<int64_t>(g_min_bytes)}};
  auto more = g_cache ? g_cache->stats() : Cache().stats();
  s.insert(s.end(), more.begin(), more.end());
  return s;
}

size_t allocator_empty_cache() {
  return g_cache ? g_cache->empty_cache() : 0;
}

std::vector<std::pair<uintptr_t, size_t>> allocator_arenas() {
  return g_cache ? g_cache->arenas() : std::vector<std::pair<uintptr_t, size_t>>{};
}

} // namespace torch_hccl
