#include "sweep/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/report.h"
#include "analysis/sequences.h"
#include "analysis/training_probe.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/format.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "core/stage_cache.h"
#include "eval/evaluate.h"
#include "io/checkpoint.h"
#include "io/text_corpus.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"
#include "model/model.h"
#include "sweep/spec.h"
#include "sweep/tables.h"
#include "train/metrics_log.h"
#include "train/trainer.h"

namespace gatedlm::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

StageLog g_log("sweep");  // core/stage_cache.h, as the demo's

void say(const std::string& message) { g_log.say(message); }

json number_or_null(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key] : json(nullptr);
}

// The step losses of a run's metrics.jsonl, in order (train/metrics_log.h's policy).
std::vector<double> step_losses(const fs::path& run) {
  const train::MetricsLog log = train::read_metrics_log(run / "metrics.jsonl", train::IfMissing::empty);
  if (log.dropped_last_line) std::fprintf(stderr, "note: %s\n", log.dropped_last_line->c_str());
  std::vector<double> out;
  for (const json& record : log.records)
    if (record.contains("loss") && record["loss"].is_number()) out.push_back(record["loss"].get<double>());
  return out;
}

struct Context {
  const SweepSpec* spec;
  const io::TokenDataset* data;
  std::string data_dir;
  std::vector<int32_t> val;
  std::string heldout_name, heldout_text;
  std::vector<int32_t> heldout_ids;  // encoded when first needed
  double heldout_bytes_per_token = 0;
};

// A run's measurements after training: what summary.json says, the held-out bits per byte,
// the final probe, first and final training loss, divergence.
json measure_run(Context& ctx, const fs::path& dir, const json& summary, const train::TrainConfig& tc,
                 const std::string& key, bool nonfinite) {
  const std::vector<double> losses = step_losses(dir);
  json r{{"key", key}, {"outcome", nonfinite ? "non-finite" : "completed"}, {"nonfinite", nonfinite}};
  for (const char* k : {"steps", "tokens_seen", "params", "tokens_per_s", "elapsed_s", "val_loss", "val_ppl", "val_bpb"})
    r[k] = number_or_null(summary, k);
  r["spikes"] = summary.contains("spikes") ? number_or_null(summary["spikes"], "count") : json(nullptr);
  r["lr"] = tc.lr;
  // Divergence (issue 15): a NaN/Inf, or a final loss (mean of the last 10 steps) above the first step's.
  json first = nullptr, final_loss = nullptr;
  if (!losses.empty()) {
    first = losses.front();
    const size_t k = std::min<size_t>(10, losses.size());
    double s = 0;
    for (size_t i = losses.size() - k; i < losses.size(); ++i) s += losses[i];
    final_loss = s / static_cast<double>(k);
  }
  r["first_loss"] = first;
  r["final_loss"] = final_loss;
  r["diverged"] = nonfinite || (first.is_number() && final_loss.is_number() && final_loss.get<double>() > first.get<double>());
  for (const char* k : {"heldout_bpb", "f_attn", "sink_rate_percent", "m_act", "gate_mean"}) r[k] = nullptr;
  if (nonfinite) {
    if (r["spikes"].is_null()) r["spikes"] = 0;
    return r;
  }
  io::Checkpoint ck = io::load_checkpoint(dir.string());
  model::Model<float> m(ck.config);
  m.load_params(ck.params);
  if (!ctx.heldout_text.empty()) {
    const auto tok = ctx.data->tokenizer();
    if (ctx.heldout_ids.empty()) {
      ctx.heldout_ids = tok->encode(ctx.heldout_text);
      ctx.heldout_bytes_per_token =
          static_cast<double>(ctx.heldout_text.size()) / static_cast<double>(std::max<size_t>(ctx.heldout_ids.size(), 1));
    }
    const eval::EvalResult e = eval::evaluate(m, ctx.heldout_ids, tok->bos_id(), tc.seq_len, ctx.spec->heldout_tokens,
                                              tc.batch_size, ctx.heldout_bytes_per_token);
    r["heldout_bpb"] = e.bpb;
    r["heldout_loss"] = e.loss;
    r["heldout_tokens"] = e.tokens;
  }
  const analysis::SequenceSet windows =
      analysis::sample_windows(ctx.val, ctx.data->manifest().bos_id, ctx.spec->final_windows, tc.seq_len, 0);
  const json p = analysis::probe_summary(m, windows);
  for (const char* k : {"f_attn", "sink_rate_percent", "m_act", "gate_mean"}) r[k] = p[k];
  r["probe_windows"] = p["probe_windows"];
  return r;
}

