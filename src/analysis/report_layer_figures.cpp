// The report's figures by layer, from each input's analysis JSON (docs/analysis.md), and
// its attention maps (report_figures.h).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "analysis/report_figures.h"
#include "core/error.h"

namespace gatedlm::analysis {

using nlohmann::json;

namespace {

// The columns of data/layers_I.dat, one row per layer. y: the SDPA output Y before the
// gate, y_gated: Y' after it, control: Y x the mean gate score; lt_1e-2: the share of
// values with |v| < 1e-2.
const std::vector<std::string> kLayerColumns = {
    "layer", "f_attn", "f_attn_all_rows", "top1", "top2", "top3", "median", "massive_count", "gate_mean",
    "mean_abs_y", "mean_abs_y_gated", "sdpa_mean_abs", "y_lt_1e-2", "y_gated_lt_1e-2", "control_lt_1e-2",
    "y_lt_1e-3", "y_gated_lt_1e-3", "control_lt_1e-3", "sdpa_lt_1e-2", "sdpa_lt_1e-3", "sink_logit_mass"};

double field(const json& j, const char* key) { return j.is_object() && j.contains(key) ? jnum(j[key]) : NAN; }

// Layer l's entry of a section's "per_layer" list (null past its end or without one).
json layer_of(const json& a, const char* section, int64_t l) {
  if (!a.contains(section) || !a[section].is_object()) return json();
  const json& arr = a[section].value("per_layer", json::array());
  return l < static_cast<int64_t>(arr.size()) ? arr[l] : json();
}

double per_layer_value(const json& a, const char* section, int64_t l) {
  const json v = layer_of(a, section, l);
  return v.is_null() ? NAN : jnum(v);
}

// A sparsity share: j["sparsity"][part][key], or j["sparsity"][key] without a part.
double sparsity(const json& j, const char* part, const char* key) {
  if (!j.is_object() || !j.contains("sparsity")) return NAN;
  const json& sp = part ? j["sparsity"].value(part, json()) : j["sparsity"];
  return field(sp, key);
}

int64_t layer_count(const json& a) {
  return a.contains("f_attn") ? static_cast<int64_t>(a["f_attn"].value("per_layer", json::array()).size()) : 0;
}

DataTable layer_table(const json& a, size_t i) {
  DataTable t(cat("layers_", i), kLayerColumns);
  for (int64_t l = 0, n = layer_count(a); l < n; ++l) {
    const json m = layer_of(a, "massive_activations", l), g = layer_of(a, "gates", l), s = layer_of(a, "sdpa_output", l);
    auto top = [&](size_t k) { return m.is_object() && m.contains("top3") && m["top3"].size() > k ? jnum(m["top3"][k]) : NAN; };
    t.add_row({static_cast<double>(l), per_layer_value(a, "f_attn", l), per_layer_value(a, "f_attn_all_rows", l),
               top(0), top(1), top(2), field(m, "median"), field(m, "massive_count"), field(g, "mean_score"),
               field(g, "mean_abs_y"), field(g, "mean_abs_y_gated"), field(s, "mean_abs"),
               sparsity(g, "before", "lt_1e-2"), sparsity(g, "after", "lt_1e-2"),
               sparsity(g, "mean_scaled_control", "lt_1e-2"), sparsity(g, "before", "lt_1e-3"),
               sparsity(g, "after", "lt_1e-3"), sparsity(g, "mean_scaled_control", "lt_1e-3"),
               sparsity(s, nullptr, "lt_1e-2"), sparsity(s, nullptr, "lt_1e-3"),
               per_layer_value(a, "sink_logit_mass", l)});
  }
  return t;
}

std::string layer_axis(int64_t n_layers) {
  std::string s = "set xlabel 'layer'\n";
  if (n_layers <= 32) s += "set xtics 1\n";
  s += cat("set xrange [-0.5:", std::max<int64_t>(n_layers, 1) - 0.5, "]\n");
  return s;
}

// A plot element: `columns` of table drawn in the run's colour.
std::string element(const DataTable& t, std::initializer_list<std::string_view> columns, const std::string& style,
                    const ReportRun& r, const std::string& title) {
  return t.plot(columns) + " with " + style + " lc rgb '" + r.color + "' " +
         (title.empty() ? std::string("notitle") : "title " + gp_str(title));
}

// Runs with an analysis, each with its layer table.
struct Analysed {
  const ReportRun* run;
  DataTable table;
};

// A figure of one value per layer (solid, with points, titled) and its companion (dashed):
// F-Attn over rows t >= 1 beside all rows; the largest |h| beside the median |h|.
struct LayerCurvePair {
  const char *name, *caption, *axis, *solid, *dashed;
};
constexpr LayerCurvePair kFAttnPerLayer = {
    "f_attn_per_layer", "F-Attn per layer: mean attention on token 0 over query rows t >= 1 (dashed: all rows)",
    "set ylabel 'F-Attn'\nset yrange [0:*]\n", "f_attn", "f_attn_all_rows"};
constexpr LayerCurvePair kTopActivation = {
    "top_activation", "Largest |h| of the residual stream after each block (dashed: median |h|)",
    "set ylabel '|h|'\nset logscale y\nset format y '%g'\n", "top1", "median"};

Figure curve_pair_figure(const LayerCurvePair& kind, const std::vector<Analysed>& runs, const std::string& axis) {
  Figure f{kind.name, kind.caption};
  f.setup = axis + kind.axis;
  for (const Analysed& a : runs) {
    f.elements.push_back(element(a.table, {"layer", kind.solid}, "linespoints pt 7 ps 0.7 lw 2", *a.run, a.run->label));
    f.elements.push_back(element(a.table, {"layer", kind.dashed}, "lines dt 2 lw 1", *a.run, ""));
  }
  return f;
}

Figure mean_abs_y_figure(const std::vector<Analysed>& runs, const std::string& axis) {
  Figure f{"mean_abs_y", "Mean |Y| before (solid) and |Y'| after (dashed) the gate; models without a gate: mean |SDPA output|"};
  f.setup = axis + "set ylabel 'mean |value|'\nset logscale y\nset format y '%g'\n";
  for (const Analysed& a : runs) {
    const std::string& label = a.run->label;
    if (has_gates(*a.run)) {
      f.elements.push_back(element(a.table, {"layer", "mean_abs_y"}, "linespoints pt 7 ps 0.6 lw 2", *a.run, label + " |Y|"));
      f.elements.push_back(
          element(a.table, {"layer", "mean_abs_y_gated"}, "linespoints pt 6 ps 0.6 lw 2 dt 2", *a.run, label + " |Y'|"));
    } else {
      f.elements.push_back(element(a.table, {"layer", "sdpa_mean_abs"}, "linespoints pt 5 ps 0.6 lw 2", *a.run,
                                   label + " SDPA output (no gate)"));
    }
  }
  return f;
}

// threshold: "1e-2" or "1e-3", the suffix of the table's sparsity columns.
Figure sparsity_figure(const std::vector<Analysed>& runs, const std::string& axis, const std::string& threshold) {
  Figure f{"sparsity_" + threshold, "Share of values with |v| < " + threshold +
                                        ": Y before the gate (solid), Y' after (dashed), control Y x mean score "
                                        "(dotted); models without a gate: SDPA output"};
  f.setup = axis + "set ylabel 'share |v| < " + threshold + "'\nset yrange [0:*]\n";
  const std::string y = "y_lt_" + threshold, y_gated = "y_gated_lt_" + threshold,
                    control = "control_lt_" + threshold, sdpa = "sdpa_lt_" + threshold;
  for (const Analysed& a : runs) {
    const std::string& label = a.run->label;
    if (has_gates(*a.run)) {
      f.elements.push_back(element(a.table, {"layer", y}, "linespoints pt 7 ps 0.6 lw 2", *a.run, label + " before"));
      f.elements.push_back(element(a.table, {"layer", y_gated}, "linespoints pt 6 ps 0.6 lw 2 dt 2", *a.run, label + " after"));
      f.elements.push_back(element(a.table, {"layer", control}, "lines lw 2 dt 3", *a.run, label + " control"));
    } else {
      f.elements.push_back(element(a.table, {"layer", sdpa}, "linespoints pt 5 ps 0.6 lw 2", *a.run,
                                   label + " SDPA output (no gate)"));
    }
  }
  return f;
}

// The gate-score histogram of run i, its layers' shares averaged; none without histograms.
std::optional<DataTable> gate_histogram_table(const ReportRun& r, size_t i) {
  const json& layers = r.analysis["gates"].value("per_layer", json::array());
  std::vector<double> share;
  double counted = 0;  // layers with a histogram (not a hybrid's linear layers: theirs is null)
  for (const json& l : layers) {
    if (!l.contains("histogram") || !l["histogram"].contains("share") || !l["mean_score"].is_number()) continue;
    const json& s = l["histogram"]["share"];
    share.resize(std::max(share.size(), s.size()), 0.0);
    for (size_t k = 0; k < s.size(); ++k) share[k] += jnum(s[k]);
    ++counted;
  }
  if (share.empty()) return std::nullopt;
  for (double& v : share) v /= counted;
  DataTable t(cat("gate_hist_", i), {"score", "share"});
  for (size_t k = 0; k < share.size(); ++k)
    t.add_row({(static_cast<double>(k) + 0.5) / static_cast<double>(share.size()), share[k]});
  return t;
}

void add_gate_figures(const std::vector<Analysed>& runs, const std::vector<ReportRun>& all, const std::string& axis,
                      FigureSet& set) {
  Figure mean{"gate_mean_per_layer", "Mean gate score per layer"};
  mean.setup = axis + "set ylabel 'mean gate score'\nset yrange [0:*]\n";
  Figure hist{"gate_histogram", "Gate-score distribution on [0, 1] (all layers; 50 bins; share of all scores)"};
  hist.setup = "set xlabel 'gate score'\nset ylabel 'share of scores'\nset xrange [0:1]\nset yrange [0:*]\n";
  for (const Analysed& a : runs) {
    if (!has_gates(*a.run)) continue;
    mean.elements.push_back(element(a.table, {"layer", "gate_mean"}, "linespoints pt 7 ps 0.7 lw 2", *a.run, a.run->label));
    const size_t i = static_cast<size_t>(a.run - all.data());
    if (std::optional<DataTable> t = gate_histogram_table(*a.run, i)) {
      hist.elements.push_back(element(*t, {"score", "share"}, "histeps lw 2", *a.run, a.run->label));
      set.tables.push_back(std::move(*t));
    }
  }
  if (mean.elements.empty()) {
    set.notes["gates"] = "no model with a gate among the analysed inputs";
    return;
  }
  set.figures.push_back(std::move(mean));
  if (!hist.elements.empty()) set.figures.push_back(std::move(hist));
}

// The probability the learned sink logits take per layer (attention_sinks models; analyze's
// sink_logit_mass), beside F-Attn's attention on token 0: where a model parks attention.
void add_sink_logit_figure(const std::vector<Analysed>& runs, const std::string& axis, FigureSet& set) {
  Figure f{"sink_logit_mass_per_layer",
           "Probability on the learned sink logit per layer, mean over heads and queries (attention_sinks models; "
           "dashed: F-Attn, the attention on token 0)"};
  f.setup = axis + "set ylabel 'probability'\nset yrange [0:*]\n";
  for (const Analysed& a : runs) {
    const json& mass = a.run->analysis.value("sink_logit_mass", json());
    if (!mass.is_object()) continue;
    f.elements.push_back(element(a.table, {"layer", "sink_logit_mass"}, "linespoints pt 7 ps 0.7 lw 2", *a.run,
                                 a.run->label));
    f.elements.push_back(element(a.table, {"layer", "f_attn"}, "lines dt 2 lw 1", *a.run, ""));
  }
  if (!f.elements.empty()) set.figures.push_back(std::move(f));
}

}  // namespace

FigureSet layer_figures(const std::vector<ReportRun>& runs) {
  FigureSet set;
  std::vector<Analysed> analysed;
  int64_t max_layers = 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].analysis.is_object()) continue;
    max_layers = std::max(max_layers, layer_count(runs[i].analysis));
    analysed.push_back({&runs[i], layer_table(runs[i].analysis, i)});
  }
  if (analysed.empty()) {
    set.notes["analysis"] = "no analysis JSON among the inputs (run `gatedlm analyze`)";
    set.notes["gates"] = "no model with a gate among the analysed inputs";
    return set;
  }
  const std::string axis = layer_axis(max_layers);
  set.figures.push_back(curve_pair_figure(kFAttnPerLayer, analysed, axis));
  set.figures.push_back(curve_pair_figure(kTopActivation, analysed, axis));
  set.figures.push_back(mean_abs_y_figure(analysed, axis));
  for (const char* threshold : {"1e-2", "1e-3"}) set.figures.push_back(sparsity_figure(analysed, axis, threshold));
  add_gate_figures(analysed, runs, axis, set);
  add_sink_logit_figure(analysed, axis, set);
  for (Analysed& a : analysed) set.tables.push_back(std::move(a.table));
  return set;
}

