#pragma once
// Long-context evaluation (`gatedlm longctx`, docs/longctx.md): per evaluation length,
// perplexity by position bucket on held-out text, passkey retrieval and RULER-style
// needle-in-a-haystack, with the RoPE settings of the checkpoint or overridden (base,
// scaling type, factor, original length).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/tasks.h"
#include "io/tokenizer.h"
#include "model/config.h"

namespace gatedlm::eval {

// Evaluation-time RoPE settings; anything left unset comes from the checkpoint's config.
struct RopeOverride {
  std::optional<model::RopeScalingType> type;
  std::optional<double> factor;  // unset with a scaling type given: max(1, length / original_len)
  std::optional<int64_t> original_len;
  std::optional<double> rope_base;
};

// The model config used at one evaluation length. Throws naming the flag on a bad mix
// (e.g. a factor without any scaling).
model::ModelConfig config_for_length(const model::ModelConfig& checkpoint, const RopeOverride& rope, int64_t length);

struct LongctxOptions {
  std::vector<int64_t> lengths;
  RopeOverride rope;
  std::vector<TaskKind> tasks = all_tasks();
  bool perplexity = true;
  int64_t samples = 20;          // examples per task and length
  int64_t depths = 5;            // the depth sweep: depth k/(depths-1), samples cycle through them
  uint64_t seed = 1;             // examples; its stream names differ from `data synth`'s
  int64_t ppl_windows = 16;      // held-out windows per length
  int64_t buckets = 8;           // position buckets of the perplexity curve
  int64_t batch_tokens = 4096;   // tokens per forward pass (batch = max(1, batch_tokens / length))
  int64_t train_len = 0;         // the training length (0 = the checkpoint's max_seq_len)
  bool heldout_filler = false;   // filler from held-out text instead of the neutral block
  TaskShape shape;
};

struct LongctxInput {
  model::ModelConfig config;     // the checkpoint's
  const std::vector<float>* params = nullptr;
  const io::Tokenizer* tokenizer = nullptr;
  std::vector<int32_t> heldout;  // held-out token stream (perplexity, held-out filler)
  int32_t bos = 0, eos = 0;
};

// Runs everything and returns the JSON document of docs/longctx.md (without the
// command-line fields, which the caller adds). `log` gets one line per finished step.
nlohmann::json run_longctx(const LongctxInput& input, const LongctxOptions& options,
                           const std::function<void(const std::string&)>& log = {});

// Aggregate of scored answers (one task at one length, or one depth of it).
struct RetrievalTally {
  int64_t samples = 0, values = 0, recovered = 0, tokens = 0, correct = 0;
  double logprob = 0;  // summed over values
  void add(const AnswerScore& s);
  nlohmann::json to_json() const;  // samples, values, score, digit_accuracy, mean_logprob, ...
};

// Checks evaluation lengths (the command line splits "256,512,1024"): at least one, each at
// least 2 tokens, none twice; `flag` names the option in messages.
void check_lengths(const std::vector<int64_t>& lengths, const std::string& flag);

}  // namespace gatedlm::eval
