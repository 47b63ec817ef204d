#pragma once
// Attention-sink probes (docs metrics.md, "Attention sink"): F-Attn, the Gu et al. sink
// rate and head-averaged attention maps, from the materialised attention probabilities
// A[h][t][j] of each layer (kernels::attention_probs). A hybrid model's linear-attention
// layers have no such probabilities: their per-layer values are NaN (null in JSON) and the
// means and the sink rate run over the softmax layers. With learned sink logits
// (attention_sinks) the rows sum to less than 1, and the rest is the sink's: sink_logit_mass.
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace gatedlm::analysis {

struct AttentionSinkOptions {
  double eps = 0.3;                 // sink-rate threshold
  std::vector<int64_t> map_layers;  // layers whose head-averaged map is kept
  int64_t map_size = 64;            // the maps cover query/key positions < min(seq, map_size)
};

struct AttentionSinkResult {
  // [layer][head]: mean over sequences of the mean over query rows of A[t][0].
  std::vector<std::vector<double>> f_attn_per_head;      // rows t >= 1
  std::vector<std::vector<double>> f_attn_all_per_head;  // rows t >= 0
  std::vector<double> f_attn_per_layer, f_attn_all_per_layer;  // mean over heads
  double f_attn = 0, f_attn_all = 0;                            // mean over layers
  double eps = 0.3;
  double sink_rate_percent = 0;  // 100 * mean over sequences of the share of (l, h) with alpha_0 > eps
  // Models with learned sink logits (attention_sinks): [layer][head] the probability a head
  // gives its sink, 1 - sum_j A[t][j], mean over all query rows and sequences; per layer the
  // mean over heads, and the mean over layers. Empty without sinks.
  std::vector<std::vector<double>> sink_logit_mass_per_head;
  std::vector<double> sink_logit_mass_per_layer;
  double sink_logit_mass = 0;
  std::vector<int64_t> map_layers;
  int64_t map_size = 0;  // rows/cols of each map
  // [map layer][t][j]: A averaged over heads and sequences, t, j < map_size.
  std::vector<std::vector<std::vector<double>>> maps;
  int64_t sequences = 0;
};

class AttentionSinkProbe {
 public:
  AttentionSinkProbe(const model::ModelConfig& config, AttentionSinkOptions options);
  // Reads batch row b of the model's last forward (the probabilities of every layer that has them).
  void observe(const model::Model<float>& m, int64_t b = 0);
  // Lower level: the probabilities [n_heads, seq, seq] of one layer of the current
  // sequence; call for every layer, then end_sequence().
  void observe_layer(int64_t layer, const float* probs, int64_t seq);
  void end_sequence();
  AttentionSinkResult result() const;

 private:
  void sink_mass_result(AttentionSinkResult& r) const;
  // Whether the layer's kind has softmax probabilities (model/layer_kinds.h's captures), and
  // how many layers of the model do: the means run over those.
  bool has_probs(int64_t layer) const;
  int64_t softmax_layers() const;
  model::ModelConfig config_;
  AttentionSinkOptions options_;
  int64_t sequences_ = 0, map_n_ = 0;
  std::vector<double> sum_f_, sum_f_all_;   // [layer * heads + head]
  std::vector<double> sum_sink_mass_;       // [layer * heads + head], models with attention_sinks
  std::vector<double> seq_alpha_;           // current sequence's alpha_0 [layer * heads + head]
  std::vector<char> seq_seen_;              // layers observed for the current sequence
  double sum_sink_share_ = 0;
  std::vector<std::vector<double>> map_sum_;  // [map layer][t * map_n + j]
  std::vector<float> probs_;                  // scratch
};

}  // namespace gatedlm::analysis