FigureSet attention_map_figures(const std::vector<ReportRun>& runs) {
  FigureSet set;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].analysis.is_object() || !runs[i].analysis.contains("attention_maps")) continue;
    const json& maps = runs[i].analysis["attention_maps"];
    if (!maps.is_object()) continue;
    std::vector<std::pair<int64_t, std::string>> keys;  // layer, its key, sorted by layer
    for (auto it = maps.begin(); it != maps.end(); ++it) {
      try {
        keys.emplace_back(std::stoll(it.key()), it.key());
      } catch (const std::exception&) {
      }
    }
    std::sort(keys.begin(), keys.end());
    for (const auto& [layer, key] : keys) {
      const json& m = maps[key];
      if (!m.is_array() || m.empty()) continue;
      std::ostringstream d;  // gnuplot's `matrix`: row t, column j, no header
      for (const json& row : m) {
        for (size_t j = 0; j < row.size(); ++j) d << (j ? " " : "") << num(jnum(row[j]));
        d << '\n';
      }
      const std::string name = cat("attention_map_", i, "_layer", layer);
      set.matrices[name] = d.str();
      const size_t n = m.size();
      Figure f{name, cat(runs[i].label, ": attention map of layer ", layer,
                         " (mean over heads and sequences; first ", n, " positions)")};
      f.width = 520;
      f.height = 460;
      f.setup = cat("set title ", gp_str(cat(runs[i].label, " layer ", layer)), "\n",
                    "set xlabel 'key position j'\nset ylabel 'query position t'\nset size ratio -1\n",
                    "set xrange [-0.5:", n - 0.5, "]\nset yrange [-0.5:", n - 0.5, "] reverse\n",
                    "set palette defined (0 '#ffffff', 0.15 '#c6dbef', 0.5 '#4292c6', 1 '#08306b')\n",
                    "set cbrange [0:*]\nunset key\nunset grid\n");
      f.elements.push_back(cat("'data/", name, ".dat' matrix with image"));
      set.figures.push_back(std::move(f));
    }
  }
  return set;
}

}  // namespace gatedlm::analysis
