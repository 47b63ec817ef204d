#pragma once
// The report's page for a sweep (DIR/sweep.json of `gatedlm sweep`): its tables in HTML and
// figures of the measurements per variant (mean +- std over seeds), the paired differences
// to the baseline with their 95 % intervals, and the loss against the learning rate for
// variants grouped in series (the lr-stability preset).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/report_parts.h"

namespace gatedlm::analysis {

bool is_sweep(const nlohmann::json& j);

struct SweepPage {
  std::vector<Figure> figures;
  std::vector<DataTable> tables;  // the data the figures plot (data/sweepTAG_*.dat)
  std::string html;  // the section, with <figure> placeholders "@@FIGURE:name@@" for the figures
};

// `tag` keeps figure and data names unique when several sweeps are given.
SweepPage sweep_page(const nlohmann::json& sweep, const std::string& tag);

}  // namespace gatedlm::analysis
