#include "analysis/report_inputs.h"

#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>

#include "analysis/report_stream_eval.h"
#include "analysis/report_sweep.h"
#include "analysis/run_throughput.h"
#include "core/error.h"
#include "core/json_file.h"
#include "model/config.h"
#include "train/metrics_log.h"

namespace gatedlm::analysis {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

json read_json(const fs::path& p) { return read_json_file(p.string()); }

bool is_number(const json& j, const char* key) { return j.is_object() && j.contains(key) && j[key].is_number(); }

std::optional<double> number(const json& j, const char* key) {
  if (is_number(j, key)) return j[key].get<double>();
  return std::nullopt;
}

double number_or_nan(const json& j, const char* key) { return is_number(j, key) ? j[key].get<double>() : NAN; }

void check_analysis(const json& a, const std::string& where) {
  if (!a.is_object() || a.value("format", "") != "gatedlm-analysis")
    fail(where, ": not a gatedlm analysis JSON (no \"format\": \"gatedlm-analysis\")");
}

// A `gatedlm longctx` result: per-length records under "lengths" and the RoPE override.
bool is_longctx(const json& j) {
  return j.is_object() && j.contains("lengths") && j["lengths"].is_array() && j.contains("rope_override");
}

// metrics.jsonl through the one reader (train/metrics_log.h): its policy for a cut last line.
void load_metrics(ReportRun& r, const fs::path& file, std::vector<std::string>& warnings) {
  const train::MetricsLog log = train::read_metrics_log(file);
  if (log.dropped_last_line) warnings.push_back(*log.dropped_last_line);
  r.has_metrics = true;
  for (const json& rec : log.records) {
    if (!is_number(rec, "step")) continue;
    const double step = rec["step"].get<double>();
    if (is_number(rec, "loss")) {
      r.train.emplace_back(step, rec["loss"].get<double>());
      if (rec.value("spike", false)) r.spike_steps.insert(static_cast<int64_t>(step));
    }
    if (is_number(rec, "f_attn"))
      r.probes.push_back({step, rec["f_attn"].get<double>(), number_or_nan(rec, "sink_rate_percent"),
                          number_or_nan(rec, "m_act"), number_or_nan(rec, "gate_mean")});
    if (is_number(rec, "val_loss")) {
      r.val.emplace_back(step, rec["val_loss"].get<double>());
      r.last_eval = rec;
    }
  }
  r.tokens_per_s = run_tokens_per_s(log.records);
}

// The analysis a run directory names: summary.json's "analysis" (relative to the run), else
// RUN/analysis.json; "" when neither exists.
fs::path run_analysis_path(const ReportRun& r, const fs::path& dir, std::vector<std::string>& warnings) {
  if (r.summary.is_object() && r.summary.contains("analysis") && r.summary["analysis"].is_string()) {
    fs::path named = r.summary["analysis"].get<std::string>();
    if (named.is_relative()) named = dir / named;
    if (fs::exists(named)) return named;
    warnings.push_back(cat(r.path, ": summary.json names analysis ", named.string(), ", which does not exist"));
  }
  return fs::exists(dir / "analysis.json") ? dir / "analysis.json" : fs::path();
}

void load_run_dir(ReportRun& r, const fs::path& p, std::vector<std::string>& warnings) {
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
  if (fs::exists(p / "longctx.json")) r.longctx = read_json(p / "longctx.json");
  if (fs::exists(p / "stream_eval.json")) {
    r.stream_eval = read_json(p / "stream_eval.json");
    if (!is_stream_eval(r.stream_eval))
      fail((p / "stream_eval.json").string(), ": not a `gatedlm stream-eval --json` result (no \"results\" "
           "records with \"cache\", \"sinks\" and \"ppl\")");
  }
  if (const fs::path analysis = run_analysis_path(r, p, warnings); !analysis.empty()) {
    r.analysis = read_json(analysis);
    check_analysis(r.analysis, analysis.string());
    r.analysis_path = analysis.string();
  }
  if (r.train.empty() && r.val.empty() && r.summary.is_null() && r.analysis.is_null() && r.longctx.is_null() &&
      r.stream_eval.is_null())
    fail(r.path, ": a directory with none of metrics.jsonl, summary.json, analysis.json, longctx.json, "
         "stream_eval.json");
}

void load_result_file(ReportRun& r, const fs::path& p) {
  json j = read_json(p);
  r.label = p.stem().string();
  if (is_longctx(j)) {
    r.longctx = std::move(j);
  } else if (is_stream_eval(j)) {
    r.stream_eval = std::move(j);
  } else {
    check_analysis(j, r.path);
    r.analysis = std::move(j);
    r.analysis_path = r.path;
    if (r.label == "analysis" && p.has_parent_path()) r.label = fs::absolute(p).parent_path().filename().string();
  }
}

// A sweep directory: its first seed with metrics of each variant, labelled "VARIANT seed S".
void load_sweep(const fs::path& p, ReportInputs& in, std::vector<std::string>& warnings) {
  json sweep = read_json(p / "sweep.json");
  if (!is_sweep(sweep)) fail(p.string(), "/sweep.json: not a gatedlm sweep (no \"format\": \"gatedlm-sweep\")");
  for (const json& v : sweep.at("variants"))
    for (const json& seed : sweep.at("seeds")) {
      const fs::path dir = p / "runs" / v.at("name").get<std::string>() / ("seed-" + seed.dump());
      if (!fs::exists(dir / "metrics.jsonl")) continue;
      in.runs.push_back(load_report_run(dir.string(), warnings));
      in.runs.back().label = v.at("name").get<std::string>() + " seed " + seed.dump();
      break;
    }
  in.sweeps.push_back(std::move(sweep));
}

}  // namespace

