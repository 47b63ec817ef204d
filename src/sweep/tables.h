#pragma once
// The sweep's tables from its runs' results: per variant the mean +- standard deviation
// over seeds of every measurement, and the difference to its baseline paired by seed with a
// 95 % confidence interval (sweep/stats.h); written as DIR/sweep.json and DIR/sweep.md.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace gatedlm::sweep {

// The measurements of a run's result.json that the tables summarise, in column order.
extern const char* const kMetrics[];
extern const size_t kMetricCount;

// `sweep` holds "variants": [{name, label, compare_to, ..., runs: [result or null per seed]}]
// and "seeds"; adds "stats" and "vs_baseline" to every variant.
void add_statistics(nlohmann::json& sweep);

// The Markdown page of a sweep JSON with statistics.
std::string sweep_markdown(const nlohmann::json& sweep);

}  // namespace gatedlm::sweep
