#pragma once
// A GGUF file's vocabulary (tokenizer.ggml.*) as the tokenizer.json that gatedlm's
// byte-level BPE loader (io/tokenizer_json.h) reads: llama.cpp's "gpt2" tokenizer model,
// its tokens (by id) and token types, its merges ("left right", by rank) and its
// pre-tokenizer name, which picks the split regex and normalizer (llama_pre_tokenizers()).
//   token type 1 normal (2 unknown)  -> model.vocab
//   token type 3 control             -> added_tokens, special
//   token type 4 user-defined        -> added_tokens, not special
//   token type 5 unused              -> left out (llama.cpp's "[PAD<id>]" padding)
//   token type 6 byte                -> refused (SentencePiece's byte fallback)
#include <cstdint>
#include <span>
#include <string>

#include "io/gguf_reader.h"
#include "io/tokenizer_json.h"

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

// llama.cpp's pre-tokenizers (tokenizer.ggml.pre, as llama.cpp 0ad4a86's llama-vocab.cpp
// names them) that split text as a tokenizer.json with one Split regex does.
struct LlamaPreTokenizer {
  const char* name;     // what the export writes
  const char* aliases;  // other names llama.cpp splits the same way, read by the import ("" or "a b")
  const char* regex;    // the Split regex of the tokenizer.json, as Hugging Face's files spell it
  bool nfc;             // the import normalises to NFC first, as the model's tokenizer.json does
                        // (llama.cpp itself never normalises: text that NFC changes differs there)
  bool ignore_merges;   // llama.cpp looks a piece up whole before merging (its llama3)
};
std::span<const LlamaPreTokenizer> llama_pre_tokenizers();

// Import: the pre-tokenizer called `name` (or an alias); refuses, naming `source`, the key,
// the name and the known names, any other (llama.cpp's "default" among them: it splits with
// four regexes in turn, which one Split cannot express).
const LlamaPreTokenizer& llama_pre_tokenizer_named(const std::string& name, const std::string& source);

// Export: the name of the pre-tokenizer that splits as `v` does (same regex, same
// ignore_merges); refuses, naming `source`, the regex and the known names, a split llama.cpp
// has no name for. A vocabulary without a split regex (gatedlm's byte tokenizer: no merges,
// so no split changes its ids) gets "qwen2".
std::string llama_pre_tokenizer_name(const TokenizerJsonVocabulary& v, const std::string& source);

}  // namespace gatedlm::io
