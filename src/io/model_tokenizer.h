#pragma once
// The tokenizer a model's text goes through, when the model file does not carry one itself
// (a GGUF file's vocabulary does: io/model_loader.h). Checkpoints carry none; it is found,
// in order:
//   1. --tokenizer (byte, a SentencePiece .model or a Hugging Face tokenizer.json), when given;
//   2. the training run's data: RUN/run.json names the dataset directory, whose
//      manifest names the tokenizer (RUN is the path given, or for RUN/checkpoints/STEP
//      two levels up);
//   3. a tokenizer.model, else a tokenizer.json (what `import` copies beside an imported
//      model), in the checkpoint directory, the run directory, or two levels above the
//      run (the demo's OUT/tokenizer.model for OUT/runs/NAME).
// A Hugging Face model directory has its tokenizer inside: rule 3 in that directory only.
#include <cstdint>
#include <memory>
#include <string>

#include "io/tokenizer.h"

namespace gatedlm::io {

// Rules 2 and 3 above for `checkpoint` as given (a run or checkpoint directory) and its
// resolved checkpoint_dir: the tokenizer and, in `source`, where it came from; null when
// none is recorded.
std::unique_ptr<Tokenizer> recorded_tokenizer(const std::string& checkpoint, const std::string& checkpoint_dir,
                                              std::string& source);
// Rule 3 in `dir` alone (a Hugging Face model directory's tokenizer.model or tokenizer.json).
std::unique_ptr<Tokenizer> tokenizer_beside(const std::string& dir, std::string& source);
// Throws naming `source` and `checkpoint` when the tokenizer has more ids than vocab_size.
void check_tokenizer_fits(const Tokenizer& tokenizer, const std::string& source, int64_t vocab_size,
                          const std::string& checkpoint);

}  // namespace gatedlm::io
