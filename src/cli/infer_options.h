#pragma once
// Options shared by the commands that run a trained model (generate, stream-eval, serve).
#include <string>

#include "infer/generation.h"
#include "kernels/element_types.h"
#include "infer/sampler.h"

namespace CLI {
class App;
}

namespace gatedlm::cli {

// What --checkpoint takes in every command that runs a model (io/model_loader.h).
inline constexpr const char* kModelPathHelp =
    "the model: a checkpoint or run directory, a quantised checkpoint, a Hugging Face model directory or a GGUF file";

// --checkpoint (required) and --tokenizer (io/model_tokenizer.h says how the default is found).
void add_checkpoint_options(CLI::App* sub, std::string& checkpoint, std::string& tokenizer);
// --max-tokens --temperature --top-k --top-p --min-p --repetition-penalty --seed --stop
void add_sampling_options(CLI::App* sub, infer::SamplingParams& sampling, infer::StopRules& rules);

// --kv-type f32|f16: the element type of the KV cache's rows (infer/kv_cache.h).
void add_kv_type_option(CLI::App* sub, kernels::ElementType& kv_type);

}  // namespace gatedlm::cli
