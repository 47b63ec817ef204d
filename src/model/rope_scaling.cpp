#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace gatedlm::model {

std::string to_string(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::none: return "none";
    case RopeScalingType::linear: return "linear";
    case RopeScalingType::ntk: return "ntk";
    case RopeScalingType::yarn: return "yarn";
  }
  return "?";
}

RopeScalingType parse_rope_scaling_type(const std::string& name, const std::string& what) {
  for (RopeScalingType t : {RopeScalingType::none, RopeScalingType::linear, RopeScalingType::ntk, RopeScalingType::yarn})
    if (to_string(t) == name) return t;
  fail(what, ": unknown value \"", name, "\" (expected none|linear|ntk|yarn)");
}

YarnRange yarn_range(int64_t rot_dims, double base, int64_t original_len, double beta_fast, double beta_slow) {
  const double D = static_cast<double>(rot_dims);
  // The pair index whose wavelength 2*pi/inv_freq fits `rotations` times into original_len.
  auto dim_of = [&](double rotations) {
    return D * std::log(static_cast<double>(original_len) / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(base));
  };
  YarnRange r;
  r.low = std::max(std::floor(dim_of(beta_fast)), 0.0);
  r.high = std::min(std::ceil(dim_of(beta_slow)), D - 1.0);
  return r;
}

ScaledRope scaled_rope(int64_t rot_dims, double base, const RopeScaling& scaling, int64_t original_len) {
  ScaledRope out;
  const double s = scaling.factor;
  switch (scaling.type) {
    case RopeScalingType::none:
      out.inv_freq = kernels::rope_inv_freq(rot_dims, base);
      break;
    case RopeScalingType::linear:
      out.inv_freq = kernels::rope_inv_freq(rot_dims, base);
      for (double& f : out.inv_freq) f /= s;
      break;
    case RopeScalingType::ntk: {
      if (rot_dims <= 2) fail("rope_scaling ntk needs rope_dims > 2, got ", rot_dims);
      const double D = static_cast<double>(rot_dims);
      out.inv_freq = kernels::rope_inv_freq(rot_dims, base * std::pow(s, D / (D - 2.0)));
      break;
    }
    case RopeScalingType::yarn: {
      if (original_len < 1) fail("rope_scaling yarn needs original_max_seq_len >= 1, got ", original_len);
      const std::vector<double> extrapolation = kernels::rope_inv_freq(rot_dims, base);
      YarnRange range = yarn_range(rot_dims, base, original_len);
      if (range.low == range.high) range.high += 0.001;  // as transformers does
      out.inv_freq.resize(extrapolation.size());
      for (size_t i = 0; i < extrapolation.size(); ++i) {
        const double ramp =
            std::clamp((static_cast<double>(i) - range.low) / (range.high - range.low), 0.0, 1.0);
        const double w_ext = 1.0 - ramp;
        out.inv_freq[i] = extrapolation[i] / s * (1.0 - w_ext) + extrapolation[i] * w_ext;
      }
      out.magnitude = s <= 1.0 ? 1.0 : 0.1 * std::log(s) + 1.0;
      break;
    }
  }
  return out;
}

}  // namespace gatedlm::model
