#pragma once
// transformers' Qwen3 layout, shared by three model families (io/model_family.h):
//   qwen3:     transformers' Qwen3 (model_type "qwen3"): QK-norm, no gate, `attention_bias`
//              biases q, k, v and o together;
//   qwen3_moe: transformers' Qwen3-MoE (model_type "qwen3_moe": num_experts,
//              num_experts_per_tok, moe_intermediate_size, decoder_sparse_step,
//              norm_topk_prob, router_aux_loss_coef; tensor names as gatedlm's `moe` layers),
//              which maps to the `moe` object; Qwen2-MoE's shared expert is refused;
//   paper:     either of them plus the keys of the gated-attention paper's released
//              checkpoints (QwQZh/gated_attention): `headwise_attn_output_gate`,
//              `elementwise_attn_output_gate` (a sigmoid G1 gate whose rows sit inside
//              q_proj), `use_qk_norm`, and `qkv_bias` (like attention_bias: q, k, v and o).
// The qwen3 and paper families read and write both model types (dense and MoE): --format
// qwen3 of an MoE model writes Qwen3-MoE, as it always has.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/hf_names.h"
#include "io/model_family.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::io {

// The paper's keys: any of them in a config.json makes --format auto pick the paper family.
bool has_paper_keys(const nlohmann::json& hf);
// The config's model_type, or "" when it has none (or not a string).
std::string model_type_of(const nlohmann::json& hf);

struct Qwen3Layout {
  const char* format;  // the family's name, for messages
  bool paper_keys;     // the paper's keys are read and written (else refused on import)
  bool moe_only;       // model_type "qwen3_moe" on import, an MoE model on export (qwen3_moe)
  const std::vector<NameRule>& (*name_table)();  // where each parameter lives
};
// Throws naming `source` and the key; model_type must be "qwen3" or "qwen3_moe".
model::ModelConfig qwen3_layout_from_hf(const nlohmann::json& hf, const Qwen3Layout& layout, const std::string& source);
// Throws naming the gatedlm key the layout cannot express ("export --format <format>: ...").
nlohmann::ordered_json qwen3_layout_to_hf(const model::ModelConfig& c, const Qwen3Layout& layout,
                                          const std::string& torch_dtype);

// A Qwen3-layout family's ModelFamily functions, from its description L (a family file
// passes its own constant; the claim is the family's own).
template <const Qwen3Layout& L>
struct Qwen3LayoutFunctions {
  static model::ModelConfig from_hf(const nlohmann::json& hf, const std::string& source) {
    return qwen3_layout_from_hf(hf, L, source);
  }
  static nlohmann::ordered_json to_hf(const model::ModelConfig& c, const std::string& torch_dtype) {
    return qwen3_layout_to_hf(c, L, torch_dtype);
  }
  // The checkpoint's names all start with "model." (or are lm_head.weight); experts one tensor each.
  static std::vector<TensorMapping> tensors(const model::ModelConfig& c, const model::ParamLayout& layout,
                                            const std::string&, std::optional<bool>) {
    return map_table_tensors(c, layout, L.name_table(), L.format);
  }
};

// The ModelFamily entry of a Qwen3-layout family: its name is L.format.
template <const Qwen3Layout& L>
constexpr ModelFamily qwen3_layout_family(Claim (*claim)(const nlohmann::json&), const GgufArchitecture* gguf) {
  using F = Qwen3LayoutFunctions<L>;
  return {.name = L.format,
          .claim = claim,
          .config_from_hf = F::from_hf,
          .config_to_hf = F::to_hf,
          .map_tensors = F::tensors,
          .hybrid = false,
          .stacked_experts = false,
          .gguf = gguf};
}

}  // namespace gatedlm::io
