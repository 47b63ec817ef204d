// gatedlm report: loads the inputs (report_inputs.h), builds each kind of figure with its
// data tables (report_figures.h, report_sweep.h), draws them with gnuplot
// (report_gnuplot.h) and writes the page (report_html.h).
#include "analysis/report.h"

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/report_figures.h"
#include "analysis/report_gnuplot.h"
#include "analysis/report_html.h"
#include "analysis/report_inputs.h"
#include "analysis/report_parts.h"
#include "analysis/report_sweep.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/subprocess.h"

namespace gatedlm::analysis {

namespace fs = std::filesystem;

namespace {

// DIR, DIR/figures and DIR/data, created; DIR may exist (its files are overwritten).
void make_report_dirs(const std::string& out_dir) {
  const fs::path out(out_dir);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) fail("--out ", out_dir, ": exists and is not a directory");
  fs::create_directories(out / "figures", ec);
  if (!ec) fs::create_directories(out / "data", ec);
  if (ec) fail("--out ", out_dir, ": cannot create the report directory (", ec.message(), ")");
}

// Every figure of the page, in the order the script draws them.
FigureSet all_figures(const ReportInputs& in, std::vector<SweepPage>& sweep_pages) {
  FigureSet set = training_figures(in.runs);
  set.append(probe_figures(in.runs));
  for (size_t k = 0; k < in.sweeps.size(); ++k) {
    sweep_pages.push_back(sweep_page(in.sweeps[k], std::to_string(k)));
    for (const Figure& f : sweep_pages.back().figures) set.figures.push_back(f);
    for (const DataTable& t : sweep_pages.back().tables) set.tables.push_back(t);
  }
  set.append(layer_figures(in.runs));
  set.append(attention_map_figures(in.runs));
  set.append(longctx_figures(in.runs));
  return set;
}

ReportResult render_checked(const ReportOptions& options) {
  if (options.inputs.empty()) fail("report: no inputs (give run directories or analysis JSON files)");
  if (options.out_dir.empty()) fail("report: no output directory");
  const std::string gnuplot = find_gnuplot(options.gnuplot);
  if (gnuplot.empty())
    fail("report: gnuplot was not found", options.gnuplot.empty() ? "" : cat(" (asked for ", options.gnuplot, ")"),
         "; install it (Debian: apt-get install gnuplot-nox) or set GATEDLM_GNUPLOT to its path");

  ReportResult result;
  const ReportInputs in = load_report_inputs(options.inputs, result.warnings);
  make_report_dirs(options.out_dir);
  const fs::path out(options.out_dir);
  std::vector<SweepPage> sweep_pages;
  const FigureSet figures = all_figures(in, sweep_pages);
  write_figure_data(figures, out / "data");
  result.figures = draw_figures(gnuplot, out, figures.figures);
  result.html_path = (out / "index.html").string();
  write_file_atomic(result.html_path,
                    report_html({options.title, in.runs, figures, sweep_pages, result.warnings}));
  return result;
}

}  // namespace

std::string find_gnuplot(const std::string& preferred) {
  std::string want = preferred;
  if (want.empty())
    if (const char* env = std::getenv("GATEDLM_GNUPLOT"); env && *env) want = env;
  return find_program(want.empty() ? "gnuplot" : want);
}

// A value of an unexpected type somewhere in an input (a hand-edited or mutated JSON) is
// reported naming the inputs instead of escaping as a raw library exception.
ReportResult render_report(const ReportOptions& options) {
  try {
    return render_checked(options);
  } catch (const nlohmann::json::exception& e) {
    std::string inputs;
    for (const std::string& in : options.inputs) inputs += (inputs.empty() ? "" : ", ") + in;
    fail("report: ", inputs, ": a value of an unexpected type or shape (", e.what(), ")");
  }
}

}  // namespace gatedlm::analysis
