#include "render/buffer.h"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gen3d::render {
namespace detail {
namespace {

size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

// Freed large blocks kept mapped for reuse: first-touch page faults cost several times a memset
// on virtualized hosts (measured here: ~0.75 ms per MB to fault vs ~0.2 ms per MB to clear).
struct Pool {
  std::mutex mutex;
  std::vector<std::pair<void*, size_t>> blocks;  // (address, mapped bytes)
  size_t held = 0;
  size_t limit = kDefaultPoolLimit;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: blocks may be freed during static destruction
  return *p;
}

void* map_fresh(size_t rounded) {
#if defined(__linux__)
  // A private anonymous mapping (fresh zero pages), trimmed to a 2 MiB aligned range. We do not
  // ask for transparent huge pages (MADV_HUGEPAGE): with the common defrag=madvise setting the
  // first faults may stall in compaction (measured: up to 2x slower first rasterization).
  const size_t span = rounded + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(start, kHugePage);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + rounded;
  if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
  return reinterpret_cast<void*>(aligned);
#else
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
#endif
}

void unmap(void* p, size_t rounded) noexcept {
#if defined(__linux__)
  munmap(p, rounded);
#else
  (void)rounded;
  std::free(p);
#endif
}

}  // namespace

void* allocate_large(size_t bytes) {
  const size_t rounded = round_up(bytes, kHugePage);
  void* reused = nullptr;
  {
    Pool& p = pool();
    std::lock_guard lock(p.mutex);
    // Blocks are reused for requests of exactly their size (rasters come in few sizes).
    for (size_t i = 0; i < p.blocks.size(); ++i) {
      if (p.blocks[i].second != rounded) continue;
      reused = p.blocks[i].first;
      p.blocks.erase(p.blocks.begin() + static_cast<ptrdiff_t>(i));
      p.held -= rounded;
      break;
    }
  }
  if (!reused) return map_fresh(rounded);
  std::memset(reused, 0, bytes);  // reused memory must look fresh
  return reused;
}

void free_large(void* ptr, size_t bytes) noexcept {
  const size_t rounded = round_up(bytes, kHugePage);
  Pool& p = pool();
  {
    std::lock_guard lock(p.mutex);
    if (p.held + rounded <= p.limit) {
      p.blocks.emplace_back(ptr, rounded);
      p.held += rounded;
      return;
    }
  }
  unmap(ptr, rounded);
}

}  // namespace detail

void set_buffer_pool_limit(size_t bytes) {
  detail::Pool& p = detail::pool();
  std::vector<std::pair<void*, size_t>> release;
  {
    std::lock_guard lock(p.mutex);
    p.limit = bytes;
    while (p.held > p.limit && !p.blocks.empty()) {
      release.push_back(p.blocks.back());
      p.held -= p.blocks.back().second;
      p.blocks.pop_back();
    }
  }
  for (auto [ptr, size] : release) detail::unmap(ptr, size);
}

size_t buffer_pool_bytes() {
  detail::Pool& p = detail::pool();
  std::lock_guard lock(p.mutex);
  return p.held;
}

}  // namespace gen3d::render
