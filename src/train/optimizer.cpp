#include "train/optimizer.h"

#include "kernels/adamw.h"

namespace gatedlm::train {

template <typename T>
AdamW<T>::AdamW(const model::ParamLayout& layout, AdamWConfig config)
    : layout_(layout), config_(config), m_(layout.total(), T(0)), v_(layout.total(), T(0)) {}

template <typename T>
void AdamW<T>::step(std::span<T> params, std::span<const T> grads, double lr) {
  ++step_;
  for (const model::ParamSpec& s : layout_.specs()) {
    kernels::AdamWParams hp{lr, config_.beta1, config_.beta2, config_.eps,
                            s.decays() ? config_.weight_decay : 0.0, step_};
    kernels::adamw_update(params.data() + s.offset, m_.data() + s.offset, v_.data() + s.offset,
                          grads.data() + s.offset, s.numel, hp);
  }
}

template class AdamW<float>;
template class AdamW<double>;

}  // namespace gatedlm::train
