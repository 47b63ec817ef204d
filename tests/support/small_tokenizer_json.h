#pragma once
// A small Hugging Face tokenizer.json for tests that need one on disk.
#include <nlohmann/json.hpp>
#include <string>

namespace gatedlm::testing {

// Qwen2's pre-tokenizer as a tokenizer.json writes it: its Split regex, then ByteLevel.
inline nlohmann::json qwen2_pre_tokenizer() {
  using nlohmann::json;
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern",
              {{"Regex",
                R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

// A byte-level BPE tokenizer.json of 11 ids with Qwen2's pre-tokenizer (the GGUF export
// calls it "qwen2").
inline nlohmann::json small_tokenizer() {
  using nlohmann::json;
  json vocab = json::object();
  for (int i = 0; i < 8; ++i) vocab[std::string(1, static_cast<char>('a' + i))] = i;
  vocab["ab"] = 8;
  auto added = [](int id, const char* content, bool special) {
    return json{{"id", id}, {"content", content}, {"special", special}};
  };
  return json{
      {"added_tokens", {added(9, "<|endoftext|>", true), added(10, "<x>", false)}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", qwen2_pre_tokenizer()},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}}};
}

}  // namespace gatedlm::testing
