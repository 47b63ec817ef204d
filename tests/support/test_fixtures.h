#pragma once
// Small inputs that a unit test and a CLI test of the same feature both use.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/rng.h"

namespace gatedlm::testing {

// Seeded sentences over a small word list: a corpus whose byte bigrams are far from uniform.
inline std::string corpus_text(int sentences, uint64_t seed) {
  static const char* const words[] = {"the",  "state", "of",    "union", "is",   "strong", "and",   "we",
                                      "will", "keep",  "peace", "with",  "all",  "nations", "people", "work",
                                      "for",  "a",     "better", "future", "every", "family", "deserves", "hope"};
  const int n = static_cast<int>(sizeof(words) / sizeof(words[0]));
  Rng rng(seed);
  std::string s;
  for (int i = 0; i < sentences; ++i) {
    const int len = 5 + static_cast<int>(rng.below(8));
    for (int k = 0; k < len; ++k) s += std::string(words[rng.below(n)]) + (k + 1 < len ? " " : ".\n");
  }
  return s;
}

// A sweep spec of two tiny variants (baseline, G1) and two seeds.
inline nlohmann::json tiny_spec() {
  using nlohmann::json;
  return json{{"base", {{"d_model", 32}, {"n_layers", 2}, {"n_heads", 2}, {"n_kv_heads", 1}, {"head_dim", 16},
                        {"ffn_hidden", 64}, {"max_seq_len", 32}}},
              {"train", {{"batch_size", 4}, {"seq_len", 32}, {"lr", 3e-3}, {"min_lr", 3e-4}, {"eval_tokens", 256}}},
              {"tokens", 2048},
              {"seeds", {1, 2}},
              {"final_windows", 3},
              {"heldout_tokens", 256},
              {"variants",
               {{{"name", "baseline"}},
                {{"name", "g1"}, {"label", "G1 gated"}, {"model", {{"gate", {{"position", "sdpa"}}}}}}}}};
}

// A tiny model config with switch heads of `experts` experts, `top_k` active, on `on`.
inline nlohmann::json switch_config(int64_t experts, int64_t top_k, const char* on) {
  return nlohmann::json{{"vocab_size", 258}, {"d_model", 32}, {"n_layers", 2},    {"n_heads", 4},
          {"n_kv_heads", 2},   {"head_dim", 8},  {"ffn_hidden", 48}, {"max_seq_len", 32},
          {"init_std", 0.2},
          {"switch_heads", {{"n_experts", experts}, {"top_k", top_k}, {"experts_on", on}}}};
}

}  // namespace gatedlm::testing
