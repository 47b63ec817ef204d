// CacheLineVector: data() on a 64-byte boundary at every size, through growth and copies
// (the quantised kernels' full-width loads rely on it, core/aligned_allocator.h), and from
// 2 MiB up on its own mapping the kernel may back with huge pages.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

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

// The THPeligible line of /proc/self/smaps for the mapping that holds p: 1 when the kernel may
// back it with huge pages, 0 when not, -1 when the file does not say.
int huge_page_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

// Whether this machine's kernel grants huge pages to a mapping that asks (THP "always" or
// "madvise"); "never" makes every mapping ineligible.
bool huge_pages_on_request() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(in, modes);
  return !modes.empty() && modes.find("[never]") == std::string::npos;
}

TEST(CacheLineVector, LargeBuffersSitOnWholeHugePagesThatTheKernelMayUse) {
  // Weights of a quantised model (model/quantized_weights.h): from 2 MiB up each buffer is its
  // own 2 MiB-aligned mapping, marked for transparent huge pages.
  for (std::size_t n : {kHugePageBytes, kHugePageBytes + 1, 5 * kHugePageBytes + 12345}) {
    CacheLineVector<uint8_t> bytes(n);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(bytes.data()) % kHugePageBytes, 0u) << n << " bytes";
    for (std::size_t i = 0; i < n; i += 4093) bytes[i] = static_cast<uint8_t>(i);
    bytes[n - 1] = 0xAB;
    for (std::size_t i = 0; i < n; i += 4093) ASSERT_EQ(bytes[i], static_cast<uint8_t>(i)) << i;
    EXPECT_EQ(bytes[n - 1], 0xAB);
    if (huge_pages_on_request()) {
      EXPECT_EQ(huge_page_eligible(bytes.data()), 1) << n << " bytes";
    }
  }
  // Growth across the threshold moves the elements from the small storage to the mapping.
  CacheLineVector<float> grown(1000, 1.5f);
  grown.resize(kHugePageBytes / sizeof(float) + 3, 2.5f);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(grown.data()) % kHugePageBytes, 0u);
  EXPECT_EQ(grown[999], 1.5f);
  EXPECT_EQ(grown.back(), 2.5f);
}

}  // namespace
}  // namespace gatedlm
