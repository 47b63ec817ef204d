#include "infer/decoder.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/attention_sinks.h"
#include "kernels/element_types.h"
#include "model/layer_kinds.h"
#include "model/rope_scaling.h"

namespace gatedlm::infer {

namespace {

// out = in rounded to `type` and widened back, the values a cache of that type's rows read
// back as (KvCache::write_rows and read_rows convert with the same functions); n a whole
// number of the type's blocks, and pieces of 1024 values keep Q8_0's blocks whole.
void round_through(kernels::ElementType type, float* out, const float* in, int64_t n) {
  alignas(64) std::byte stored[1024 * sizeof(float)];
  for (int64_t i = 0; i < n; i += 1024) {
    const int64_t m = std::min<int64_t>(1024, n - i);
    kernels::element_from_f32(type, stored, in + i, m);
    kernels::element_to_f32(type, out + i, stored, m);
  }
}

CacheGeometry geometry_of(const model::ModelConfig& c, const DecoderOptions& o) {
  if (o.slots < 1) fail("decoder: slots must be at least 1");
  if (o.window < 0 || o.sinks < 0) fail("decoder: window and sinks must not be negative");
  if (o.window == 0 && o.sinks > 0) fail("decoder: --sinks needs --window");
  // n_layers: counted by Decoder::make_caches.
  CacheGeometry g{0, c.n_kv_heads, c.head_dim, o.slots, 0, o.window, o.sinks, o.kv_type};
  g.capacity = o.window > 0 ? o.sinks + o.window : (o.capacity > 0 ? o.capacity : c.max_seq_len);
  if (g.capacity < 1) fail("decoder: the cache needs a capacity (the model's max_seq_len is 0)");
  return g;
}

}  // namespace

Decoder::Decoder(model::Model<float>& model, const DecoderOptions& options)
    : model_(model),
      recurrent_(model.config(), options.slots),
      use_packed_(options.packed_weights),
      packed_(model.params()) {
  make_caches(options);
  length_.assign(options.slots, 0);
}

// Asks each layer's kind what it keeps: KV rows (in the cache of its window) or not.
void Decoder::make_caches(const DecoderOptions& options) {
  const model::ModelConfig& c = model_.config();
  std::vector<CacheGeometry> geometries{geometry_of(c, options)};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (model::layer_spec(c, l).decode_state != model::DecodeStateKind::kv_cache) {
      cache_layer_.push_back({-1, -1});
      continue;
    }
    const int64_t window = model::kv_window(c, l);
    size_t group = 0;
    while (window > 0 && group < geometries.size() && (group == 0 || geometries[group].window != window)) ++group;
    if (group == geometries.size())  // the first layer of this window: its cache keeps window rows
      geometries.push_back(
          CacheGeometry{0, c.n_kv_heads, c.head_dim, options.slots, window, window, 0, options.kv_type});
    cache_layer_.push_back({static_cast<int64_t>(group), geometries[group].n_layers++});
  }
  for (const CacheGeometry& g : geometries) caches_.emplace_back(g);
}

int64_t Decoder::state_bytes_per_sequence(int64_t tokens) const {
  int64_t bytes = static_cast<int64_t>(sizeof(float)) * recurrent_.floats_per_slot();
  for (const KvCache& cache : caches_) {
    const CacheGeometry& g = cache.geometry();
    const int64_t rows = g.streaming() ? std::min(tokens, g.capacity) : tokens;
    bytes += 2 * g.n_layers * rows * g.token_bytes();
  }
  return bytes;
}

