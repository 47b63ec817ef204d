#pragma once
// The Gated DeltaNet ("linear attention") layers of a hybrid model in llama.cpp's qwen35 /
// qwen35moe / qwen3next GGUF (used by io/gguf_tables.cpp; which form, by the architecture's traits). Hugging Face Qwen3.5's tensors map
// one to one to llama.cpp's, as its converter writes them:
//   in_proj_qkv -> attn_qkv, in_proj_z -> attn_gate, in_proj_b -> ssm_beta,
//   in_proj_a -> ssm_alpha, conv1d [C, 1, K] -> ssm_conv1d [C, K], dt_bias -> ssm_dt.bias,
//   A_log -> ssm_a = -exp(A_log), norm -> ssm_norm (plain, never zero-centred),
//   out_proj -> ssm_out.
// The value-head axis (model/value_heads.h: the rows of v in attn_qkv, attn_gate, ssm_beta,
// ssm_alpha, ssm_dt, ssm_a and the v channels of ssm_conv1d, and the columns of ssm_out) is in
// the architecture's order, the model's (model/hybrid_config.h's ValueHeadOrder) reordered to
// it where they differ: qwen35 / qwen35moe tile the value heads (file head m*n_k + j is the
// m-th head key head j serves), which ggml's broadcasting repeats key heads in; r = n_v / n_k.
// A qwen35 import keeps the tiled order, so every tensor loads as it is (K-quant blocks of
// ssm_out included); a Hugging Face model (grouped) is tiled as it is written.
// qwen3next keeps the grouped order (its graph repeats key heads interleaved) and fuses beta
// and alpha as Qwen3-Next's in_proj_ba: ssm_ba [2 * n_v, d], per key head j its r beta rows,
// then its r alpha rows. Older qwen3next files (llama.cpp's converter before it split
// in_proj_qkvz) hold q, k, v and z in one ssm_in [2 * key_dim + 2 * value_dim, d], per key
// head j: its q rows, its k rows, its r value heads' v rows, their z rows (`ssm_in` below);
// llama.cpp still reads them.
#include <string>
#include <vector>

#include "io/gguf_tensor.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::io {

// The GGUF tensor of one parameter of a linear layer (none for qwen3next's in_proj_a, which
// is in ssm_ba, nor for in_proj_z with `ssm_in`); false for any other parameter. grouped:
// the architecture keeps Hugging Face's grouped value heads and fuses ssm_ba (qwen3next's
// GgufArchitecture::grouped_linear_inputs); else the value heads are tiled (qwen35).
bool add_linear_attention_tensor(std::vector<GgufTensor>& out, const model::ParamLayout& layout,
                                 const model::ParamSpec& s, const model::ModelConfig& c, bool grouped,
                                 bool ssm_in = false);

}  // namespace gatedlm::io
