#pragma once
// An allocator for std::vector whose elements start as zeros without being written: the
// storage comes from calloc, which for large blocks maps fresh pages that the kernel zeroes
// when they are first touched, and `vector(n)` constructs no element. So a large buffer
// costs memory only where it is written: a quantised model's fp32 parameter buffer
// (model/quantized_weights.h) holds pages only for the tensors kept in F32, never for those
// that live in blocks. Trivially constructible elements only.
#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace gatedlm {

template <typename T>
struct ZeroedAllocator {
  static_assert(std::is_trivially_default_constructible_v<T>, "elements that need no construction");
  using value_type = T;
  ZeroedAllocator() = default;
  template <typename U>
  ZeroedAllocator(const ZeroedAllocator<U>&) noexcept {}  // NOLINT: converting, as allocators are
  T* allocate(std::size_t n) {
    void* p = std::calloc(n, sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) noexcept { std::free(p); }
  // vector(n) and resize(n) value-initialise through this: the zeros are already there.
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) ::new (static_cast<void*>(p)) U;
    else ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const ZeroedAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T>
using ZeroedVector = std::vector<T, ZeroedAllocator<T>>;

}  // namespace gatedlm
