#include "analysis/report_sweep.h"

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"

namespace gatedlm::analysis {

using nlohmann::json;

bool is_sweep(const json& j) { return j.is_object() && j.value("format", "") == "gatedlm-sweep"; }

namespace {

const char* const kSeriesColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"};

std::optional<double> opt_num(const json& j) {
  if (j.is_number()) return j.get<double>();
  return std::nullopt;
}

// "mean ± std" of a variant's stats entry.
std::string mean_pm(const json& v, const char* metric, const char* format) {
  const json& s = v["stats"][metric];
  std::string out = fmt(opt_num(s["mean"]), format);
  if (s["std"].is_number()) out += " ± " + fmt(opt_num(s["std"]), format);
  return out;
}

std::string diff_ci(const json& v, const char* metric, const char* format) {
  if (!v["vs_baseline"].is_object()) return kDash;
  const json& d = v["vs_baseline"]["metrics"][metric];
  std::string out = fmt(opt_num(d["mean"]), format);
  if (d["ci_low"].is_number())
    out += " [" + fmt(opt_num(d["ci_low"]), format) + ", " + fmt(opt_num(d["ci_high"]), format) + "]";
  return out;
}

// The sweep's heading, what it trained, and its table: a row per variant.
std::string sweep_table_html(const json& sw) {
  std::ostringstream h;
  h << "<h2>Sweep" << (sw.value("description", "").empty() ? "" : ": " + html_escape(sw["description"].get<std::string>()))
    << "</h2>\n<p>" << html_escape(sw.value("source", "")) << "; " << sw.value("tokens_per_run", int64_t{0})
    << " training tokens per run; seeds " << html_escape(sw["seeds"].dump()) << "; baseline parameters "
    << sw.value("base_params", int64_t{0})
    << ". Mean &plusmn; standard deviation over seeds; differences to the baseline paired by seed with a 95 % "
       "t-interval. The full tables: sweep.md beside sweep.json.</p>\n";
  h << "<table>\n<tr><th class=\"l\">Variant</th><th class=\"l\">Gate</th><th>Params (vs base)</th><th>Val loss</th>"
       "<th>Val BPB</th><th>Held-out BPB</th><th>F-Attn</th><th>Sink %</th><th>Sink logit</th><th>M-Act</th><th>Gate score</th>"
       "<th>Spikes</th><th>Diverged</th><th>&Delta; val BPB [95 % CI]</th><th>&Delta; F-Attn</th></tr>\n";
  for (const json& v : sw["variants"]) {
    const int64_t dp = v.value("params_vs_base", int64_t{0});
    h << "<tr><td class=\"l\">" << html_escape(v.value("label", "")) << "</td><td class=\"l\">"
      << html_escape(v.value("gate", "")) << "</td><td>" << v.value("params", int64_t{0}) << " (" << (dp >= 0 ? "+" : "")
      << dp << ")</td><td>" << mean_pm(v, "val_loss", "%.4f") << "</td><td>" << mean_pm(v, "val_bpb", "%.4f")
      << "</td><td>" << mean_pm(v, "heldout_bpb", "%.4f") << "</td><td>" << mean_pm(v, "f_attn", "%.3f")
      << "</td><td>" << mean_pm(v, "sink_rate_percent", "%.1f") << "</td><td>" << mean_pm(v, "sink_logit_mass", "%.3f")
      << "</td><td>" << mean_pm(v, "m_act", "%.3g")
      << "</td><td>" << mean_pm(v, "gate_mean", "%.3f") << "</td><td>" << mean_pm(v, "spikes", "%.1f") << "</td><td>"
      << v.value("diverged_runs", 0) << "/" << v.value("runs_done", 0) << "</td><td>"
      << diff_ci(v, "val_bpb", "%+.4f") << "</td><td>" << diff_ci(v, "f_attn", "%+.3f") << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

// Per variant (x: its index, labelled by its name): the mean val BPB with the seeds'
// standard deviation, and the paired difference to its baseline with the 95 % interval.
void add_variant_figures(const json& variants, const std::string& tag, SweepPage& page) {
  DataTable bpb("sweep" + tag + "_bpb", {"index", "val_bpb", "val_bpb_std", "variant"});
  DataTable delta("sweep" + tag + "_delta", {"index", "delta_bpb", "ci_low", "ci_high", "variant"});
  double i = 0;
  for (const json& v : variants) {
    const json& s = v["stats"]["val_bpb"];
    const std::string name = v.value("name", "?");
    bpb.add_cells({num(i), num(jnum(s["mean"])), num(s["std"].is_number() ? s["std"].get<double>() : 0.0), name});
    if (v["vs_baseline"].is_object()) {
      const json& d = v["vs_baseline"]["metrics"]["val_bpb"];
      const double m = jnum(d["mean"]);
      delta.add_cells({num(i), num(m), num(d["ci_low"].is_number() ? jnum(d["ci_low"]) : m),
                       num(d["ci_high"].is_number() ? jnum(d["ci_high"]) : m), name});
    }
    ++i;
  }
  const std::string xaxis = "set xtics rotate by -45 left noenhanced font ',8'\nset xrange [-0.7:" + num(i - 0.3) +
                            "]\nset bmargin 10\nset key off\n";
  Figure fb{"sweep" + tag + "_val_bpb", "Validation bits per byte per variant: mean over seeds, bars: standard deviation"};
  fb.width = 960;
  fb.setup = xaxis + "set ylabel 'validation bits per byte'\n";
  fb.elements.push_back(bpb.plot({"index", "val_bpb", "val_bpb_std"}) + ":xtic(stringcolumn(" + bpb.quoted("variant") +
                        ")) with yerrorbars pt 7 ps 0.8 lw 1.5 lc rgb '#1f77b4'");
  page.figures.push_back(fb);
  page.tables.push_back(std::move(bpb));
  if (delta.rows() == 0) return;
  Figure fd{"sweep" + tag + "_delta_bpb",
            "Difference in validation bits per byte to the baseline, paired by seed, with the 95 % interval "
            "(below 0: better than the baseline)"};
  fd.width = 960;
  fd.setup = xaxis + "set ylabel 'delta bits per byte'\nset arrow from graph 0, first 0 to graph 1, first 0 nohead lc rgb '#888888'\n";
  fd.elements.push_back(delta.plot({"index", "delta_bpb", "ci_low", "ci_high"}) + ":xtic(stringcolumn(" +
                        delta.quoted("variant") + ")) with yerrorbars pt 7 ps 0.8 lw 1.5 lc rgb '#d62728'");
  page.figures.push_back(fd);
  page.tables.push_back(std::move(delta));
}

// Variants grouped in series (the lr-stability preset) against the learning rate: every
// run a point, the means a line, diverged runs marked.
void add_learning_rate_figure(const json& variants, const std::string& tag, SweepPage& page) {
  std::map<std::string, std::vector<const json*>> series;  // name -> its runs
  std::set<double> rates;
  for (const json& v : variants) {
    const std::string name = v.value("series", "");
    if (name.empty()) continue;
    for (const json& r : v["runs"]) {
      if (!r.is_object()) continue;
      if (r["lr"].is_number()) rates.insert(r["lr"].get<double>());
      series[name].push_back(&r);
    }
  }
  if (series.empty()) return;
  Figure fl{"sweep" + tag + "_loss_vs_lr",
            "Final training loss (mean of the last 10 steps; solid) and validation loss (dashed) against the peak "
            "learning rate; open squares: runs that diverged (NaN runs have no point)"};
  std::string tics;  // at the rates trained (log axis), with some room on both sides
  for (double lr : rates) tics += (tics.empty() ? "" : ", ") + gp_str(fmt(lr, "%g")) + " " + num(lr);
  fl.setup = "set logscale x 2\nset xtics (" + tics + ")\nset xrange [" + num(*rates.begin() / 1.25) + ":" +
             num(*rates.rbegin() * 1.25) + "]\nset xlabel 'peak learning rate'\nset ylabel 'loss (nats)'\n" +
             "set key below noenhanced\n";
  int k = 0;
  for (const auto& [name, runs] : series) {
    DataTable t("sweep" + tag + "_lr_" + std::to_string(k), {"lr", "final_loss", "val_loss", "diverged"});
    for (const json* r : runs)
      t.add_row({jnum((*r)["lr"]), jnum((*r)["final_loss"]), jnum((*r)["val_loss"]), r->value("diverged", false) ? 1.0 : 0.0});
    const std::string c = kSeriesColors[k % 5];
    fl.elements.push_back(t.plot({"lr", "final_loss"}) + " smooth unique with linespoints pt 7 lw 2 lc rgb '" + c +
                          "' title " + gp_str(name + " final train loss"));
    fl.elements.push_back(t.plot({"lr", "val_loss"}) + " smooth unique with linespoints pt 6 lw 1.5 dt 2 lc rgb '" + c +
                          "' title " + gp_str(name + " val loss"));
    fl.elements.push_back(t.file() + " using " + t.quoted("lr") + ":(" + t.col("diverged") + " > 0 ? " +
                          t.col("final_loss") + " : 1/0) with points pt 4 ps 2 lc rgb '" + c + "' notitle");
    page.tables.push_back(std::move(t));
    ++k;
  }
  page.figures.push_back(fl);
}

}  // namespace

SweepPage sweep_page(const json& sw, const std::string& tag) {
  SweepPage page;
  add_variant_figures(sw["variants"], tag, page);
  add_learning_rate_figure(sw["variants"], tag, page);
  page.html = sweep_table_html(sw);
  for (const Figure& f : page.figures) page.html += "@@FIGURE:" + f.name + "@@\n";
  return page;
}

}  // namespace gatedlm::analysis
