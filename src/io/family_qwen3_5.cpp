// The qwen3_5 family: Qwen3.5 / Qwen3.6 dense (transformers' Qwen3_5ForCausalLM; model_type
// "qwen3_5_text", or "qwen3_5" for the multimodal wrapper with the language model's keys in
// "text_config" and its tensors under "model.language_model."), a hybrid of Gated DeltaNet
// layers and G1-gated softmax layers (io/hf_hybrid_config.h); tensors as gatedlm names them
// (io/hf_hybrid_names.h). GGUF: llama.cpp's qwen35 (export's choice for a G1-gated dense
// model): tiled value heads, M-RoPE's rope.dimension_sections (text: plain RoPE),
// zero-centred norms stored plus one, A_log as ssm_a = -exp(A_log) (io/gguf_tables.h).
#include "io/gguf_tables.h"
#include "io/hf_hybrid_config.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kQwen35Family;

namespace {

constexpr HybridFamily kQwen35{"qwen3_5",
                               "qwen3_5_text",
                               "qwen3_5",
                               "Qwen3_5ForCausalLM",
                               HybridFfn::dense,
                               MoeKeys{},  // a dense family: no MoE keys
                               HybridTensors{false, false}};

// llama.cpp's qwen35: G1-gated, dense, M-RoPE sections, picked by --gguf-arch auto.
constexpr GgufArchitecture kGguf{"qwen35", true, false, false, true, false, true,
                                 nullptr, gguf_gated_names};

}  // namespace

constinit const ModelFamily kQwen35Family = hybrid_family<kQwen35>(&kGguf);

}  // namespace gatedlm::io
