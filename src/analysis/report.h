#pragma once
// An offline HTML report comparing runs side by side: training curves from a run
// directory (metrics.jsonl, summary.json) and the probes of an analysis JSON (schema:
// docs/analysis.md), drawn as PNG + SVG with gnuplot (run as a subprocess on a generated
// script), plus a table in the style of the paper's Table 4.
//
// Inputs, each either
//   - an analysis JSON file, or
//   - a run directory RUN/ with any of metrics.jsonl, summary.json, config.json and an
//     analysis: summary.json's "analysis" (a path, relative to RUN/ unless absolute) or
//     RUN/analysis.json.
// Whatever an input lacks (no metrics, no analysis, no gate) shows as "—".
//
// Output DIR/index.html, DIR/figures/NAME.{png,svg}, DIR/data/ (the plotted numbers, the
// gnuplot script and its log).
#include <string>
#include <vector>

namespace gatedlm::analysis {

struct ReportOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string title = "gatedlm report";
  std::string gnuplot;  // executable; empty: $GATEDLM_GNUPLOT, else "gnuplot" on PATH
};

struct ReportResult {
  std::string html_path;
  std::vector<std::string> figures;  // paths of every PNG and SVG written
  std::vector<std::string> warnings;
};

// The gnuplot executable that render_report would use, or "" when there is none.
std::string find_gnuplot(const std::string& preferred = "");

// Throws gatedlm::Error naming the input at fault, or saying gnuplot is missing.
ReportResult render_report(const ReportOptions& options);

}  // namespace gatedlm::analysis
