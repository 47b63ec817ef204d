// The report's figures over training steps: the loss curves and the probes recorded while
// training (report_figures.h).
#include <cmath>
#include <string>

#include "analysis/report_figures.h"
#include "core/error.h"

namespace gatedlm::analysis {

namespace {

constexpr double kEma = 0.9;  // loss smoothing: ema = 0.9 ema + 0.1 loss, starting at the first loss

// Adds run i's loss curves (raw thin and pale, EMA thick) and its spikes to `loss`.
void add_loss_curves(const ReportRun& r, size_t i, Figure& loss, FigureSet& set) {
  DataTable curve(cat("train_", i), {"step", "loss", "loss_ema"});
  DataTable spikes(cat("spikes_", i), {"step", "loss"});
  double ema = NAN;
  for (const auto& [step, l] : r.train) {
    if (!std::isfinite(ema)) ema = l;
    else if (std::isfinite(l)) ema = kEma * ema + (1 - kEma) * l;
    curve.add_row({step, l, ema});
    if (r.spike_steps.count(static_cast<int64_t>(step))) spikes.add_row({step, l});
  }
  const std::string pale = "#B0" + r.color.substr(1);  // the run's colour, 70 % transparent
  loss.elements.push_back(curve.plot({"step", "loss"}) + " with lines lw 0.8 lc rgb '" + pale + "' notitle");
  loss.elements.push_back(curve.plot({"step", "loss_ema"}) + " with lines lw 2 lc rgb '" + r.color + "' title " +
                          gp_str(r.label));
  if (spikes.rows() > 0) {
    loss.elements.push_back(spikes.plot({"step", "loss"}) + " with points pt 7 ps 1.3 lc rgb '" + r.color +
                            "' title " + gp_str(r.label + " spikes"));
    set.tables.push_back(std::move(spikes));
  }
  set.tables.push_back(std::move(curve));
}

void add_val_curve(const ReportRun& r, size_t i, Figure& val, FigureSet& set) {
  DataTable curve(cat("val_", i), {"step", "val_loss"});
  for (const auto& [step, l] : r.val) curve.add_row({step, l});
  val.elements.push_back(curve.plot({"step", "val_loss"}) + " with linespoints pt 7 ps 0.6 lw 2 lc rgb '" + r.color +
                         "' title " + gp_str(r.label));
  set.tables.push_back(std::move(curve));
}

// The probe figures: name, caption, axis, and the column of the probe table they draw.
struct ProbeFigureKind {
  const char *name, *caption, *axis, *column;
};
constexpr ProbeFigureKind kProbeFigures[] = {
    {"probe_f_attn", "F-Attn during training: attention on the first token (rows t >= 1)",
     "set ylabel 'F-Attn'\nset yrange [0:*]\n", "f_attn"},
    {"probe_sink_rate", "Sink rate during training (Gu et al., eps 0.3), percent of heads",
     "set ylabel 'sink rate %'\nset yrange [0:*]\n", "sink_rate_percent"},
    {"probe_m_act", "M-Act during training: mean over layers of the largest |h|",
     "set ylabel 'M-Act'\nset logscale y\nset format y '%g'\n", "m_act"},
    {"probe_gate_mean", "Mean gate score during training", "set ylabel 'mean gate score'\nset yrange [0:*]\n",
     "gate_mean"},
};

DataTable probe_table(const ReportRun& r, size_t i) {
  DataTable t(cat("probes_", i), {"step", "f_attn", "sink_rate_percent", "m_act", "gate_mean"});
  for (const ProbeRecord& p : r.probes) t.add_row({p.step, p.f_attn, p.sink_rate_percent, p.m_act, p.gate_mean});
  return t;
}

// Why the probe section is empty: which inputs had a training log without probe records.
std::string no_probes_note(const std::vector<ReportRun>& runs) {
  std::string logged;
  for (const ReportRun& r : runs)
    if (r.has_metrics) logged += (logged.empty() ? "" : ", ") + r.label;
  if (logged.empty()) return "no training log (metrics.jsonl) among the inputs, so no probe records to draw";
  return "no probe records in the metrics.jsonl of " + logged +
         ": the training that wrote them did not probe (`gatedlm train --probe-every N` and `gatedlm demo` record "
         "F-Attn, sink rate, M-Act and the gate mean while training)";
}

}  // namespace

FigureSet training_figures(const std::vector<ReportRun>& runs) {
  FigureSet set;
  Figure loss{"train_loss", "Training loss (thin: raw; thick: EMA 0.9), loss spikes marked"};
  loss.setup = "set xlabel 'step'\nset ylabel 'loss (nats)'\n";
  Figure val{"val_loss", "Validation loss"};
  val.setup = "set xlabel 'step'\nset ylabel 'validation loss (nats)'\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].train.empty()) add_loss_curves(runs[i], i, loss, set);
    if (!runs[i].val.empty()) add_val_curve(runs[i], i, val, set);
  }
  if (!loss.elements.empty()) set.figures.push_back(std::move(loss));
  else set.notes["train_loss"] = "no training metrics (metrics.jsonl) among the inputs";
  if (!val.elements.empty()) set.figures.push_back(std::move(val));
  else set.notes["val_loss"] = "no validation records among the inputs";
  return set;
}

FigureSet probe_figures(const std::vector<ReportRun>& runs) {
  FigureSet set;
  std::vector<Figure> figures;
  for (const ProbeFigureKind& kind : kProbeFigures) {
    figures.emplace_back(kind.name, kind.caption);
    figures.back().setup = std::string("set xlabel 'step'\n") + kind.axis;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const ReportRun& r = runs[i];
    if (r.probes.empty()) continue;
    DataTable table = probe_table(r, i);
    bool gated = false;  // a baseline's probes have no gate mean
    for (const ProbeRecord& p : r.probes) gated |= std::isfinite(p.gate_mean);
    for (size_t k = 0; k < figures.size(); ++k) {
      if (std::string(kProbeFigures[k].column) == "gate_mean" && !gated) continue;
      figures[k].elements.push_back(table.plot({"step", kProbeFigures[k].column}) +
                                    " with linespoints pt 7 ps 0.5 lw 2 lc rgb '" + r.color + "' title " +
                                    gp_str(r.label));
    }
    set.tables.push_back(std::move(table));
  }
  for (Figure& f : figures)
    if (!f.elements.empty()) set.figures.push_back(std::move(f));
  if (set.figures.empty()) set.notes["probes"] = no_probes_note(runs);
  return set;
}

}  // namespace gatedlm::analysis
