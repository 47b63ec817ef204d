#pragma once
// Massive activations (docs metrics.md, "Massive activations"): per layer, of the residual
// stream after the block, the top-3 |h| over all tokens and channels, median |h| and the
// count of massive activations (|h| > 100 and |h| >= 1000 * median), each averaged over
// sequences; M-Act = mean over layers of the per-layer max |h|.
#include <array>
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace gatedlm::analysis {

struct MassiveLayer {
  std::array<double, 3> top3{};  // mean over sequences of the k-th largest |h| (k = 1, 2, 3)
  double median = 0;             // mean over sequences of median |h| (even count: mean of the middle two)
  double massive_count = 0;      // mean over sequences of the number of massive activations
  double top1_first_token = 0;   // share of sequences whose largest |h| sits at token 0
};

struct MassiveResult {
  std::vector<MassiveLayer> per_layer;
  double m_act = 0;  // mean over layers of per_layer[l].top3[0]
  double abs_threshold = 100.0, median_ratio = 1000.0;
  int64_t sequences = 0;
};

class MassiveActivationProbe {
 public:
  explicit MassiveActivationProbe(const model::ModelConfig& config);
  // Reads batch row b of the model's last forward.
  void observe(const model::Model<float>& m, int64_t b = 0);
  // Lower level: the residual [seq, d_model] of one layer of the current sequence; call for
  // every layer, then end_sequence().
  void observe_layer(int64_t layer, const float* resid, int64_t seq);
  void end_sequence();
  MassiveResult result() const;

 private:
  model::ModelConfig config_;
  int64_t sequences_ = 0;
  std::vector<MassiveLayer> sum_;
  std::vector<char> seen_;
  std::vector<float> scratch_;
};

}  // namespace gatedlm::analysis