const float* Decoder::step(std::span<const Chunk> chunks, bool all_rows) {
  if (chunks.empty()) fail("decoder: a step with no tokens");
  row_slot_.clear();
  row_pos_.clear();
  chunk_first_.clear();
  chunk_len_.clear();
  chunk_slot_.clear();
  std::vector<int32_t> tokens;
  std::vector<int64_t> logit_rows;
  std::vector<bool> seen(slots(), false);
  for (const Chunk& ch : chunks) {
    if (ch.slot < 0 || ch.slot >= slots()) fail("decoder: no slot ", ch.slot);
    if (seen[ch.slot]) fail("decoder: slot ", ch.slot, " twice in one step");
    seen[ch.slot] = true;
    const int64_t len = static_cast<int64_t>(ch.tokens.size()), start = length_[ch.slot];
    if (len < 1) fail("decoder: an empty chunk");
    if (start + len > capacity())
      fail("decoder: ", start + len, " tokens do not fit the cache's ", capacity(), " per sequence");
    chunk_first_.push_back(static_cast<int64_t>(tokens.size()));
    chunk_len_.push_back(len);
    chunk_slot_.push_back(ch.slot);
    for (int64_t i = 0; i < len; ++i) {
      if (all_rows) logit_rows.push_back(static_cast<int64_t>(tokens.size()));
      tokens.push_back(ch.tokens[i]);
      row_slot_.push_back(ch.slot);
      row_pos_.push_back(static_cast<int32_t>(start + i));
    }
    if (!all_rows) logit_rows.push_back(static_cast<int64_t>(tokens.size()) - 1);
  }
  // A decode step of many sequences (not a prompt: prompts have enough rows for oneDNN's
  // own re-layout to pay, and would pack the weights for every short generation).
  const int64_t rows = static_cast<int64_t>(tokens.size());
  const bool decode_batch = rows == static_cast<int64_t>(chunks.size()) && rows > kernels::kSkinnyRows;
  kernels::PackedWeightsScope packed(use_packed_ && decode_batch ? &packed_ : nullptr);
  model_.forward_tokens(
      tokens.data(), row_pos_.data(), static_cast<int64_t>(tokens.size()),
      [this](const model::AttentionCall<float>& call) { attend(call); }, logit_rows,
      [this](int64_t layer, int64_t row) { return recurrent_.of(layer, row_slot_[row]); });
  for (size_t c = 0; c < chunks.size(); ++c) length_[chunk_slot_[c]] += chunk_len_[c];
  return model_.logits();
}

// One block's attention for the step's rows: store each row's key and value in its
// slot's cache, then attend. Prompts that start an empty slot and fit the cache take the
// fused kernel; the other rows go in waves (the i-th row of every chunk), since in a
// streaming window a later row may overwrite a row an earlier one reads.
void Decoder::attend(const model::AttentionCall<float>& call) {
  const int64_t l = cache_layer_[call.layer].second;
  KvCache& cache = caches_[cache_layer_[call.layer].first];
  const CacheGeometry& g = cache.geometry();
  std::vector<size_t> waved;  // chunks that take the decode kernel
  int64_t waves = 0;
  for (size_t ch = 0; ch < chunk_first_.size(); ++ch) {
    const int64_t first = chunk_first_[ch], len = chunk_len_[ch], slot = chunk_slot_[ch];
    if (len > 1 && (row_pos_[first] == 0 ? len <= g.capacity : !g.streaming())) {
      const int64_t kvd = g.row_width();
      for (int64_t r = first; r < first + len; ++r)
        cache.write_rows(l, slot, cache.row_of(row_pos_[r]), 1, call.k + r * kvd, call.v + r * kvd);
      fused_rows(call, cache, l, slot, first, len);
    } else {
      waved.push_back(ch);
      waves = std::max(waves, len);
    }
  }
  if (g.type == kernels::ElementType::f16)
    decode_waves<uint16_t>(call, cache, l, waved, waves);
  else if (g.type == kernels::ElementType::q8_0)
    decode_waves<kernels::BlockQ8_0>(call, cache, l, waved, waves);
  else
    decode_waves<float>(call, cache, l, waved, waves);
}

