#pragma once
// A model of a config with init_params' weights of a seed (the tests' random models).
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/init.h"
#include "model/model.h"

namespace gatedlm::testing {

template <typename T = float>
model::Model<T> seeded_model(const model::ModelConfig& c, uint64_t seed) {
  model::Model<T> m(c);
  std::vector<T> w;
  model::init_params(w, m.layout(), c, seed);
  m.load_params(w);
  return m;
}

}  // namespace gatedlm::testing
