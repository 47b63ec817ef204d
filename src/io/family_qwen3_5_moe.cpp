// The qwen3_5_moe family: Qwen3.5 / Qwen3.6 MoE (transformers' Qwen3_5MoeForCausalLM;
// model_type "qwen3_5_moe_text", or "qwen3_5_moe" for the multimodal wrapper), the qwen3_5
// hybrid with an MoE FFN in every layer: top-k weights always renormalised, a shared expert
// behind a sigmoid gate (io/hf_hybrid_config.h). Experts stored stacked:
// mlp.experts.gate_up_proj [E, 2I, d] and mlp.experts.down_proj [E, d, I] (io/hf_hybrid_names.h;
// one tensor each is read too). GGUF: llama.cpp's qwen35moe (export's choice for a G1-gated
// MoE model): qwen35's tensors and keys, the experts stacked, a shared expert required (a
// zero one written for a model without).
#include "io/gguf_tables.h"
#include "io/hf_hybrid_config.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kQwen35MoeFamily;

namespace {

// transformers' Qwen3_5MoeTextConfig defaults: 256 experts, top 8, renormalised.
constexpr HybridFamily kQwen35Moe{"qwen3_5_moe",
                                  "qwen3_5_moe_text",
                                  "qwen3_5_moe",
                                  "Qwen3_5MoeForCausalLM",
                                  HybridFfn::moe_every_layer,
                                  MoeKeys{256, 8, 512, true, true, false},
                                  HybridTensors{false, true}};

// llama.cpp's qwen35moe: G1-gated, MoE, a shared expert, M-RoPE sections, picked by --gguf-arch auto.
constexpr GgufArchitecture kGguf{"qwen35moe", true, true, true, true, false, true,
                                 nullptr, gguf_gated_names};

}  // namespace

constinit const ModelFamily kQwen35MoeFamily = hybrid_family<kQwen35Moe>(&kGguf);

}  // namespace gatedlm::io