template <typename S>
void Decoder::decode_waves(const model::AttentionCall<float>& call, KvCache& cache, int64_t l,
                           std::span<const size_t> waved, int64_t waves) {
  const model::ModelConfig& c = model_.config();
  const CacheGeometry& g = cache.geometry();
  const int64_t kvd = g.row_width(), qd = c.q_dim(), D = c.head_dim;
  const bool softpick = c.attention_normalizer == model::AttentionNormalizer::softpick;
  const kernels::DecodeShape ds{c.n_heads, c.n_kv_heads, D, 1.0 / std::sqrt(static_cast<double>(D)), softpick};
  std::vector<kernels::DecodeQuery<float, S>> queries;
  // Moved sink keys, a part per waved chunk (sized before any query points into them).
  sink_keys_.resize(waved.size() * g.sinks * kvd);
  if (!std::is_same_v<S, float>) sink_keys_stored_.resize(waved.size() * g.sinks * g.token_bytes());
  for (int64_t i = 0; i < waves; ++i) {
    queries.clear();
    for (size_t w = 0; w < waved.size(); ++w) {
      const size_t ch = waved[w];
      if (i >= chunk_len_[ch]) continue;
      const int64_t row = chunk_first_[ch] + i, slot = chunk_slot_[ch], t = row_pos_[row];
      cache.write_rows(l, slot, cache.row_of(t), 1, call.k + row * kvd, call.v + row * kvd);
      const KvCache::Visible vis = cache.visible(t);
      kernels::DecodeQuery<float, S> q{call.q + row * qd, call.out + row * qd,
                                       call.gate_score ? call.gate_score + row * qd : nullptr,
                                       call.gated_out ? call.gated_out + row * qd : nullptr, {}, call.sinks};
      if (!g.streaming()) {
        q.spans.push_back(cache.span<S>(l, slot, 0, t + 1));
      } else {
        // The text-to-cache position shift of this query: first visible window token
        // minus its cache position (the window rows need none: relative positions
        // inside the window are the text's).
        const int64_t shift = vis.first_token - g.sinks;
        if (vis.sinks > 0 && shift > 0 && c.rope_dims > 0)
          q.spans.push_back(moved_sinks<S>(cache, l, slot, vis.sinks, shift, w));
        else if (vis.sinks > 0)
          q.spans.push_back(cache.span<S>(l, slot, 0, vis.sinks));
        // Visible window tokens fill the ring from its start until it wraps, then all of it.
        if (vis.tokens > 0) q.spans.push_back(cache.span<S>(l, slot, g.sinks, vis.tokens));
      }
      queries.push_back(std::move(q));
    }
    kernels::attention_decode<float, S>(queries, ds);
  }
}

// Sink keys moved to the query's cache position, row-major [sinks, n_kv, D] in part w of
// sink_keys_ (each part g.sinks rows, sized by decode_waves); the values stay in the cache.
// In an f16 or q8_0 cache the moved keys are rounded back to the cache's type (in part w of
// sink_keys_stored_), so that a query's spans are of one type.
template <typename S>
kernels::KvSpan<S> Decoder::moved_sinks(const KvCache& cache, int64_t l, int64_t slot, int64_t sinks, int64_t shift,
                                        size_t w) {
  const model::ModelConfig& c = model_.config();
  const CacheGeometry& g = cache.geometry();
  const int64_t kvd = g.row_width(), part = g.sinks * kvd;
  float* moved = sink_keys_.data() + w * part;
  cache.read_rows(l, slot, 0, sinks, moved, nullptr);
  if (sink_rope_.positions <= shift)
    sink_rope_ = model::model_rope_table(c, std::max<int64_t>(2 * shift + 1, 1024), /*unit_magnitude=*/true);
  // Every sink row of every kv head rotated on by `shift` positions: as rope_apply sees
  // them, a batch of sinks * n_kv sequences of one token of one head.
  kernels::rope_apply(moved, sink_rope_, sinks * g.n_kv, 1, 1, g.head_dim, shift, false);
  kernels::KvSpan<S> span = cache.span<S>(l, slot, 0, sinks);
  const int64_t units = span.k_layout.row_stride;  // of S in a head row
  span.k_layout = {g.n_kv * units, units};  // row-major [sinks, n_kv, D]
  if constexpr (std::is_same_v<S, float>) {
    span.k = moved;
  } else {
    std::byte* rounded = sink_keys_stored_.data() + w * g.sinks * g.token_bytes();
    kernels::element_from_f32(g.type, rounded, moved, sinks * kvd);
    span.k = reinterpret_cast<const S*>(rounded);
  }
  return span;
}

