#include "analysis/run_throughput.h"

#include <cstdint>
#include <map>

#include "train/metrics_log.h"

namespace gatedlm::analysis {

using nlohmann::json;

std::optional<double> run_tokens_per_s(const std::vector<json>& metrics_records) {
  std::map<int64_t, double> rate_by_step;  // a later record of a step replaces an earlier one
  for (const json& r : metrics_records) {
    if (!r.is_object() || !r.contains("step") || !r["step"].is_number()) continue;
    if (!r.contains("tokens_per_s") || !r["tokens_per_s"].is_number()) continue;
    const double tokens_per_s = r["tokens_per_s"].get<double>();
    if (tokens_per_s > 0) rate_by_step[r["step"].get<int64_t>()] = tokens_per_s;
  }
  if (rate_by_step.empty()) return std::nullopt;
  double seconds_per_token = 0;
  for (const auto& [step, rate] : rate_by_step) seconds_per_token += 1.0 / rate;
  return static_cast<double>(rate_by_step.size()) / seconds_per_token;
}

std::optional<double> run_tokens_per_s(const std::filesystem::path& run_dir) {
  const train::MetricsLog log = train::read_metrics_log(run_dir / "metrics.jsonl", train::IfMissing::empty);
  return run_tokens_per_s(log.records);
}

}  // namespace gatedlm::analysis
