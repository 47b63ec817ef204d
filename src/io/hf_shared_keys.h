#pragma once
// The config.json keys the model families share (io/model_family.h), read and written in
// one place: the sizes, the norm epsilon, tied embeddings, the activation and window keys,
// rope_scaling, and the MoE keys of Qwen3-MoE and of Qwen2-MoE's block (Qwen3-Next, Qwen3.5).
// A family calls these with its own defaults; what only one family means stays in its file.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "io/hf_reader.h"
#include "model/config.h"

namespace gatedlm::io {

// transformers' defaults of the size keys a family may leave out.
struct SizeDefaults {
  std::optional<int64_t> head_dim;  // nullopt: hidden_size / num_attention_heads
  std::optional<int64_t> ffn_hidden;  // nullopt: intermediate_size is required
};
// vocab_size, hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim, intermediate_size, rms_norm_eps, max_position_embeddings, tie_word_embeddings,
// initializer_range.
void read_sizes(HfReader& r, model::ModelConfig& c, const SizeDefaults& defaults);
// hidden_act (silu only: gatedlm's FFN is SwiGLU), use_sliding_window (false only) and
// sliding_window (unused without it).
void read_activation(HfReader& r);  // hidden_act: silu only
void read_activation_and_window(HfReader& r);
// rope_scaling: null / "default" -> none; linear; yarn with transformers' defaults (other
// values refused naming `source` and the key).
void read_rope_scaling(HfReader& r, model::ModelConfig& c, const std::string& source);

// What export writes first: architectures, model_type, vocab_size, hidden_size,
// intermediate_size.
void write_head(nlohmann::ordered_json& j, const model::ModelConfig& c, const std::string& architecture,
                const std::string& model_type);
// Then: num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, hidden_act,
// max_position_embeddings, rms_norm_eps.
void write_shape(nlohmann::ordered_json& j, const model::ModelConfig& c);

// A family's MoE keys: transformers' defaults and block.
struct MoeKeys {
  std::optional<int64_t> n_experts, top_k, expert_hidden;  // defaults; nullopt: the key is required
  bool norm_topk_prob;    // transformers' default
  bool shared_expert;     // Qwen2-MoE's block: a shared expert behind sigmoid(h g^T); else none (refused)
  bool sparse_step_keys;  // export writes decoder_sparse_step and mlp_only_layers (import always reads them)
};
// num_experts, num_experts_per_tok, moe_intermediate_size, [shared_expert_intermediate_size],
// decoder_sparse_step (gatedlm's `every`: layer i is sparse when (i + 1) % step == 0),
// norm_topk_prob, router_aux_loss_coef, router_z_loss_coef, output_router_logits, and
// mlp_only_layers (dense layers beyond the step's are refused). n_layers bounds the list.
model::MoeConfig read_moe_keys(HfReader& r, const MoeKeys& keys, int64_t n_layers);
// mlp_only_layers: gatedlm's dense layers are those decoder_sparse_step skips; a listed layer
// the step would make sparse is refused.
void check_dense_layers(HfReader& r, int64_t step, int64_t n_layers);
void write_moe_keys(nlohmann::ordered_json& j, const model::MoeConfig& m, const MoeKeys& keys);

// "export --format <format>: model config key "<key>" <why>".
[[noreturn]] void refuse_export(const std::string& format, const std::string& key, const std::string& why);
// A plain Qwen3 block: no SDPA transform, sandwich norm, residual clip or switch heads (the
// refusal says `switch_heads_why`), and one bias setting for q, k, v and o (`bias_why`).
void check_plain_block_for_export(const model::ModelConfig& c, const std::string& format,
                                  const std::string& switch_heads_why, const std::string& bias_why);
// The G1 gate as the Hugging Face families hold it: on the SDPA output (`g1` names it in the
// refusal), elementwise when `elementwise_only`, sigmoid, multiply, per head, reading all of
// d_model; any other setting is refused by key.
void check_g1_gate_for_export(const model::ModelConfig& c, const std::string& format, const std::string& g1,
                              bool elementwise_only);

}  // namespace gatedlm::io
