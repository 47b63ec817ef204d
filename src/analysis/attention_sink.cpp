#include "analysis/attention_sink.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/layer_kinds.h"

namespace gatedlm::analysis {

AttentionSinkProbe::AttentionSinkProbe(const model::ModelConfig& config, AttentionSinkOptions options)
    : config_(config), options_(std::move(options)) {
  const int64_t L = config_.n_layers, H = config_.n_heads;
  for (int64_t l : options_.map_layers) {
    if (l < 0 || l >= L) fail("attention map layer ", l, " is outside 0..", L - 1);
    if (!has_probs(l))
      fail("attention map layer ", l, " is a ", model::layer_spec(config_, l).name,
           " layer: it has no attention probabilities");
  }
  if (options_.map_size < 1) fail("attention map size must be at least 1, got ", options_.map_size);
  sum_f_.assign(L * H, 0.0);
  sum_f_all_.assign(L * H, 0.0);
  if (config_.attention_sinks) sum_sink_mass_.assign(L * H, 0.0);
  seq_alpha_.assign(L * H, 0.0);
  seq_seen_.assign(L, 0);
  map_sum_.resize(options_.map_layers.size());
}

bool AttentionSinkProbe::has_probs(int64_t layer) const {
  return model::layer_spec(config_, layer).captures.attention_probs;
}

int64_t AttentionSinkProbe::softmax_layers() const {
  return model::count_layers(config_, &model::LayerCaptures::attention_probs);
}

void AttentionSinkProbe::observe(const model::Model<float>& m, int64_t b) {
  const model::ModelConfig& c = config_;
  const int64_t S = m.seq();
  const int64_t elements = c.n_heads * S * S;
  if (elements > (int64_t{1} << 30))
    fail("attention sink probe: ", c.n_heads, " heads x ", S, "^2 probabilities need ", elements * 4 / (1 << 20),
         " MiB per layer; use a shorter --seq-len");
  probs_.resize(static_cast<size_t>(elements));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (!m.attention_probs(probs_.data(), l, b)) {  // no softmax, no sink to measure: left out of every mean
      seq_seen_[l] = 1;
      continue;
    }
    observe_layer(l, probs_.data(), S);
  }
  end_sequence();
}

void AttentionSinkProbe::observe_layer(int64_t layer, const float* probs, int64_t S) {
  const int64_t H = config_.n_heads;
  if (layer < 0 || layer >= config_.n_layers) fail("attention sink probe: no layer ", layer);
  if (S < 2) fail("attention sink probe: sequences need at least 2 tokens, got ", S);
  // A sliding-window layer's queries t >= W no longer see token 0: its F-Attn and alpha_0
  // average over the rows t < W that do (docs metrics.md).
  const int64_t window = model::kv_window(config_, layer);
  const int64_t rows = window > 0 ? std::max<int64_t>(2, std::min(S, window)) : S;
  for (int64_t h = 0; h < H; ++h) {
    const float* A = probs + h * S * S;
    double first_rows = 0.0;  // sum over 1 <= t < rows of A[t][0]
    for (int64_t t = 1; t < rows; ++t) first_rows += A[t * S];
    const double all_rows = first_rows + A[0];
    sum_f_[layer * H + h] += first_rows / static_cast<double>(rows - 1);
    const double alpha = all_rows / static_cast<double>(rows);  // Gu et al. alpha_0
    sum_f_all_[layer * H + h] += alpha;
    seq_alpha_[layer * H + h] = alpha;
    if (sum_sink_mass_.empty()) continue;
    double sink = 0;  // sum over rows of 1 - the row's probabilities
    for (int64_t t = 0; t < S; ++t) {
      double row = 0;
      for (int64_t j = 0; j <= t; ++j) row += A[t * S + j];
      sink += 1.0 - row;
    }
    sum_sink_mass_[layer * H + h] += sink / static_cast<double>(S);
  }
  seq_seen_[layer] = 1;
  for (size_t i = 0; i < options_.map_layers.size(); ++i) {
    if (options_.map_layers[i] != layer) continue;
    const int64_t n = std::min(S, options_.map_size);
    if (map_n_ == 0) map_n_ = n;
    if (map_n_ != n) fail("attention maps: sequences of different lengths (", map_n_, " vs ", n, ")");
    std::vector<double>& sum = map_sum_[i];
    sum.resize(static_cast<size_t>(n * n), 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j <= t; ++j) sum[t * n + j] += probs[(h * S + t) * S + j];
  }
}

