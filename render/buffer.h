#pragma once
// Buffer<T>: a std::vector whose resize() leaves trivially constructible elements uninitialized.
// Large per-pixel buffers are always fully written by their producer, so zero-filling them first
// would only cost a pass over memory.

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace gen3d::render {

namespace detail {
// Allocations of at least this many bytes are zero-filled, 2 MiB aligned blocks: fresh anonymous
// mappings (Linux), or blocks freed earlier and kept in a bounded process-wide pool, cleared on
// reuse. So a raster's background needs no clearing pass, and repeated rasterizations do not pay
// first-touch page faults again.
inline constexpr size_t kHugeThreshold = size_t{4} << 20;
inline constexpr size_t kHugePage = size_t{2} << 20;
inline constexpr size_t kDefaultPoolLimit = size_t{640} << 20;  // ~6 rasters at 2048 x 2048
void* allocate_large(size_t bytes);  // zero-filled; throws std::bad_alloc
void free_large(void* p, size_t bytes) noexcept;
}  // namespace detail

// Bytes of freed large buffers the pool may keep for reuse (default 640 MiB; 0 disables it and
// returns what it holds to the system).
void set_buffer_pool_limit(size_t bytes);
// Bytes the pool currently holds.
size_t buffer_pool_bytes();

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= detail::kHugeThreshold) return static_cast<T*>(detail::allocate_large(bytes));
    return std::allocator<T>::allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) >= detail::kHugeThreshold) {
      detail::free_large(p, n * sizeof(T));
    } else {
      std::allocator<T>::deallocate(p, n);
    }
  }

  // Default-initialize (no zeroing) when constructed without arguments.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T>
using Buffer = std::vector<T, DefaultInitAllocator<T>>;

// Replaces b by n zeros: large buffers come zero-filled from allocate_large, small ones are
// cleared.
template <class T>
void resize_zeroed(Buffer<T>& b, size_t n) {
  static_assert(std::is_trivial_v<T>);
  Buffer<T> fresh;
  fresh.reserve(n);  // exactly n elements: allocate(n)
  fresh.resize(n);
  if (n * sizeof(T) < detail::kHugeThreshold && n > 0) {
    std::memset(static_cast<void*>(fresh.data()), 0, n * sizeof(T));
  }
  b = std::move(fresh);
}

}  // namespace gen3d::render
