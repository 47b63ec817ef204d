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

namespace {

// Calls copy(in cache, in rows) with the offsets of the head_dim floats of each (row, kv
// head) of rows [first, first + count): in the cache's layout [n_kv, capacity, head_dim]
// and in a row-major block [count, n_kv, head_dim].
template <typename Copy>
void for_each_head_row(const CacheGeometry& g, int64_t first, int64_t count, Copy&& copy) {
  if (first < 0 || count < 0 || first + count > g.capacity)
    fail("kv cache: rows ", first, "..", first + count, " past the cache's ", g.capacity, " rows");
  const int64_t D = g.head_dim;
  for (int64_t h = 0; h < g.n_kv; ++h)
    for (int64_t j = 0; j < count; ++j) copy((h * g.capacity + first + j) * D, j * g.row_width() + h * D);
}

}  // namespace

void KvCache::write_rows(int64_t layer, int64_t slot, int64_t first, int64_t count, const float* k, const float* v) {
  float* kc = k_.data() + offset(layer, slot);
  float* vc = v_.data() + offset(layer, slot);
  const int64_t D = g_.head_dim;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    std::copy_n(k + in_rows, D, kc + in_cache);
    std::copy_n(v + in_rows, D, vc + in_cache);
  });
}

void KvCache::read_rows(int64_t layer, int64_t slot, int64_t first, int64_t count, float* k, float* v) const {
  const float* kc = keys(layer, slot);
  const float* vc = values(layer, slot);
  const int64_t D = g_.head_dim;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    std::copy_n(kc + in_cache, D, k + in_rows);
    std::copy_n(vc + in_cache, D, v + in_rows);
  });
}

kernels::KvSpan<float> KvCache::span(int64_t layer, int64_t slot, int64_t first, int64_t len) const {
  const int64_t at = first * g_.head_dim;
  return {keys(layer, slot) + at, values(layer, slot) + at, len, layout(), layout()};
}

KvCache::Visible KvCache::visible(int64_t t) const {
  if (!g_.streaming()) return {0, 0, t + 1};
  const int64_t sinks = std::min(g_.sinks, t + 1);
  const int64_t first = std::max(g_.sinks, t - g_.window + 1);
  return {sinks, first, std::max<int64_t>(0, t - first + 1)};
}

}  // namespace gatedlm::infer
