#pragma once
// Options of `gatedlm tokenizer train` and `gatedlm data prepare` beyond the option
// structs of tokenizer.h and token_dataset.h (the plain overloads there use the defaults).
#include "io/token_dataset.h"
#include "io/tokenizer.h"

namespace gatedlm::io {

// threads <= 0: every core the machine has.
void train_tokenizer(const TokenizerTrainOptions& options, int threads);

// force: replace a dataset already in options.out (otherwise that is an error).
void prepare_dataset(const PrepareOptions& options, bool force);

// Smallest vocabulary train_tokenizer accepts: unk, BOS, EOS, the 256 byte-fallback
// pieces and at least one more (the text's characters need more still).
inline constexpr int64_t kMinTrainedVocab = 260;

}  // namespace gatedlm::io
