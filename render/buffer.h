#pragma once
// Buffer<T>: a std::vector whose resize() leaves trivially constructible elements uninitialized.
// Large per-pixel buffers are always fully written by their producer, so zero-filling them first
// would only cost a pass over memory.

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace gen3d::render {

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

}  // namespace gen3d::render
