#include "analysis/massive_activations.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"

namespace gatedlm::analysis {

MassiveActivationProbe::MassiveActivationProbe(const model::ModelConfig& config)
    : config_(config), sum_(config.n_layers), seen_(config.n_layers, 0) {}

void MassiveActivationProbe::observe(const model::Model<float>& m, int64_t b) {
  const int64_t S = m.seq(), d = config_.d_model;
  if (b < 0 || b >= m.batch()) fail("massive activation probe: no batch row ", b);
  for (int64_t l = 0; l < config_.n_layers; ++l) observe_layer(l, m.probe(l).resid_out + b * S * d, S);
  end_sequence();
}

void MassiveActivationProbe::observe_layer(int64_t layer, const float* resid, int64_t S) {
  if (layer < 0 || layer >= config_.n_layers) fail("massive activation probe: no layer ", layer);
  const int64_t d = config_.d_model, n = S * d;
  scratch_.resize(static_cast<size_t>(n));
  // Top 3 with positions, in one pass.
  std::array<float, 3> top{-1.f, -1.f, -1.f};
  int64_t top_index = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(resid[i]);
    scratch_[i] = a;
    if (a > top[2]) {
      if (a > top[0]) {
        top = {a, top[0], top[1]};
        top_index = i;
      } else if (a > top[1]) {
        top = {top[0], a, top[1]};
      } else {
        top[2] = a;
      }
    }
  }
  // Median of |h|: the middle value, or the mean of the two middle values for even n.
  const int64_t mid = n / 2;
  std::nth_element(scratch_.begin(), scratch_.begin() + mid, scratch_.end());
  double median = scratch_[mid];
  if (n % 2 == 0) {
    const float lower = *std::max_element(scratch_.begin(), scratch_.begin() + mid);
    median = 0.5 * (static_cast<double>(lower) + median);
  }
  int64_t massive = 0;
  const double ratio_floor = 1000.0 * median;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(resid[i]));
    massive += a > 100.0 && a >= ratio_floor;
  }
  MassiveLayer& s = sum_[layer];
  for (int k = 0; k < 3; ++k) s.top3[k] += k < n ? top[k] : 0.0;
  s.median += median;
  s.massive_count += static_cast<double>(massive);
  s.top1_first_token += top_index < d ? 1.0 : 0.0;
  seen_[layer] = 1;
}

void MassiveActivationProbe::end_sequence() {
  for (int64_t l = 0; l < config_.n_layers; ++l)
    if (!seen_[l]) fail("massive activation probe: layer ", l, " was not observed for sequence ", sequences_);
  std::fill(seen_.begin(), seen_.end(), 0);
  ++sequences_;
}

MassiveResult MassiveActivationProbe::result() const {
  MassiveResult r;
  r.sequences = sequences_;
  const double ns = sequences_ > 0 ? static_cast<double>(sequences_) : NAN;
  for (const MassiveLayer& s : sum_) {
    MassiveLayer m;
    for (int k = 0; k < 3; ++k) m.top3[k] = s.top3[k] / ns;
    m.median = s.median / ns;
    m.massive_count = s.massive_count / ns;
    m.top1_first_token = s.top1_first_token / ns;
    r.m_act += m.top3[0] / static_cast<double>(sum_.size());
    r.per_layer.push_back(m);
  }
  return r;
}

}  // namespace gatedlm::analysis
