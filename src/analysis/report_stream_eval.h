#pragma once
// The report's "Streaming windows" section: `gatedlm stream-eval --json` results of the
// inputs side by side (full cache, then the rolling window at each sink count), the
// StreamingLLM comparison of issue 13.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace gatedlm::analysis {

// Whether j is a `gatedlm stream-eval --json` result: "results" records with "cache",
// "sinks" and "ppl".
bool is_stream_eval(const nlohmann::json& j);

// An HTML table with a row per (label, result): full-cache perplexity, then per window
// size and sink count the perplexity over all scored tokens and after the window filled.
// Values a result lacks show as a dash. Labels are escaped here.
std::string stream_eval_table_html(const std::vector<std::pair<std::string, nlohmann::json>>& results);

}  // namespace gatedlm::analysis
