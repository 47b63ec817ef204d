#pragma once
// RoPE scaling for context extension (docs/metrics.md, "RoPE and its extensions"), with
// D = rope_dims, b = rope_base, s = factor, L = original_max_seq_len:
//   none    inv_freq_i = b^(-2i/D)
//   linear  position interpolation: inv_freq_i = b^(-2i/D) / s
//   ntk     NTK-aware base: b' = b * s^(D/(D-2)), inv_freq_i = b'^(-2i/D)
//   yarn    as Hugging Face transformers: d(r) = D ln(L/(2 pi r)) / (2 ln b),
//           low = max(floor(d(32)), 0), high = min(ceil(d(1)), D-1),
//           ramp_i = clamp((i-low)/(high-low), 0, 1), w_ext = 1 - ramp_i,
//           inv_freq_i = (b^(-2i/D)/s)(1-w_ext) + b^(-2i/D) w_ext,
//           and cos/sin multiplied by m = 0.1 ln s + 1 (attention logits scale by m^2).
// The magnitude is 1 for every type but yarn.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope.h"

namespace gatedlm::model {


enum class RopeScalingType { none, linear, ntk, yarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 1.0;
  int64_t original_max_seq_len = 0;  // 0 = the model's max_seq_len
};

std::string to_string(RopeScalingType t);
// "none", "linear", "ntk", "yarn"; throws naming `what` otherwise.
RopeScalingType parse_rope_scaling_type(const std::string& name, const std::string& what);

// YaRN's correction range: the first and last rotary-pair index of the ramp.
struct YarnRange {
  double low = 0, high = 0;
};
YarnRange yarn_range(int64_t rot_dims, double base, int64_t original_len, double beta_fast = 32.0,
                     double beta_slow = 1.0);

// inv_freq [rot_dims/2] and the cos/sin magnitude of a scaling.
struct ScaledRope {
  std::vector<double> inv_freq;
  double magnitude = 1.0;
};
// original_len must be resolved (> 0) for yarn.
ScaledRope scaled_rope(int64_t rot_dims, double base, const RopeScaling& scaling, int64_t original_len);

}  // namespace gatedlm::model
