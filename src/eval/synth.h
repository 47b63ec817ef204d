#pragma once
// `gatedlm data synth`: a dataset directory (docs/data-format.md) of synthetic retrieval
// examples (eval/tasks.h), alone or mixed with text at a set ratio, for training models
// that are then evaluated with `gatedlm longctx` (docs/longctx.md).
#include <cstdint>
#include <string>

#include "eval/tasks.h"

namespace gatedlm::eval {

struct SynthOptions {
  std::string task = "passkey";  // passkey | niah (single, multikey, multivalue in turn) | all (the four)
  std::string tokenizer;         // "byte" or a SentencePiece .model
  std::string out;
  int64_t count = 0;             // examples; 0 = 1000, or as --ratio needs with --mix-text
  int64_t seq_len = 256;         // the longest example (tokens, BOS included)
  int64_t min_len = 0;           // the shortest (0 = seq_len / 4; raised to what a task needs)
  std::string mix_text;          // text file(s) to mix in (its tail is the validation split)
  double ratio = 0;              // with mix_text: share of training tokens that are synthetic
  double val_fraction = 0.1;
  std::string filler;            // filler text file; empty = the neutral block
  uint64_t seed = 7;             // its streams ("synth/...") never meet longctx's ("longctx/...")
  bool force = false;
  TaskShape shape;
};

struct SynthSummary {
  int64_t train_examples = 0, val_examples = 0, synthetic_tokens = 0, text_tokens = 0;
};

SynthSummary synthesize_dataset(const SynthOptions& options);

}  // namespace gatedlm::eval
