#include "analysis/report.h"

#include "analysis/report_parts.h"
#include "analysis/report_sweep.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "analysis/expert_load.h"
#include "analysis/report_stream_eval.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "model/config.h"

namespace gatedlm::analysis {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kEma = 0.9;  // loss smoothing: ema = 0.9 ema + 0.1 loss, starting at the first loss
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

struct Run {
  std::string label, path;
  bool is_dir = false;
  std::vector<std::pair<double, double>> train;  // step, loss
  std::vector<std::pair<double, double>> val;    // step, val_loss
  std::vector<double> step_tokens_per_s;
  std::vector<std::array<double, 5>> probes;  // step, f_attn, sink_rate_percent, m_act, gate_mean (train --probe-every)
  std::set<int64_t> spike_steps;
  json summary, analysis, config;  // null when absent
  std::string analysis_path;
  json last_eval;  // the last eval record of metrics.jsonl
  json longctx;    // a `gatedlm longctx` result (docs/longctx.md), null when absent
  json stream_eval;  // a `gatedlm stream-eval --json` result (stream_eval.json in a run), null when absent
  std::string color;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(p.string(), ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_json(const fs::path& p) { return parse_json_strict(read_file(p), p.string()); }

bool is_number(const json& j, const char* key) { return j.is_object() && j.contains(key) && j[key].is_number(); }

std::optional<double> number(const json& j, const char* key) {
  if (is_number(j, key)) return j[key].get<double>();
  return std::nullopt;
}

void check_analysis(const json& a, const std::string& where) {
  if (!a.is_object() || a.value("format", "") != "gatedlm-analysis")
    fail(where, ": not a gatedlm analysis JSON (no \"format\": \"gatedlm-analysis\")");
}

// A `gatedlm longctx` result: per-length records under "lengths" and the RoPE override.
bool is_longctx(const json& j) {
  return j.is_object() && j.contains("lengths") && j["lengths"].is_array() && j.contains("rope_override");
}

void load_metrics(Run& r, const fs::path& file, std::vector<std::string>& warnings) {
  std::ifstream in(file);
  if (!in) fail(file.string(), ": cannot open");
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json rec;
    try {
      rec = json::parse(line);
    } catch (const json::exception&) {
      warnings.push_back(cat(file.string(), ":", n, ": not a JSON record, skipped"));
      continue;
    }
    if (!is_number(rec, "step")) continue;
    const double step = rec["step"].get<double>();
    if (is_number(rec, "loss")) {
      r.train.emplace_back(step, rec["loss"].get<double>());
      if (is_number(rec, "tokens_per_s")) r.step_tokens_per_s.push_back(rec["tokens_per_s"].get<double>());
      if (rec.value("spike", false)) r.spike_steps.insert(static_cast<int64_t>(step));
    }
    if (is_number(rec, "f_attn"))
      r.probes.push_back({step, rec["f_attn"].get<double>(), jnum(rec.value("sink_rate_percent", json())),
                          jnum(rec.value("m_act", json())), jnum(rec.value("gate_mean", json()))});
    if (is_number(rec, "val_loss")) {
      r.val.emplace_back(step, rec["val_loss"].get<double>());
      r.last_eval = rec;
    }
  }
}

Run load_input(const std::string& input, std::vector<std::string>& warnings) {
  Run r;
  r.path = input;
  const fs::path p(input);
  if (!fs::exists(p)) fail(input, ": no such file or directory");
  if (fs::is_directory(p)) {
    r.is_dir = true;
    r.label = fs::absolute(p).lexically_normal().filename().string();
    if (r.label.empty()) r.label = fs::absolute(p).lexically_normal().parent_path().filename().string();
    if (fs::exists(p / "metrics.jsonl")) load_metrics(r, p / "metrics.jsonl", warnings);
    if (fs::exists(p / "summary.json")) r.summary = read_json(p / "summary.json");
    if (fs::exists(p / "config.json")) r.config = read_json(p / "config.json");
    if (r.summary.is_object() && r.summary.contains("spikes") && r.summary["spikes"].is_object()) {
      const json& steps = r.summary["spikes"].value("steps", json::array());
      if (steps.is_array())
        for (const json& s : steps)
          if (s.is_number()) r.spike_steps.insert(s.get<int64_t>());
    }
    fs::path analysis;
    if (r.summary.is_object() && r.summary.contains("analysis") && r.summary["analysis"].is_string()) {
      analysis = r.summary["analysis"].get<std::string>();
      if (analysis.is_relative()) analysis = p / analysis;
      if (!fs::exists(analysis)) {
        warnings.push_back(cat(input, ": summary.json names analysis ", analysis.string(), ", which does not exist"));
        analysis.clear();
      }
    }
    if (analysis.empty() && fs::exists(p / "analysis.json")) analysis = p / "analysis.json";
    if (fs::exists(p / "longctx.json")) r.longctx = read_json(p / "longctx.json");
    if (fs::exists(p / "stream_eval.json")) {
      r.stream_eval = read_json(p / "stream_eval.json");
      if (!is_stream_eval(r.stream_eval))
        fail((p / "stream_eval.json").string(), ": not a `gatedlm stream-eval --json` result (no \"results\" "
             "records with \"cache\", \"sinks\" and \"ppl\")");
    }
    if (!analysis.empty()) {
      r.analysis = read_json(analysis);
      check_analysis(r.analysis, analysis.string());
      r.analysis_path = analysis.string();
    }
    if (r.train.empty() && r.val.empty() && r.summary.is_null() && r.analysis.is_null() && r.longctx.is_null() &&
        r.stream_eval.is_null())
      fail(input, ": a directory with none of metrics.jsonl, summary.json, analysis.json, longctx.json, "
           "stream_eval.json");
  } else if (json j = read_json(p); is_longctx(j)) {
    r.longctx = std::move(j);
    r.label = p.stem().string();
  } else if (is_stream_eval(j)) {
    r.stream_eval = std::move(j);
    r.label = p.stem().string();
  } else {
    r.analysis = read_json(p);
    check_analysis(r.analysis, input);
    r.analysis_path = input;
    r.label = p.stem().string();
    if (r.label == "analysis" && p.has_parent_path())
      r.label = fs::absolute(p).parent_path().filename().string();
  }
  if (r.config.is_null() && r.analysis.is_object() && r.analysis.contains("config")) r.config = r.analysis["config"];
  return r;
}

// ---- what the table shows -------------------------------------------------------------

std::string gate_variant(const Run& r) {
  if (r.analysis.is_object() && r.analysis.contains("gate_variant") && r.analysis["gate_variant"].is_string())
    return r.analysis["gate_variant"].get<std::string>();
  if (r.config.is_object()) {
    try {
      return model::describe_gate(model::config_from_json(r.config, r.path + "/config.json"));
    } catch (const std::exception&) {
    }
  }
  return "";
}

bool gated(const Run& r) { return r.analysis.is_object() && r.analysis.contains("gates") && r.analysis["gates"].is_object(); }

std::optional<double> analysis_number(const Run& r, std::initializer_list<const char*> path) {
  const json* j = &r.analysis;
  for (const char* k : path) {
    if (!j->is_object() || !j->contains(k)) return std::nullopt;
    j = &(*j)[k];
  }
  if (j->is_number()) return j->get<double>();
  return std::nullopt;
}

std::optional<double> eval_number(const Run& r, const char* key) {
  if (auto v = number(r.summary, key)) return v;
  return number(r.last_eval, key);
}

std::optional<double> tokens_per_s(const Run& r) {
  if (auto v = number(r.summary, "tokens_per_s")) return v;
  if (r.step_tokens_per_s.empty()) return std::nullopt;
  double s = 0;
  for (double v : r.step_tokens_per_s) s += v;
  return s / static_cast<double>(r.step_tokens_per_s.size());
}

std::optional<double> spike_count(const Run& r) {
  if (r.summary.is_object() && r.summary.contains("spikes") && is_number(r.summary["spikes"], "count"))
    return r.summary["spikes"]["count"].get<double>();
  if (!r.train.empty()) return static_cast<double>(r.spike_steps.size());
  return std::nullopt;
}

// ---- gnuplot ----------------------------------------------------------------------------

std::string layer_axis(int64_t n_layers) {
  std::string s = "set xlabel 'layer'\n";
  if (n_layers <= 32) s += "set xtics 1\n";
  s += cat("set xrange [-0.5:", std::max<int64_t>(n_layers, 1) - 0.5, "]\n");
  return s;
}

std::string common_setup() {
  return "set datafile missing 'NaN'\nset grid lc rgb '#dddddd'\nset key below noenhanced\n"
         "set border lc rgb '#444444'\n";
}

int run_gnuplot(const std::string& exe, const fs::path& dir, const std::string& script, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid < 0) fail("report: cannot start gnuplot (fork failed)");
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    ::execlp(exe.c_str(), exe.c_str(), script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("report: waiting for gnuplot failed");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool executable(const fs::path& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p); }

}  // namespace

std::string find_gnuplot(const std::string& preferred) {
  std::string want = preferred;
  if (want.empty())
    if (const char* env = std::getenv("GATEDLM_GNUPLOT"); env && *env) want = env;
  if (want.empty()) want = "gnuplot";
  if (want.find('/') != std::string::npos) return executable(want) ? want : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string d;
  while (std::getline(dirs, d, ':')) {
    if (d.empty()) d = ".";
    const fs::path candidate = fs::path(d) / want;
    if (executable(candidate)) return candidate.string();
  }
  return "";
}

namespace {
ReportResult render_checked(const ReportOptions& options);
}  // namespace

// A value of an unexpected type somewhere in an input (a hand-edited or mutated JSON) is
// reported naming the inputs instead of escaping as a raw library exception.
ReportResult render_report(const ReportOptions& options) {
  try {
    return render_checked(options);
  } catch (const json::exception& e) {
    std::string inputs;
    for (const std::string& in : options.inputs) inputs += (inputs.empty() ? "" : ", ") + in;
    fail("report: ", inputs, ": a value of an unexpected type or shape (", e.what(), ")");
  }
}

namespace {

ReportResult render_checked(const ReportOptions& options) {
  if (options.inputs.empty()) fail("report: no inputs (give run directories or analysis JSON files)");
  if (options.out_dir.empty()) fail("report: no output directory");
  const std::string gnuplot = find_gnuplot(options.gnuplot);
  if (gnuplot.empty())
    fail("report: gnuplot was not found", options.gnuplot.empty() ? "" : cat(" (asked for ", options.gnuplot, ")"),
         "; install it (Debian: apt-get install gnuplot-nox) or set GATEDLM_GNUPLOT to its path");

  ReportResult result;
  std::vector<Run> runs;
  std::vector<json> sweeps;  // a sweep directory: its tables, and its runs (the first seed of each variant)
  for (const std::string& in : options.inputs) {
    const fs::path p(in);
    if (fs::is_directory(p) && fs::exists(p / "sweep.json")) {
      json sw = read_json(p / "sweep.json");
      if (!is_sweep(sw)) fail(in, "/sweep.json: not a gatedlm sweep (no \"format\": \"gatedlm-sweep\")");
      for (const json& v : sw.at("variants"))
        for (const json& seed : sw.at("seeds")) {
          const fs::path dir = p / "runs" / v.at("name").get<std::string>() / ("seed-" + seed.dump());
          if (!fs::exists(dir / "metrics.jsonl")) continue;
          runs.push_back(load_input(dir.string(), result.warnings));
          runs.back().label = v.at("name").get<std::string>() + " seed " + seed.dump();
          break;
        }
      sweeps.push_back(std::move(sw));
      continue;
    }
    runs.push_back(load_input(in, result.warnings));
  }
  // Unique labels, colours by position.
  std::map<std::string, int> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    Run& r = runs[i];
    if (int n = seen[r.label]++; n > 0) r.label += cat(" (", n + 1, ")");
    r.color = kColors[i % std::size(kColors)];
  }
  for (size_t i = 0; i < runs.size(); ++i)  // a later duplicate renamed the first? label the first too
    if (seen[runs[i].label] > 1) runs[i].label += " (1)";

