#pragma once
// An allocator for std::vector whose storage starts on a 64-byte boundary (a cache line,
// one AVX-512 vector): kernels that stream rows with full-width loads then never split a
// load across two lines (glibc's malloc aligns to 16 bytes, and its large, mmap-backed
// blocks sit 16 bytes past a page start, so every 64-byte load of such a row would).
//
// From 2 MiB up (a quantised model's weights) the storage is a mapping of its own, 2 MiB-
// aligned, its whole 2 MiB frames marked MADV_HUGEPAGE: where transparent huge pages are "madvise" (Debian's
// default) the kernel then backs it with 2 MiB pages instead of 4 KiB ones, so streaming the
// weights once per decode step takes one TLB entry per 2 MiB instead of 512. Measured on an
// AVX2 Zen 4 (bench/RESULTS.md, "Weights on huge pages"): quantised decode 3-11 % faster.
// GATEDLM_HUGE_PAGES=0 leaves out the mark (the kernel's default pages).
#include <cstddef>
#include <new>
#include <vector>

namespace gatedlm {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
// `bytes` on a 2 MiB-aligned anonymous mapping of zeros whose whole 2 MiB frames are marked
// for huge pages (core/huge_pages.cpp); throws std::bad_alloc when mmap fails.
void* allocate_huge_pages(std::size_t bytes);
void free_huge_pages(void* p, std::size_t bytes) noexcept;

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: converting, as allocators are
  T* allocate(std::size_t n) {
    if (n * sizeof(T) >= kHugePageBytes) return static_cast<T*>(allocate_huge_pages(n * sizeof(T)));
    return static_cast<T*>(::operator new(n * sizeof(T), kAlignment));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) >= kHugePageBytes) free_huge_pages(p, n * sizeof(T));
    else ::operator delete(p, kAlignment);
  }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

// A vector whose data() is 64-byte aligned.
template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace gatedlm
