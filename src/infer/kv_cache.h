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
#include <cstdint>
#include <vector>

#include "core/aligned_allocator.h"

namespace gatedlm::infer {

struct CacheGeometry {
  int64_t n_layers, n_kv, head_dim;
  int64_t slots;      // sequences held at once
  int64_t capacity;   // rows per slot: max tokens (full) or sinks + window (streaming)
  int64_t window = 0; // 0: full cache; > 0: streaming window of this many recent tokens
  int64_t sinks = 0;  // streaming only: tokens kept from the start
  int64_t row_width() const { return n_kv * head_dim; }
  bool streaming() const { return window > 0; }
};

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

  float* keys(int64_t layer, int64_t slot) { return k_.data() + offset(layer, slot); }
  float* values(int64_t layer, int64_t slot) { return v_.data() + offset(layer, slot); }
  const float* keys(int64_t layer, int64_t slot) const { return k_.data() + offset(layer, slot); }
  const float* values(int64_t layer, int64_t slot) const { return v_.data() + offset(layer, slot); }

 private:
  int64_t offset(int64_t layer, int64_t slot) const { return (layer * g_.slots + slot) * g_.capacity * g_.row_width(); }
  CacheGeometry g_;
  // [n_layers, slots, capacity, n_kv, head_dim]. On huge pages where the kernel grants them
  // (core/aligned_allocator.h): a decode task reads one kv head's head_dim floats of each
  // row, rows n_kv * head_dim floats apart (4 KiB at the 1B shape), so with 4 KiB pages every
  // position it reads is a page, and a TLB entry, of its own (1B Q4_K_M, batch 1, 1000-1900
  // tokens of context, Zen 5: decode faster in 12 of 14 alternated pairs, by 6 % at the
  // median; bench/RESULTS.md).
  std::vector<float, CacheLineAllocator<float>> k_, v_;
};

}  // namespace gatedlm::infer
