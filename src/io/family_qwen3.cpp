// The qwen3 family: transformers' Qwen3 (model_type "qwen3"; io/hf_qwen3_layout.h): QK-norm,
// no gate, one attention_bias key for q, k, v and o; tensors as gatedlm names them (the
// identity table of io/hf_names.h). --format qwen3 also reads and writes Qwen3-MoE configs
// (model_type "qwen3_moe"), as it always has. --format auto falls back to it, so that an
// unknown model_type is refused by name. GGUF: llama.cpp's qwen3 (export's choice for an
// ungated dense model): the Qwen3 tensor names, the shared keys only (io/gguf_tables.h).
#include "io/hf_qwen3_layout.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kQwen3Family;

namespace {

constexpr Qwen3Layout kLayout{"qwen3", false};
constexpr GgufArchitecture kGguf{"qwen3", false, false, false, false, false, true, nullptr};

Claim claim(const nlohmann::json&) { return Claim::fallback; }

model::ModelConfig from_hf(const nlohmann::json& hf, const std::string& source) {
  return qwen3_layout_from_hf(hf, kLayout, source);
}

nlohmann::ordered_json to_hf(const model::ModelConfig& c, const std::string& torch_dtype) {
  return qwen3_layout_to_hf(c, kLayout, torch_dtype);
}

std::vector<TensorMapping> tensors(const model::ModelConfig& c, const model::ParamLayout& layout, const std::string&,
                                   std::optional<bool>) {
  return map_table_tensors(c, layout, qwen3_name_table(), kLayout.format);
}

}  // namespace

const ModelFamily kQwen3Family{.name = "qwen3",
                               .summary = "transformers' Qwen3 (ungated)",
                               .claim = claim,
                               .config_from_hf = from_hf,
                               .config_to_hf = to_hf,
                               .map_tensors = tensors,
                               .hybrid = false,
                               .stacked_experts = false,
                               .gguf = &kGguf};

}  // namespace gatedlm::io
