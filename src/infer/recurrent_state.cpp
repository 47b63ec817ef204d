#include "infer/recurrent_state.h"

#include <algorithm>

#include "core/error.h"
#include "model/layer_kinds.h"

namespace gatedlm::infer {

RecurrentState::RecurrentState(const model::ModelConfig& c, int64_t slots)
    : index_(c.n_layers, -1),
      slots_(slots),
      conv_size_(model::conv_state_size(c.linear_attention)),
      delta_size_(model::delta_state_size(c.linear_attention)) {
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (model::layer_spec(c, l).decode_state == model::DecodeStateKind::recurrent) index_[l] = linear_layers_++;
  conv_.assign(static_cast<size_t>(linear_layers_ * slots_ * conv_size_), 0.0f);
  delta_.assign(static_cast<size_t>(linear_layers_ * slots_ * delta_size_), 0.0f);
}

model::DeltaNetState<float> RecurrentState::of(int64_t layer, int64_t slot) {
  if (layer < 0 || layer >= static_cast<int64_t>(index_.size()) || index_[layer] < 0 || slot < 0 || slot >= slots_)
    fail("recurrent state: no linear layer ", layer, " / slot ", slot);
  const int64_t cell = index_[layer] * slots_ + slot;
  return {conv_.data() + cell * conv_size_, delta_.data() + cell * delta_size_};
}

void RecurrentState::save(int64_t slot, float* out) const {
  for (int64_t i = 0; i < linear_layers_; ++i, out += conv_size_)
    std::copy_n(conv_.data() + (i * slots_ + slot) * conv_size_, conv_size_, out);
  for (int64_t i = 0; i < linear_layers_; ++i, out += delta_size_)
    std::copy_n(delta_.data() + (i * slots_ + slot) * delta_size_, delta_size_, out);
}

void RecurrentState::load(int64_t slot, const float* in) {
  for (int64_t i = 0; i < linear_layers_; ++i, in += conv_size_)
    std::copy_n(in, conv_size_, conv_.data() + (i * slots_ + slot) * conv_size_);
  for (int64_t i = 0; i < linear_layers_; ++i, in += delta_size_)
    std::copy_n(in, delta_size_, delta_.data() + (i * slots_ + slot) * delta_size_);
}

}  // namespace gatedlm::infer
