#include "sweep/tables.h"

#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "sweep/stats.h"

namespace gatedlm::sweep {

using nlohmann::json;

const char* const kMetrics[] = {"val_loss",  "val_ppl", "val_bpb", "heldout_bpb", "f_attn", "sink_rate_percent",
                                "sink_logit_mass", "m_act", "gate_mean", "spikes", "final_loss"};
const size_t kMetricCount = std::size(kMetrics);

namespace {

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// The metric of each seed's run (NaN where the run is missing or has no such number).
std::vector<double> per_seed(const json& variant, const char* metric, size_t seeds) {
  std::vector<double> out(seeds, NAN);
  const json& runs = variant["runs"];
  for (size_t i = 0; i < seeds && i < runs.size(); ++i)
    if (runs[i].is_object() && runs[i].contains(metric) && runs[i][metric].is_number())
      out[i] = runs[i][metric].get<double>();
  return out;
}

std::string f(const json& v, const char* format) {
  if (!v.is_number()) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v.get<double>());
  return buf;
}

// "mean ± std" (or the mean alone for one seed) in `format`.
std::string mean_pm(const json& stats, const char* metric, const char* format) {
  const json& s = stats[metric];
  if (!s["mean"].is_number()) return "—";
  std::string out = f(s["mean"], format);
  if (s["std"].is_number()) out += " ± " + f(s["std"], format);
  return out;
}

// "+d [lo, hi]" with n pairs; just "+d" for one pair.
std::string diff_ci(const json& d, const char* format) {
  if (!d.is_object() || !d["mean"].is_number()) return "—";
  std::string plus_format = std::string("%+") + (format + 1);
  std::string out = f(d["mean"], plus_format.c_str());
  if (d["ci_low"].is_number())
    out += " [" + f(d["ci_low"], plus_format.c_str()) + ", " + f(d["ci_high"], plus_format.c_str()) + "]";
  return out;
}


}  // namespace

void add_statistics(json& sweep) {
  const size_t seeds = sweep.at("seeds").size();
  json& variants = sweep.at("variants");
  for (json& v : variants) {
    json stats = json::object();
    for (size_t m = 0; m < kMetricCount; ++m) {
      const MeanStd s = mean_std(per_seed(v, kMetrics[m], seeds));
      stats[kMetrics[m]] = {{"n", s.n}, {"mean", finite_or_null(s.mean)}, {"std", finite_or_null(s.std)}};
    }
    v["stats"] = stats;
    int64_t done = 0, diverged = 0;
    for (const json& r : v["runs"])
      if (r.is_object()) ++done, diverged += r.value("diverged", false) ? 1 : 0;
    v["runs_done"] = done;
    v["diverged_runs"] = diverged;
  }
  for (json& v : variants) {
    const std::string base = v.value("compare_to", "");
    v["vs_baseline"] = nullptr;
    if (base.empty() || base == v.value("name", "")) continue;
    const json* b = nullptr;
    for (const json& other : variants)
      if (other.value("name", "") == base) b = &other;
    if (!b) continue;
    json diffs = json::object();
    for (size_t m = 0; m < kMetricCount; ++m) {
      const PairedDifference d = paired_difference(per_seed(v, kMetrics[m], seeds), per_seed(*b, kMetrics[m], seeds));
      diffs[kMetrics[m]] = {{"n", d.n},           {"mean", finite_or_null(d.mean)},     {"std", finite_or_null(d.std)},
                            {"t", finite_or_null(d.t)}, {"ci_low", finite_or_null(d.ci_low)}, {"ci_high", finite_or_null(d.ci_high)}};
    }
    v["vs_baseline"] = {{"baseline", base}, {"confidence", 0.95}, {"paired_by", "seed"}, {"metrics", diffs}};
  }
}

