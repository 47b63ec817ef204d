#include "io/gguf_linear.h"

#include "io/hf_names.h"

namespace gatedlm::io {

namespace {

// Runs of `width` values of parameter s: for each of `outer` blocks (`stride` values apart,
// from `base`), the value heads of `head` values each in tiled order.
void tiled_heads(std::vector<GgufRun>& runs, const model::ParamSpec& s, const model::LinearAttentionConfig& la,
                 int64_t base, int64_t head, int64_t outer, int64_t stride) {
  const int64_t r = la.heads_per_key();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t m = 0; m < r; ++m)
      for (int64_t j = 0; j < la.n_k_heads; ++j) runs.push_back({&s, base + o * stride + (j * r + m) * head, head});
}

}  // namespace

bool add_linear_attention_tensor(std::vector<GgufTensor>& out, const model::ParamSpec& s, const model::ModelConfig& c) {
  const auto [generic, layer] = generic_name(s.name);
  const std::string prefix = "model.layers.{i}.linear_attn.";
  if (generic.rfind(prefix, 0) != 0) return false;
  const std::string part = generic.substr(prefix.size()), blk = "blk." + layer + ".";
  const model::LinearAttentionConfig& la = c.linear_attention;
  const int64_t d = c.d_model, dv = la.v_head_dim, nv = la.n_v_heads;
  GgufTensor t{"", s.shape, {}};
  if (part == "in_proj_qkv.weight") {  // q | k as they are, v's heads tiled
    t.name = blk + "attn_qkv.weight";
    t.runs.push_back({&s, 0, 2 * la.key_dim() * d});
    tiled_heads(t.runs, s, la, 2 * la.key_dim() * d, dv * d, 1, 0);
  } else if (part == "in_proj_z.weight" || part == "in_proj_b.weight" || part == "in_proj_a.weight") {
    t.name = blk + (part == "in_proj_z.weight" ? "attn_gate.weight" : part == "in_proj_b.weight" ? "ssm_beta.weight" : "ssm_alpha.weight");
    tiled_heads(t.runs, s, la, 0, (part == "in_proj_z.weight" ? dv : 1) * d, 1, 0);
  } else if (part == "conv1d.weight") {  // [C, 1, K] -> [C, K]; the v channels' heads tiled
    const int64_t k = la.conv_kernel;
    t.name = blk + "ssm_conv1d.weight";
    t.shape = {la.conv_dim(), k};
    t.runs.push_back({&s, 0, 2 * la.key_dim() * k});
    tiled_heads(t.runs, s, la, 2 * la.key_dim() * k, dv * k, 1, 0);
  } else if (part == "dt_bias" || part == "A_log") {
    t.name = blk + (part == "dt_bias" ? "ssm_dt.bias" : "ssm_a");
    if (part == "A_log") t.values = GgufValues::minus_exp;
    tiled_heads(t.runs, s, la, 0, 1, 1, 0);
  } else if (part == "norm.weight") {
    t.name = blk + "ssm_norm.weight";
    t.runs.push_back({&s, 0, s.numel});
  } else if (part == "out_proj.weight") {  // [d, n_v * dv]: each row's heads tiled
    t.name = blk + "ssm_out.weight";
    tiled_heads(t.runs, s, la, 0, dv, d, nv * dv);
  } else {
    return false;
  }
  out.push_back(std::move(t));
  return true;
}

}  // namespace gatedlm::io
