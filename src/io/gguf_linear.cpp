#include "io/gguf_linear.h"

#include "io/hf_names.h"

namespace gatedlm::io {

namespace {

// Runs of parameter s: for each of `outer` blocks (`stride` values apart, from `base`), its
// n_v value heads of `head` values each, in tiled order when `tiled`, else as they are.
void value_heads(std::vector<GgufRun>& runs, const model::ParamSpec& s, const model::LinearAttentionConfig& la,
                 bool tiled, int64_t base, int64_t head, int64_t outer, int64_t stride) {
  const int64_t r = la.heads_per_key();
  for (int64_t o = 0; o < outer; ++o) {
    if (!tiled) {
      runs.push_back({&s, base + o * stride, la.n_v_heads * head});
      continue;
    }
    for (int64_t m = 0; m < r; ++m)
      for (int64_t j = 0; j < la.n_k_heads; ++j) runs.push_back({&s, base + o * stride + (j * r + m) * head, head});
  }
}

// qwen3next's ssm_ba [2 * n_v, d]: per key head, its r rows of in_proj_b, then its r of in_proj_a.
GgufTensor beta_alpha(const model::ParamLayout& layout, const model::ModelConfig& c, const std::string& layer) {
  const model::LinearAttentionConfig& la = c.linear_attention;
  const std::string prefix = "model.layers." + layer + ".linear_attn.";
  const model::ParamSpec& b = layout.at(prefix + "in_proj_b.weight");
  const model::ParamSpec& a = layout.at(prefix + "in_proj_a.weight");
  const int64_t rows = la.heads_per_key() * c.d_model;  // values of one key head's rows
  GgufTensor t{"blk." + layer + ".ssm_ba.weight", {2 * la.n_v_heads, c.d_model}, {}};
  for (int64_t j = 0; j < la.n_k_heads; ++j) {
    t.runs.push_back({&b, j * rows, rows});
    t.runs.push_back({&a, j * rows, rows});
  }
  return t;
}

// qwen3next's older ssm_in [2 * key_dim + 2 * value_dim, d]: per key head j, its q rows, its
// k rows, its r value heads' v rows (of in_proj_qkv), then their z rows (of in_proj_z).
GgufTensor fused_qkvz(const model::ParamLayout& layout, const model::ModelConfig& c, const std::string& layer) {
  const model::LinearAttentionConfig& la = c.linear_attention;
  const std::string prefix = "model.layers." + layer + ".linear_attn.";
  const model::ParamSpec& qkv = layout.at(prefix + "in_proj_qkv.weight");
  const model::ParamSpec& z = layout.at(prefix + "in_proj_z.weight");
  const int64_t d = c.d_model, key = la.k_head_dim * d, values = la.heads_per_key() * la.v_head_dim * d;
  GgufTensor t{"blk." + layer + ".ssm_in.weight", {2 * la.key_dim() + 2 * la.value_dim(), d}, {}};
  for (int64_t j = 0; j < la.n_k_heads; ++j) {
    t.runs.push_back({&qkv, j * key, key});
    t.runs.push_back({&qkv, la.n_k_heads * key + j * key, key});
    t.runs.push_back({&qkv, 2 * la.n_k_heads * key + j * values, values});
    t.runs.push_back({&z, j * values, values});
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
  const int64_t d = c.d_model, dv = la.v_head_dim, nv = la.n_v_heads;
  const bool tiled = !grouped, fused_ba = grouped;
  GgufTensor t{"", s.shape, {}};
  if (ssm_in && fused_ba && (part == "in_proj_qkv.weight" || part == "in_proj_z.weight")) {
    if (part == "in_proj_qkv.weight") out.push_back(fused_qkvz(layout, c, layer));
    return true;
  }
  if (part == "in_proj_qkv.weight") {  // q | k as they are, then v's heads
    t.name = blk + "attn_qkv.weight";
    t.runs.push_back({&s, 0, 2 * la.key_dim() * d});
    value_heads(t.runs, s, la, tiled, 2 * la.key_dim() * d, dv * d, 1, 0);
  } else if (fused_ba && (part == "in_proj_b.weight" || part == "in_proj_a.weight")) {
    if (part == "in_proj_b.weight") out.push_back(beta_alpha(layout, c, layer));
    return true;
  } else if (part == "in_proj_z.weight" || part == "in_proj_b.weight" || part == "in_proj_a.weight") {
    t.name = blk + (part == "in_proj_z.weight" ? "attn_gate.weight" : part == "in_proj_b.weight" ? "ssm_beta.weight" : "ssm_alpha.weight");
    value_heads(t.runs, s, la, tiled, 0, (part == "in_proj_z.weight" ? dv : 1) * d, 1, 0);
  } else if (part == "conv1d.weight") {  // [C, 1, K] -> [C, K]; then the v channels' heads
    const int64_t k = la.conv_kernel;
    t.name = blk + "ssm_conv1d.weight";
    t.shape = {la.conv_dim(), k};
    t.runs.push_back({&s, 0, 2 * la.key_dim() * k});
    value_heads(t.runs, s, la, tiled, 2 * la.key_dim() * k, dv * k, 1, 0);
  } else if (part == "dt_bias" || part == "A_log") {
    t.name = blk + (part == "dt_bias" ? "ssm_dt.bias" : "ssm_a");
    if (part == "A_log") t.values = GgufValues::minus_exp;
    value_heads(t.runs, s, la, tiled, 0, 1, 1, 0);
  } else if (part == "norm.weight") {
    t.name = blk + "ssm_norm.weight";
    t.runs.push_back({&s, 0, s.numel});
  } else if (part == "out_proj.weight") {  // [d, n_v * dv]: each row's heads
    t.name = blk + "ssm_out.weight";
    value_heads(t.runs, s, la, tiled, 0, dv, d, nv * dv);
  } else {
    return false;
  }
  out.push_back(std::move(t));
  return true;
}

}  // namespace gatedlm::io
