#include "analysis/gate_stats.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/gate.h"
#include "model/layer_kinds.h"

namespace gatedlm::analysis {

namespace {

void count_below(std::array<int64_t, 2>& counts, double v) {
  const double a = std::fabs(v);
  for (size_t i = 0; i < kSparsityThresholds.size(); ++i) counts[i] += a < kSparsityThresholds[i];
}

SparsityShares shares(const std::array<int64_t, 2>& counts, int64_t total) {
  SparsityShares s;
  for (size_t i = 0; i < counts.size(); ++i)
    s.below[i] = total > 0 ? static_cast<double>(counts[i]) / static_cast<double>(total) : NAN;
  return s;
}

}  // namespace

GateStatsProbe::GateStatsProbe(const model::ModelConfig& config) : config_(config), acc_(config.n_layers) {
  if (config_.has_gate()) target_ = model::GateShape::of(config_).target_size();
}

bool GateStatsProbe::has_sdpa(int64_t layer) const {
  return model::layer_spec(config_, layer).captures.sdpa_output;
}

void GateStatsProbe::observe(const model::Model<float>& m, int64_t b) {
  if (control_pass_) fail("gate statistics: observe() after begin_control_pass()");
  const int64_t S = m.seq(), qd = config_.q_dim();
  if (b < 0 || b >= m.batch()) fail("gate statistics: no batch row ", b);
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    if (!has_sdpa(l)) continue;  // e.g. Gated DeltaNet: no SDPA, no gate (linear_attention_stats.h)
    const model::BlockProbe<float> p = m.probe(l);
    const int64_t off = b * S * target_;
    observe_layer(l, S, p.gate_y ? p.gate_y + off : nullptr, p.gate_y_out ? p.gate_y_out + off : nullptr,
                  p.gate_score ? p.gate_score + off : nullptr, p.sdpa_out + b * S * qd);
  }
}

void GateStatsProbe::observe_layer(int64_t layer, int64_t tokens, const float* y, const float* y_gated,
                                   const float* score, const float* sdpa) {
  if (layer < 0 || layer >= config_.n_layers) fail("gate statistics: no layer ", layer);
  Acc& a = acc_[layer];
  const int64_t qn = tokens * config_.q_dim();
  for (int64_t i = 0; i < qn; ++i) {
    a.sdpa_abs += std::fabs(static_cast<double>(sdpa[i]));
    count_below(a.sdpa_below, sdpa[i]);
  }
  a.sdpa_count += qn;
  if (!gated()) return;
  if (!y || !y_gated || !score) fail("gate statistics: layer ", layer, " has no gate tensors");
  const int64_t n = tokens * target_;
  for (int64_t i = 0; i < n; ++i) {
    const double s = score[i];
    a.score_sum += s;
    if (s < 0.0) {
      ++a.below_range;
    } else if (s > 1.0) {
      ++a.above_range;
    } else {
      ++a.hist[std::min<int64_t>(static_cast<int64_t>(s * kGateHistogramBins), kGateHistogramBins - 1)];
    }
    a.abs_y += std::fabs(static_cast<double>(y[i]));
    a.abs_y_gated += std::fabs(static_cast<double>(y_gated[i]));
    count_below(a.before, y[i]);
    count_below(a.after, y_gated[i]);
  }
  a.count += n;
}

void GateStatsProbe::begin_control_pass() {
  if (!gated()) return;
  control_mean_.resize(acc_.size());
  for (size_t l = 0; l < acc_.size(); ++l) {
    if (!has_sdpa(static_cast<int64_t>(l))) continue;
    if (acc_[l].count == 0) fail("gate statistics: no sequence observed before the control pass");
    control_mean_[l] = acc_[l].score_sum / static_cast<double>(acc_[l].count);
  }
  control_pass_ = true;
}

void GateStatsProbe::observe_control(const model::Model<float>& m, int64_t b) {
  if (!gated()) return;
  const int64_t S = m.seq();
  for (int64_t l = 0; l < config_.n_layers; ++l)
    if (has_sdpa(l)) observe_control_layer(l, S, m.probe(l).gate_y + b * S * target_);
}

void GateStatsProbe::observe_control_layer(int64_t layer, int64_t tokens, const float* y) {
  if (!control_pass_) fail("gate statistics: observe_control() before begin_control_pass()");
  Acc& a = acc_[layer];
  const double mean = control_mean_[layer];
  const bool add = config_.gate.combine == model::GateCombine::add;
  const int64_t n = tokens * target_;
  for (int64_t i = 0; i < n; ++i) {
    const double v = add ? static_cast<double>(y[i]) + mean : static_cast<double>(y[i]) * mean;
    count_below(a.control, v);
  }
  a.control_count += n;
}

double GateStatsResult::mean_score() const {
  double sum = 0;
  int64_t layers = 0;
  for (const GateLayer& g : gates)
    if (std::isfinite(g.mean_score)) {
      sum += g.mean_score;
      ++layers;
    }
  return layers ? sum / static_cast<double>(layers) : NAN;
}

GateStatsResult GateStatsProbe::result() const {
  GateStatsResult r;
  r.gated = gated();
  for (const Acc& a : acc_) {
    SdpaLayer s;
    s.mean_abs = a.sdpa_count ? a.sdpa_abs / static_cast<double>(a.sdpa_count) : NAN;
    s.sparsity = shares(a.sdpa_below, a.sdpa_count);
    r.sdpa.push_back(s);
    if (!gated()) continue;
    GateLayer g;
    const double n = a.count ? static_cast<double>(a.count) : NAN;
    g.mean_score = a.score_sum / n;
    for (int i = 0; i < kGateHistogramBins; ++i) g.histogram[i] = static_cast<double>(a.hist[i]) / n;
    g.below_range = static_cast<double>(a.below_range) / n;
    g.above_range = static_cast<double>(a.above_range) / n;
    g.before = shares(a.before, a.count);
    g.after = shares(a.after, a.count);
    g.has_control = a.control_count > 0;
    g.mean_scaled_control = shares(a.control, a.control_count);
    g.mean_abs_y = a.abs_y / n;
    g.mean_abs_y_gated = a.abs_y_gated / n;
    r.gates.push_back(g);
  }
  return r;
}

}  // namespace gatedlm::analysis
