#include "model/init.h"

#include "core/rng.h"

namespace gatedlm::model {

template <typename T>
void init_params(std::vector<T>& params, const ParamLayout& layout, const ModelConfig& c, uint64_t seed) {
  params.resize(layout.total());
  for (const ParamSpec& spec : layout.specs()) {
    T* p = params.data() + spec.offset;
    bool normal = spec.kind == ParamKind::embedding || spec.kind == ParamKind::lm_head ||
                  spec.kind == ParamKind::matrix || spec.kind == ParamKind::switch_router ||
                  (spec.kind == ParamKind::gate && c.gate.init == GateInit::normal);
    if (spec.kind == ParamKind::norm) {
      std::fill_n(p, spec.numel, T(1));
    } else if (normal) {
      Rng rng(Rng::derive(seed, spec.name));
      for (int64_t i = 0; i < spec.numel; ++i) p[i] = static_cast<T>(rng.normal() * c.init_std);
    } else {
      std::fill_n(p, spec.numel, T(0));
    }
  }
}

template void init_params<float>(std::vector<float>&, const ParamLayout&, const ModelConfig&, uint64_t);
template void init_params<double>(std::vector<double>&, const ParamLayout&, const ModelConfig&, uint64_t);

}  // namespace gatedlm::model
