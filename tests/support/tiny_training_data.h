#pragma once
// What the training tests train on: a small pseudo-English corpus, a tiny model config
// and the corpus prepared with the byte tokenizer, under one directory:
//   root/corpus.txt, root/model.json, root/data/
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/rng.h"

namespace gatedlm::testing {

inline CliResult make_tiny_training_data(const std::filesystem::path& root);

// A fresh directory for one test suite's files, under the temporary directory, named by tag
// and process, with the tiny training data in it; returns the result of `data prepare`.
inline CliResult make_tiny_training_root(const std::filesystem::path& root) {
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  return make_tiny_training_data(root);
}
inline std::filesystem::path suite_root(const std::string& tag) {
  return std::filesystem::temp_directory_path() / ("gatedlm_" + tag + "_" + std::to_string(::getpid()));
}

// The per-step records (those with a "loss") of a run's metrics.jsonl, in order.
inline std::vector<nlohmann::json> step_records(const std::filesystem::path& run) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j);
  }
  return out;
}

// Returns the result of `gatedlm data prepare` (exit code 0 when all went well).
inline CliResult make_tiny_training_data(const std::filesystem::path& root) {
  Rng rng(5);
  const char* words[] = {"the", "king", "shall", "speak", "of", "love", "and", "war", "to", "thee", "my", "lord"};
  std::ofstream text(root / "corpus.txt");
  for (int i = 0; i < 20000; ++i) text << words[rng.below(12)] << (rng.below(9) == 0 ? ".\n" : " ");
  text.close();
  nlohmann::json config{{"vocab_size", 258}, {"d_model", 48},   {"n_layers", 2},  {"n_heads", 4},
                        {"n_kv_heads", 2},   {"head_dim", 12},  {"ffn_hidden", 96}, {"max_seq_len", 64},
                        {"gate", {{"position", "sdpa"}}}};
  std::ofstream(root / "model.json") << config.dump();
  return run_gatedlm({"data", "prepare", "--tokenizer", "byte", "--input", (root / "corpus.txt").string(), "--out",
                      (root / "data").string()});
}

}  // namespace gatedlm::testing
