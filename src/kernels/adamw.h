#pragma once
// AdamW as torch.optim.AdamW computes it (decoupled weight decay, bias correction).
#include <cstdint>

namespace gatedlm::kernels {

struct AdamWParams {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1-based: the step being taken
};

// param, m, v [n] updated in place from grad [n].
template <typename T>
void adamw_update(T* param, T* m, T* v, const T* grad, int64_t n, const AdamWParams& hp);

}  // namespace gatedlm::kernels
