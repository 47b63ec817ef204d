// The qwen3_next family: transformers' Qwen3-Next (model_type "qwen3_next"), a hybrid of Gated
// DeltaNet layers and G1-gated softmax layers; dense when num_experts is 0, else MoE with a
// shared expert every decoder_sparse_step layers (io/hf_hybrid_config.h). Its linear layers
// fuse q, k, v, z in in_proj_qkvz and b, a in in_proj_ba, per key head; experts one tensor
// each (io/hf_hybrid_names.h). GGUF: llama.cpp's qwen3next, MoE only (llama.cpp refuses zero
// experts), asked for by --gguf-arch: grouped value heads, beta and alpha fused in ssm_ba,
// older files' ssm_in read (io/gguf_linear.h), no M-RoPE sections.
#include "io/gguf_tables.h"
#include "io/hf_hybrid_config.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kQwen3NextFamily;

namespace {

// transformers' Qwen3NextConfig defaults: 512 experts, top 10, renormalised.
constexpr HybridFamily kQwen3Next{"qwen3_next",
                                  "qwen3_next",
                                  nullptr,
                                  "Qwen3NextForCausalLM",
                                  HybridFfn::dense_or_moe,
                                  MoeKeys{512, 10, 512, true, true, true},
                                  HybridTensors{true, false}};

// llama.cpp's qwen3next: G1-gated, MoE, a shared expert, grouped linear inputs, asked for by name.
constexpr GgufArchitecture kGguf{"qwen3next", true, true, true, false, true, false,
                                 "\"model cannot have zero experts\"", gguf_gated_names};

}  // namespace

constinit const ModelFamily kQwen3NextFamily = hybrid_family<kQwen3Next>(&kGguf);

}  // namespace gatedlm::io
