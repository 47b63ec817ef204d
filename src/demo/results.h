#pragma once
// The demo's results: one record per run (from RUN/summary.json, RUN/heldout.json and
// RUN/analysis.json), written as DIR/results.json and as a table in the form of the
// paper's Table 4 (DIR/results.md, and on stdout).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gatedlm::demo {

// The JSON in a file, or null when the file is missing or not valid JSON (an unfinished
// stage of an earlier demo run).
nlohmann::json read_json_or_null(const std::string& path);

struct ResultsRun {
  std::string name, label, dir;
  bool diverged = false;
};

struct ResultsInput {
  std::string command, preset, out_dir;
  double minutes = 0;  // 0: a fixed step budget
  nlohmann::json corpus, heldout, tokenizer, data, train_config;
  std::string heldout_name, heldout_note;
  int64_t param_difference = 0;
  std::vector<int64_t> ffn_hidden;  // baseline, gated
  std::string report, report_note;
  double wall_s = 0;
  std::string contention_note;  // non-empty: the tok/s column was measured under contention
  std::vector<ResultsRun> runs;  // baseline first
};

struct Results {
  nlohmann::json json;
  std::string json_text, markdown, terminal;
};

// A run's training throughput over all its steps, from RUN/metrics.jsonl: the tokens of
// the step records over the time they took (each step's tokens / its tokens_per_s), so a
// run trained in several segments (the demo's budget plan) counts every segment; null
// without step records. (summary.json's tokens_per_s is the last segment's alone: 0 when
// the last segment only evaluated.)
nlohmann::json run_tokens_per_s(const std::string& run_dir);

// Missing files or keys become null in the JSON and "—" in the table.
Results collect_results(const ResultsInput& input);

}  // namespace gatedlm::demo