// The fused kernel for rows [first, first + len) of the step, one chunk of `slot` whose
// keys and values are stored. A chunk that continues its slot (positions pos.. > 0) runs it
// over all rows [0, pos + len) of the slot with zero queries before pos, outputs discarded:
// the kernel's row t depends on its query and keys 0..t alone, in blocks fixed from row 0,
// so the rows get the bits of the whole prompt run in one go (what prefix reuse needs,
// prefix_cache.h), at the price of attention for the earlier rows. The kernel reads keys
// and values row-major [end, n_kv, head_dim]: the step's own rows when the chunk starts its
// slot, else all the slot's rows read out of the cache. An f16 cache's rows are always
// read back (rounded as stored), so that a prompt run in one go and the same prompt
// continued after a restored prefix see the same values. (The same holds for a q8_0 cache.)
void Decoder::fused_rows(const model::AttentionCall<float>& call, const KvCache& cache, int64_t l, int64_t slot,
                         int64_t first, int64_t len) {
  const model::ModelConfig& c = model_.config();
  const int64_t qd = c.q_dim(), kvd = cache.geometry().row_width(), pos = row_pos_[first], end = pos + len;
  const float* k = call.k + first * kvd;
  const float* v = call.v + first * kvd;
  if (pos > 0 || cache.geometry().type != kernels::ElementType::f32) {  // kv_pad_: [2 (K, V), end, kvd]
    kv_pad_.resize(static_cast<size_t>(2 * end * kvd));
    if (pos > 0) {
      cache.read_rows(l, slot, 0, end, kv_pad_.data(), kv_pad_.data() + end * kvd);
    } else {  // the step's own rows as the cache holds them: the same bits, no gather
      round_through(cache.geometry().type, kv_pad_.data(), k, end * kvd);
      round_through(cache.geometry().type, kv_pad_.data() + end * kvd, v, end * kvd);
    }
    k = kv_pad_.data();
    v = kv_pad_.data() + end * kvd;
  }
  const float* q = call.q + first * qd;
  float* out = call.out + first * qd;
  const float* gate = call.gate_score ? call.gate_score + first * qd : nullptr;
  float* gated = call.gated_out ? call.gated_out + first * qd : nullptr;
  if (pos > 0) {  // pad_: [4 (queries, outputs, gate scores, gated outputs), end, qd]
    pad_.assign(static_cast<size_t>((gate ? 4 : 2) * end * qd), 0.0f);
    float* pq = pad_.data();
    std::copy_n(q, len * qd, pq + pos * qd);
    q = pq;
    out = pq + end * qd;
    if (gate) {
      std::copy_n(gate, len * qd, pq + (2 * end + pos) * qd);
      gate = pq + 2 * end * qd;
      gated = gated ? pq + 3 * end * qd : nullptr;
    }
  }
  const bool softpick = c.attention_normalizer == model::AttentionNormalizer::softpick;
  const kernels::AttentionShape as{1, end, c.n_heads, c.n_kv_heads, c.head_dim,
                                   1.0 / std::sqrt(static_cast<double>(c.head_dim)), 0, softpick};
  lse_.resize(static_cast<size_t>(end * c.n_heads));
  kernels::attention_forward(out, lse_.data(), q, k, v, as, gate, gated);
  if (call.sinks) kernels::attention_sinks_forward(out, gated, lse_.data(), call.sinks, as);
  if (pos > 0) {
    std::copy_n(out + pos * qd, len * qd, call.out + first * qd);
    if (gated) std::copy_n(gated + pos * qd, len * qd, call.gated_out + first * qd);
  }
}

std::string Decoder::prefix_reuse_refusal() const {
  if (cache().geometry().streaming()) return "a streaming window (--window) keeps no rows to restore";
  if (caches_.size() > 1) return "sliding-window layers keep a ring of rows that is not saved";
  return "";
}

int64_t Decoder::kv_bytes_per_token() const {
  const CacheGeometry& g = cache().geometry();
  return 2 * g.n_layers * g.token_bytes();
}

std::vector<std::byte> Decoder::save_rows(int64_t slot, int64_t tokens) const {
  const KvCache& kv = cache();
  const int64_t block = tokens * kv.geometry().token_bytes();  // one layer's K (or V)
  if (tokens > length_[slot]) fail("decoder: slot ", slot, " holds ", length_[slot], " tokens, not ", tokens);
  std::vector<std::byte> out(static_cast<size_t>(kv_bytes_per_token() * tokens));
  for (int64_t l = 0; l < kv.geometry().n_layers; ++l)
    kv.copy_rows_out(l, slot, 0, tokens, out.data() + 2 * l * block, out.data() + (2 * l + 1) * block);
  return out;
}

std::vector<float> Decoder::save_recurrent(int64_t slot) const {
  std::vector<float> out(static_cast<size_t>(recurrent_floats()));
  recurrent_.save(slot, out.data());
  return out;
}

void Decoder::restore(int64_t slot, int64_t tokens, const std::byte* kv, int64_t kv_rows, const float* snapshot) {
  KvCache& cache = caches_.front();
  const int64_t width = cache.geometry().token_bytes();  // bytes of a row
  if (!prefix_reuse_refusal().empty() || tokens > kv_rows || tokens >= capacity())
    fail("decoder: cannot restore ", tokens, " tokens into slot ", slot);
  for (int64_t l = 0; l < cache.geometry().n_layers; ++l)
    cache.copy_rows_in(l, slot, 0, tokens, kv + 2 * l * kv_rows * width, kv + (2 * l + 1) * kv_rows * width);
  if (recurrent_floats() > 0) recurrent_.load(slot, snapshot);
  length_[slot] = tokens;
}

}  // namespace gatedlm::infer
