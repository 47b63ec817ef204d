#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "kernels/fast_math.h"

namespace gatedlm::kernels {

namespace {

// exp in the precision of the kernel: the vectorisable approximation for float (the
// vocabulary loop dominates the loss's cost), libm for the double reference path.
inline float exp_t(float x) { return exp_approx(x); }
inline double exp_t(double x) { return std::exp(x); }

}  // namespace

template <typename T>
double cross_entropy(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t rows,
                     int64_t vocab, T grad_scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* z = logits + r * vocab;
    const int32_t target = targets[r];
    if (target < 0) {
      losses[r] = 0;
      if (dlogits) std::fill(dlogits + r * vocab, dlogits + (r + 1) * vocab, T(0));
      continue;
    }
    const T m = *std::max_element(z, z + vocab);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < vocab; ++i) sum += exp_t(z[i] - m);
    const T log_sum = static_cast<T>(std::log(static_cast<double>(sum)));
    losses[r] = log_sum - (z[target] - m);
    if (dlogits) {
      T* d = dlogits + r * vocab;
      const T inv = grad_scale / sum;
#pragma omp simd
      for (int64_t i = 0; i < vocab; ++i) d[i] = exp_t(z[i] - m) * inv;
      d[target] -= grad_scale;
    }
  }
  // Summed in row order so the result does not depend on the thread count or timing.
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) total += static_cast<double>(losses[r]);
  return total;
}

template double cross_entropy<float>(float*, float*, const float*, const int32_t*, int64_t, int64_t, float);
template double cross_entropy<double>(double*, double*, const double*, const int32_t*, int64_t, int64_t,
                                      double);

}  // namespace gatedlm::kernels
