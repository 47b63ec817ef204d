#pragma once
// The demo's results: one record per run (from RUN/summary.json, RUN/heldout.json and
// RUN/analysis.json), written as DIR/results.json and as a table in the form of the
// paper's Table 4 (DIR/results.md, and on stdout).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gatedlm::demo {

struct ResultsRun {
  std::string name, label, dir;
  bool diverged = false;
};

struct ResultsInput {
  std::string command, preset, out_dir;
  double minutes = 0;  // 0: a fixed step budget
  nlohmann::json corpus, heldout, tokenizer, data;
  nlohmann::json train_config;  // its "steps": the steps that ran
  int64_t planned_steps = 0;    // the plan's (other than ran when a budget re-plan moved the end)
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

// Missing files or keys become null in the JSON and "—" in the table. A run's tok/s is
// analysis/run_throughput.h's, the figure the report shows.
Results collect_results(const ResultsInput& input);

}  // namespace gatedlm::demo
