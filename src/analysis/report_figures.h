#pragma once
// The report's figures, one builder per kind. Each reads the loaded runs (their index in
// `runs` names their data files: train_0.dat, layers_1.dat ...) and returns its figures,
// the data tables they plot (columns read by name) and, when it has nothing to draw, a note
// under its section's key saying why.
#include <vector>

#include "analysis/report_inputs.h"
#include "analysis/report_parts.h"

namespace gatedlm::analysis {

// train_loss (raw, EMA 0.9, spikes) and val_loss; notes "train_loss", "val_loss".
FigureSet training_figures(const std::vector<ReportRun>& runs);

// probe_f_attn, probe_sink_rate, probe_m_act, probe_gate_mean over the steps from the
// probe records of metrics.jsonl; note "probes" naming the runs without any.
FigureSet probe_figures(const std::vector<ReportRun>& runs);

// From each analysis, a table per run of its numbers by layer, drawn as f_attn_per_layer,
// top_activation, mean_abs_y, sparsity_1e-2, sparsity_1e-3 and, for gated models,
// gate_mean_per_layer and gate_histogram; notes "analysis", "gates".
FigureSet layer_figures(const std::vector<ReportRun>& runs);

// attention_map_RUN_layerL: one heatmap per run and layer kept by the analysis.
FigureSet attention_map_figures(const std::vector<ReportRun>& runs);

// longctx_ppl and longctx_accuracy by evaluation length; note "longctx".
FigureSet longctx_figures(const std::vector<ReportRun>& runs);

}  // namespace gatedlm::analysis