  const fs::path out(options.out_dir), figdir = out / "figures", datadir = out / "data";
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) fail("--out ", options.out_dir, ": exists and is not a directory");
  fs::create_directories(figdir, ec);
  if (!ec) fs::create_directories(datadir, ec);
  if (ec) fail("--out ", options.out_dir, ": cannot create the report directory (", ec.message(), ")");

  std::vector<Figure> figures;
  std::map<std::string, std::string> notes;  // section -> why a figure is absent

  // ---- training loss and validation loss ----
  {
    Figure loss{"train_loss", "Training loss (thin: raw; thick: EMA 0.9), loss spikes marked"};
    loss.setup = "set xlabel 'step'\nset ylabel 'loss (nats)'\n";
    Figure val{"val_loss", "Validation loss"};
    val.setup = "set xlabel 'step'\nset ylabel 'validation loss (nats)'\n";
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      if (!r.train.empty()) {
        std::ostringstream d, sp;
        double ema = NAN;
        for (const auto& [step, l] : r.train) {
          if (!std::isfinite(ema)) ema = l;
          else if (std::isfinite(l)) ema = kEma * ema + (1 - kEma) * l;
          d << num(step) << ' ' << num(l) << ' ' << num(ema) << '\n';
          if (r.spike_steps.count(static_cast<int64_t>(step))) sp << num(step) << ' ' << num(l) << '\n';
        }
        write_data(datadir / cat("train_", i, ".dat"), d.str());
        const std::string c = r.color.substr(1);
        loss.elements.push_back(cat("'data/train_", i, ".dat' using 1:2 with lines lw 0.8 lc rgb '#B0", c,
                                    "' notitle"));
        loss.elements.push_back(cat("'data/train_", i, ".dat' using 1:3 with lines lw 2 lc rgb '", r.color,
                                    "' title ", gp_str(r.label)));
        if (!sp.str().empty()) {
          write_data(datadir / cat("spikes_", i, ".dat"), sp.str());
          loss.elements.push_back(cat("'data/spikes_", i, ".dat' using 1:2 with points pt 7 ps 1.3 lc rgb '",
                                      r.color, "' title ", gp_str(r.label + " spikes")));
        }
      }
      if (!r.val.empty()) {
        std::ostringstream d;
        for (const auto& [step, l] : r.val) d << num(step) << ' ' << num(l) << '\n';
        write_data(datadir / cat("val_", i, ".dat"), d.str());
        val.elements.push_back(cat("'data/val_", i, ".dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb '",
                                   r.color, "' title ", gp_str(r.label)));
      }
    }
    if (!loss.elements.empty()) figures.push_back(loss);
    else notes["train_loss"] = "no training metrics (metrics.jsonl) among the inputs";
    if (!val.elements.empty()) figures.push_back(val);
    else notes["val_loss"] = "no validation records among the inputs";
  }

  // ---- probes during training (train --probe-every) ----
  {
    const char* const names[] = {"probe_f_attn", "probe_sink_rate", "probe_m_act", "probe_gate_mean"};
    const char* const captions[] = {"F-Attn during training: attention on the first token (rows t >= 1)",
                                    "Sink rate during training (Gu et al., eps 0.3), percent of heads",
                                    "M-Act during training: mean over layers of the largest |h|",
                                    "Mean gate score during training"};
    const char* const ylabels[] = {"set ylabel 'F-Attn'\nset yrange [0:*]\n", "set ylabel 'sink rate %'\nset yrange [0:*]\n",
                                   "set ylabel 'M-Act'\nset logscale y\nset format y '%g'\n",
                                   "set ylabel 'mean gate score'\nset yrange [0:*]\n"};
    std::vector<Figure> probe_figs;
    for (int k = 0; k < 4; ++k) {
      probe_figs.emplace_back(names[k], captions[k]);
      probe_figs.back().setup = std::string("set xlabel 'step'\n") + ylabels[k];
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      if (r.probes.empty()) continue;
      std::ostringstream d;
      d << "# step f_attn sink_rate_percent m_act gate_mean\n";
      bool gate = false;
      for (const auto& p : r.probes) {
        d << num(p[0]) << ' ' << num(p[1]) << ' ' << num(p[2]) << ' ' << num(p[3]) << ' ' << num(p[4]) << '\n';
        gate |= std::isfinite(p[4]);
      }
      write_data(datadir / cat("probes_", i, ".dat"), d.str());
      for (int k = 0; k < 4; ++k) {
        if (k == 3 && !gate) continue;
        probe_figs[k].elements.push_back(cat("'data/probes_", i, ".dat' using 1:", k + 2,
                                             " with linespoints pt 7 ps 0.5 lw 2 lc rgb '", r.color, "' title ",
                                             gp_str(r.label)));
      }
    }
    for (Figure& f : probe_figs)
      if (!f.elements.empty()) figures.push_back(std::move(f));
    notes["probes"] = "no probe records among the inputs (train with --probe-every N)";
  }

  // ---- sweeps ----
  std::vector<SweepPage> sweep_pages;
  for (size_t k = 0; k < sweeps.size(); ++k) {
    sweep_pages.push_back(sweep_page(sweeps[k], std::to_string(k), datadir));
    for (const Figure& f : sweep_pages.back().figures) figures.push_back(f);
  }

  // ---- per-layer probe numbers, one data file per run with an analysis ----
  int64_t max_layers = 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    if (!r.analysis.is_object()) continue;
    const json& a = r.analysis;
    const int64_t L = a.contains("f_attn") ? static_cast<int64_t>(a["f_attn"].value("per_layer", json::array()).size()) : 0;
    max_layers = std::max(max_layers, L);
    std::ostringstream d;
    d << "# layer f_attn f_attn_all top1 top2 top3 median massive_count gate_mean mean_abs_y mean_abs_y_gated "
         "sdpa_mean_abs before_2 after_2 control_2 before_3 after_3 control_3 sdpa_2 sdpa_3\n";
    for (int64_t l = 0; l < L; ++l) {
      auto at = [&](const char* section, const char* key) -> double {
        if (!a.contains(section) || !a[section].is_object()) return NAN;
        const json& arr = a[section].value(key, json::array());
        return l < static_cast<int64_t>(arr.size()) ? jnum(arr[l]) : NAN;
      };
      auto layer_of = [&](const char* section) -> json {
        if (!a.contains(section) || !a[section].is_object()) return json();
        const json& arr = a[section].value("per_layer", json::array());
        return l < static_cast<int64_t>(arr.size()) ? arr[l] : json();
      };
      const json m = layer_of("massive_activations"), g = layer_of("gates"), s = layer_of("sdpa_output");
      auto top = [&](int k) -> double { return m.is_object() && m.contains("top3") && m["top3"].size() > size_t(k) ? jnum(m["top3"][k]) : NAN; };
      auto sparse = [](const json& j, const char* part, const char* key) -> double {
        if (!j.is_object() || !j.contains("sparsity")) return NAN;
        const json& sp = part ? j["sparsity"].value(part, json()) : j["sparsity"];
        return sp.is_object() && sp.contains(key) ? jnum(sp[key]) : NAN;
      };
      auto field = [](const json& j, const char* key) -> double { return j.is_object() && j.contains(key) ? jnum(j[key]) : NAN; };
      d << l << ' ' << num(at("f_attn", "per_layer")) << ' ' << num(at("f_attn_all_rows", "per_layer")) << ' '
        << num(top(0)) << ' ' << num(top(1)) << ' ' << num(top(2)) << ' ' << num(field(m, "median")) << ' '
        << num(field(m, "massive_count")) << ' ' << num(field(g, "mean_score")) << ' '
        << num(field(g, "mean_abs_y")) << ' ' << num(field(g, "mean_abs_y_gated")) << ' '
        << num(field(s, "mean_abs")) << ' ' << num(sparse(g, "before", "lt_1e-2")) << ' '
        << num(sparse(g, "after", "lt_1e-2")) << ' ' << num(sparse(g, "mean_scaled_control", "lt_1e-2")) << ' '
        << num(sparse(g, "before", "lt_1e-3")) << ' ' << num(sparse(g, "after", "lt_1e-3")) << ' '
        << num(sparse(g, "mean_scaled_control", "lt_1e-3")) << ' ' << num(sparse(s, nullptr, "lt_1e-2")) << ' '
        << num(sparse(s, nullptr, "lt_1e-3")) << '\n';
    }
    write_data(datadir / cat("layers_", i, ".dat"), d.str());
  }
  auto analysed = [&](size_t i) { return runs[i].analysis.is_object(); };
  const bool any_analysis = std::any_of(runs.begin(), runs.end(), [](const Run& r) { return r.analysis.is_object(); });
  const bool any_gate = std::any_of(runs.begin(), runs.end(), [](const Run& r) { return gated(r); });
  if (!any_analysis) notes["analysis"] = "no analysis JSON among the inputs (run `gatedlm analyze`)";

  if (any_analysis) {
    Figure f{"f_attn_per_layer", "F-Attn per layer: mean attention on token 0 over query rows t >= 1 (dashed: all rows)"};
    f.setup = layer_axis(max_layers) + "set ylabel 'F-Attn'\nset yrange [0:*]\n";
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!analysed(i)) continue;
      const std::string file = cat("'data/layers_", i, ".dat'");
      f.elements.push_back(cat(file, " using 1:2 with linespoints pt 7 ps 0.7 lw 2 lc rgb '", runs[i].color, "' title ",
                               gp_str(runs[i].label)));
      f.elements.push_back(cat(file, " using 1:3 with lines dt 2 lw 1 lc rgb '", runs[i].color, "' notitle"));
    }
    figures.push_back(f);

    Figure t{"top_activation", "Largest |h| of the residual stream after each block (dashed: median |h|)"};
    t.setup = layer_axis(max_layers) + "set ylabel '|h|'\nset logscale y\nset format y '%g'\n";
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!analysed(i)) continue;
      const std::string file = cat("'data/layers_", i, ".dat'");
      t.elements.push_back(cat(file, " using 1:4 with linespoints pt 7 ps 0.7 lw 2 lc rgb '", runs[i].color,
                               "' title ", gp_str(runs[i].label)));
      t.elements.push_back(cat(file, " using 1:7 with lines dt 2 lw 1 lc rgb '", runs[i].color, "' notitle"));
    }
    figures.push_back(t);

    Figure y{"mean_abs_y", "Mean |Y| before (solid) and |Y'| after (dashed) the gate; models without a gate: mean |SDPA output|"};
    y.setup = layer_axis(max_layers) + "set ylabel 'mean |value|'\nset logscale y\nset format y '%g'\n";
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!analysed(i)) continue;
      const std::string file = cat("'data/layers_", i, ".dat'"), c = runs[i].color;
      if (gated(runs[i])) {
        y.elements.push_back(cat(file, " using 1:10 with linespoints pt 7 ps 0.6 lw 2 lc rgb '", c, "' title ",
                                 gp_str(runs[i].label + " |Y|")));
        y.elements.push_back(cat(file, " using 1:11 with linespoints pt 6 ps 0.6 lw 2 dt 2 lc rgb '", c, "' title ",
                                 gp_str(runs[i].label + " |Y'|")));
      } else {
        y.elements.push_back(cat(file, " using 1:12 with linespoints pt 5 ps 0.6 lw 2 lc rgb '", c, "' title ",
                                 gp_str(runs[i].label + " SDPA output (no gate)")));
      }
    }
    figures.push_back(y);

    for (const auto& [thr, cols] : std::vector<std::pair<std::string, std::array<int, 4>>>{
             {"1e-2", {13, 14, 15, 19}}, {"1e-3", {16, 17, 18, 20}}}) {
      Figure s{"sparsity_" + thr,
               "Share of values with |v| < " + thr +
                   ": Y before the gate (solid), Y' after (dashed), control Y x mean score (dotted); "
                   "models without a gate: SDPA output"};
      s.setup = layer_axis(max_layers) + "set ylabel 'share |v| < " + thr + "'\nset yrange [0:*]\n";
      for (size_t i = 0; i < runs.size(); ++i) {
        if (!analysed(i)) continue;
        const std::string file = cat("'data/layers_", i, ".dat'"), c = runs[i].color;
        if (gated(runs[i])) {
          s.elements.push_back(cat(file, " using 1:", cols[0], " with linespoints pt 7 ps 0.6 lw 2 lc rgb '", c,
                                   "' title ", gp_str(runs[i].label + " before")));
          s.elements.push_back(cat(file, " using 1:", cols[1], " with linespoints pt 6 ps 0.6 lw 2 dt 2 lc rgb '", c,
                                   "' title ", gp_str(runs[i].label + " after")));
          s.elements.push_back(cat(file, " using 1:", cols[2], " with lines lw 2 dt 3 lc rgb '", c, "' title ",
                                   gp_str(runs[i].label + " control")));
        } else {
          s.elements.push_back(cat(file, " using 1:", cols[3], " with linespoints pt 5 ps 0.6 lw 2 lc rgb '", c,
                                   "' title ", gp_str(runs[i].label + " SDPA output (no gate)")));
        }
      }
      figures.push_back(s);
    }
  }

  if (any_gate) {
    Figure g{"gate_mean_per_layer", "Mean gate score per layer"};
    g.setup = layer_axis(max_layers) + "set ylabel 'mean gate score'\nset yrange [0:*]\n";
    Figure h{"gate_histogram", "Gate-score distribution on [0, 1] (all layers; 50 bins; share of all scores)"};
    h.setup = "set xlabel 'gate score'\nset ylabel 'share of scores'\nset xrange [0:1]\nset yrange [0:*]\n";
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!gated(runs[i])) continue;
      g.elements.push_back(cat("'data/layers_", i, ".dat' using 1:9 with linespoints pt 7 ps 0.7 lw 2 lc rgb '",
                               runs[i].color, "' title ", gp_str(runs[i].label)));
      const json& layers = runs[i].analysis["gates"].value("per_layer", json::array());
      std::vector<double> share;
      for (const json& l : layers) {
        if (!l.contains("histogram") || !l["histogram"].contains("share")) continue;
        const json& s = l["histogram"]["share"];
        share.resize(std::max(share.size(), s.size()), 0.0);
        for (size_t k = 0; k < s.size(); ++k) share[k] += jnum(s[k]) / static_cast<double>(layers.size());
      }
      std::ostringstream d;
      for (size_t k = 0; k < share.size(); ++k)
        d << num((static_cast<double>(k) + 0.5) / static_cast<double>(share.size())) << ' ' << num(share[k]) << '\n';
      if (share.empty()) continue;
      write_data(datadir / cat("gate_hist_", i, ".dat"), d.str());
      h.elements.push_back(cat("'data/gate_hist_", i, ".dat' using 1:2 with histeps lw 2 lc rgb '", runs[i].color,
                               "' title ", gp_str(runs[i].label)));
    }
    figures.push_back(g);
    if (!h.elements.empty()) figures.push_back(h);
  } else {
    notes["gates"] = "no model with a gate among the analysed inputs";
  }

  // Attention maps: one heatmap per run and kept layer.
  std::vector<std::pair<size_t, std::string>> map_figs;  // run, figure name
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!analysed(i) || !runs[i].analysis.contains("attention_maps")) continue;
    const json& maps = runs[i].analysis["attention_maps"];
    if (!maps.is_object()) continue;
    std::vector<std::pair<int64_t, std::string>> keys;
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
      std::ostringstream d;
      for (const json& row : m) {
        for (size_t j = 0; j < row.size(); ++j) d << (j ? " " : "") << num(jnum(row[j]));
        d << '\n';
      }
      const std::string name = cat("attention_map_", i, "_layer", layer);
      write_data(datadir / (name + ".dat"), d.str());
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
      figures.push_back(f);
      map_figs.emplace_back(i, name);
    }
  }

  // ---- long-context evaluations: perplexity and retrieval accuracy by length ----
  const char* const kTasks[] = {"passkey", "niah_single", "niah_multikey", "niah_multivalue"};
  Figure lc_ppl{"longctx_ppl", "Long context: perplexity of held-out text at each evaluation length"};
  Figure lc_acc{"longctx_accuracy",
                "Long context: share of expected values recovered (teacher-forced) by length; one dash style per task"};
  const std::string length_axis = "set logscale x 2\nset xlabel 'evaluation length (tokens)'\nset format x '%g'\n";
  lc_ppl.setup = length_axis + "set ylabel 'perplexity'\n";
  lc_acc.setup = length_axis + "set ylabel 'score'\nset yrange [-0.02:1.02]\nset key outside right\n";
  lc_acc.width = 960;
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& lc = runs[i].longctx;
    if (!lc.is_object()) continue;
    std::ostringstream d;
    d << "# length ppl passkey niah_single niah_multikey niah_multivalue\n";
    std::string scaling = "none";
    for (const json& L : lc["lengths"]) {
      if (!L.is_object()) continue;
      if (L.contains("rope") && L["rope"].is_object()) scaling = L["rope"].value("scaling", scaling);
      const json perplexity = L.value("perplexity", json());
      d << num(jnum(L.value("length", json()))) << ' '
        << num(perplexity.is_object() ? jnum(perplexity.value("ppl", json())) : NAN);
      const json tasks = L.value("tasks", json());
      for (const char* t : kTasks) {
        const json task = tasks.is_object() ? tasks.value(t, json()) : json();
        d << ' ' << num(task.is_object() ? jnum(task.value("score", json())) : NAN);
      }
      d << '\n';
    }
    write_data(datadir / cat("longctx_", i, ".dat"), d.str());
    const std::string file = cat("'data/longctx_", i, ".dat'"), label = runs[i].label + " (" + scaling + ")";
    lc_ppl.elements.push_back(cat(file, " using 1:2 with linespoints pt 7 ps 0.7 lw 2 lc rgb '", runs[i].color,
                                  "' title ", gp_str(label)));
    for (int t = 0; t < 4; ++t)
      lc_acc.elements.push_back(cat(file, " using 1:", t + 3, " with linespoints pt ", 5 + t, " ps 0.7 lw 2 dt ", t + 1,
                                    " lc rgb '", runs[i].color, "' title ", gp_str(label + " " + kTasks[t])));
  }
  if (!lc_ppl.elements.empty()) {
    figures.push_back(lc_ppl);
    figures.push_back(lc_acc);
  } else {
    notes["longctx"] = "no long-context evaluation among the inputs (run `gatedlm longctx` and pass its JSON)";
  }

  // ---- the gnuplot script ----
  std::ostringstream gp;
  gp << "# generated by gatedlm report; run from the report directory: gnuplot data/report.gp\n";
  for (const Figure& f : figures) {
    const std::string body = common_setup() + f.setup;
    std::string plot = "plot ";
    for (size_t k = 0; k < f.elements.size(); ++k) plot += (k ? ", \\\n     " : "") + f.elements[k];
    gp << "\n# " << f.name << "\nreset\n"
       << "set terminal pngcairo size " << f.width << "," << f.height << " noenhanced font 'sans,10' background '#ffffff'\n"
       << "set output 'figures/" << f.name << ".png'\n"
       << body << plot << "\n"
       << "set terminal svg size " << f.width << "," << f.height << " noenhanced font 'sans,10' background '#ffffff'\n"
       << "set output 'figures/" << f.name << ".svg'\nreplot\nunset output\n";
  }
  write_data(datadir / "report.gp", gp.str());
  for (const Figure& f : figures)
    for (const char* ext : {".png", ".svg"}) fs::remove(figdir / (f.name + ext));
  const fs::path log = datadir / "gnuplot.log";
  if (!figures.empty()) {
    const int rc = run_gnuplot(gnuplot, out, "data/report.gp", fs::absolute(log));
    if (rc != 0) {
      std::string tail;
      if (fs::exists(log)) {
        tail = read_file(log);
        if (tail.size() > 2000) tail = "..." + tail.substr(tail.size() - 2000);
      }
      fail("report: gnuplot (", gnuplot, ") failed with status ", rc, " on ", (datadir / "report.gp").string(), ":\n",
           tail);
    }
  }
  for (const Figure& f : figures)
    for (const char* ext : {".png", ".svg"}) {
      const fs::path p = figdir / (f.name + ext);
      if (!fs::exists(p) || fs::file_size(p) == 0)
        fail("report: gnuplot did not write ", p.string(), " (see ", log.string(), ")");
      result.figures.push_back(p.string());
    }

  // ---- HTML ----
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << html_escape(options.title)
    << "</title>\n<style>\n"
       "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\n"
       "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}\n"
       "th{background:#f3f3f3}td.l,th.l{text-align:left}\n"
       "figure{display:inline-block;margin:0.5em;vertical-align:top}figcaption{font-size:90%;max-width:760px}\n"
       "img{border:1px solid #eee}.note{color:#777}.sw{display:inline-block;width:0.9em;height:0.9em;"
       "margin-right:0.4em;vertical-align:middle}\n"
       "</style>\n</head>\n<body>\n<h1>" << html_escape(options.title) << "</h1>\n";
  auto figure_html = [&](const Figure& f) {
    h << "<figure><a href=\"figures/" << f.name << ".svg\"><img src=\"figures/" << f.name << ".png\" width=\""
      << f.width << "\" height=\"" << f.height << "\" alt=\"" << html_escape(f.name) << "\"></a><figcaption>"
      << html_escape(f.caption) << " (<a href=\"figures/" << f.name << ".svg\">SVG</a>)</figcaption></figure>\n";
  };
  auto find_fig = [&](const std::string& name) -> const Figure* {
    for (const Figure& f : figures)
      if (f.name == name) return &f;
    return nullptr;
  };
  auto section_fig = [&](const std::string& name, const std::string& note_key) {
    if (const Figure* f = find_fig(name)) figure_html(*f);
    else if (notes.count(note_key)) h << "<p class=\"note\">" << kDash << " " << html_escape(notes[note_key]) << "</p>\n";
  };

  for (const SweepPage& page : sweep_pages) {
    // The page's text with its figures where it placed them.
    std::string html = page.html;
    for (size_t at; (at = html.find("@@FIGURE:")) != std::string::npos;) {
      const size_t end = html.find("@@", at + 9);
      const std::string name = html.substr(at + 9, end - at - 9);
      h << html.substr(0, at);
      if (const Figure* f = find_fig(name)) figure_html(*f);
      html = html.substr(end + 2);
    }
    h << html;
  }

  // Table 4 style summary.
  h << "<h2>Summary</h2>\n<p>In the style of the paper's Table 4. Gate score: mean over layers of the mean gate "
       "score; M-Act: mean over layers of the largest |h| after each block; F-Attn: attention on the first token, "
       "rows t &ge; 1; sink rate: Gu et al., eps 0.3. " << kDash << ": not available for that input.</p>\n"
    << "<table>\n<tr><th class=\"l\">Method</th><th class=\"l\">Gate</th><th>Gate score</th><th>M-Act</th>"
       "<th>F-Attn</th><th>Sink rate %</th><th>Val loss</th><th>PPL</th><th>BPB</th><th>Spikes</th>"
       "<th>Tokens/s</th></tr>\n";
  for (const Run& r : runs) {
    const std::string variant = gate_variant(r);
    const std::optional<double> m_act = analysis_number(r, {"massive_activations", "m_act"});
    h << "<tr><td class=\"l\"><span class=\"sw\" style=\"background:" << r.color << "\"></span>"
      << html_escape(r.label) << "</td><td class=\"l\">"
      << (variant.empty() ? kDash : variant == "none" ? "none (baseline)" : html_escape(variant)) << "</td><td>"
      << fmt(analysis_number(r, {"gates", "mean_score"}), "%.3f") << "</td><td>"
      << fmt(m_act, m_act && *m_act >= 100 ? "%.0f" : "%.3g") << "</td><td>"
      << fmt(analysis_number(r, {"f_attn", "mean"}), "%.3f") << "</td><td>"
      << fmt(analysis_number(r, {"sink_rate", "percent"}), "%.1f") << "</td><td>"
      << fmt(eval_number(r, "val_loss"), "%.4f") << "</td><td>" << fmt(eval_number(r, "val_ppl"), "%.3f")
      << "</td><td>" << fmt(eval_number(r, "val_bpb"), "%.4f") << "</td><td>" << fmt(spike_count(r), "%.0f")
      << "</td><td>" << fmt(tokens_per_s(r), "%.0f") << "</td></tr>\n";
  }
  h << "</table>\n";

  h << "<h2>Training</h2>\n";
  section_fig("train_loss", "train_loss");
  section_fig("val_loss", "val_loss");

  h << "<h2>Probes during training</h2>\n";
  if (find_fig("probe_f_attn")) {
    for (const char* name : {"probe_f_attn", "probe_sink_rate", "probe_m_act", "probe_gate_mean"}) section_fig(name, "");
  } else {
    h << "<p class=\"note\">" << kDash << " " << html_escape(notes["probes"]) << "</p>\n";
  }

  h << "<h2>Attention sink</h2>\n";
  if (any_analysis) {
    section_fig("f_attn_per_layer", "analysis");
    for (const auto& [i, name] : map_figs) figure_html(*find_fig(name));
    if (map_figs.empty()) h << "<p class=\"note\">" << kDash << " no attention maps in the analyses</p>\n";
  } else {
    h << "<p class=\"note\">" << kDash << " " << html_escape(notes["analysis"]) << "</p>\n";
  }
  h << "<h2>Massive activations</h2>\n";
  section_fig("top_activation", "analysis");
  h << "<h2>Gates and SDPA-output sparsity</h2>\n";
  if (any_gate) {
    section_fig("gate_mean_per_layer", "gates");
    section_fig("gate_histogram", "gates");
  } else {
    h << "<p class=\"note\">" << kDash << " " << html_escape(notes["gates"]) << "</p>\n";
  }
  section_fig("mean_abs_y", "analysis");
  section_fig("sparsity_1e-2", "analysis");
  section_fig("sparsity_1e-3", "analysis");
  {
    std::vector<std::pair<std::string, json>> loads;
    for (const Run& r : runs) loads.push_back({html_escape(r.label), r.analysis});
    expert_load_table(h, loads);
  }
  h << "<h2>Long context</h2>\n";
  section_fig("longctx_ppl", "longctx");
  section_fig("longctx_accuracy", "longctx");
  h << "<h2>Streaming windows</h2>\n";
  std::vector<std::pair<std::string, json>> streams;
  for (const Run& r : runs)
    if (r.stream_eval.is_object()) streams.emplace_back(r.label, r.stream_eval);
  if (streams.empty()) {
    h << "<p class=\"note\">" << kDash << " no streaming-window evaluation among the inputs (run `gatedlm stream-eval "
         "--json` and save it as RUN/stream_eval.json, or pass the JSON file)</p>\n";
  } else {
    h << "<p>Perplexity of a text longer than the training length through a rolling KV cache of the last W tokens "
         "plus K sink tokens (StreamingLLM; positions inside the cache), beside the full cache. A model that parks "
         "attention on the first tokens blows up at K = 0; in parentheses: the tokens scored after the window "
         "filled.</p>\n"
      << stream_eval_table_html(streams);
  }

  // Inputs.
  h << "<h2>Inputs</h2>\n<table>\n<tr><th class=\"l\">Name</th><th class=\"l\">Input</th><th class=\"l\">Analysis</th>"
       "<th>Sequences</th><th>Seq len</th><th>Seed</th><th class=\"l\">Sequence source</th><th>Train records</th>"
       "<th>Eval records</th></tr>\n";
  for (const Run& r : runs) {
    auto a_int = [&](const char* key) -> std::string {
      return r.analysis.is_object() && r.analysis.contains(key) && r.analysis[key].is_number()
                 ? r.analysis[key].dump()
                 : kDash;
    };
    std::string source = kDash;
    if (r.analysis.is_object() && r.analysis.contains("source") && r.analysis["source"].is_object()) {
      const json& s = r.analysis["source"];
      source = s.value("kind", "") == "data" ? cat(s.value("dir", ""), " (", s.value("split", ""), ")")
                                             : s.value("file", std::string(kDash));
      source += cat(", tokenizer ", s.value("tokenizer", "?"));
    }
    h << "<tr><td class=\"l\">" << html_escape(r.label) << "</td><td class=\"l\">" << html_escape(r.path)
      << (r.is_dir ? " (run)" : "") << "</td><td class=\"l\">"
      << (r.analysis_path.empty() ? std::string(kDash) : html_escape(r.analysis_path)) << "</td><td>"
      << a_int("sequences") << "</td><td>" << a_int("seq_len") << "</td><td>" << a_int("seed") << "</td><td class=\"l\">"
      << html_escape(source) << "</td><td>" << (r.is_dir ? std::to_string(r.train.size()) : kDash) << "</td><td>"
      << (r.is_dir ? std::to_string(r.val.size()) : kDash) << "</td></tr>\n";
  }
  h << "</table>\n";
  if (!result.warnings.empty()) {
    h << "<h2>Warnings</h2>\n<ul>\n";
    for (const std::string& w : result.warnings) h << "<li>" << html_escape(w) << "</li>\n";
    h << "</ul>\n";
  }
  h << "<p class=\"note\">Generated by gatedlm report. Figures drawn with gnuplot; the numbers plotted and the "
       "script are in data/.</p>\n</body>\n</html>\n";
  result.html_path = (out / "index.html").string();
  write_file_atomic(result.html_path, h.str());
  return result;
}

}  // namespace

}  // namespace gatedlm::analysis
