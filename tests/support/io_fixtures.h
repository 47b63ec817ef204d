#pragma once
// Inputs the unit tests of io/ share: a random checkpoint of a JSON config, the G1 gate as a
// config's "gate" value, and tokenizer training options on a given number of threads.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "test_util.h"

namespace gatedlm::testing {

// A checkpoint of `config` whose parameters are normal draws of standard deviation 0.2 from `seed`.
inline io::Checkpoint random_checkpoint(const nlohmann::json& config, uint64_t seed) {
  io::Checkpoint ck{model::config_from_json(config, "test"), {}};
  ck.params = random_vector<float>(model::ParamLayout(ck.config).total(), seed, 0.2);
  return ck;
}

// The paper's G1 gate: after SDPA, elementwise, sigmoid.
inline nlohmann::json g1_gate() {
  return {{"position", "sdpa"}, {"granularity", "elementwise"}, {"activation", "sigmoid"}};
}

// `o` with `threads` training threads.
inline io::TokenizerTrainOptions with_threads(io::TokenizerTrainOptions o, int threads) {
  o.threads = threads;
  return o;
}

}  // namespace gatedlm::testing
