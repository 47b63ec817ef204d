#include "kernels/adamw.h"

#include <cmath>

#include "kernels/kernel_sets.h"

#include "kernels/kernel_set_begin.h"

namespace gatedlm::kernels::GATEDLM_KSET {

template <typename T>
void adamw_update(T* param, T* m, T* v, const T* grad, int64_t n, const AdamWParams& hp) {
  const double bias1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
  const double bias2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
  const T decay = static_cast<T>(1.0 - hp.lr * hp.weight_decay);
  const T b1 = static_cast<T>(hp.beta1), b2 = static_cast<T>(hp.beta2);
  const T step_size = static_cast<T>(hp.lr / bias1);
  const T inv_sqrt_bias2 = static_cast<T>(1.0 / std::sqrt(bias2));
  const T eps = static_cast<T>(hp.eps);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    m[i] = b1 * m[i] + (T(1) - b1) * g;
    v[i] = b2 * v[i] + (T(1) - b2) * g * g;
    T denom = std::sqrt(v[i]) * inv_sqrt_bias2 + eps;
    param[i] = param[i] * decay - step_size * m[i] / denom;
  }
}

template void adamw_update<float>(float*, float*, float*, const float*, int64_t, const AdamWParams&);
template void adamw_update<double>(double*, double*, double*, const double*, int64_t, const AdamWParams&);

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
