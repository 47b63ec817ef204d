#pragma once
// Fresh weights: normal(0, init_std) for matrices, embeddings and hidden-input gates,
// ones for norms, zeros for zero-initialised gates. Each tensor draws from its own stream
// seeded by (seed, tensor name), so a baseline and a gated model made with the same seed
// share every weight they have in common.
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::model {

template <typename T>
void init_params(std::vector<T>& params, const ParamLayout& layout, const ModelConfig& config, uint64_t seed);

}  // namespace gatedlm::model
