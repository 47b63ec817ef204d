#pragma once
// The model configuration: the JSON keys of config.json, their defaults and the checks
// that reject impossible shapes with a message naming the key.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kernels/activations.h"
#include "model/hybrid_config.h"
#include "model/moe_config.h"
#include "model/rope_scaling.h"

namespace gatedlm::model {

// Where the gate acts (paper Fig. 1): G1 sdpa, G2 value, G3 key, G4 query, G5 dense.
enum class GatePosition { none, sdpa, value, key, query, dense };
enum class GateGranularity { elementwise, headwise };
enum class GateCombine { multiply, add };
enum class GateInput { hidden, constant };
enum class GateInit { normal, zero };
enum class SdpaTransform { none, rmsnorm, silu };
// What turns a query's scores into weights (attention_normalizer): softmax, or softpick
// (arXiv 2504.20966: relu(e^a - 1) / sum |e^a - 1|, rows may sum to less than 1).
enum class AttentionNormalizer { softmax, softpick };

struct GateConfig {
  GatePosition position = GatePosition::none;
  GateGranularity granularity = GateGranularity::elementwise;
  bool head_shared = false;
  GateCombine combine = GateCombine::multiply;
  kernels::Activation activation = kernels::Activation::sigmoid;
  GateInput input = GateInput::hidden;
  int64_t input_dims = 0;  // 0 = all of d_model
  GateInit init = GateInit::normal;  // default zero for input=constant (the paper's choice)
};

// Switch heads (Csordás et al., "SwitchHead"; the paper's Appendix A.1, Table 6): per KV
// head, the value projection (experts_on v) or the key and value projections (kv) are a
// mixture of n_experts expert projections. A sigmoid router per head scores the experts
// for each token; the top_k highest (ties: the lower expert index wins) are computed and
// summed, each weighted by its own sigmoid score (no renormalisation). With experts_on kv
// one router picks the experts of both k and v. n_experts 0 = off (the plain projections).
// src/model/switch_heads.h has the computation.
enum class SwitchTarget { v, kv };
struct SwitchHeadsConfig {
  int64_t n_experts = 0;  // 0 = off
  int64_t top_k = 0;
  SwitchTarget experts_on = SwitchTarget::v;
  bool on() const { return n_experts > 0; }
  bool switches_k() const { return on() && experts_on == SwitchTarget::kv; }
};

struct ModelConfig {
  int64_t vocab_size = 0, d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0,
          ffn_hidden = 0;
  double rope_base = 10000.0;
  int64_t rope_dims = 0;  // defaults to head_dim
  RopeScaling rope_scaling;  // rope_scaling: {type, factor, original_max_seq_len}
  bool qk_norm = true;
  bool tie_embeddings = false;
  double norm_eps = 1e-6;
  int64_t max_seq_len = 0;
  double init_std = 0.02;
  GateConfig gate;
  SdpaTransform sdpa_transform = SdpaTransform::none;
  bool sandwich_norm = false;
  double residual_clip = 0.0;  // 0 = off
  // Attention biases: attn_qkv_bias adds a bias to q_proj, k_proj, v_proj and to a gate
  // projection that reads all of d_model (in the paper's checkpoints the gate rows sit in
  // q_proj and share its bias); attn_o_bias adds one to o_proj.
  bool attn_qkv_bias = false;
  bool attn_o_bias = false;
  // Learned sink logits (gpt-oss): per softmax layer a tensor self_attn.sinks [n_heads],
  // initialised at 0, whose logit joins every query row's softmax denominator and carries no
  // value (kernels/attention_sinks.h). Another remedy for the attention sink than the gate.
  bool attention_sinks = false;
  AttentionNormalizer attention_normalizer = AttentionNormalizer::softmax;
  SwitchHeadsConfig switch_heads;  // switch_heads: {n_experts, top_k, experts_on}
  MoeConfig moe;  // mixture-of-experts FFN (model/moe_config.h); n_experts 0 = dense FFN everywhere
  // Hybrid models (model/hybrid_config.h): the kind of each layer (empty: all full
  // attention) and the shape of the Gated DeltaNet layers.
  std::vector<LayerKind> layer_types;
  LinearAttentionConfig linear_attention;
  // The window W of the sliding_attention layers: a query t sees keys t - W < j <= t (in
  // decode, those layers keep W rows per sequence). 0: none (every layer kind but sliding).
  int64_t sliding_window = 0;
  // RMSNorms compute x_hat * (1 + w), weights initialised at 0 (Qwen3-Next / Qwen3.5), for
  // the block norms, QK-norm, the sandwich and SDPA norms and the final norm; the linear
  // layers' gated norm stays plain.
  bool norm_zero_centered = false;

  bool has_gate() const { return gate.position != GatePosition::none; }
  bool has_moe() const { return moe.enabled(); }
  bool is_linear(int64_t layer) const {
    return !layer_types.empty() && layer_types[layer] == LayerKind::linear_attention;
  }
  int64_t linear_layers() const;  // how many layers are Gated DeltaNet layers
  bool has_linear() const { return linear_layers() > 0; }
  int64_t sliding_layers() const;  // how many layers are sliding-window attention layers
  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  // Heads of the tensor the gate acts on (1 for the dense output) and their width.
  int64_t gate_target_heads() const;
  int64_t gate_target_head_dim() const;
  // The gate projection's shape: [gate_out, gate_in] (input hidden) or [gate_out].
  int64_t gate_out() const;
  int64_t gate_in() const;
  // Whether the gate projection carries a bias (attn_qkv_bias with a hidden-input gate).
  bool gate_has_bias() const;

  // Throws gatedlm::Error naming the offending key.
  void validate() const;
  void validate_switch_heads() const;  // the switch_heads part of validate()
  void validate_hybrid() const;        // layer_types and linear_attention
};

// Parses and validates; `source` names the file in messages.
ModelConfig config_from_json(const nlohmann::json& j, const std::string& source = "config");
nlohmann::json config_to_json(const ModelConfig& c);
ModelConfig load_config(const std::string& path);
void save_config(const ModelConfig& c, const std::string& path);

std::string to_string(GatePosition p);
std::string to_string(SwitchTarget t);  // "v" or "kv"
std::string describe_switch_heads(const ModelConfig& c);  // e.g. "switch v, 8top2" or "none"
std::string describe_gate(const ModelConfig& c);  // e.g. "G1 sdpa elementwise sigmoid multiply"

// The table the model uses: the config's rope_dims, rope_base and rope_scaling
// (original_max_seq_len 0 resolved to max_seq_len), for `positions` positions.
// unit_magnitude: the same rotations without YaRN's magnitude (to move an already
// rotated key to another position: infer/'s streaming window).
kernels::RopeTable model_rope_table(const ModelConfig& config, int64_t positions, bool unit_magnitude = false);

}  // namespace gatedlm::model
