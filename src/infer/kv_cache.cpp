#include "infer/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <new>

#include "core/error.h"

namespace gatedlm::infer {

KvCache::KvCache(const CacheGeometry& g) : g_(g) {
  if (g.slots < 1 || g.capacity < 1) fail("kv cache: needs at least one slot and one row");
  if (g.streaming() && g.capacity != g.sinks + g.window)
    fail("kv cache: a streaming cache holds sinks + window rows");
  // K and V are filled at once, so a cache larger than the machine's memory cannot be had:
  // refused as an allocation that failed (in doubles: the product can pass int64), before
  // asking the allocator (which, under a sanitizer, aborts on sizes past its limit).
  const double bytes = 2.0 * sizeof(float) * static_cast<double>(g.n_layers) * static_cast<double>(g.slots) *
                       static_cast<double>(g.capacity) * static_cast<double>(g.row_width());
  if (bytes > static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)))
    throw std::bad_alloc();
  const size_t size = static_cast<size_t>(g.n_layers * g.slots * g.capacity * g.row_width());
  k_.assign(size, 0.0f);
  v_.assign(size, 0.0f);
}

int64_t KvCache::row_of(int64_t t) const {
  if (!g_.streaming()) {
    if (t >= g_.capacity) fail("kv cache: token ", t, " is past the cache's ", g_.capacity, " tokens");
    return t;
  }
  if (t < g_.sinks) return t;
  return g_.sinks + (t - g_.sinks) % g_.window;
}

KvCache::Visible KvCache::visible(int64_t t) const {
  if (!g_.streaming()) return {0, 0, t + 1};
  const int64_t sinks = std::min(g_.sinks, t + 1);
  const int64_t first = std::max(g_.sinks, t - g_.window + 1);
  return {sinks, first, std::max<int64_t>(0, t - first + 1)};
}

}  // namespace gatedlm::infer
