#pragma once
// Options shared by the commands that run a trained model (generate, stream-eval, serve).
#include <string>

#include "infer/generation.h"
#include "infer/sampler.h"

namespace CLI {
class App;
}

namespace gatedlm::cli {

// --checkpoint (required) and --tokenizer (infer/model_files.h says how the default is found).
void add_checkpoint_options(CLI::App* sub, std::string& checkpoint, std::string& tokenizer);
// --max-tokens --temperature --top-k --top-p --min-p --repetition-penalty --seed --stop
void add_sampling_options(CLI::App* sub, infer::SamplingParams& sampling, infer::StopRules& rules);

}  // namespace gatedlm::cli