std::string sweep_markdown(const json& sw) {
  std::string md;
  auto line = [&](const std::string& s) { md += s + "\n"; };
  line("# gatedlm sweep" + (sw.value("description", "").empty() ? "" : ": " + sw["description"].get<std::string>()));
  line("");
  const json& tc = sw["train_config"];
  std::string seeds;
  for (const json& s : sw["seeds"]) seeds += (seeds.empty() ? "" : ", ") + s.dump();
  line(cat("- spec: `", sw.value("source", ""), "`", sw.value("command", "").empty() ? "" : cat("; command: `", sw["command"].get<std::string>(), "`")));
  line(cat("- data: `", sw.value("data", ""), "`; held-out text: ",
           sw["heldout"].is_string() ? "`" + sw["heldout"].get<std::string>() + "`" : "none"));
  line(cat("- budget: ", thousands(sw.value("tokens_per_run", int64_t{0})), " training tokens per run (", tc.value("steps", 0),
           " steps of ", tc.value("batch_size", 0), " x ", tc.value("seq_len", 0), " tokens", tc.value("grad_accum", 1) > 1 ? cat(" x ", tc["grad_accum"].get<int64_t>()) : "",
           "), lr ", tc.value("lr", 0.0), " (warmup ", tc.value("warmup", 0), " steps, cosine to ", tc.value("min_lr", 0.0),
           "), weight decay ", tc.value("weight_decay", 0.0), ", clip ", tc.value("clip", 0.0)));
  line(cat("- seeds: ", seeds, " (a seed fixes the initial weights and the data order; every variant sees the same "
           "batches for the same seed)"));
  line(cat("- baseline parameters: ", thousands(sw.value("base_params", int64_t{0})),
           "; gated variants have their FFN narrowed to match it (the paper's dense-model rule), the parameter-expansion "
           "baselines are unmatched on purpose"));
  line(cat("- F-Attn, sink rate, sink logit (the probability learned sinks take; models with attention_sinks), M-Act "
           "and gate score: `gatedlm analyze`'s probes on ", sw.value("final_windows", 0),
           " validation windows (seed 0) of the final weights; spikes: steps whose loss exceeds the median of the "
           "previous 100 by 20 %; final loss: mean training loss of the last 10 steps; diverged: NaN/Inf, or a final "
           "loss above the first step's"));
  line("");
  line("## Mean ± standard deviation over seeds");
  line("");
  line("| Variant | Gate | FFN | Params (vs base) | Val loss | Val PPL | Val BPB | Held-out BPB | F-Attn | Sink % | Sink logit | M-Act | Gate score | Spikes | Diverged |");
  line("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const json& v : sw["variants"]) {
    const json& st = v["stats"];
    const int64_t dp = v.value("params_vs_base", int64_t{0});
    line(cat("| ", v.value("label", ""), " | ", v.value("gate", ""), " | ", v.value("ffn_hidden", 0), " | ",
             thousands(v.value("params", int64_t{0})), " (", dp >= 0 ? "+" : "", thousands(dp), ") | ",
             mean_pm(st, "val_loss", "%.4f"), " | ", mean_pm(st, "val_ppl", "%.3f"), " | ",
             mean_pm(st, "val_bpb", "%.4f"), " | ", mean_pm(st, "heldout_bpb", "%.4f"), " | ",
             mean_pm(st, "f_attn", "%.3f"), " | ", mean_pm(st, "sink_rate_percent", "%.1f"), " | ",
             mean_pm(st, "sink_logit_mass", "%.3f"), " | ", mean_pm(st, "m_act", "%.3g"), " | ",
             mean_pm(st, "gate_mean", "%.3f"), " | ",
             mean_pm(st, "spikes", "%.1f"), " | ", v.value("diverged_runs", 0), "/", v.value("runs_done", 0), " |"));
  }
  line("");
  line("## Difference to the baseline, paired by seed (95 % confidence interval, t-distribution)");
  line("");
  line("Each cell: mean of (variant − baseline) over the seeds where both runs have the number, and "
       "[mean ± t(0.975, n−1) · sd / √n]. Negative is better for the losses and bits per byte.");
  line("");
  line("| Variant | Baseline | Pairs | Δ val loss | Δ val BPB | Δ held-out BPB | Δ F-Attn | Δ M-Act | Δ spikes |");
  line("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const json& v : sw["variants"]) {
    if (!v["vs_baseline"].is_object()) continue;
    const json& d = v["vs_baseline"]["metrics"];
    line(cat("| ", v.value("label", ""), " | ", v["vs_baseline"].value("baseline", ""), " | ",
             d["val_loss"].value("n", 0), " | ", diff_ci(d["val_loss"], "%.4f"), " | ", diff_ci(d["val_bpb"], "%.4f"),
             " | ", diff_ci(d["heldout_bpb"], "%.4f"), " | ", diff_ci(d["f_attn"], "%.3f"), " | ",
             diff_ci(d["m_act"], "%.3g"), " | ", diff_ci(d["spikes"], "%.1f"), " |"));
  }
  line("");
  line("## Runs");
  line("");
  line("| Variant | Seed | LR | Steps | First loss | Final loss | Diverged | Spikes | Val loss | Val BPB | Held-out BPB | F-Attn | M-Act | Gate | tok/s |");
  line("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const json& v : sw["variants"])
    for (const json& r : v["runs"]) {
      if (!r.is_object()) continue;
      line(cat("| ", v.value("label", ""), " | ", r["seed"].dump(), " | ", f(r["lr"], "%.3g"), " | ",
               f(r["steps"], "%.0f"), " | ", f(r["first_loss"], "%.4f"), " | ", f(r["final_loss"], "%.4f"), " | ",
               r.value("nonfinite", false) ? "NaN/Inf" : r.value("diverged", false) ? "above start" : "no", " | ",
               f(r["spikes"], "%.0f"), " | ", f(r["val_loss"], "%.4f"), " | ", f(r["val_bpb"], "%.4f"), " | ",
               f(r["heldout_bpb"], "%.4f"), " | ", f(r["f_attn"], "%.3f"), " | ", f(r["m_act"], "%.3g"), " | ",
               f(r["gate_mean"], "%.3f"), " | ", f(r["tokens_per_s"], "%.0f"), " |"));
    }
  return md;
}

}  // namespace gatedlm::sweep
