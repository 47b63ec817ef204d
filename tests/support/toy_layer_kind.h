#pragma once
// A third layer kind defined outside model/, for the tests that show a kind joins the engine
// through its registry row alone (tests/unit/model/test_layer_kinds.cpp,
// tests/unit/infer/test_layer_kind_decoder.cpp): a per-token SiLU "mixer", branch = SiLU(h),
// with no parameters and no decode state. The block loop, the parameter layout, the decoder
// and the probes were not edited for it.
#include <cmath>

#include "model/mixer.h"

namespace gatedlm::testing {

// A value outside the built-in kinds of model/hybrid_config.h.
inline constexpr model::LayerKind kSiluKind = static_cast<model::LayerKind>(100);

template <typename T>
class SiluMixer final : public model::Mixer<T> {
 public:
  void resize(model::LayerActivations<T>&, int64_t, const model::ModelConfig&) const override {}
  void check_layout(int64_t, const model::ModelConfig&, const model::LayerWeights<T>&, const model::ParamLayout&,
                    const T*) const override {}
  // a.o0 [n, d] = h * sigmoid(h)
  const T* forward(const model::MixerPass<T>& p) const override {
    const int64_t size = p.s.n * p.c.d_model;
    for (int64_t i = 0; i < size; ++i) {
      const T h = p.a.h[i];
      p.a.o0[i] = h / (T(1) + std::exp(-h));
    }
    return p.a.o0.data();
  }
  // dh = d * (s + h s (1 - s)), s = sigmoid(h)
  void backward(const model::MixerPass<T>& p, const T* d_branch) const override {
    const int64_t size = p.s.n * p.c.d_model;
    for (int64_t i = 0; i < size; ++i) {
      const T h = p.a.h[i], s = T(1) / (T(1) + std::exp(-h));
      p.s.dh[i] = d_branch[i] * (s + h * s * (T(1) - s));
    }
  }
  void probe(model::BlockProbe<T>&, const model::LayerActivations<T>&, const model::ModelConfig&) const override {}
  bool attention_probs(T*, const model::LayerActivations<T>&, const model::LayerWeights<T>&,
                       const model::ModelConfig&, int64_t, int64_t, int64_t) const override {
    return false;
  }
};

inline void add_no_params(model::LayerParams&, const model::ModelConfig&) {}

template <typename T>
const model::Mixer<T>& silu_mixer() {
  static const SiluMixer<T> mixer;
  return mixer;
}

// Registers the kind (idempotent: a second call replaces the row with the same one).
inline void register_silu_kind() {
  model::register_layer_kind({kSiluKind, "silu_mixer", model::DecodeStateKind::none, model::LayerCaptures{},
                              add_no_params, silu_mixer<float>, silu_mixer<double>});
}

}  // namespace gatedlm::testing
