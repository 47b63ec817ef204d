// Tokenizer::load: a tokenizer spec to the kind it names (io/tokenizer.h's byte tokenizer and
// SentencePiece models, io/tokenizer_json.h's Hugging Face files). Its own file, so that
// neither kind's file includes the other's.
#include "io/tokenizer.h"
#include "io/tokenizer_json.h"

#include "core/error.h"

namespace gatedlm::io {

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& spec) {
  if (spec == "byte") return byte_tokenizer();
  if (spec.empty()) fail("no tokenizer given (a SentencePiece .model file, a tokenizer.json or \"byte\")");
  if (is_tokenizer_json(spec)) return load_tokenizer_json(spec);
  return load_sentencepiece(spec);
}

}  // namespace gatedlm::io
