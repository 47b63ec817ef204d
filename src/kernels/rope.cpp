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

// Runs of consecutive rows at consecutive positions (a prompt) go to rope_apply in one
// call; a decode step's rows, one per sequence, one call each.
template <typename T>
void rope_apply_rows(T* x, const RopeTable& table, int64_t n, const int32_t* positions, int64_t heads,
                     int64_t head_dim) {
  for (int64_t r = 0; r < n;) {
    int64_t len = 1;
    while (r + len < n && positions[r + len] == positions[r] + len) ++len;
    if (positions[r] < 0) fail("rope: negative position ", positions[r]);
    rope_apply(x + r * heads * head_dim, table, 1, len, heads, head_dim, positions[r], false);
    r += len;
  }
}

template void rope_apply_rows<float>(float*, const RopeTable&, int64_t, const int32_t*, int64_t, int64_t);
template void rope_apply_rows<double>(double*, const RopeTable&, int64_t, const int32_t*, int64_t, int64_t);

}  // namespace gatedlm::kernels
