#include "infer/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace gatedlm::infer {

KvCache::KvCache(const CacheGeometry& g) : g_(g) {
  if (g.slots < 1 || g.capacity < 1) fail("kv cache: needs at least one slot and one row");
  if (g.streaming() && g.capacity != g.sinks + g.window)
    fail("kv cache: a streaming cache holds sinks + window rows");
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
