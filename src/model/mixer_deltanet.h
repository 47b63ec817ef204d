#pragma once
// Gated DeltaNet ("linear_attention", model/gated_deltanet.h) as a Mixer (model/mixer.h):
// a.h -> deltanet_forward -> a.o0. A training-shaped pass runs whole sequences from a zero
// state; forward_tokens runs its rows in runs over the caller's recurrent states
// (decode_state recurrent: infer/recurrent_state.h).
#include "model/mixer.h"

namespace gatedlm::model {

template <typename T>
class DeltaNetMixer final : public Mixer<T> {
 public:
  void resize(LayerActivations<T>& a, int64_t n, const ModelConfig& c) const override;
  void check_layout(int64_t layer, const ModelConfig& c, const LayerWeights<T>& w, const ParamLayout& layout,
                    const T* base) const override;
  const T* forward(const MixerPass<T>& p) const override;
  void backward(const MixerPass<T>& p, const T* d_branch) const override;
  void probe(BlockProbe<T>& out, const LayerActivations<T>& a, const ModelConfig& c) const override;
  bool attention_probs(T*, const LayerActivations<T>&, const LayerWeights<T>&, const ModelConfig&, int64_t,
                       int64_t, int64_t) const override {
    return false;  // no softmax
  }
};

// The registry row of "linear_attention" (builtin_layer_kinds.cpp lists it).
LayerKindSpec deltanet_layer_kind();

}  // namespace gatedlm::model
