#include "infer/decoder.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/attention_sinks.h"
#include "model/layer_kinds.h"
#include "model/rope_scaling.h"

namespace gatedlm::infer {

namespace {

CacheGeometry geometry_of(const model::ModelConfig& c, const DecoderOptions& o) {
  if (o.slots < 1) fail("decoder: slots must be at least 1");
  if (o.window < 0 || o.sinks < 0) fail("decoder: window and sinks must not be negative");
  if (o.window == 0 && o.sinks > 0) fail("decoder: --sinks needs --window");
  // n_layers: counted by Decoder::make_caches.
  CacheGeometry g{0, c.n_kv_heads, c.head_dim, o.slots, 0, o.window, o.sinks};
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
      geometries.push_back(CacheGeometry{0, c.n_kv_heads, c.head_dim, options.slots, window, window, 0});
    cache_layer_.push_back({static_cast<int64_t>(group), geometries[group].n_layers++});
  }
  for (const CacheGeometry& g : geometries) caches_.emplace_back(g);
}

int64_t Decoder::state_bytes_per_sequence(int64_t tokens) const {
  int64_t floats = recurrent_.floats_per_slot();
  for (const KvCache& cache : caches_) {
    const CacheGeometry& g = cache.geometry();
    const int64_t rows = g.streaming() ? std::min(tokens, g.capacity) : tokens;
    floats += 2 * g.n_layers * rows * g.row_width();
  }
  return static_cast<int64_t>(sizeof(float)) * floats;
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
  const model::ModelConfig& c = model_.config();
  // Plain names, not a structured binding: the lambdas below capture them (clang 14 cannot).
  const int64_t cache_index = cache_layer_[call.layer].first, l = cache_layer_[call.layer].second;
  KvCache& cache = caches_[cache_index];
  const CacheGeometry& g = cache.geometry();
  const int64_t kvd = g.row_width(), qd = c.q_dim(), D = c.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const bool softpick = c.attention_normalizer == model::AttentionNormalizer::softpick;
  auto store = [&](int64_t row) {
    const int64_t slot = row_slot_[row], dst = cache.row_of(row_pos_[row]);
    cache.write_rows(l, slot, dst, 1, call.k + row * kvd, call.v + row * kvd);
  };
  std::vector<size_t> waved;  // chunks that take the decode kernel
  int64_t waves = 0;
  for (size_t ch = 0; ch < chunk_first_.size(); ++ch) {
    const int64_t first = chunk_first_[ch], len = chunk_len_[ch], slot = chunk_slot_[ch];
    if (len > 1 && (row_pos_[first] == 0 ? len <= g.capacity : !g.streaming())) {
      for (int64_t r = first; r < first + len; ++r) store(r);
      fused_rows(call, cache, l, slot, first, len);
    } else {
      waved.push_back(ch);
      waves = std::max(waves, len);
    }
  }
  const kernels::DecodeShape ds{c.n_heads, c.n_kv_heads, D, scale, softpick};
  std::vector<kernels::DecodeQuery<float>> queries;
  for (int64_t i = 0; i < waves; ++i) {
    queries.clear();
    // Sink keys moved to the query's cache position: [rows of this wave, n_kv, sinks, D].
    sink_keys_.resize(static_cast<size_t>(waved.size() * g.sinks * kvd));
    for (size_t w = 0; w < waved.size(); ++w) {
      const size_t ch = waved[w];
      if (i >= chunk_len_[ch]) continue;
      const int64_t row = chunk_first_[ch] + i, slot = chunk_slot_[ch], t = row_pos_[row];
      store(row);
      const KvCache::Visible vis = cache.visible(t);
      kernels::DecodeQuery<float> q{call.q + row * qd, call.out + row * qd,
                                    call.gate_score ? call.gate_score + row * qd : nullptr,
                                    call.gated_out ? call.gated_out + row * qd : nullptr, {}, call.sinks};
      if (!g.streaming()) {
        q.spans.push_back(cache.span(l, slot, 0, t + 1));
      } else {
        // The text-to-cache position shift of this query: first visible window token
        // minus its cache position (the window rows need none: relative positions
        // inside the window are the text's).
        const int64_t shift = vis.first_token - g.sinks;
        if (vis.sinks > 0 && shift > 0 && c.rope_dims > 0) {
          kernels::KvSpan<float> sinks = cache.span(l, slot, 0, vis.sinks);
          float* moved = sink_keys_.data() + w * g.sinks * kvd;
          for (int64_t h = 0; h < g.n_kv; ++h)
            std::copy_n(sinks.k + h * cache.head_stride(), vis.sinks * D, moved + h * vis.sinks * D);
          if (sink_rope_.positions <= shift)
            sink_rope_ = model::model_rope_table(c, std::max<int64_t>(2 * shift + 1, 1024), /*unit_magnitude=*/true);
          // Every sink row of every kv head rotated on by `shift` positions: as rope_apply
          // sees them, a batch of n_kv * sinks sequences of one token of one head.
          kernels::rope_apply(moved, sink_rope_, g.n_kv * vis.sinks, 1, 1, D, shift, false);
          sinks.k = moved;
          sinks.k_layout = {D, vis.sinks * D};
          q.spans.push_back(sinks);
        } else if (vis.sinks > 0) {
          q.spans.push_back(cache.span(l, slot, 0, vis.sinks));
        }
        // Visible window tokens fill the ring from its start until it wraps, then all of it.
        if (vis.tokens > 0) q.spans.push_back(cache.span(l, slot, g.sinks, vis.tokens));
      }
      queries.push_back(std::move(q));
    }
    kernels::attention_decode<float>(queries, ds);
  }
}

// The fused kernel for rows [first, first + len) of the step, one chunk of `slot` whose
// keys and values are stored. A chunk that continues its slot (positions pos.. > 0) runs it
// over all rows [0, pos + len) of the slot with zero queries before pos, outputs discarded:
// the kernel's row t depends on its query and keys 0..t alone, in blocks fixed from row 0,
// so the rows get the bits of the whole prompt run in one go (what prefix reuse needs,
// prefix_cache.h), at the price of attention for the earlier rows. The kernel reads keys
// and values row-major [end, n_kv, head_dim]: the step's own rows when the chunk starts its
// slot, else all the slot's rows read out of the cache.
void Decoder::fused_rows(const model::AttentionCall<float>& call, const KvCache& cache, int64_t l, int64_t slot,
                         int64_t first, int64_t len) {
  const model::ModelConfig& c = model_.config();
  const int64_t qd = c.q_dim(), kvd = cache.geometry().row_width(), pos = row_pos_[first], end = pos + len;
  const float* k = call.k + first * kvd;
  const float* v = call.v + first * kvd;
  if (pos > 0) {  // kv_pad_: [2 (keys, values), end, kvd]
    kv_pad_.resize(static_cast<size_t>(2 * end * kvd));
    cache.read_rows(l, slot, 0, end, kv_pad_.data(), kv_pad_.data() + end * kvd);
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

int64_t Decoder::kv_floats_per_token() const {
  const CacheGeometry& g = cache().geometry();
  return 2 * g.n_layers * g.row_width();
}

std::vector<float> Decoder::save_rows(int64_t slot, int64_t tokens) const {
  const KvCache& kv = cache();
  const int64_t block = tokens * kv.geometry().row_width();
  if (tokens > length_[slot]) fail("decoder: slot ", slot, " holds ", length_[slot], " tokens, not ", tokens);
  std::vector<float> out(static_cast<size_t>(kv_floats_per_token() * tokens));
  for (int64_t l = 0; l < kv.geometry().n_layers; ++l)
    kv.read_rows(l, slot, 0, tokens, out.data() + 2 * l * block, out.data() + (2 * l + 1) * block);
  return out;
}

std::vector<float> Decoder::save_recurrent(int64_t slot) const {
  std::vector<float> out(static_cast<size_t>(recurrent_floats()));
  recurrent_.save(slot, out.data());
  return out;
}

void Decoder::restore(int64_t slot, int64_t tokens, const float* kv, int64_t kv_rows, const float* snapshot) {
  KvCache& cache = caches_.front();
  const int64_t width = cache.geometry().row_width();
  if (!prefix_reuse_refusal().empty() || tokens > kv_rows || tokens >= capacity())
    fail("decoder: cannot restore ", tokens, " tokens into slot ", slot);
  for (int64_t l = 0; l < cache.geometry().n_layers; ++l)
    cache.write_rows(l, slot, 0, tokens, kv + 2 * l * kv_rows * width, kv + (2 * l + 1) * kv_rows * width);
  if (recurrent_floats() > 0) recurrent_.load(slot, snapshot);
  length_[slot] = tokens;
}

}  // namespace gatedlm::infer