ReportRun load_report_run(const std::string& input, std::vector<std::string>& warnings) {
  ReportRun r;
  r.path = input;
  const fs::path p(input);
  if (!fs::exists(p)) fail(input, ": no such file or directory");
  if (fs::is_directory(p)) load_run_dir(r, p, warnings);
  else load_result_file(r, p);
  if (r.config.is_null() && r.analysis.is_object() && r.analysis.contains("config")) r.config = r.analysis["config"];
  return r;
}

ReportInputs load_report_inputs(const std::vector<std::string>& inputs, std::vector<std::string>& warnings) {
  ReportInputs in;
  for (const std::string& input : inputs) {
    const fs::path p(input);
    if (fs::is_directory(p) && fs::exists(p / "sweep.json")) load_sweep(p, in, warnings);
    else in.runs.push_back(load_report_run(input, warnings));
  }
  label_and_colour(in.runs);
  return in;
}

void label_and_colour(std::vector<ReportRun>& runs) {
  std::map<std::string, int> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    ReportRun& r = runs[i];
    if (int n = seen[r.label]++; n > 0) r.label += cat(" (", n + 1, ")");
    r.color = kColors[i % std::size(kColors)];
  }
  for (ReportRun& r : runs)  // a later duplicate renamed the first? label the first too
    if (seen[r.label] > 1) r.label += " (1)";
}

std::string gate_variant(const ReportRun& r) {
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

bool has_gates(const ReportRun& r) {
  return r.analysis.is_object() && r.analysis.contains("gates") && r.analysis["gates"].is_object();
}

std::optional<double> analysis_number(const ReportRun& r, std::initializer_list<const char*> path) {
  const json* j = &r.analysis;
  for (const char* k : path) {
    if (!j->is_object() || !j->contains(k)) return std::nullopt;
    j = &(*j)[k];
  }
  if (j->is_number()) return j->get<double>();
  return std::nullopt;
}

std::optional<double> eval_number(const ReportRun& r, const char* key) {
  if (auto v = number(r.summary, key)) return v;
  return number(r.last_eval, key);
}

std::optional<double> spike_count(const ReportRun& r) {
  if (r.summary.is_object() && r.summary.contains("spikes") && is_number(r.summary["spikes"], "count"))
    return r.summary["spikes"]["count"].get<double>();
  if (!r.train.empty()) return static_cast<double>(r.spike_steps.size());
  return std::nullopt;
}

}  // namespace gatedlm::analysis
