#pragma once
// The report's figures drawn by gnuplot: one script (DIR/data/report.gp, runnable by hand
// from DIR) renders every figure as figures/NAME.png and figures/NAME.svg.
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/report_parts.h"

namespace gatedlm::analysis {

// The script: per figure, a PNG then the same plot replayed as SVG.
std::string gnuplot_script(const std::vector<Figure>& figures);

// Writes data/report.gp under out_dir and runs `gnuplot` on it from out_dir (its output in
// data/gnuplot.log). Returns the PNG and SVG paths, each checked to exist and be non-empty.
// Throws gatedlm::Error naming gnuplot, its status and the end of its log when it fails.
std::vector<std::string> draw_figures(const std::string& gnuplot, const std::filesystem::path& out_dir,
                                      const std::vector<Figure>& figures);

}  // namespace gatedlm::analysis
