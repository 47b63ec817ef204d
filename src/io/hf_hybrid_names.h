#pragma once
// Where each gatedlm parameter lives in a hybrid Hugging Face checkpoint (the families
// qwen3_next, qwen3_5, qwen3_5_moe). gatedlm's names are Qwen3.5's; the layouts differ in three places:
//
//  * softmax layers, every format: q_proj [2 * n_heads * head_dim, d] holds per head h
//    [ query rows (head_dim) | G1 gate rows (head_dim) ]: ours q_proj row h*hd + i is row
//    2*h*hd + i, the gate's (self_attn.gate.weight) row h*hd + i is row 2*h*hd + hd + i;
//    q_proj.bias likewise for the query and gate biases.
//  * Qwen3-Next's linear layers fuse in_proj_qkvz [2*key_dim + 2*value_dim, d] and
//    in_proj_ba [2*n_v, d] per key head j (r = n_v / n_k value heads each, transformers'
//    fix_query_key_value_ordering): block j of in_proj_qkvz is
//    [ q_j (d_k) | k_j (d_k) | v of value heads j*r.. (r*d_v) | z of them (r*d_v) ],
//    block j of in_proj_ba is [ b of value heads j*r.. (r) | a of them (r) ].
//    gatedlm (and Qwen3.5) keep in_proj_qkv (q | k | v), in_proj_z, in_proj_b, in_proj_a.
//  * Qwen3.5-MoE stores each layer's experts stacked: mlp.experts.gate_up_proj
//    [E, 2*I, d] (expert e's gate_proj rows then its up_proj rows) and mlp.experts.down_proj
//    [E, d, I]; Qwen3-Next keeps one tensor per expert, as gatedlm. Either format may be
//    read in the other's storage (the importer looks at the tensor names).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/hf_names.h"

namespace gatedlm::io {

// How a hybrid family stores what the three layouts store differently.
struct HybridTensors {
  bool fused_linear_inputs;  // Qwen3-Next's in_proj_qkvz and in_proj_ba
  bool stacked_experts;      // the family's own expert storage: Qwen3.5-MoE's stacked tensors
};
// The mapping of every parameter (with their_shape and row), in layout order; `prefix`
// replaces "model." in the language model's names. stacked_experts: the storage the file
// uses (nullopt: the family's own).
std::vector<TensorMapping> map_hybrid_parameters(const model::ModelConfig& c, const model::ParamLayout& layout,
                                                 const HybridTensors& family, const std::string& prefix,
                                                 std::optional<bool> stacked_experts = std::nullopt);

// The row maps, exposed for the unit tests.
// Qwen3.5 / Qwen3-Next q_proj: row of ours (query or gate) row r.
int64_t head_interleaved_row(int64_t head_dim, bool gate, int64_t r);
// Qwen3-Next: which part of in_proj_qkv / in_proj_z / in_proj_b / in_proj_a.
enum class LinearPart { qkv, z, b, a };
int64_t qkvz_row(const model::LinearAttentionConfig& la, LinearPart part, int64_t r);
int64_t ba_row(const model::LinearAttentionConfig& la, LinearPart part, int64_t r);

}  // namespace gatedlm::io
