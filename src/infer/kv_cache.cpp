#include "infer/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <new>
#include <type_traits>
#include <utility>

#include "core/error.h"

namespace gatedlm::infer {

KvCache::KvCache(const CacheGeometry& g) : g_(g) {
  if (g.slots < 1 || g.capacity < 1) fail("kv cache: needs at least one slot and one row");
  if (g.streaming() && g.capacity != g.sinks + g.window)
    fail("kv cache: a streaming cache holds sinks + window rows");
  using kernels::ElementType;
  if (std::find(std::begin(kKvCacheTypes), std::end(kKvCacheTypes), g.type) == std::end(kKvCacheTypes))
    fail("kv cache: rows are kept in f32, f16 or q8_0, not ", kernels::element_name(g.type));
  if (g.type == ElementType::q8_0 && g.head_dim % kernels::kQuantBlockValues != 0)
    fail("kv cache: q8_0 rows need head_dim a multiple of ", kernels::kQuantBlockValues, "; this model's is ",
         g.head_dim, " (take --kv-type f16 or f32)");
  // K and V are filled at once, so a cache larger than the machine's memory cannot be had:
  // refused as an allocation that failed (in doubles: the product can pass int64), before
  // asking the allocator (which, under a sanitizer, aborts on sizes past its limit).
  const double bytes = 2.0 * static_cast<double>(g.head_row_bytes()) * static_cast<double>(g.n_layers) *
                       static_cast<double>(g.slots) * static_cast<double>(g.capacity) * static_cast<double>(g.n_kv);
  if (bytes > static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)))
    throw std::bad_alloc();
  const size_t size = static_cast<size_t>(g.n_layers * g.slots * g.n_kv * g.capacity * g.head_row_bytes());
  k_.assign(size, std::byte{0});
  v_.assign(size, std::byte{0});
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

// Calls copy(in cache, in rows) with the indices of the head rows (head_dim values each) of
// rows [first, first + count) of a slot: in the cache's layout [n_kv, capacity], from the
// slot's first head row, and in a row-major block [count, n_kv].
template <typename Copy>
void for_each_head_row(const CacheGeometry& g, int64_t first, int64_t count, Copy&& copy) {
  if (first < 0 || count < 0 || first + count > g.capacity)
    fail("kv cache: rows ", first, "..", first + count, " past the cache's ", g.capacity, " rows");
  for (int64_t h = 0; h < g.n_kv; ++h)
    for (int64_t j = 0; j < count; ++j) copy(h * g.capacity + first + j, j * g.n_kv + h);
}

}  // namespace

void KvCache::write_rows(int64_t layer, int64_t slot, int64_t first, int64_t count, const float* k, const float* v) {
  const int64_t D = g_.head_dim, bytes = g_.head_row_bytes();
  std::byte *ks = k_.data() + first_head_row(layer, slot) * bytes, *vs = v_.data() + first_head_row(layer, slot) * bytes;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    kernels::element_from_f32(g_.type, ks + in_cache * bytes, k + in_rows * D, D);
    kernels::element_from_f32(g_.type, vs + in_cache * bytes, v + in_rows * D, D);
  });
}

void KvCache::read_rows(int64_t layer, int64_t slot, int64_t first, int64_t count, float* k, float* v) const {
  const int64_t D = g_.head_dim, bytes = g_.head_row_bytes();
  const std::byte *ks = k_.data() + first_head_row(layer, slot) * bytes,
                  *vs = v_.data() + first_head_row(layer, slot) * bytes;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    kernels::element_to_f32(g_.type, k + in_rows * D, ks + in_cache * bytes, D);
    if (v) kernels::element_to_f32(g_.type, v + in_rows * D, vs + in_cache * bytes, D);
  });
}

void KvCache::copy_rows_out(int64_t layer, int64_t slot, int64_t first, int64_t count, std::byte* k,
                            std::byte* v) const {
  const int64_t bytes = g_.head_row_bytes();
  const std::byte *ks = k_.data() + first_head_row(layer, slot) * bytes,
                  *vs = v_.data() + first_head_row(layer, slot) * bytes;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    std::memcpy(k + in_rows * bytes, ks + in_cache * bytes, static_cast<size_t>(bytes));
    std::memcpy(v + in_rows * bytes, vs + in_cache * bytes, static_cast<size_t>(bytes));
  });
}

void KvCache::copy_rows_in(int64_t layer, int64_t slot, int64_t first, int64_t count, const std::byte* k,
                           const std::byte* v) {
  const int64_t bytes = g_.head_row_bytes();
  std::byte *ks = k_.data() + first_head_row(layer, slot) * bytes, *vs = v_.data() + first_head_row(layer, slot) * bytes;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    std::memcpy(ks + in_cache * bytes, k + in_rows * bytes, static_cast<size_t>(bytes));
    std::memcpy(vs + in_cache * bytes, v + in_rows * bytes, static_cast<size_t>(bytes));
  });
}

template <typename S>
kernels::KvSpan<S> KvCache::span(int64_t layer, int64_t slot, int64_t first, int64_t len) const {
  if (kv_row_type<S> != g_.type)
    fail("kv cache: rows of ", kernels::element_name(g_.type), " read as ", kernels::element_name(kv_row_type<S>));
  const int64_t units = g_.head_row_bytes() / static_cast<int64_t>(sizeof(S));  // of S in a head row
  const int64_t at = (first_head_row(layer, slot) + first) * units;
  const kernels::KvLayout layout{units, g_.capacity * units};
  return {reinterpret_cast<const S*>(k_.data()) + at, reinterpret_cast<const S*>(v_.data()) + at, len, layout, layout};
}
template kernels::KvSpan<float> KvCache::span<float>(int64_t, int64_t, int64_t, int64_t) const;
template kernels::KvSpan<uint16_t> KvCache::span<uint16_t>(int64_t, int64_t, int64_t, int64_t) const;
template kernels::KvSpan<kernels::BlockQ8_0> KvCache::span<kernels::BlockQ8_0>(int64_t, int64_t, int64_t,
                                                                               int64_t) const;

KvCache::Visible KvCache::visible(int64_t t) const {
  if (!g_.streaming()) return {0, 0, t + 1};
  const int64_t sinks = std::min(g_.sinks, t + 1);
  const int64_t first = std::max(g_.sinks, t - g_.window + 1);
  return {sinks, first, std::max<int64_t>(0, t - first + 1)};
}

}  // namespace gatedlm::infer
