#pragma once
// Hugging Face `tokenizer.json` byte-level BPE, as Qwen2 and Qwen3 use it: NFC normalizer
// (ICU), the pre-tokenizer's Split regex run by PCRE2 (isolated matches), GPT-2's
// byte-to-unicode map, BPE merges by rank, added and special tokens matched in the raw
// text before anything else, ByteLevel decoding. Anything else in the file (other models,
// normalizers, pre-tokenizers, byte fallback, subword prefixes) is refused by name.
#include <memory>
#include <string>

#include "io/tokenizer.h"

namespace gatedlm::io {

// True for a path that names a tokenizer.json (the file name ends in ".json").
bool is_tokenizer_json(const std::string& spec);
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);

}  // namespace gatedlm::io
