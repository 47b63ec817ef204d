#pragma once
// The held-out token stream behind `gatedlm eval`, `analyze` and `longctx`: either a
// prepared dataset's split (--data DIR [--split val|train]) or a text file encoded with a
// tokenizer (--text FILE --tokenizer T). One place decides which was given, checks the
// tokenizer's vocabulary against the model's, and works out BOS and bytes per token, so
// the three commands agree on inputs and on their error messages.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace gatedlm::io {

// What the user gave; exactly one of `data` and `text` is set.
struct EvalSource {
  std::string command;        // the subcommand, for messages ("eval: give --data DIR or ...")
  std::string data;           // --data: a prepared dataset directory
  std::string split = "val";  // --split: with data, "val" or "train"
  std::string text;           // --text: a text file (read as bytes)
  std::string tokenizer;      // --tokenizer: with text, "byte" or a SentencePiece .model
};

struct EvalStream {
  std::vector<int32_t> tokens;  // the whole split, or the whole file encoded (no BOS/EOS added)
  std::unique_ptr<Tokenizer> tokenizer;  // the dataset's own (its tokenizer.model, or byte), or --tokenizer
  int32_t bos = -1;                      // the tokenizer's BOS (with data: the manifest's bos_id)
  // Source bytes over tokens, for bits per byte: with data the split's bytes/tokens from the
  // manifest (BOS/EOS counted as tokens), with text the file size over its encoded length.
  double bytes_per_token = 1.0;
  std::string origin;     // the dataset directory or the text file, as given
  nlohmann::json record;  // {kind: "data", dir, split, tokenizer, stream_tokens} or
                          // {kind: "text", file, tokenizer, stream_tokens} (docs/analysis.md `source`)
};

// Checks what can be checked without reading anything: one of --data/--text, --tokenizer
// with --text, a known --split with --data. Commands call it before loading a checkpoint so
// a wrong command line fails at once; load_eval_stream calls it again.
void check_eval_source(const EvalSource& src);

// Loads the stream. Fails, naming the directory or file, when the tokenizer has more ids than
// model_vocab (checked before the tokens are read) or when anything cannot be read.
EvalStream load_eval_stream(const EvalSource& src, int64_t model_vocab);

}  // namespace gatedlm::io
