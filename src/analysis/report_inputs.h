#pragma once
// The report's inputs, loaded: each run directory, analysis JSON, `gatedlm longctx` or
// `gatedlm stream-eval --json` result becomes a ReportRun; a sweep directory adds its
// description and a ReportRun for the first seed of each variant (report.h says which
// files a run directory may hold).
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gatedlm::analysis {

// One probe record of metrics.jsonl (`train --probe-every`, the demo's runs).
struct ProbeRecord {
  double step, f_attn, sink_rate_percent, m_act, gate_mean;  // NaN where the record lacks one
};

struct ReportRun {
  std::string label, path;  // label: unique among the inputs
  std::string color;        // "#rrggbb", by position
  bool is_dir = false;
  bool has_metrics = false;                        // a metrics.jsonl was read
  std::vector<std::pair<double, double>> train;    // step, loss
  std::vector<std::pair<double, double>> val;      // step, val_loss
  std::vector<ProbeRecord> probes;
  std::set<int64_t> spike_steps;
  std::optional<double> tokens_per_s;              // analysis/run_throughput.h over metrics.jsonl
  nlohmann::json summary, analysis, config;        // null when absent
  std::string analysis_path;
  nlohmann::json last_eval;    // the last eval record of metrics.jsonl
  nlohmann::json longctx;      // a `gatedlm longctx` result (docs/longctx.md), null when absent
  nlohmann::json stream_eval;  // a `gatedlm stream-eval --json` result, null when absent
};

struct ReportInputs {
  std::vector<ReportRun> runs;
  std::vector<nlohmann::json> sweeps;  // each sweep directory's sweep.json
};

// Throws gatedlm::Error naming the input at fault; what can be read past (a truncated last
// line of metrics.jsonl, a summary naming a missing analysis) goes to `warnings`.
ReportInputs load_report_inputs(const std::vector<std::string>& inputs, std::vector<std::string>& warnings);

// One run directory or input file (no sweep directories).
ReportRun load_report_run(const std::string& input, std::vector<std::string>& warnings);

// Labels made unique (" (2)", " (3)", and " (1)" on the first of a repeated name); colours
// given by position.
void label_and_colour(std::vector<ReportRun>& runs);

// What the table shows for a run, "" / none when it lacks it.
std::string gate_variant(const ReportRun& r);
bool has_gates(const ReportRun& r);  // its analysis has a "gates" section
std::optional<double> analysis_number(const ReportRun& r, std::initializer_list<const char*> path);
std::optional<double> eval_number(const ReportRun& r, const char* key);  // summary.json, else the last eval
std::optional<double> spike_count(const ReportRun& r);

}  // namespace gatedlm::analysis
