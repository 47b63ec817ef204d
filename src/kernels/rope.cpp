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

namespace {

// Rotates the heads of one token row x [heads, head_dim] by the table's position pos.
template <typename T>
void rotate_row(T* x, const RopeTable& table, int64_t pos, int64_t heads, int64_t head_dim, T sign) {
  const int64_t half = table.half;
  const double* c = table.cos.data() + pos * half;
  const double* s = table.sin.data() + pos * half;
  for (int64_t h = 0; h < heads; ++h) {
    T* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      T ci = static_cast<T>(c[i]), si = sign * static_cast<T>(s[i]);
      T x1 = v[i], x2 = v[i + half];
      v[i] = x1 * ci - x2 * si;
      v[i + half] = x2 * ci + x1 * si;
    }
  }
}

}  // namespace

template <typename T>
void rope_apply(T* x, const RopeTable& table, int64_t batch, int64_t seq, int64_t heads,
                int64_t head_dim, int64_t pos0, bool inverse) {
  if (pos0 + seq > table.positions)
    fail("rope: position ", pos0 + seq - 1, " is past the table's ", table.positions, " positions");
  const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      rotate_row(x + (b * seq + t) * heads * head_dim, table, pos0 + t, heads, head_dim, sign);
}

template <typename T>
void rope_apply_rows(T* x, const RopeTable& table, int64_t n, const int32_t* positions, int64_t heads,
                     int64_t head_dim) {
  for (int64_t r = 0; r < n; ++r)
    if (positions[r] < 0 || positions[r] >= table.positions)
      fail("rope: position ", positions[r], " is outside the table's ", table.positions, " positions");
#pragma omp parallel for schedule(static) if (n > 1)
  for (int64_t r = 0; r < n; ++r) rotate_row(x + r * heads * head_dim, table, positions[r], heads, head_dim, T(1));
}

template void rope_apply<float>(float*, const RopeTable&, int64_t, int64_t, int64_t, int64_t, int64_t, bool);
template void rope_apply<double>(double*, const RopeTable&, int64_t, int64_t, int64_t, int64_t, int64_t,
                                 bool);
template void rope_apply_rows<float>(float*, const RopeTable&, int64_t, const int32_t*, int64_t, int64_t);
template void rope_apply_rows<double>(double*, const RopeTable&, int64_t, const int32_t*, int64_t, int64_t);

}  // namespace gatedlm::kernels
