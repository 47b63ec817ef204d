#include "model/value_heads.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "model/param_layout.h"

namespace gatedlm::model {

std::optional<ValueHeadAxis> value_head_axis(const std::string& part, const LinearAttentionConfig& la,
                                             int64_t d_model) {
  const int64_t d = d_model, dv = la.v_head_dim, kd = la.key_dim(), K = la.conv_kernel;
  if (part == "in_proj_qkv.weight") return ValueHeadAxis{2 * kd * d, dv * d};  // rows q | k | v
  if (part == "in_proj_z.weight") return ValueHeadAxis{0, dv * d};
  if (part == "in_proj_b.weight" || part == "in_proj_a.weight") return ValueHeadAxis{0, d};
  if (part == "conv1d.weight") return ValueHeadAxis{2 * kd * K, dv * K};  // [C, 1, K]: channels q | k | v
  if (part == "dt_bias" || part == "A_log") return ValueHeadAxis{0, 1};
  if (part == "out_proj.weight") return ValueHeadAxis{0, dv, d, la.value_dim()};  // [d, n_v * d_v]
  return std::nullopt;
}

void reorder_value_heads(ModelConfig& c, std::span<float> params, ValueHeadOrder to) {
  LinearAttentionConfig& la = c.linear_attention;
  const ParamLayout layout(c);
  if (static_cast<int64_t>(params.size()) != layout.total())
    fail("reorder_value_heads: ", params.size(), " values, the model has ", layout.total());
  if (la.value_head_order == to) return;
  const std::string marker = ".linear_attn.";
  const int64_t r = la.heads_per_key();
  std::vector<float> heads;
  for (const ParamSpec& s : layout.specs()) {
    const size_t at = s.name.find(marker);
    if (at == std::string::npos) continue;
    const auto axis = value_head_axis(s.name.substr(at + marker.size()), la, c.d_model);
    if (!axis) continue;
    heads.resize(static_cast<size_t>(la.n_v_heads * axis->head));
    for (int64_t o = 0; o < axis->outer; ++o) {
      float* block = params.data() + s.offset + axis->base + o * axis->stride;
      std::copy(block, block + heads.size(), heads.begin());
      for (int64_t j = 0; j < la.n_k_heads; ++j)
        for (int64_t m = 0; m < r; ++m)
          std::copy_n(heads.data() + la.value_head(j, m) * axis->head, axis->head,
                      block + la.value_head(j, m, to) * axis->head);
    }
  }
  la.value_head_order = to;
}

}  // namespace gatedlm::model
