#pragma once
// Where the value heads sit in a linear (Gated DeltaNet) layer's parameters, and how to turn a
// model from one value-head order into the other (model/hybrid_config.h's ValueHeadOrder):
// llama.cpp's qwen35 files keep their tiled order as gatedlm imports them, Hugging Face's
// files are grouped, and an export writes the order of its target.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "model/config.h"

namespace gatedlm::model {

// A parameter's value-head axis: for each of `outer` blocks (`stride` values apart, from
// `base`), n_v heads of `head` values each, one after another.
struct ValueHeadAxis {
  int64_t base = 0, head = 0, outer = 1, stride = 0;
};

// The axis of linear-layer parameter `part` (its name after "linear_attn.", e.g.
// "in_proj_qkv.weight": the v rows after q and k; "out_proj.weight": each row's columns);
// nullopt for norm.weight, which the heads share, and any name the layer does not have.
std::optional<ValueHeadAxis> value_head_axis(const std::string& part, const LinearAttentionConfig& la,
                                             int64_t d_model);

// Rewrites every linear layer's value heads in `params` (ParamLayout(c)'s) from c's order to
// `to`, and sets it in c: the same model, its tensors in the other order.
void reorder_value_heads(ModelConfig& c, std::span<float> params, ValueHeadOrder to);

}  // namespace gatedlm::model
