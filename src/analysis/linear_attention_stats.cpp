#include "analysis/linear_attention_stats.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/layer_kinds.h"

namespace gatedlm::analysis {

LinearAttentionProbe::LinearAttentionProbe(const model::ModelConfig& config) : config_(config), acc_(config.n_layers) {
  for (Acc& a : acc_) {
    a.beta_sum.assign(config_.linear_attention.n_v_heads, 0.0);
    a.decay_sum.assign(config_.linear_attention.n_v_heads, 0.0);
  }
}

bool LinearAttentionProbe::has_state(int64_t layer) const {
  return model::layer_spec(config_, layer).captures.recurrent_state;
}

void LinearAttentionProbe::observe(const model::Model<float>& m, int64_t b) {
  if (b < 0 || b >= m.batch()) fail("linear attention statistics: no batch row ", b);
  const int64_t S = m.seq(), nv = config_.linear_attention.n_v_heads, vd = config_.linear_attention.value_dim();
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    if (!has_state(l)) continue;
    const model::DeltaNetActivations<float>* lin = m.probe(l).linear;
    if (!lin) fail("linear attention statistics: layer ", l, " kept no tensors");
    Acc& a = acc_[l];
    for (int64_t i = b * S * vd; i < (b + 1) * S * vd; ++i) {
      const double z = lin->z_gate[i];
      a.z_sum += z;
      a.z_abs += std::fabs(z);
      for (size_t t = 0; t < kSparsityThresholds.size(); ++t) a.z_below[t] += std::fabs(z) < kSparsityThresholds[t];
    }
    a.z_count += S * vd;
    for (int64_t r = b * S; r < (b + 1) * S; ++r)
      for (int64_t h = 0; h < nv; ++h) {
        a.beta_sum[h] += lin->beta[r * nv + h];
        a.decay_sum[h] += std::exp(static_cast<double>(lin->g[r * nv + h]));
      }
    a.tokens += S;
  }
}

std::vector<LinearAttentionLayer> LinearAttentionProbe::result() const {
  std::vector<LinearAttentionLayer> out;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    if (!has_state(l)) continue;
    const Acc& a = acc_[l];
    const double n = a.z_count ? static_cast<double>(a.z_count) : NAN, t = a.tokens ? static_cast<double>(a.tokens) : NAN;
    LinearAttentionLayer r;
    r.layer = l;
    r.z_gate_mean = a.z_sum / n;
    r.z_gate_mean_abs = a.z_abs / n;
    for (size_t i = 0; i < kSparsityThresholds.size(); ++i) r.z_gate_sparsity.below[i] = static_cast<double>(a.z_below[i]) / n;
    for (double s : a.beta_sum) r.beta_per_head.push_back(s / t);
    for (double s : a.decay_sum) r.decay_per_head.push_back(s / t);
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json linear_attention_json(const std::vector<LinearAttentionLayer>& layers) {
  if (layers.empty()) return nullptr;
  nlohmann::json per_layer = nlohmann::json::array();
  for (const LinearAttentionLayer& r : layers) {
    const nlohmann::json sparsity{{"lt_1e-2", r.z_gate_sparsity.below[0]}, {"lt_1e-3", r.z_gate_sparsity.below[1]}};
    per_layer.push_back({{"layer", r.layer},
                         {"z_gate", {{"mean", r.z_gate_mean}, {"mean_abs", r.z_gate_mean_abs}, {"sparsity", sparsity}}},
                         {"beta_per_head", r.beta_per_head},
                         {"decay_per_head", r.decay_per_head}});
  }
  return {{"per_layer", per_layer}};
}

}  // namespace gatedlm::analysis
