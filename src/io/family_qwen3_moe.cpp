// The qwen3_moe family: transformers' Qwen3-MoE (model_type "qwen3_moe"; io/hf_qwen3_layout.h):
// Qwen3 with an MoE FFN every decoder_sparse_step layers (num_experts, num_experts_per_tok,
// moe_intermediate_size, norm_topk_prob, router_aux_loss_coef -> the `moe` object), no
// shared expert; the router and experts keep gatedlm's names (mlp.gate.weight,
// mlp.experts.{e}.{gate,up,down}_proj.weight). --format qwen3 and paper read and write it
// too; --format qwen3_moe insists on MoE. GGUF: llama.cpp's qwen3moe (export's choice for an
// ungated MoE model): every layer sparse, top-k renormalised, experts stacked as
// ffn_{gate,up,down}_exps (io/gguf_tables.h).
#include "io/gguf_tables.h"
#include "io/hf_qwen3_layout.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kQwen3MoeFamily;

namespace {

constexpr Qwen3Layout kLayout{"qwen3_moe", false, true, qwen3_name_table};
// llama.cpp's qwen3moe: ungated, MoE, picked by --gguf-arch auto.
constexpr GgufArchitecture kGguf{"qwen3moe", false, true, false, false, false, true,
                                 nullptr, gguf_ungated_names};

Claim claim(const nlohmann::json& hf) { return model_type_of(hf) == "qwen3_moe" ? Claim::model_type : Claim::none; }

}  // namespace

constinit const ModelFamily kQwen3MoeFamily = qwen3_layout_family<kLayout>(claim, &kGguf);

}  // namespace gatedlm::io
