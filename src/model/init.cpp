#include "model/init.h"

#include <cmath>

#include "core/rng.h"

namespace gatedlm::model {

namespace {

// The Gated DeltaNet layers' own tensors, initialised as transformers' Qwen3.5 does:
// the depthwise convolution as torch's Conv1d default (uniform in +-1/sqrt(fan_in), fan_in =
// the kernel width), dt_bias at 1, and A_log = log(A) with A uniform in [0.01, 16), so that
// the heads start with decay rates spread over three orders of magnitude.
template <typename T>
void init_linear_attention(T* p, const ParamSpec& spec, Rng& rng) {
  if (spec.kind == ParamKind::conv) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(spec.shape.back()));
    for (int64_t i = 0; i < spec.numel; ++i) p[i] = static_cast<T>((2.0 * rng.uniform() - 1.0) * bound);
  } else if (spec.name.ends_with(".A_log")) {
    for (int64_t i = 0; i < spec.numel; ++i) p[i] = static_cast<T>(std::log(0.01 + rng.uniform() * (16.0 - 0.01)));
  } else {  // dt_bias
    std::fill_n(p, spec.numel, T(1));
  }
}

}  // namespace

template <typename T>
void init_params(std::vector<T>& params, const ParamLayout& layout, const ModelConfig& c, uint64_t seed) {
  params.resize(layout.total());
  for (const ParamSpec& spec : layout.specs()) {
    T* p = params.data() + spec.offset;
    bool normal = spec.kind == ParamKind::embedding || spec.kind == ParamKind::lm_head ||
                  spec.kind == ParamKind::matrix || spec.kind == ParamKind::switch_router ||
                  (spec.kind == ParamKind::gate && c.gate.init == GateInit::normal);
    Rng rng(Rng::derive(seed, spec.name));
    if (spec.kind == ParamKind::norm) {
      // Zero-centred norms compute x_hat * (1 + w): w = 0 is the identity scale.
      std::fill_n(p, spec.numel, c.norm_zero_centered ? T(0) : T(1));
    } else if (spec.kind == ParamKind::linear_norm) {
      std::fill_n(p, spec.numel, T(1));
    } else if (spec.kind == ParamKind::conv || spec.kind == ParamKind::decay) {
      init_linear_attention(p, spec, rng);
    } else if (normal) {
      for (int64_t i = 0; i < spec.numel; ++i) p[i] = static_cast<T>(rng.normal() * c.init_std);
    } else {
      std::fill_n(p, spec.numel, T(0));
    }
  }
}

template void init_params<float>(std::vector<float>&, const ParamLayout&, const ModelConfig&, uint64_t);
template void init_params<double>(std::vector<double>&, const ParamLayout&, const ModelConfig&, uint64_t);

}  // namespace gatedlm::model
