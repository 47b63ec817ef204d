// Large weight buffers on 2 MiB-aligned anonymous mappings the kernel may back with
// transparent huge pages (core/aligned_allocator.h says why).
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "core/aligned_allocator.h"

namespace gatedlm {

namespace {

std::size_t whole_huge_pages(std::size_t bytes) { return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1); }

// GATEDLM_HUGE_PAGES=0 leaves the mappings to the kernel's default (4 KiB pages where THP is
// "madvise", as on Debian): to measure what the hint gives, or to rule it out.
bool hint_wanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("GATEDLM_HUGE_PAGES");
    return !(v && v[0] == '0' && v[1] == '\0');
  }();
  return wanted;
}

}  // namespace

void* allocate_huge_pages(std::size_t bytes) {
  // Map one huge page more than needed, keep the 2 MiB-aligned part, return the rest: the
  // kernel backs a range with huge pages only where it covers whole aligned 2 MiB frames.
  const std::size_t size = whole_huge_pages(bytes);
  void* raw = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePageBytes - 1) & ~(std::uintptr_t{kHugePageBytes} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t tail = start + size + kHugePageBytes - (aligned + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // The whole frames the buffer fills, not its last partial one: that frame stays on 4 KiB
  // pages, resident only where touched, so no buffer costs more memory than its bytes.
  // A hint: ignored where THP is off.
  if (hint_wanted()) madvise(p, bytes & ~(kHugePageBytes - 1), MADV_HUGEPAGE);
  return p;
}

void free_huge_pages(void* p, std::size_t bytes) noexcept { munmap(p, whole_huge_pages(bytes)); }

}  // namespace gatedlm
