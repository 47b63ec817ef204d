#include "core/memory.h"

#include <unistd.h>

#include <fstream>
#include <limits>

#include "core/error.h"

namespace gatedlm {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  uint64_t total = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                                         : std::numeric_limits<uint64_t>::max();
  // A container's limit (cgroup v2), when set and lower.
  std::ifstream in("/sys/fs/cgroup/memory.max");
  uint64_t limit = 0;
  if (in >> limit && limit > 0 && limit < total) total = limit;
  return total;
}

void require_memory(const std::string& what, uint64_t bytes, const std::string& hint) {
  const uint64_t have = physical_memory_bytes();
  if (bytes > have)
    fail(what, " needs about ", bytes / (1 << 20), " MiB, more than this machine's ", have / (1 << 20),
         " MiB of memory", hint.empty() ? "" : " (" + hint + ")");
}

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

}  // namespace gatedlm
