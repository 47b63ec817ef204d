#pragma once
// An allocator for std::vector whose storage starts on a 64-byte boundary (a cache line,
// one AVX-512 vector): kernels that stream rows with full-width loads then never split a
// load across two lines (glibc's malloc aligns to 16 bytes, and its large, mmap-backed
// blocks sit 16 bytes past a page start, so every 64-byte load of such a row would).
#include <cstddef>
#include <new>
#include <vector>

namespace gatedlm {

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: converting, as allocators are
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlignment); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

// A vector whose data() is 64-byte aligned.
template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace gatedlm
