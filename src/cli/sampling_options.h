#pragma once
// The sampling and stop options shared by `generate` and `bench generate`.
#include "infer/generation.h"
#include "infer/sampler.h"

namespace CLI {
class App;
}

namespace gatedlm::cli {

// --max-tokens --temperature --top-k --top-p --min-p --repetition-penalty --seed --stop
void add_sampling_options(CLI::App* sub, infer::SamplingParams& sampling, infer::StopRules& rules);

}  // namespace gatedlm::cli
