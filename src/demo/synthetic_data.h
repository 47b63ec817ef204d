#pragma once
// A demo preset's optional "data" object: train on synthetic data generated from the demo's
// corpus instead of the corpus itself. The one task so far is Bigram-Backcopy
// (eval/synth_bigram_backcopy.h), the setting in which the attention sink forms in small
// models (configs/demo/sink.json):
//   "data": {"task": "bigram-backcopy", "tokenizer": "byte" | "trained",
//            "seq_len": 4096, "tokens": 20000000, "triggers": 3, "seed": 7, "val_fraction": 0.01}
// "byte" needs no tokenizer training (vocabulary 258); "trained" uses the demo's SentencePiece
// model (tokenizer_vocab pieces).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gatedlm::demo {

struct SyntheticData {
  std::string task = "bigram-backcopy";
  std::string tokenizer = "byte";  // "byte" or "trained"
  int64_t seq_len = 4096;          // tokens per document, BOS included
  int64_t tokens = 1000000;        // training tokens
  int64_t triggers = 3;
  uint64_t seed = 7;
  double val_fraction = 0.01;

  bool byte_tokenizer() const { return tokenizer == "byte"; }
  nlohmann::json to_json() const;
};

// Reads and checks the preset's "data" object; errors name `source` and the key.
SyntheticData synthetic_data_from_json(const nlohmann::json& j, const std::string& source);

// Writes the dataset into `out_dir` (replacing one there) from the corpus files, tokenised with
// `tokenizer_spec` ("byte" or the demo's .model); its manifest's "synthetic" key records what was
// drawn (symbols, triggers and their share of positions, documents).
void write_synthetic_data(const SyntheticData& spec, const std::vector<std::string>& corpus_inputs,
                          const std::string& tokenizer_spec, const std::string& out_dir);

}  // namespace gatedlm::demo
