#pragma once
// The tables GGUF export (io/gguf.cpp) writes by and GGUF import (io/gguf_import.cpp) reads
// by, so that the two directions cannot drift apart: which GGUF tensors hold a gatedlm
// parameter layout (llama.cpp's names, MoE experts stacked, qwen35's gate inside attn_q)
// and which metadata keys hold the model config's numbers. Defined in io/gguf_tables.cpp.
//
// The architectures are the model families' (io/model_family.h, GgufArchitecture): qwen3
// (ungated dense), qwen3moe (ungated MoE), qwen35 (the paper's G1 gate: elementwise sigmoid on
// the SDPA output, reading all of d_model; Gated DeltaNet layers beside the softmax ones:
// io/gguf_linear.h), qwen35moe (the same with MoE FFNs) and qwen3next (MoE only; the Gated
// DeltaNet tensors in Hugging Face's grouped head order, beta and alpha fused into ssm_ba).
// The tables here read an architecture's traits, never its name. The hybrid ones hold the gate in attn_q: per head h, the
// head's head_dim query rows, then its head_dim gate rows. Their norms are llama.cpp's plain
// x_hat * w (llama.cpp's converter adds 1 to Qwen3.5's and Qwen3-Next's zero-centred
// weights), so zero-centred weights are stored plus one and plain ones as they are.
// llama.cpp's qwen35moe and qwen3next require a sigmoid-gated shared expert: a model without
// one is stored with a zero shared expert of kZeroSharedUnits units (its output is exactly 0).
//
// An architecture is chosen from the config (gguf_architecture) or named (export's
// --gguf-arch); the tables below take it as `arch`. The importer accepts every architecture
// they know (io/gguf_import.cpp).
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "io/gguf_tensor.h"
#include "io/model_family.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::io {

// Every parameter of the layout of config c, in layout order of first use. Throws naming a
// parameter that has no GGUF name.
std::vector<GgufTensor> gguf_tensors(const model::ParamLayout& layout, const model::ModelConfig& c);
// ssm_in: qwen3next's linear layers with q, k, v and z fused in ssm_in, as older llama.cpp
// converters wrote them (io/gguf_linear.h).
std::vector<GgufTensor> gguf_tensors(const model::ParamLayout& layout, const model::ModelConfig& c, const std::string& arch,
                                     bool ssm_in = false);

// The GGUF names of the ungated architectures (qwen3, qwen3moe: attn_q, ffn_norm) and of the
// G1-gated ones (qwen35, qwen35moe, qwen3next: post_attention_norm, the shared expert's),
// beyond those every architecture shares (token_embd, attn_k, ffn_gate_inp, ...). A family's
// GgufArchitecture::tensor_names names one of them.
const std::vector<GgufName>& gguf_ungated_names();
const std::vector<GgufName>& gguf_gated_names();

// The width of the zero shared expert written for an MoE model without a shared expert.
inline constexpr int64_t kZeroSharedUnits = 32;
// The traits of a registered family's architecture; throws for a name no family has.
const GgufArchitecture& gguf_traits(const std::string& arch);
// qwen35, qwen35moe, qwen3next: the G1-gated hybrid architectures.
bool gguf_is_hybrid(const std::string& arch);
// qwen35moe, qwen3next: MoE with a required sigmoid-gated shared expert.
bool gguf_has_shared_expert(const std::string& arch);

// The architecture export picks for the model's gate and FFN (chosen_by_auto): "qwen3" or
// "qwen3moe" for an ungated model, "qwen35" or "qwen35moe" for a gated one: the value of
// general.architecture and the prefix of the keys below. (Export refuses first what the
// architecture cannot run: io/gguf.cpp.)
std::string gguf_architecture(const model::ModelConfig& c);

// A config number stored under "<architecture>.<key>": a field of ModelConfig, or (moe_field
// set) of its MoeConfig, written only for MoE models. Several keys may hold one field
// (key_length and value_length are both head_dim): import requires them to agree.
struct GgufIntKey {
  const char* key;
  int64_t model::ModelConfig::*field;
  int64_t model::MoeConfig::*moe_field;
};
struct GgufFloatKey {
  const char* key;
  double model::ModelConfig::*field;
};
const std::vector<GgufIntKey>& gguf_int_keys();
const std::vector<GgufFloatKey>& gguf_float_keys();

inline int64_t& gguf_field(model::ModelConfig& c, const GgufIntKey& k) {
  return k.field ? c.*k.field : c.moe.*k.moe_field;
}
inline int64_t gguf_field(const model::ModelConfig& c, const GgufIntKey& k) {
  return k.field ? c.*k.field : c.moe.*k.moe_field;
}

// Keys of one architecture only (the hybrids' rope.dimension_count = rope_dims, and qwen35's
// M-RoPE rope.dimension_sections (qwen3next's RoPE is NeoX's rotate-half); the layer kinds as full_attention_interval k when layer l is full
// attention iff (l + 1) % k == 0, else as attention.recurrent_layers (a bool per layer); the
// ssm.* sizes of the Gated DeltaNet layers (conv_kernel, state_size = k_head_dim,
// group_count = n_k_heads, time_step_rank = n_v_heads, inner_size = n_v_heads * v_head_dim;
// 0 without such layers: qwen35 requires them); qwen35moe's and qwen3next's
// expert_shared_feed_forward_length), without the "<architecture>." prefix.
struct GgufArchKey {
  std::string key;
  std::variant<uint32_t, std::vector<int32_t>, std::vector<bool>> value;
};
std::vector<GgufArchKey> gguf_arch_keys(const model::ModelConfig& c);
std::vector<GgufArchKey> gguf_arch_keys(const model::ModelConfig& c, const std::string& arch);

// qwen35's M-RoPE sections for rope_dims rotated dims (p = rope_dims / 2 pairs):
// llama.cpp gives pair s the position of section s % 3 when s < 3 * sections[s % 3] and
// position 0 otherwise; for text all three sections hold the token's position, so
// [ceil(p/3), ceil((p-1)/3), floor(p/3), 0] makes it the rotate-half RoPE gatedlm computes.
std::vector<int32_t> gguf_rope_sections(int64_t rope_dims);

}  // namespace gatedlm::io
