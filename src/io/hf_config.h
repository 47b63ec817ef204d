#pragma once
// Hugging Face config.json <-> gatedlm's model config, for the two layouts gatedlm reads
// and writes (names in io/hf_names.h):
//   qwen3: transformers' Qwen3 (model_type "qwen3"): QK-norm, no gate, `attention_bias`
//          biases q, k, v and o together;
//   paper: the same plus the keys of the gated-attention paper's released checkpoints
//          (QwQZh/gated_attention): `headwise_attn_output_gate`,
//          `elementwise_attn_output_gate` (a sigmoid G1 gate whose rows sit inside
//          q_proj), `use_qk_norm`, and `qkv_bias` (like attention_bias, q, k, v and o).
// Either layout may be transformers' Qwen3-MoE (model_type "qwen3_moe": num_experts,
// num_experts_per_tok, moe_intermediate_size, decoder_sparse_step, norm_topk_prob,
// router_aux_loss_coef; tensor names as gatedlm's `moe` layers), which maps to the `moe`
// object; Qwen2-MoE's shared expert and an explicit mlp_only_layers list are refused.
// Keys gatedlm cannot represent are refused by name; keys without effect on the
// computation (token ids, dtype, version, dropout, ...) are listed and ignored.
// The hybrid formats (qwen3_next, qwen3_5, qwen3_5_moe: Gated DeltaNet layers beside gated
// softmax layers) are mapped in io/hf_hybrid_config.h.
#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"

namespace gatedlm::io {

enum class HfFormat { paper, qwen3, qwen3_next, qwen3_5, qwen3_5_moe };
bool is_hybrid_format(HfFormat f);  // qwen3_next, qwen3_5, qwen3_5_moe
std::string to_string(HfFormat f);
// "paper" | "qwen3" | "qwen3_next" | "qwen3_5" | "qwen3_5_moe"; "auto" resolves from the
// config itself (see detect_hf_format).
HfFormat parse_hf_format(const std::string& name);
// By model_type: qwen3_next; qwen3_5 / qwen3_5_text -> qwen3_5; qwen3_5_moe /
// qwen3_5_moe_text -> qwen3_5_moe (also inside a multimodal config's text_config); else
// paper when any of the paper's keys is present, else qwen3.
HfFormat detect_hf_format(const nlohmann::json& hf);

// Throws naming `source` and the key. Under qwen3, a paper key is refused.
model::ModelConfig config_from_hf(const nlohmann::json& hf, HfFormat format, const std::string& source);
// Throws naming the gatedlm key that the format cannot express.
nlohmann::ordered_json config_to_hf(const model::ModelConfig& c, HfFormat format, const std::string& torch_dtype);

}  // namespace gatedlm::io
