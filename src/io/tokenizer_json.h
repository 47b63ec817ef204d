#pragma once
// Hugging Face `tokenizer.json` byte-level BPE, as Qwen2, Qwen3 and Qwen3.5 use it: NFC
// normalizer (ICU), the pre-tokenizer's Split regex run by PCRE2 (isolated matches; written
// in Oniguruma's syntax, rewritten where PCRE2 reads it differently: io/tokenizer_regex.h), GPT-2's
// byte-to-unicode map, BPE merges by rank, added and special tokens matched in the raw
// text before anything else (lstrip / rstrip: with the white space beside them; a
// "normalized" token is matched in the raw text too), ByteLevel decoding. Anything else in
// the file (other models, normalizers, pre-tokenizers, byte fallback, subword prefixes,
// single_word tokens) is refused by name.
#include <memory>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer.h"

namespace gatedlm::io {

// True for a path that names a tokenizer.json (the file name ends in ".json").
bool is_tokenizer_json(const std::string& spec);
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);
// The same from the file's text held in memory (a GGUF file's vocabulary, io/gguf_tokenizer.h);
// `source` names it in messages and is the tokenizer's name().
std::unique_ptr<Tokenizer> tokenizer_json_from_text(std::string_view text, const std::string& source);

// GPT-2's split regex, which a ByteLevel pre-tokenizer with use_regex applies.
inline constexpr const char* kGpt2SplitRegex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's byte-to-unicode map, which byte-level BPE vocabularies are written in: printable
// bytes stand for themselves, the other 68 are shifted past U+0100. UTF-8.
std::string byte_level_symbol(unsigned char byte);

// The vocabulary of a tokenizer.json, checked as load_tokenizer_json checks the file (the
// GGUF export writes it out for llama.cpp).
struct TokenizerJsonVocabulary {
  enum class Kind : uint8_t { unused, normal, added, special };  // special: an added token marked special
  std::vector<std::string> tokens;  // by id; "" for an id the file leaves out
  std::vector<Kind> kinds;          // by id
  std::vector<std::string> merges;  // "left right", by rank
  int32_t document_id = -1;         // <|endoftext|>
  // How text is split before BPE: the Split regex as the file writes it (GPT-2's for
  // ByteLevel's own use_regex; empty for a vocabulary without one), NFC first or not, and
  // whether a piece found whole in the vocabulary skips the merges.
  std::string split_regex;
  bool nfc = false, ignore_merges = false;
};
TokenizerJsonVocabulary read_tokenizer_json_vocabulary(const std::string& path);

}  // namespace gatedlm::io
