#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace gatedlm::kernels {

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
    T m = *std::max_element(z, z + vocab);
    double sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(z[i] - m));
    const double lse = static_cast<double>(m) + std::log(sum);
    const double loss = lse - static_cast<double>(z[target]);
    losses[r] = static_cast<T>(loss);
    if (dlogits) {
      T* d = dlogits + r * vocab;
      for (int64_t i = 0; i < vocab; ++i)
        d[i] = static_cast<T>(std::exp(static_cast<double>(z[i]) - lse)) * grad_scale;
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
