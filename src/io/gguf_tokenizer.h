#pragma once
// A GGUF file's vocabulary (tokenizer.ggml.*) as the tokenizer.json that gatedlm's
// byte-level BPE loader (io/tokenizer_json.h) reads: llama.cpp's "gpt2" tokenizer model,
// its tokens (by id) and token types, its merges ("left right", by rank) and its
// pre-tokenizer name, which picks the split regex and normalizer (table in the .cpp).
//   token type 1 normal (2 unknown)  -> model.vocab
//   token type 3 control             -> added_tokens, special
//   token type 4 user-defined        -> added_tokens, not special
//   token type 5 unused              -> left out (llama.cpp's "[PAD<id>]" padding)
//   token type 6 byte                -> refused (SentencePiece's byte fallback)
#include <cstdint>
#include <string>

#include "io/gguf_reader.h"

namespace gatedlm::io {

struct GgufVocabulary {
  // The tokenizer.json text; empty when the file has no vocabulary (no
  // tokenizer.ggml.tokens) or holds gatedlm's byte tokenizer's, as `export --format gguf`
  // writes it for a byte model (the checkpoint then needs no tokenizer file).
  std::string tokenizer_json;
  std::string description;  // for the import's message: "byte-level BPE, 300 ids, pre qwen2"
  bool byte_tokenizer = false;  // the vocabulary is gatedlm's byte tokenizer's
};

// Refuses, naming the file and key (or token id), what the loader cannot represent, and
// loads the result once through load_tokenizer_json before returning it. `model_vocab`:
// the model's vocab_size, which the tokens must not exceed.
GgufVocabulary gguf_vocabulary(const GgufReader& file, int64_t model_vocab);

}  // namespace gatedlm::io
