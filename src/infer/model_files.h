#pragma once
// What generate, stream-eval and serve load: a checkpoint's model and the tokenizer its
// text goes through. Checkpoints do not carry a tokenizer; it is found, in order:
//   1. --tokenizer (byte, a SentencePiece .model or a Hugging Face tokenizer.json), when given;
//   2. the training run's data: RUN/run.json names the dataset directory, whose
//      manifest names the tokenizer (RUN is the path given, or for RUN/checkpoints/STEP
//      two levels up);
//   3. a tokenizer.model, else a tokenizer.json (what `import` copies beside an imported
//      model), in the checkpoint directory, the run directory, or two levels above the
//      run (the demo's OUT/tokenizer.model for OUT/runs/NAME).
// Otherwise an error that names the checkpoint and asks for --tokenizer.
#include <memory>
#include <string>

#include "io/tokenizer.h"
#include "model/model.h"
#include "model/quantized_weights.h"

namespace gatedlm::infer {

struct LoadedModel {
  std::string checkpoint_dir;  // resolved checkpoint directory
  std::unique_ptr<model::Model<float>> model;
  // A quantised checkpoint's weight blocks, attached to model (io/quantized_checkpoint.h);
  // null for F32. Declared after model: unregistered before the model goes.
  std::unique_ptr<model::QuantizedWeights> quantized;
  std::unique_ptr<io::Tokenizer> tokenizer;
  std::string tokenizer_source;  // where the tokenizer came from (for messages and JSON)
};

LoadedModel load_model(const std::string& checkpoint, const std::string& tokenizer_flag);

// Rules 2 and 3 above for `checkpoint` as given (a run or checkpoint directory) and its
// resolved checkpoint_dir: the tokenizer and, in `source`, where it came from; null when
// none is recorded (the Python package's Model.load then leaves the model without one).
std::unique_ptr<io::Tokenizer> recorded_tokenizer(const std::string& checkpoint, const std::string& checkpoint_dir,
                                                  std::string& source);
// Throws naming `source` and `checkpoint` when the tokenizer has more ids than vocab_size.
void check_tokenizer_fits(const io::Tokenizer& tokenizer, const std::string& source, int64_t vocab_size,
                          const std::string& checkpoint);

}  // namespace gatedlm::infer
