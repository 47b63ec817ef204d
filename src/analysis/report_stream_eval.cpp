#include "analysis/report_stream_eval.h"

#include <map>
#include <optional>
#include <sstream>

#include "analysis/report_parts.h"

namespace gatedlm::analysis {

using json = nlohmann::json;

namespace {

std::optional<double> number_at(const json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
  return std::nullopt;
}

// The column of a record: window size (0 = the full cache) and sink count.
using Column = std::pair<int64_t, int64_t>;

std::optional<Column> column_of(const json& r) {
  if (!r.is_object() || !r.contains("cache") || !r["cache"].is_string()) return std::nullopt;
  if (r["cache"] == "full") return Column{0, 0};
  const auto window = number_at(r, "window"), sinks = number_at(r, "sinks");
  if (!window || !sinks) return std::nullopt;
  return Column{static_cast<int64_t>(*window), static_cast<int64_t>(*sinks)};
}

}  // namespace

bool is_stream_eval(const json& j) {
  if (!j.is_object() || !j.contains("results") || !j["results"].is_array() || j["results"].empty()) return false;
  for (const json& r : j["results"])
    if (!r.is_object() || !r.contains("cache") || !r.contains("sinks") || !r.contains("ppl")) return false;
  return true;
}

std::string stream_eval_table_html(const std::vector<std::pair<std::string, json>>& results) {
  std::map<Column, bool> columns;  // sorted: the full cache first, then by window and sinks
  for (const auto& [label, j] : results)
    for (const json& r : j["results"])
      if (auto c = column_of(r)) columns[*c] = true;
  std::ostringstream h;
  h << "<table>\n<tr><th class=\"l\">Model</th><th>Tokens</th><th>Training length</th>";
  for (const auto& [c, unused] : columns) {
    if (c.first == 0) h << "<th>Full cache</th>";
    else h << "<th>Window " << c.first << ", " << c.second << (c.second == 1 ? " sink" : " sinks") << "</th>";
  }
  h << "</tr>\n";
  for (const auto& [label, j] : results) {
    std::map<Column, const json*> by_column;
    for (const json& r : j["results"])
      if (auto c = column_of(r)) by_column[*c] = &r;
    h << "<tr><td class=\"l\">" << html_escape(label) << "</td><td>" << fmt(number_at(j, "tokens"), "%.0f")
      << "</td><td>" << fmt(number_at(j, "train_len"), "%.0f") << "</td>";
    for (const auto& [c, unused] : columns) {
      auto it = by_column.find(c);
      if (it == by_column.end()) {
        h << "<td>" << kDash << "</td>";
        continue;
      }
      const json& r = *it->second;
      h << "<td>" << fmt(number_at(r, "ppl"), "%.2f");
      if (c.first > 0 && number_at(r, "ppl_after_fill"))
        h << " (" << fmt(number_at(r, "ppl_after_fill"), "%.2f") << " after fill)";
      h << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

}  // namespace gatedlm::analysis
