// CacheLineVector: data() on a 64-byte boundary at every size, through growth and copies
// (the quantised kernels' full-width loads rely on it, core/aligned_allocator.h).
#include <gtest/gtest.h>

#include <cstdint>

#include "core/aligned_allocator.h"

namespace gatedlm {
namespace {

bool on_cache_line(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

TEST(CacheLineVector, DataStartsOnACacheLineAtEverySize) {
  // Small sizes (malloc's 16-byte alignment) and large ones (mmap-backed: 16 bytes past a page).
  for (std::size_t n : {1u, 3u, 17u, 100u, 4096u, 1u << 20, 5u << 20}) {
    CacheLineVector<uint8_t> bytes(n, 7);
    EXPECT_TRUE(on_cache_line(bytes.data())) << n << " bytes";
    CacheLineVector<uint16_t> halves(n);
    EXPECT_TRUE(on_cache_line(halves.data())) << n << " halves";
  }
  CacheLineVector<float> grown;
  for (int i = 0; i < 10000; ++i) {
    grown.push_back(static_cast<float>(i));
    ASSERT_TRUE(on_cache_line(grown.data())) << "after " << i + 1 << " push_backs";
  }
  const CacheLineVector<float> copy = grown;
  EXPECT_TRUE(on_cache_line(copy.data()));
  EXPECT_EQ(copy, grown);
}

}  // namespace
}  // namespace gatedlm
