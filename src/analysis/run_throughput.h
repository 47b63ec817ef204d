#pragma once
// A run's training throughput, the one tokens/s figure the report, the demo's results and
// the sweep show for a run: the tokens of its step records over the time they took.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace gatedlm::analysis {

// From the records of a run's metrics.jsonl (train/metrics_log.h's read_metrics_log):
// every record with a "step" and a positive "tokens_per_s" is one step; a step logged
// twice (a segment redone after a resume) counts once, its later record. Steps train the
// same number of tokens, so tokens / seconds is the harmonic mean of the steps' rates:
// n / sum(1 / tokens_per_s). A run trained in several segments (the demo's budget plan)
// counts every segment. None without step records. (summary.json's tokens_per_s is the
// last segment's alone, 0 when that segment only evaluated.)
std::optional<double> run_tokens_per_s(const std::vector<nlohmann::json>& metrics_records);

// The same from RUN/metrics.jsonl; none when the run has no such file or no step records.
std::optional<double> run_tokens_per_s(const std::filesystem::path& run_dir);

}  // namespace gatedlm::analysis
