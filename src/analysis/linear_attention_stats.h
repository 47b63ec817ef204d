#pragma once
// Statistics of a hybrid model's Gated DeltaNet layers (model/gated_deltanet.h), the
// counterpart of the softmax layers' gate statistics: the output gate SiLU(z) of the gated
// RMSNorm (mean and sparsity, as the paper measures its sigmoid gate), and per value head the
// delta rule's write strength beta and decay exp(g) (mean over tokens).
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "analysis/gate_stats.h"
#include "model/model.h"

namespace gatedlm::analysis {

struct LinearAttentionLayer {
  int64_t layer = 0;
  double z_gate_mean = 0, z_gate_mean_abs = 0;
  SparsityShares z_gate_sparsity;      // share of |SiLU(z)| below each threshold
  std::vector<double> beta_per_head;   // [n_v] mean beta
  std::vector<double> decay_per_head;  // [n_v] mean exp(g)
};

class LinearAttentionProbe {
 public:
  explicit LinearAttentionProbe(const model::ModelConfig& config);
  // Reads batch row b of the model's last forward.
  void observe(const model::Model<float>& m, int64_t b = 0);
  std::vector<LinearAttentionLayer> result() const;

 private:
  // Whether the layer's kind keeps the Gated DeltaNet's tensors (model/layer_kinds.h's captures).
  bool has_state(int64_t layer) const;
  struct Acc {
    double z_sum = 0, z_abs = 0;
    std::array<int64_t, 2> z_below{};
    int64_t z_count = 0, tokens = 0;
    std::vector<double> beta_sum, decay_sum;
  };
  model::ModelConfig config_;
  std::vector<Acc> acc_;  // [n_layers], used for the linear layers
};

// {"per_layer": [{layer, z_gate: {mean, mean_abs, sparsity}, beta_per_head, decay_per_head}]},
// or null for a model without linear layers.
nlohmann::json linear_attention_json(const std::vector<LinearAttentionLayer>& layers);

}  // namespace gatedlm::analysis
