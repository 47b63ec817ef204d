#pragma once
// GGUF import of llama.cpp's gated hybrid architectures (qwen35, qwen35moe, qwen3next; used by
// io/gguf_import.cpp), the inverse of what export writes (io/gguf_tables.h, io/gguf_linear.h)
// and of what llama.cpp's converter writes for Qwen3.5 / Qwen3-Next:
//   - the G1 gate (its rows inside attn_q), QK-norm;
//   - the layer kinds from attention.recurrent_layers (a bool per layer) or
//     full_attention_interval (llama.cpp's default 4 when neither is there);
//   - the Gated DeltaNet shape from ssm.group_count (n_k_heads), ssm.time_step_rank
//     (n_v_heads), ssm.state_size (k_head_dim = v_head_dim; ssm.inner_size must be
//     n_v_heads * state_size), ssm.conv_kernel; the value heads in the file's order (qwen35's
//     tiled, qwen3next's grouped), so that no tensor is reordered;
//   - rope_dims from rope.dimension_count; qwen35's rope.dimension_sections must give every
//     rotated pair the token's position (text M-RoPE = rotate-half RoPE);
//   - qwen3next's linear layers as attn_qkv + attn_gate or, from older converters, ssm_in;
//   - MoE: one shared expert of expert_shared_feed_forward_length units, or none when the
//     file holds the all-zero one of kZeroSharedUnits units export writes for a model without;
//   - the norms' convention: gatedlm's key kGgufNormZeroCenteredKey when the file has it, else
//     zero-centred for these architectures (llama.cpp's converter stores Qwen3.5's and
//     Qwen3-Next's 1 + w), and every value map undone (stored 1 + w -> w, ssm_a = -exp(A_log)
//     -> A_log).
//   - multi-token-prediction blocks (nextn_predict_layers, counted in block_count after the
//     model's own) are left out: gatedlm has no MTP head (import says so).
#include <span>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_tables.h"

namespace gatedlm::io {

// The keys (without the "<arch>." prefix) the hybrid reader consumes beyond the shared ones.
std::vector<std::string> gguf_hybrid_keys(const std::string& arch);
// Completes config c (its shared keys read) for hybrid architecture `arch`.
void read_hybrid_config(GgufReader& f, const std::string& arch, model::ModelConfig& c);
// How many of the file's blocks are multi-token-prediction blocks (the last ones).
int64_t gguf_mtp_layers(const GgufReader& f, const std::string& arch);
// Whether a qwen3next file holds its linear layers' q, k, v and z fused in ssm_in (older
// converters; io/gguf_linear.h).
bool gguf_has_fused_qkvz(const GgufReader& f, const std::string& arch);
// Whether the norms are zero-centred: the gatedlm key, else the architecture's convention.
bool gguf_norm_zero_centered(const GgufReader& f, const std::string& arch);
// Undoes each tensor's value map (GgufValues) on the parameters it was read into; refuses,
// naming the tensor, a stored ssm_a that is not negative.
void invert_stored_values(const std::vector<GgufTensor>& tensors, std::span<float> params, const std::string& path);

}  // namespace gatedlm::io
