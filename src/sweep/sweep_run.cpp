#include "sweep/sweep_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "analysis/sequences.h"
#include "analysis/training_probe.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/sha256.h"
#include "eval/evaluate.h"
#include "io/checkpoint.h"
#include "io/text_corpus.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/model.h"
#include "train/metrics_log.h"
#include "train/trainer.h"

namespace gatedlm::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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
json measure_run(SweepContext& ctx, const fs::path& dir, const json& summary, const train::TrainConfig& tc,
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
  for (const char* k : {"heldout_bpb", "f_attn", "sink_rate_percent", "sink_logit_mass", "m_act", "gate_mean"})
    r[k] = nullptr;
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
  for (const char* k : {"f_attn", "sink_rate_percent", "sink_logit_mass", "m_act", "gate_mean"}) r[k] = p[k];
  r["probe_windows"] = p["probe_windows"];
  return r;
}

enum class RunState { done, measure, resume, diverged, start };

// What the run directory says: a result with the same key (done), a finished training not
// yet measured, a divergence, a checkpoint to resume from, or nothing of ours (start).
RunState run_state(const SweepRun& run, const json& prior, const json& summary) {
  if (!stamp_matches(run.dir.string() + ".key", run.key)) return RunState::start;
  if (prior.is_object() && prior.value("key", "") == run.key) return RunState::done;
  const std::string outcome = summary.is_object() ? summary.value("outcome", "") : "";
  if (outcome == "completed") return RunState::measure;
  if (outcome == "non-finite") return RunState::diverged;
  if (fs::exists(run.dir / "latest")) return RunState::resume;
  return RunState::start;
}

// Trains the run (from the start, or resuming); sets `nonfinite` when training diverged.
train::TrainOutcome train_run(const SweepRun& run, RunState state, StageLog& log, bool& nonfinite) {
  train::TrainRequest req;
  req.out = run.dir.string();
  req.config = run.config;
  req.probe = analysis::make_training_probe();
  if (state == RunState::resume) {
    req.resume = true;
  } else {
    std::error_code ec;
    fs::remove_all(run.dir, ec);
    fs::create_directories(run.dir.parent_path(), ec);
    write_stamp(run.dir.string() + ".key", run.key);
    req.model_config = run.config_file.string();
    req.data = run.data;
  }
  try {
    return train::run_training(req);
  } catch (const Error& e) {
    const json s = read_json_or_null(run.dir / "summary.json");
    if (!(s.is_object() && s.value("outcome", "") == "non-finite")) throw;
    log.say(cat(run.label, ": DIVERGED (", e.what(), ")"));
    nonfinite = true;
    return train::TrainOutcome::completed;
  }
}

std::string result_line(const json& r) {
  return cat(r["diverged"].get<bool>() ? "diverged, " : "",
             r["val_bpb"].is_number() ? cat("val bpb ", r["val_bpb"].get<double>()) : "no validation",
             r["f_attn"].is_number() ? cat(", F-Attn ", r["f_attn"].get<double>()) : "",
             r["m_act"].is_number() ? cat(", M-Act ", r["m_act"].get<double>()) : "",
             r["gate_mean"].is_number() ? cat(", gate ", r["gate_mean"].get<double>()) : "", ", spikes ",
             r["spikes"].dump());
}

}  // namespace

SweepContext open_sweep_context(const SweepSpec& spec, const io::TokenDataset& dataset) {
  SweepContext ctx;
  ctx.spec = &spec;
  ctx.data = &dataset;
  ctx.data_sha = sha256_file_hex((fs::path(spec.data) / "manifest.json").string());
  ctx.val = dataset.load_split("val");
  if (spec.heldout.empty() || spec.heldout == "none") return ctx;
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
  ctx.heldout_sha = sha256_hex(ctx.heldout_text);
  return ctx;
}

SweepRun make_sweep_run(const SweepContext& ctx, const PlannedVariant& v, uint64_t seed, const fs::path& out) {
  const SweepSpec& spec = *ctx.spec;
  SweepRun run;
  run.variant = &v;
  run.seed = seed;
  run.config = train_config_for(spec, v.variant, seed);
  run.dir = out / "runs" / v.variant.name / cat("seed-", seed);
  run.config_file = out / "configs" / (v.variant.name + ".json");
  run.data = spec.data;
  run.key = stage_key({{"config", model::config_to_json(v.config)},
                       {"train", train::train_config_to_json(run.config)},
                       {"data", ctx.data_sha},
                       {"heldout", ctx.heldout_sha},
                       {"heldout_tokens", spec.heldout_tokens},
                       {"final_windows", spec.final_windows}});
  return run;
}

RunOutcome complete_run(SweepContext& ctx, const SweepRun& run, const std::string& eta, StageLog& log, json& result,
                        bool& trained) {
  trained = false;
  const json prior = read_json_or_null(run.dir / "result.json");
  RunState state = run_state(run, prior, read_json_or_null(run.dir / "summary.json"));
  if (state == RunState::done) {
    result = prior;
    return RunOutcome::measured;
  }
  if (state == RunState::start || state == RunState::resume) {
    log.say(cat(run.label, state == RunState::resume ? " (resuming)" : "", ": ", run.config.steps, " steps, lr ",
                run.config.lr, eta));
    bool nonfinite = false;
    if (train_run(run, state, log, nonfinite) == train::TrainOutcome::interrupted) return RunOutcome::interrupted;
    trained = true;
    state = nonfinite ? RunState::diverged : RunState::measure;
  }
  const json summary = read_json_or_null(run.dir / "summary.json");
  result = measure_run(ctx, run.dir, summary, run.config, run.key, state == RunState::diverged);
  result["variant"] = run.variant->variant.name;
  result["seed"] = run.seed;
  write_file_atomic((run.dir / "result.json").string(), result.dump(2) + "\n");
  log.say(cat(run.label, ": ", result_line(result)));
  return RunOutcome::measured;
}

}  // namespace gatedlm::sweep
