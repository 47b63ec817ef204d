#include "kernels/rope.h"

#include <cmath>

#include "core/error.h"

namespace gatedlm::kernels {

std::vector<double> rope_inv_freq(int64_t rot_dims, double base) {
  std::vector<double> inv(rot_dims / 2);
  for (int64_t i = 0; i < rot_dims / 2; ++i)
    inv[i] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rot_dims));
  return inv;
}

RopeTable rope_table(const std::vector<double>& inv_freq, int64_t positions, double magnitude) {
  RopeTable t;
  t.positions = positions;
  t.half = static_cast<int64_t>(inv_freq.size());
  t.cos.resize(positions * t.half);
  t.sin.resize(positions * t.half);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < t.half; ++i) {
      double angle = static_cast<double>(p) * inv_freq[i];
      t.cos[p * t.half + i] = std::cos(angle) * magnitude;
      t.sin[p * t.half + i] = std::sin(angle) * magnitude;
    }
  return t;
}

}  // namespace gatedlm::kernels
