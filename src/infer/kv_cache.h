#pragma once
// The KV cache of the incremental path: per sequence slot and per layer, the keys (after
// QK-norm and RoPE) and values of the tokens seen so far (how many: the decoder's count).
//
// Full cache: token t sits in row t (capacity rows in all), with RoPE at position t.
// Streaming window (StreamingLLM): the first `sinks` tokens stay in rows [0, sinks)
// forever and the last `window` tokens rotate through rows [sinks, sinks + window). Keys
// are stored with RoPE at their position in the text; attention sees positions inside
// the cache (sinks 0..K-1, window K..), which differ from the text's only for the sink
// rows, since the window is contiguous and ends at the query. The decoder re-rotates the
// K sink keys at each step by the difference (see decoder.cpp).
//
// Element type: f32, f16 (--kv-type f16) or q8_0 (--kv-type q8_0): each kv head's row of
// head_dim values is rounded as it is written, to IEEE binary16 (half the memory and half
// the bytes each decode step reads) or to Q8_0 blocks of 32 (34 bytes per 32 values, 0.27
// of f32; head_dim a multiple of 32), by element_types.h's conversions (Q8_0: ggml's
// reference quantiser, which llama.cpp's q8_0 cache also uses). Attention widens the rows
// back to fp32 as it loads them (kernels/attention_decode.h) and computes in fp32.
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/aligned_allocator.h"
#include "kernels/attention_decode.h"
#include "kernels/element_types.h"

namespace gatedlm::infer {

struct CacheGeometry {
  int64_t n_layers, n_kv, head_dim;
  int64_t slots;      // sequences held at once
  int64_t capacity;   // rows per slot: max tokens (full) or sinks + window (streaming)
  int64_t window = 0; // 0: full cache; > 0: streaming window of this many recent tokens
  int64_t sinks = 0;  // streaming only: tokens kept from the start
  kernels::ElementType type = kernels::ElementType::f32;  // of the stored rows: f32, f16 or q8_0
  int64_t row_width() const { return n_kv * head_dim; }
  // Bytes of one kv head's stored row of head_dim values.
  int64_t head_row_bytes() const { return kernels::element_row_bytes(type, head_dim); }
  // Bytes of one token's stored keys (or values) over the kv heads, one layer.
  int64_t token_bytes() const { return n_kv * head_row_bytes(); }
  bool streaming() const { return window > 0; }
};

// The types a KV cache keeps its rows in (--kv-type, Python's kv_type=).
inline constexpr kernels::ElementType kKvCacheTypes[] = {kernels::ElementType::f32, kernels::ElementType::f16,
                                                        kernels::ElementType::q8_0};

// The cache type whose rows attention_decode reads as S (kernels/attention_decode.h).
template <typename S>
constexpr kernels::ElementType kv_row_type = std::is_same_v<S, kernels::BlockQ8_0> ? kernels::ElementType::q8_0
                                             : std::is_same_v<S, uint16_t>         ? kernels::ElementType::f16
                                                                                   : kernels::ElementType::f32;

class KvCache {
 public:
  explicit KvCache(const CacheGeometry& g);
  const CacheGeometry& geometry() const { return g_; }

  // The row where token t of a slot is stored.
  int64_t row_of(int64_t t) const;
  // Rows [first, first + count) of the window that token t's query sees, besides the sinks:
  // tokens max(sinks, t - window + 1) .. t. In a full cache, all of 0..t (no sinks).
  struct Visible {
    int64_t sinks;        // sink rows 0..sinks-1 (streaming only)
    int64_t first_token;  // first non-sink token visible
    int64_t tokens;       // count of non-sink tokens visible (ending at t)
  };
  Visible visible(int64_t t) const;

  // Rows [first, first + count) of a slot's keys and values, each row [n_kv, head_dim] and
  // rows row_width() apart in k and v: written into the cache (rounded to its type), or read
  // out of it (as fp32; v may be null to read the keys alone).
  void write_rows(int64_t layer, int64_t slot, int64_t first, int64_t count, const float* k, const float* v);
  void read_rows(int64_t layer, int64_t slot, int64_t first, int64_t count, float* k, float* v) const;
  // The same rows as stored (token_bytes() each row: f32, F16 bits or Q8_0 blocks, [n_kv]
  // head rows), copied out of the cache or back into it unconverted: what the prefix cache
  // keeps (prefix_cache.h).
  void copy_rows_out(int64_t layer, int64_t slot, int64_t first, int64_t count, std::byte* k, std::byte* v) const;
  void copy_rows_in(int64_t layer, int64_t slot, int64_t first, int64_t count, const std::byte* k,
                    const std::byte* v);
  // Rows [first, first + len) of a slot as attention_decode reads them: S is float in an f32
  // cache, uint16_t (F16 bits) in an f16 one, BlockQ8_0 in a q8_0 one (a mismatch fails);
  // pointers and layout count in units of S (for Q8_0, blocks).
  template <typename S>
  kernels::KvSpan<S> span(int64_t layer, int64_t slot, int64_t first, int64_t len) const;

 private:
  // The index of the first head row of (layer, slot): [n_layers, slots, n_kv, capacity].
  int64_t first_head_row(int64_t layer, int64_t slot) const { return (layer * g_.slots + slot) * g_.n_kv * g_.capacity; }
  CacheGeometry g_;
  // [n_layers, slots, n_kv, capacity, head_dim]: each kv head's rows together, as a decode
  // task reads them (one task per query and kv head, kernels/attention_decode.h). In the
  // rows' own order [capacity, n_kv, head_dim] a task read head_dim floats of every row, rows
  // 4 KiB apart at the 1B shape, each position a page of its own; head-major it reads one
  // block front to back: its reads 0-13 % faster at 1900 rows, decode level (Zen 5,
  // bench/RESULTS.md). On huge pages where the kernel grants them (core/aligned_allocator.h):
  // in the row-major order they made decode at 1000-1900 tokens of context 6 % faster (1B
  // Q4_K_M, batch 1, Zen 5).
  // head_row_bytes() per head row, of the geometry's type.
  std::vector<std::byte, CacheLineAllocator<std::byte>> k_, v_;
};

}  // namespace gatedlm::infer
