// gatedlm report: an offline HTML page with gnuplot figures comparing training runs and
// analyses side by side (see analysis/report.h and docs/analysis.md).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "analysis/report.h"
#include "cli/commands.h"

namespace gatedlm::cli {

void register_report(CLI::App& app) {
  auto opt = std::make_shared<analysis::ReportOptions>();
  CLI::App* sub = app.add_subcommand(
      "report",
      "Render an offline HTML report (index.html + PNG/SVG figures drawn with gnuplot) comparing runs side by "
      "side. Each input is a training run directory (metrics.jsonl, summary.json, optional analysis.json or "
      "summary.json \"analysis\"; probe records of `train --probe-every` and of the demo's runs are drawn over "
      "the steps; Tokens/s is the throughput over every step of metrics.jsonl), an analysis JSON from "
      "`gatedlm analyze`, or a `gatedlm sweep` output directory (its tables, figures per variant and the "
      "first seed's curves). Needs gnuplot (Debian: gnuplot-nox).");
  sub->add_option("inputs", opt->inputs, "run directories, analysis JSON files and/or sweep directories")->required()->check(CLI::ExistingPath);
  sub->add_option("--out", opt->out_dir, "output directory (created; files in it are overwritten)")->required();
  sub->add_option("--title", opt->title, "page title")->capture_default_str();
  sub->add_option("--gnuplot", opt->gnuplot, "gnuplot executable (default: $GATEDLM_GNUPLOT, else gnuplot on PATH)");
  sub->callback([opt] {
    const analysis::ReportResult r = analysis::render_report(*opt);
    for (const std::string& w : r.warnings) std::fprintf(stderr, "report: warning: %s\n", w.c_str());
    std::fprintf(stderr, "report: wrote %s (%zu figure files)\n", r.html_path.c_str(), r.figures.size());
  });
}

}  // namespace gatedlm::cli
