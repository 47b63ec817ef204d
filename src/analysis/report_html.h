#pragma once
// The report's page, DIR/index.html: the sweeps' sections, the summary table in the style
// of the paper's Table 4, then a section per kind of figure (a note where an input lacks
// what it needs), the streaming-window table, the inputs and any warnings. Offline: it
// links only the figures under figures/.
#include <string>
#include <vector>

#include "analysis/report_inputs.h"
#include "analysis/report_parts.h"
#include "analysis/report_sweep.h"

namespace gatedlm::analysis {

struct ReportPage {
  std::string title;
  const std::vector<ReportRun>& runs;
  const FigureSet& figures;           // every figure drawn, and notes keyed by section
  const std::vector<SweepPage>& sweeps;
  const std::vector<std::string>& warnings;
};

std::string report_html(const ReportPage& page);

// A <figure> for f: its PNG linking to its SVG, and its caption.
std::string figure_html(const Figure& f);

// The summary table: a row per run (gate, gate score, M-Act, F-Attn, sink rate, validation
// loss / PPL / BPB, spikes, tokens/s), a dash for what a run lacks.
std::string summary_table_html(const std::vector<ReportRun>& runs);

}  // namespace gatedlm::analysis
