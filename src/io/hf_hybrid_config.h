#pragma once
// config.json <-> gatedlm's model config for the hybrid families (io/family_qwen3_next.cpp,
// family_qwen3_5.cpp, family_qwen3_5_moe.cpp): Gated DeltaNet ("linear attention") layers
// beside G1-gated softmax layers, zero-centred norms (x * (1 + w)), partial rotary
// embeddings. What the three share is here; each family passes its names and FFN kind:
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
#include <string>

#include "io/hf_hybrid_names.h"
#include "io/hf_shared_keys.h"
#include "io/model_family.h"
#include "model/config.h"

namespace gatedlm::io {

// The FFN a hybrid family holds.
enum class HybridFfn {
  dense,            // qwen3_5: no MoE keys beyond an empty mlp_only_layers
  dense_or_moe,     // qwen3_next: num_experts 0 is dense
  moe_every_layer,  // qwen3_5_moe: every layer sparse, top-k always renormalised
};

struct HybridFamily {
  const char* format;        // the family's name, for messages
  const char* text_type;     // the text model's model_type
  const char* wrapper_type;  // the multimodal wrapper's model_type (nullptr: none)
  const char* architecture;  // what export writes as `architectures`
  HybridFfn ffn;
  MoeKeys moe;            // the MoE keys' defaults (unused for dense)
  HybridTensors tensors;  // where the layouts differ (io/hf_hybrid_names.h)
};

// Whether the config's model_type (or its text_config's) is the family's text or wrapper type.
bool names_hybrid_family(const nlohmann::json& hf, const HybridFamily& family);

// Throws naming `source` and the key (a text_config key as "<source>: text_config: key").
model::ModelConfig hybrid_config_from_hf(const nlohmann::json& hf, const HybridFamily& family,
                                         const std::string& source);

// The text-only layout transformers loads with AutoModelForCausalLM (Qwen3NextForCausalLM,
// Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM). Throws naming the gatedlm key the family cannot
// express: a gate other than G1 (sdpa, elementwise, sigmoid, multiply, reading all of
// d_model), norms that are not zero-centred, no QK-norm, rope scaling, MoE in a dense family
// or its absence in qwen3_5_moe, ...
nlohmann::ordered_json hybrid_config_to_hf(const model::ModelConfig& c, const HybridFamily& family,
                                           const std::string& torch_dtype);

// A hybrid family's ModelFamily functions, from its description F (a family file passes
// its own constant).
template <const HybridFamily& F>
struct HybridFamilyFunctions {
  static Claim claim(const nlohmann::json& hf) { return names_hybrid_family(hf, F) ? Claim::hybrid_model_type : Claim::none; }
  static model::ModelConfig from_hf(const nlohmann::json& hf, const std::string& source) {
    return hybrid_config_from_hf(hf, F, source);
  }
  static nlohmann::ordered_json to_hf(const model::ModelConfig& c, const std::string& torch_dtype) {
    return hybrid_config_to_hf(c, F, torch_dtype);
  }
  static std::vector<TensorMapping> tensors(const model::ModelConfig& c, const model::ParamLayout& layout,
                                            const std::string& prefix, std::optional<bool> stacked_experts) {
    return map_hybrid_parameters(c, layout, F.tensors, prefix, stacked_experts);
  }
};

// The ModelFamily entry of a hybrid family: its name is F.format.
template <const HybridFamily& F>
constexpr ModelFamily hybrid_family(const GgufArchitecture* gguf) {
  using Functions = HybridFamilyFunctions<F>;
  return {.name = F.format,
          .claim = Functions::claim,
          .config_from_hf = Functions::from_hf,
          .config_to_hf = Functions::to_hf,
          .map_tensors = Functions::tensors,
          .hybrid = true,
          .stacked_experts = F.tensors.stacked_experts,
          .gguf = gguf};
}

}  // namespace gatedlm::io