void AttentionSinkProbe::end_sequence() {
  const int64_t L = config_.n_layers, H = config_.n_heads;
  for (int64_t l = 0; l < L; ++l)
    if (!seq_seen_[l]) fail("attention sink probe: layer ", l, " was not observed for sequence ", sequences_);
  int64_t sinks = 0;
  for (double a : seq_alpha_) sinks += a > options_.eps;
  sum_sink_share_ += static_cast<double>(sinks) / static_cast<double>(softmax_layers() * H);
  std::fill(seq_seen_.begin(), seq_seen_.end(), 0);
  ++sequences_;
}

// The per-head sums of sink mass as means over sequences, layers without softmax NaN.
void AttentionSinkProbe::sink_mass_result(AttentionSinkResult& r) const {
  if (sum_sink_mass_.empty()) return;
  const int64_t L = config_.n_layers, H = config_.n_heads;
  const double ns = sequences_ > 0 ? static_cast<double>(sequences_) : NAN;
  r.sink_logit_mass_per_head.assign(L, std::vector<double>(H, NAN));
  r.sink_logit_mass_per_layer.assign(L, NAN);
  for (int64_t l = 0; l < L; ++l) {
    if (!has_probs(l)) continue;
    r.sink_logit_mass_per_layer[l] = 0;
    for (int64_t h = 0; h < H; ++h) {
      r.sink_logit_mass_per_head[l][h] = sum_sink_mass_[l * H + h] / ns;
      r.sink_logit_mass_per_layer[l] += r.sink_logit_mass_per_head[l][h] / static_cast<double>(H);
    }
    r.sink_logit_mass += r.sink_logit_mass_per_layer[l] / static_cast<double>(softmax_layers());
  }
}

AttentionSinkResult AttentionSinkProbe::result() const {
  const int64_t L = config_.n_layers, H = config_.n_heads;
  AttentionSinkResult r;
  r.eps = options_.eps;
  r.sequences = sequences_;
  r.map_layers = options_.map_layers;
  r.map_size = map_n_;
  const double ns = sequences_ > 0 ? static_cast<double>(sequences_) : NAN;
  r.f_attn_per_head.assign(L, std::vector<double>(H));
  r.f_attn_all_per_head.assign(L, std::vector<double>(H));
  r.f_attn_per_layer.assign(L, 0.0);
  r.f_attn_all_per_layer.assign(L, 0.0);
  const double softmax_layers = static_cast<double>(this->softmax_layers());
  for (int64_t l = 0; l < L; ++l) {
    if (!has_probs(l)) {  // null in the JSON
      r.f_attn_per_layer[l] = r.f_attn_all_per_layer[l] = NAN;
      std::fill(r.f_attn_per_head[l].begin(), r.f_attn_per_head[l].end(), NAN);
      std::fill(r.f_attn_all_per_head[l].begin(), r.f_attn_all_per_head[l].end(), NAN);
      continue;
    }
    for (int64_t h = 0; h < H; ++h) {
      r.f_attn_per_head[l][h] = sum_f_[l * H + h] / ns;
      r.f_attn_all_per_head[l][h] = sum_f_all_[l * H + h] / ns;
      r.f_attn_per_layer[l] += r.f_attn_per_head[l][h] / static_cast<double>(H);
      r.f_attn_all_per_layer[l] += r.f_attn_all_per_head[l][h] / static_cast<double>(H);
    }
    r.f_attn += r.f_attn_per_layer[l] / softmax_layers;
    r.f_attn_all += r.f_attn_all_per_layer[l] / softmax_layers;
  }
  r.sink_rate_percent = 100.0 * sum_sink_share_ / ns;
  sink_mass_result(r);
  for (size_t i = 0; i < map_sum_.size(); ++i) {
    const int64_t n = map_n_;
    std::vector<std::vector<double>> map(n, std::vector<double>(n, 0.0));
    if (!map_sum_[i].empty())
      for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < n; ++j) map[t][j] = map_sum_[i][t * n + j] / (ns * static_cast<double>(H));
    r.maps.push_back(std::move(map));
  }
  return r;
}

}  // namespace gatedlm::analysis
