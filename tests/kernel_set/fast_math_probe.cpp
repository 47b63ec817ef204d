// The worst relative error of one kernel set's exp_approx (and, in the avx512 set, its
// 16-lane form) over the softmax range, for test_kernel_sets.cpp. Compiled once per kernel
// set, like the kernels (tests/CMakeLists.txt).
#include "kernels/kernel_set_begin.h"
#include "kernels/fast_math.h"

namespace gatedlm::kernels::GATEDLM_KSET {

double exp_approx_worst_error() {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.01f)
    worst = std::max(worst, std::abs(exp_approx(x) / std::exp(static_cast<double>(x)) - 1.0));
  if (exp_approx(0.0f) != 1.0f) worst = 1.0;
  return worst;
}

// -1 where the set has no 16-lane form.
double exp_approx16_worst_error() {
#if GATEDLM_KSET_AVX512
  double worst = 0;
  for (float x0 = -87.0f; x0 + 0.15f <= 88.0f; x0 += 0.16f) {
    alignas(64) float in[16], out[16];
    for (int i = 0; i < 16; ++i) in[i] = x0 + 0.01f * static_cast<float>(i);
    _mm512_store_ps(out, exp_approx16(_mm512_load_ps(in)));
    for (int i = 0; i < 16; ++i) worst = std::max(worst, std::abs(out[i] / std::exp(static_cast<double>(in[i])) - 1.0));
  }
  return worst;
#else
  return -1.0;
#endif
}

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
