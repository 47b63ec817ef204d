#pragma once
// Rotary position embedding, rotate-half convention, on the first `rot_dims` dims of
// each head: with half = rot_dims/2, x1 = x[:half], x2 = x[half:rot_dims],
//   out1 = x1*cos - x2*sin,  out2 = x2*cos + x1*sin,  dims rot_dims.. untouched.
#include <cstdint>
#include <vector>

namespace gatedlm::kernels {

// cos/sin tables [positions, rot_dims/2] for inv_freq_i = base^(-2i/rot_dims), computed
// in double. Scaled variants (PI, NTK, YaRN) supply their own inv_freq and magnitude.
struct RopeTable {
  int64_t positions = 0, half = 0;
  std::vector<double> cos, sin;  // [positions, half]
};
std::vector<double> rope_inv_freq(int64_t rot_dims, double base);
RopeTable rope_table(const std::vector<double>& inv_freq, int64_t positions, double magnitude = 1.0);

// x [batch, seq, heads, head_dim] rotated in place; token t has position pos0 + t.
// inverse=true applies the transpose rotation (the backward pass of the forward).
template <typename T>
void rope_apply(T* x, const RopeTable& table, int64_t batch, int64_t seq, int64_t heads,
                int64_t head_dim, int64_t pos0, bool inverse);

// x [n, heads, head_dim] rotated in place, row r at position positions[r] (the
// incremental path: rows of several sequences, each at its own position).
template <typename T>
void rope_apply_rows(T* x, const RopeTable& table, int64_t n, const int32_t* positions, int64_t heads,
                     int64_t head_dim);

}  // namespace gatedlm::kernels
