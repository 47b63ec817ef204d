#pragma once
// The recurrent state of a hybrid model's Gated DeltaNet layers in the incremental path: per
// linear layer and sequence slot, the last K-1 inputs of the causal convolution and the delta
// rule's state S (model/gated_deltanet.h). Unlike the KV cache it does not grow with the
// sequence: (K-1) conv_dim + n_v d_k d_v floats per layer and slot, whatever the length.
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/gated_deltanet.h"

namespace gatedlm::infer {

class RecurrentState {
 public:
  RecurrentState(const model::ModelConfig& c, int64_t slots);

  // The state of layer `layer` (a linear layer of the model) for a slot. A sequence that
  // starts at position 0 overwrites it (the model starts such runs fresh), so a slot needs
  // no reset between sequences.
  model::DeltaNetState<float> of(int64_t layer, int64_t slot);
  // Floats per slot over all linear layers.
  int64_t floats_per_slot() const { return linear_layers_ * (conv_size_ + delta_size_); }
  // A slot's whole state, floats_per_slot() floats (every layer's conv tail, then every
  // layer's delta state): a prefix cache snapshot (prefix_cache.h).
  void save(int64_t slot, float* out) const;
  void load(int64_t slot, const float* in);

 private:
  std::vector<int64_t> index_;  // [n_layers] position among the linear layers, -1 for softmax layers
  int64_t slots_, linear_layers_ = 0, conv_size_, delta_size_;
  std::vector<float> conv_, delta_;  // [linear layers, slots, conv_size] and [.., delta_size]
};

}  // namespace gatedlm::infer
