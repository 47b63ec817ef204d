#include "infer/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "kernels/half_float.h"

namespace gatedlm::infer {

KvCache::KvCache(const CacheGeometry& g) : g_(g) {
  if (g.slots < 1 || g.capacity < 1) fail("kv cache: needs at least one slot and one row");
  if (g.streaming() && g.capacity != g.sinks + g.window)
    fail("kv cache: a streaming cache holds sinks + window rows");
  if (g.type != kernels::ElementType::f32 && g.type != kernels::ElementType::f16)
    fail("kv cache: rows are kept in f32 or f16, not ", kernels::element_name(g.type));
  // K and V are filled at once, so a cache larger than the machine's memory cannot be had:
  // refused as an allocation that failed (in doubles: the product can pass int64), before
  // asking the allocator (which, under a sanitizer, aborts on sizes past its limit).
  const double bytes = 2.0 * static_cast<double>(element_bytes()) * static_cast<double>(g.n_layers) * static_cast<double>(g.slots) *
                       static_cast<double>(g.capacity) * static_cast<double>(g.row_width());
  if (bytes > static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)))
    throw std::bad_alloc();
  const size_t size = static_cast<size_t>(g.n_layers * g.slots * g.capacity * g.row_width());
  if (g.type == kernels::ElementType::f16) {
    k16_.assign(size, 0);
    v16_.assign(size, 0);
  } else {
    k_.assign(size, 0.0f);
    v_.assign(size, 0.0f);
  }
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
  const int64_t at = offset(layer, slot), D = g_.head_dim;
  const bool half = g_.type == kernels::ElementType::f16;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    if (half) {
      kernels::to_f16(k16_.data() + at + in_cache, k + in_rows, D);
      kernels::to_f16(v16_.data() + at + in_cache, v + in_rows, D);
    } else {
      std::copy_n(k + in_rows, D, k_.data() + at + in_cache);
      std::copy_n(v + in_rows, D, v_.data() + at + in_cache);
    }
  });
}

void KvCache::read_rows(int64_t layer, int64_t slot, int64_t first, int64_t count, float* k, float* v) const {
  const int64_t at = offset(layer, slot), D = g_.head_dim;
  const bool half = g_.type == kernels::ElementType::f16;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    if (half) {
      kernels::from_f16(k + in_rows, k16_.data() + at + in_cache, D);
      if (v) kernels::from_f16(v + in_rows, v16_.data() + at + in_cache, D);
    } else {
      std::copy_n(k_.data() + at + in_cache, D, k + in_rows);
      if (v) std::copy_n(v_.data() + at + in_cache, D, v + in_rows);
    }
  });
}

const std::byte* KvCache::stored(bool values) const {
  if (g_.type == kernels::ElementType::f16) return reinterpret_cast<const std::byte*>(values ? v16_.data() : k16_.data());
  return reinterpret_cast<const std::byte*>(values ? v_.data() : k_.data());
}

std::byte* KvCache::stored(bool values) { return const_cast<std::byte*>(std::as_const(*this).stored(values)); }

void KvCache::copy_rows_out(int64_t layer, int64_t slot, int64_t first, int64_t count, std::byte* k,
                            std::byte* v) const {
  const int64_t e = element_bytes(), at = offset(layer, slot) * e;
  const size_t bytes = static_cast<size_t>(g_.head_dim * e);
  const std::byte *ks = stored(false) + at, *vs = stored(true) + at;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    std::memcpy(k + in_rows * e, ks + in_cache * e, bytes);
    std::memcpy(v + in_rows * e, vs + in_cache * e, bytes);
  });
}

void KvCache::copy_rows_in(int64_t layer, int64_t slot, int64_t first, int64_t count, const std::byte* k,
                           const std::byte* v) {
  const int64_t e = element_bytes(), at = offset(layer, slot) * e;
  const size_t bytes = static_cast<size_t>(g_.head_dim * e);
  std::byte *ks = stored(false) + at, *vs = stored(true) + at;
  for_each_head_row(g_, first, count, [&](int64_t in_cache, int64_t in_rows) {
    std::memcpy(ks + in_cache * e, k + in_rows * e, bytes);
    std::memcpy(vs + in_cache * e, v + in_rows * e, bytes);
  });
}

template <typename S>
kernels::KvSpan<S> KvCache::span(int64_t layer, int64_t slot, int64_t first, int64_t len) const {
  const bool half = std::is_same_v<S, uint16_t>;
  if (half != (g_.type == kernels::ElementType::f16))
    fail("kv cache: rows of ", kernels::element_name(g_.type), " read as ", half ? "f16" : "f32");
  const int64_t at = offset(layer, slot) + first * g_.head_dim;
  if constexpr (std::is_same_v<S, uint16_t>)
    return {k16_.data() + at, v16_.data() + at, len, layout(), layout()};
  else
    return {k_.data() + at, v_.data() + at, len, layout(), layout()};
}
template kernels::KvSpan<float> KvCache::span<float>(int64_t, int64_t, int64_t, int64_t) const;
template kernels::KvSpan<uint16_t> KvCache::span<uint16_t>(int64_t, int64_t, int64_t, int64_t) const;

KvCache::Visible KvCache::visible(int64_t t) const {
  if (!g_.streaming()) return {0, 0, t + 1};
  const int64_t sinks = std::min(g_.sinks, t + 1);
  const int64_t first = std::max(g_.sinks, t - g_.window + 1);
  return {sinks, first, std::max<int64_t>(0, t - first + 1)};
}

}  // namespace gatedlm::infer
