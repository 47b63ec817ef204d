#pragma once
// Hugging Face config.json <-> gatedlm's model config for the hybrid formats: Gated
// DeltaNet ("linear attention") layers beside G1-gated softmax layers, zero-centred norms
// (x * (1 + w)), partial rotary embeddings:
//   qwen3_next:  transformers' Qwen3-Next (model_type "qwen3_next"); dense when num_experts
//                is 0, else MoE with a shared expert behind a sigmoid gate (Qwen2-MoE's
//                block), decoder_sparse_step as gatedlm's moe.every;
//   qwen3_5:     Qwen3.5 / Qwen3.6 dense (model_type "qwen3_5" with the language model's keys
//                in "text_config", or the text model's own "qwen3_5_text");
//   qwen3_5_moe: Qwen3.5 / Qwen3.6 MoE ("qwen3_5_moe" / "qwen3_5_moe_text"): every layer
//                sparse, top-k weights always renormalised, a shared expert.
// Every key maps to the model or is refused by name; the multimodal wrapper's vision keys
// are read past (the importer skips the vision tower's tensors and says so).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "io/hf_config.h"
#include "model/config.h"

namespace gatedlm::io {

// The hybrid format a config's model_type names (looking inside text_config too), or
// nullopt for any other model_type.
std::optional<HfFormat> hybrid_format_of(const nlohmann::json& hf);

// Throws naming `source` and the key (a text_config key as "<source>: text_config: key").
model::ModelConfig hybrid_config_from_hf(const nlohmann::json& hf, HfFormat format, const std::string& source);

// The text-only layout transformers loads with AutoModelForCausalLM (Qwen3NextForCausalLM,
// Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM). Throws naming the gatedlm key the format cannot
// express: a gate other than G1 (sdpa, elementwise, sigmoid, multiply, reading all of
// d_model), norms that are not zero-centred, no QK-norm, rope scaling, MoE in qwen3_5 or
// its absence in qwen3_5_moe, ...
nlohmann::ordered_json hybrid_config_to_hf(const model::ModelConfig& c, HfFormat format,
                                           const std::string& torch_dtype);

// Where the language model's tensors live: "model.language_model." in a multimodal
// checkpoint (a config with "text_config"), else "model.".
std::string hf_weight_prefix(const nlohmann::json& hf);

}  // namespace gatedlm::io
