// The qwen3_moe family: transformers' Qwen3-MoE (model_type "qwen3_moe"; io/hf_qwen3_layout.h):
// Qwen3 with an MoE FFN every decoder_sparse_step layers (num_experts, num_experts_per_tok,
// moe_intermediate_size, norm_topk_prob, router_aux_loss_coef -> the `moe` object), no
// shared expert; the router and experts keep gatedlm's names (mlp.gate.weight,
// mlp.experts.{e}.{gate,up,down}_proj.weight). --format qwen3 and paper read and write it
// too; --format qwen3_moe insists on MoE. GGUF: llama.cpp's qwen3moe (export's choice for an
// ungated MoE model): every layer sparse, top-k renormalised, experts stacked as
// ffn_{gate,up,down}_exps (io/gguf_tables.h).
#include "core/error.h"
#include "io/hf_qwen3_layout.h"
#include "io/hf_shared_keys.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kQwen3MoeFamily;

namespace {

constexpr const char* kModelType = "qwen3_moe";
constexpr Qwen3Layout kLayout{"qwen3_moe", false};
constexpr GgufArchitecture kGguf{"qwen3moe", false, true, false, false, false, true, nullptr};

Claim claim(const nlohmann::json& hf) { return model_type_of(hf) == kModelType ? Claim::model_type : Claim::none; }

model::ModelConfig from_hf(const nlohmann::json& hf, const std::string& source) {
  const std::string type = model_type_of(hf);
  if (type == "qwen3")
    fail(source, ": key \"model_type\" is \"qwen3\"; format qwen3_moe reads \"qwen3_moe\" (use --format qwen3 or auto)");
  return qwen3_layout_from_hf(hf, kLayout, source);
}

nlohmann::ordered_json to_hf(const model::ModelConfig& c, const std::string& torch_dtype) {
  if (!c.moe.enabled()) refuse_export(kLayout.format, "moe", "is required (use --format qwen3)");
  return qwen3_layout_to_hf(c, kLayout, torch_dtype);
}

std::vector<TensorMapping> tensors(const model::ModelConfig& c, const model::ParamLayout& layout, const std::string&,
                                   std::optional<bool>) {
  return map_table_tensors(c, layout, qwen3_name_table(), kLayout.format);
}

}  // namespace

const ModelFamily kQwen3MoeFamily{.name = "qwen3_moe",
                                  .summary = "transformers' Qwen3-MoE (ungated)",
                                  .claim = claim,
                                  .config_from_hf = from_hf,
                                  .config_to_hf = to_hf,
                                  .map_tensors = tensors,
                                  .hybrid = false,
                                  .stacked_experts = false,
                                  .gguf = &kGguf};

}  // namespace gatedlm::io