enum class RunState { done, measure, resume, diverged, start };

}  // namespace

SweepOutcome run_sweep(const SweepOptions& opt) {
  g_log.restart();
  if (opt.spec.empty() == opt.preset.empty()) fail("sweep: give either --spec FILE.json or --preset NAME");
  if (opt.out.empty()) fail("sweep: --out DIR is required");
  SweepSpec spec = load_spec_file(opt.spec.empty() ? find_sweep_preset(opt.preset) : opt.spec);
  if (!opt.data.empty()) spec.data = opt.data;
  if (!opt.heldout.empty()) spec.heldout = opt.heldout;
  if (opt.tokens > 0) spec.tokens = opt.tokens;
  if (!opt.seeds.empty()) spec.seeds = opt.seeds;
  if (spec.data.empty())
    fail("sweep: no data: give --data DIR (a dataset from `gatedlm data prepare`, e.g. the demo's runs/demo/data) "
         "or \"data\" in ", spec.source);
  const io::TokenDataset dataset = io::TokenDataset::open(spec.data);
  const io::DatasetManifest& mf = dataset.manifest();
  const Plan plan = plan_variants(spec, mf.vocab_size);

  // Which variants run: all, or --only and the baselines they are compared with.
  std::set<std::string> selected;
  for (const std::string& name : opt.only) {
    const PlannedVariant& v = plan.find(name);  // throws naming an unknown variant
    selected.insert(name);
    selected.insert(v.variant.compare_to.empty() ? spec.baseline : v.variant.compare_to);
  }
  auto runs_variant = [&](const PlannedVariant& v) { return selected.empty() || selected.count(v.variant.name) > 0; };

  // The plan, every parameter count printed.
  const train::TrainConfig tc0 = train_config_for(spec, plan.variants.front().variant, spec.seeds.front());
  say(cat(spec.source, ": ", plan.variants.size(), " variants x ", spec.seeds.size(), " seeds, ",
          thousands(spec.tokens), " tokens per run (", tc0.steps, " steps of ", thousands(tc0.tokens_per_step()),
          " tokens, warmup ", tc0.warmup, ", cosine to min_lr), data ", spec.data));
  std::fprintf(stderr, "  %-24s %-46s %9s %12s %20s %10s\n", "variant", "gate", "ffn", "params", "vs base",
               "gate par.");
  for (const PlannedVariant& v : plan.variants) {
    const int64_t diff = v.params - plan.base_params;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%+.2f%%", 100.0 * static_cast<double>(diff) / static_cast<double>(plan.base_params));
    std::string gate = model::describe_gate(v.config);
    if (v.config.sdpa_transform != model::SdpaTransform::none)
      gate += v.config.sdpa_transform == model::SdpaTransform::rmsnorm ? " +SDPA RMSNorm" : " +SDPA SiLU";
    std::fprintf(stderr, "  %-24s %-46s %9lld %12s %20s %10s%s\n", v.variant.name.c_str(), gate.c_str(),
                 static_cast<long long>(v.config.ffn_hidden), thousands(v.params).c_str(),
                 cat(diff >= 0 ? "+" : "", thousands(diff), " ", pct).c_str(), thousands(v.gate_params).c_str(),
                 v.variant.match == Match::none ? "  (unmatched: adds parameters)" : "");
  }

  const fs::path out(opt.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) fail("--out ", opt.out, ": exists and is not a directory");
  fs::create_directories(out / "configs", ec);
  if (ec) fail("--out ", opt.out, ": cannot create it (", ec.message(), ")");
  const std::string data_sha = sha256_file_hex((fs::path(spec.data) / "manifest.json").string());
  json plan_json{{"source", spec.source}, {"spec", spec.raw}, {"tokens", spec.tokens}, {"seeds", spec.seeds},
                 {"data", fs::absolute(spec.data).string()}, {"base_params", plan.base_params},
                 {"baseline", spec.baseline}, {"variants", json::array()}};
  for (const PlannedVariant& v : plan.variants) {
    const std::string path = (out / "configs" / (v.variant.name + ".json")).string();
    const std::string text = model::config_to_json(v.config).dump(2) + "\n";
    write_if_changed(path, text);
    plan_json["variants"].push_back(
        {{"name", v.variant.name}, {"params", v.params}, {"params_vs_base", v.params - plan.base_params},
         {"gate_params", v.gate_params}, {"ffn_hidden", v.config.ffn_hidden}, {"target_params", v.target_params},
         {"match", v.variant.match == Match::none ? "none" : v.variant.match == Match::baseline ? "baseline" : "added_by"},
         {"config", model::config_to_json(v.config)},
         {"train_config", train::train_config_to_json(train_config_for(spec, v.variant, spec.seeds.front()))}});
  }
  write_file_atomic((out / "plan.json").string(), plan_json.dump(2) + "\n");
  if (opt.plan_only) {
    say(cat("plan written to ", (out / "plan.json").string(), " (--plan: nothing trained)"));
    return SweepOutcome::planned;
  }

  Context ctx;
  ctx.spec = &spec;
  ctx.data = &dataset;
  ctx.val = dataset.load_split("val");
  if (!spec.heldout.empty() && spec.heldout != "none") {
    if (!fs::is_regular_file(spec.heldout)) fail("sweep: held-out text ", spec.heldout, " is not a file");
    ctx.heldout_text = io::read_text_file(spec.heldout);
    if (ctx.heldout_text.empty()) fail("sweep: held-out text ", spec.heldout, " is empty");
    // Only the first heldout_tokens tokens are evaluated: encode a generous prefix (whole lines).
    const size_t keep = static_cast<size_t>(spec.heldout_tokens) * 32;
    if (ctx.heldout_text.size() > keep) {
      const size_t cut = ctx.heldout_text.rfind('\n', keep);
      ctx.heldout_text.resize(cut == std::string::npos ? keep : cut + 1);
    }
    ctx.heldout_name = fs::path(spec.heldout).filename().string();
  }
  const std::string heldout_sha = ctx.heldout_text.empty() ? "" : sha256_hex(ctx.heldout_text);

  // Seed-major order: after each seed every variant has a paired run.
  int64_t total = 0, index = 0, trained = 0;
  for (const PlannedVariant& v : plan.variants) total += runs_variant(v) ? 1 : 0;
  total *= static_cast<int64_t>(spec.seeds.size());
  double trained_s = 0;
  std::map<std::string, std::vector<json>> results;  // variant -> per seed (null: not run)
  for (const PlannedVariant& v : plan.variants) results[v.variant.name].assign(spec.seeds.size(), nullptr);
  for (size_t si = 0; si < spec.seeds.size(); ++si) {
    const uint64_t seed = spec.seeds[si];
    for (const PlannedVariant& v : plan.variants) {
      if (!runs_variant(v)) continue;
      ++index;
      const train::TrainConfig tc = train_config_for(spec, v.variant, seed);
      const fs::path dir = out / "runs" / v.variant.name / cat("seed-", seed);
      const fs::path stamp = dir.string() + ".key";
      const std::string key = stage_key({{"config", model::config_to_json(v.config)},
                                         {"train", train::train_config_to_json(tc)},
                                         {"data", data_sha},
                                         {"heldout", heldout_sha},
                                         {"heldout_tokens", spec.heldout_tokens},
                                         {"final_windows", spec.final_windows}});
      const json prior = read_json_or_null(dir / "result.json");
      const json summary = read_json_or_null(dir / "summary.json");
      const bool ours = stamp_matches(stamp, key);
      RunState state = RunState::start;
      if (ours && prior.is_object() && prior.value("key", "") == key) state = RunState::done;
      else if (ours && summary.is_object() && summary.value("outcome", "") == "completed") state = RunState::measure;
      else if (ours && summary.is_object() && summary.value("outcome", "") == "non-finite") state = RunState::diverged;
      else if (ours && fs::exists(dir / "latest")) state = RunState::resume;
      const std::string what = cat("run ", index, "/", total, ": ", v.variant.name, " seed ", seed);
      if (state == RunState::done) {
        results[v.variant.name][si] = prior;
        continue;
      }
      if (state == RunState::start || state == RunState::resume) {
        const double eta = trained > 0 ? trained_s / static_cast<double>(trained) *
                                             static_cast<double>(total - index + 1)
                                       : 0.0;
        say(cat(what, state == RunState::resume ? " (resuming)" : "", ": ", tc.steps, " steps, lr ", tc.lr,
                trained > 0 ? cat(", about ", Progress::format_duration(eta), " left for the sweep") : ""));
        train::TrainRequest req;
        req.out = dir.string();
        req.config = tc;
        req.probe = analysis::make_training_probe();
        if (state == RunState::resume) {
          req.resume = true;
        } else {
          fs::remove_all(dir, ec);
          fs::create_directories(dir.parent_path(), ec);
          write_stamp(stamp, key);
          req.model_config = (out / "configs" / (v.variant.name + ".json")).string();
          req.data = spec.data;
        }
        const auto t0 = Clock::now();
        train::TrainOutcome outcome = train::TrainOutcome::completed;
        bool nonfinite = false;
        try {
          outcome = train::run_training(req);
        } catch (const Error& e) {
          const json s = read_json_or_null(dir / "summary.json");
          if (!(s.is_object() && s.value("outcome", "") == "non-finite")) throw;
          say(cat(what, ": DIVERGED (", e.what(), ")"));
          nonfinite = true;
        }
        if (outcome == train::TrainOutcome::interrupted) {
          say("interrupted: the run is saved; the same command continues the sweep where it stopped");
          return SweepOutcome::interrupted;
        }
        trained_s += std::chrono::duration<double>(Clock::now() - t0).count();
        ++trained;
        state = nonfinite ? RunState::diverged : RunState::measure;
      }
      const json s = read_json_or_null(dir / "summary.json");
      json r = measure_run(ctx, dir, s, tc, key, state == RunState::diverged);
      r["variant"] = v.variant.name;
      r["seed"] = seed;
      write_file_atomic((dir / "result.json").string(), r.dump(2) + "\n");
      say(cat(what, ": ", r["diverged"].get<bool>() ? "diverged, " : "",
              r["val_bpb"].is_number() ? cat("val bpb ", r["val_bpb"].get<double>()) : "no validation",
              r["f_attn"].is_number() ? cat(", F-Attn ", r["f_attn"].get<double>()) : "",
              r["m_act"].is_number() ? cat(", M-Act ", r["m_act"].get<double>()) : "",
              r["gate_mean"].is_number() ? cat(", gate ", r["gate_mean"].get<double>()) : "",
              ", spikes ", r["spikes"].dump()));
      results[v.variant.name][si] = r;
    }
  }

  // The tables.
  json sweep{{"format", "gatedlm-sweep"},
             {"format_version", 1},
             {"command", opt.command_line},
             {"source", spec.source},
             {"description", spec.description},
             {"tokens_per_run", spec.tokens},
             {"seeds", spec.seeds},
             {"data", fs::absolute(spec.data).string()},
             {"heldout", ctx.heldout_name.empty() ? json(nullptr) : json(fs::absolute(spec.heldout).string())},
             {"train_config", train::train_config_to_json(tc0)},
             {"base_params", plan.base_params},
             {"baseline", spec.baseline},
             {"final_windows", spec.final_windows},
             {"variants", json::array()}};
  sweep["train_config"].erase("seed");
  for (const PlannedVariant& v : plan.variants) {
    if (!runs_variant(v)) continue;
    std::string gate = model::describe_gate(v.config);
    if (v.config.sdpa_transform != model::SdpaTransform::none)
      gate += v.config.sdpa_transform == model::SdpaTransform::rmsnorm ? " + SDPA RMSNorm" : " + SDPA SiLU";
    const train::TrainConfig tc = train_config_for(spec, v.variant, spec.seeds.front());
    sweep["variants"].push_back({{"name", v.variant.name},
                                 {"label", v.variant.label},
                                 {"series", v.variant.series},
                                 {"compare_to", v.variant.compare_to.empty() ? spec.baseline : v.variant.compare_to},
                                 {"gate", gate},
                                 {"ffn_hidden", v.config.ffn_hidden},
                                 {"n_layers", v.config.n_layers},
                                 {"params", v.params},
                                 {"params_vs_base", v.params - plan.base_params},
                                 {"gate_params", v.gate_params},
                                 {"lr", tc.lr},
                                 {"dir", (out / "runs" / v.variant.name).string()},
                                 {"runs", results[v.variant.name]}});
  }
  add_statistics(sweep);
  write_file_atomic((out / "sweep.json").string(), sweep.dump(2) + "\n");
  const std::string md = sweep_markdown(sweep);
  write_file_atomic((out / "sweep.md").string(), md);
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  if (opt.report) {
    analysis::ReportOptions ro;
    ro.inputs.push_back(out.string());
    ro.out_dir = (out / "report").string();
    ro.title = cat("gatedlm sweep: ", spec.description.empty() ? spec.source : spec.description);
    try {
      const analysis::ReportResult rr = analysis::render_report(ro);
      for (const auto& w : rr.warnings) say("report warning: " + w);
      say(cat("report: ", rr.html_path));
    } catch (const Error& e) {
      say(cat("NOTE: no report (", e.what(), ")"));
    }
  }
  say(cat("done: ", trained, " runs trained, ", total - trained, " reused; tables in ", (out / "sweep.md").string(),
          " and ", (out / "sweep.json").string()));
  return SweepOutcome::completed;
}

}  // namespace gatedlm::sweep
