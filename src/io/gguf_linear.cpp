#include "io/gguf_linear.h"

#include <map>

#include "io/hf_names.h"
#include "model/value_heads.h"

namespace gatedlm::io {

namespace {

// Runs of parameter s (linear-layer part `part`) for its value-head axis
// (model/value_heads.h) in the file's order: file head m*n_k + j (tiled) or j*r + m (grouped)
// is gatedlm's la.value_head(j, m); runs of heads in the same order join when read.
void value_heads(std::vector<GgufRun>& runs, const model::ParamSpec& s, const std::string& part,
                 const model::ModelConfig& c, model::ValueHeadOrder file) {
  const model::LinearAttentionConfig& la = c.linear_attention;
  const model::ValueHeadAxis axis = *model::value_head_axis(part, la, c.d_model);
  const int64_t r = la.heads_per_key();
  const bool tiled = file == model::ValueHeadOrder::tiled;
  for (int64_t o = 0; o < axis.outer; ++o)
    for (int64_t g = 0; g < la.n_v_heads; ++g) {
      const int64_t j = tiled ? g % la.n_k_heads : g / r, m = tiled ? g / la.n_k_heads : g % r;
      runs.push_back({&s, axis.base + o * axis.stride + la.value_head(j, m) * axis.head, axis.head});
    }
}

// qwen3next's ssm_ba [2 * n_v, d]: per key head j, the in_proj_b rows of the r value heads it
// serves, then their in_proj_a rows.
GgufTensor beta_alpha(const model::ParamLayout& layout, const model::ModelConfig& c, const std::string& layer) {
  const model::LinearAttentionConfig& la = c.linear_attention;
  const std::string prefix = "model.layers." + layer + ".linear_attn.";
  const model::ParamSpec& b = layout.at(prefix + "in_proj_b.weight");
  const model::ParamSpec& a = layout.at(prefix + "in_proj_a.weight");
  const int64_t d = c.d_model;
  GgufTensor t{"blk." + layer + ".ssm_ba.weight", {2 * la.n_v_heads, d}, {}};
  for (int64_t j = 0; j < la.n_k_heads; ++j)
    for (const model::ParamSpec* s : {&b, &a})
      for (int64_t m = 0; m < la.heads_per_key(); ++m) t.runs.push_back({s, la.value_head(j, m) * d, d});
  return t;
}

// qwen3next's older ssm_in [2 * key_dim + 2 * value_dim, d]: per key head j, its q rows, its
// k rows, the v rows (of in_proj_qkv) of the r value heads it serves, then their z rows (of in_proj_z).
GgufTensor fused_qkvz(const model::ParamLayout& layout, const model::ModelConfig& c, const std::string& layer) {
  const model::LinearAttentionConfig& la = c.linear_attention;
  const std::string prefix = "model.layers." + layer + ".linear_attn.";
  const model::ParamSpec& qkv = layout.at(prefix + "in_proj_qkv.weight");
  const model::ParamSpec& z = layout.at(prefix + "in_proj_z.weight");
  const int64_t d = c.d_model, key = la.k_head_dim * d, head = la.v_head_dim * d;
  GgufTensor t{"blk." + layer + ".ssm_in.weight", {2 * la.key_dim() + 2 * la.value_dim(), d}, {}};
  for (int64_t j = 0; j < la.n_k_heads; ++j) {
    t.runs.push_back({&qkv, j * key, key});
    t.runs.push_back({&qkv, la.n_k_heads * key + j * key, key});
    for (int64_t m = 0; m < la.heads_per_key(); ++m)
      t.runs.push_back({&qkv, 2 * la.n_k_heads * key + la.value_head(j, m) * head, head});
    for (int64_t m = 0; m < la.heads_per_key(); ++m) t.runs.push_back({&z, la.value_head(j, m) * head, head});
  }
  return t;
}

}  // namespace

bool add_linear_attention_tensor(std::vector<GgufTensor>& out, const model::ParamLayout& layout,
                                 const model::ParamSpec& s, const model::ModelConfig& c, bool grouped,
                                 bool ssm_in) {
  const auto [generic, layer] = generic_name(s.name);
  const std::string prefix = "model.layers.{i}.linear_attn.";
  if (generic.rfind(prefix, 0) != 0) return false;
  const std::string part = generic.substr(prefix.size()), blk = "blk." + layer + ".";
  const model::LinearAttentionConfig& la = c.linear_attention;
  const model::ValueHeadOrder file = grouped ? model::ValueHeadOrder::grouped : model::ValueHeadOrder::tiled;
  const bool fused_ba = grouped;
  GgufTensor t{"", s.shape, {}};
  if (ssm_in && fused_ba && (part == "in_proj_qkv.weight" || part == "in_proj_z.weight")) {
    if (part == "in_proj_qkv.weight") out.push_back(fused_qkvz(layout, c, layer));
    return true;
  }
  if (fused_ba && (part == "in_proj_b.weight" || part == "in_proj_a.weight")) {
    if (part == "in_proj_b.weight") out.push_back(beta_alpha(layout, c, layer));
    return true;
  }
  static const std::map<std::string, std::string> names = {
      {"in_proj_qkv.weight", "attn_qkv.weight"}, {"in_proj_z.weight", "attn_gate.weight"},
      {"in_proj_b.weight", "ssm_beta.weight"},   {"in_proj_a.weight", "ssm_alpha.weight"},
      {"conv1d.weight", "ssm_conv1d.weight"},    {"dt_bias", "ssm_dt.bias"},
      {"A_log", "ssm_a"},                        {"norm.weight", "ssm_norm.weight"},
      {"out_proj.weight", "ssm_out.weight"}};
  const auto name = names.find(part);
  if (name == names.end()) return false;
  t.name = blk + name->second;
  if (part == "conv1d.weight") t.shape = {la.conv_dim(), la.conv_kernel};  // [C, 1, K] -> [C, K]
  if (part == "A_log") t.values = GgufValues::minus_exp;
  const auto axis = model::value_head_axis(part, la, c.d_model);
  if (!axis) {  // norm.weight: shared by the heads
    t.runs.push_back({&s, 0, s.numel});
  } else {  // what precedes the heads (q | k of in_proj_qkv, conv1d), then the heads
    if (axis->base > 0) t.runs.push_back({&s, 0, axis->base});
    value_heads(t.runs, s, part, c, file);
  }
  out.push_back(std::move(t));
  return true;
}

}  // namespace gatedlm::io
