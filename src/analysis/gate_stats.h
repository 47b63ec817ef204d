#pragma once
// Gate statistics (docs metrics.md, "Gate sparsity"), per layer: the mean gate score and
// its histogram on [0, 1]; the share of values of Y (the tensor at the gate's position)
// with |y| < 1e-2 and < 1e-3 before the gate (Y), after it (Y'), and for the control
// combine(Y, mean score) (Y * mean score for multiplicative gates, Y + mean score for
// additive ones); mean |Y| and mean |Y'|. The scores are the effective per-element scores
// the gate applied (a headwise score counts once per element of its head).
//
// The SDPA output (after sdpa_transform, before any G1 gate) is summarised for every
// model, gated or not, so baselines can be compared with gated models (paper Fig. 4).
//
// The control needs the layer's mean score over all sequences, so it takes a second pass:
// observe() every sequence, then begin_control_pass() and observe_control() them again.
#include <array>
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace gatedlm::analysis {

inline constexpr int kGateHistogramBins = 50;
inline constexpr std::array<double, 2> kSparsityThresholds{1e-2, 1e-3};

struct SparsityShares {
  std::array<double, 2> below{};  // share of values with |v| < kSparsityThresholds[i]
};

struct GateLayer {
  double mean_score = 0;
  std::array<double, kGateHistogramBins> histogram{};  // share of all scores in each bin of [0, 1]
  double below_range = 0, above_range = 0;              // share of scores < 0 and > 1
  SparsityShares before, after, mean_scaled_control;
  bool has_control = false;
  double mean_abs_y = 0, mean_abs_y_gated = 0;
};

struct SdpaLayer {
  double mean_abs = 0;
  SparsityShares sparsity;
};

struct GateStatsResult {
  bool gated = false;
  std::vector<GateLayer> gates;  // empty when the model has no gate
  std::vector<SdpaLayer> sdpa;   // every model
  // The mean over layers of each layer's mean score: over the softmax layers of a hybrid
  // (its linear layers have no such gate; their entries are NaN). NaN without a gate.
  double mean_score() const;
};

class GateStatsProbe {
 public:
  explicit GateStatsProbe(const model::ModelConfig& config);
  bool gated() const { return config_.has_gate(); }
  // Pass 1: batch row b of the model's last forward.
  void observe(const model::Model<float>& m, int64_t b = 0);
  // Lower level for pass 1: one layer, `tokens` rows of the gate tensors (null for a
  // model without a gate) and of the SDPA output.
  void observe_layer(int64_t layer, int64_t tokens, const float* y, const float* y_gated, const float* score,
                     const float* sdpa);
  // Fixes each layer's mean score for the control; then pass 2.
  void begin_control_pass();
  void observe_control(const model::Model<float>& m, int64_t b = 0);
  void observe_control_layer(int64_t layer, int64_t tokens, const float* y);
  GateStatsResult result() const;

 private:
  // Whether the layer's kind has an SDPA output and the gate (model/layer_kinds.h's captures).
  bool has_sdpa(int64_t layer) const;
  struct Acc {
    double score_sum = 0, abs_y = 0, abs_y_gated = 0;
    int64_t count = 0, control_count = 0, below_range = 0, above_range = 0;
    std::array<int64_t, kGateHistogramBins> hist{};
    std::array<int64_t, 2> before{}, after{}, control{};
    double sdpa_abs = 0;
    int64_t sdpa_count = 0;
    std::array<int64_t, 2> sdpa_below{};
  };
  model::ModelConfig config_;
  int64_t target_ = 0;  // elements of Y per token
  std::vector<Acc> acc_;
  std::vector<double> control_mean_;
  bool control_pass_ = false;
};

}  // namespace gatedlm::analysis
