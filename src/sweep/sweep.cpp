#include "sweep/sweep.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/report.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/format.h"
#include "core/progress.h"
#include "core/stage_cache.h"
#include "io/token_dataset.h"
#include "model/config.h"
#include "sweep/spec.h"
#include "sweep/sweep_run.h"
#include "sweep/tables.h"
#include "train/train_config.h"

namespace gatedlm::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

StageLog g_log("sweep");  // core/stage_cache.h, as the demo's

void say(const std::string& message) { g_log.say(message); }

// The spec file or preset with the command line's overrides applied.
SweepSpec load_spec_with_overrides(const SweepOptions& opt) {
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
  return spec;
}

// Which variants run: all, or --only and the baselines they are compared with.
std::set<std::string> selected_variants(const SweepOptions& opt, const SweepSpec& spec, const Plan& plan) {
  std::set<std::string> selected;
  for (const std::string& name : opt.only) {
    const PlannedVariant& v = plan.find(name);  // throws naming an unknown variant
    selected.insert(name);
    selected.insert(v.variant.compare_to.empty() ? spec.baseline : v.variant.compare_to);
  }
  if (selected.empty())
    for (const PlannedVariant& v : plan.variants) selected.insert(v.variant.name);
  return selected;
}

// "G1 sdpa elementwise sigmoid multiply + SDPA RMSNorm": the gate and the SDPA transform.
std::string gate_description(const model::ModelConfig& c) {
  std::string gate = model::describe_gate(c);
  if (c.sdpa_transform != model::SdpaTransform::none)
    gate += c.sdpa_transform == model::SdpaTransform::rmsnorm ? " + SDPA RMSNorm" : " + SDPA SiLU";
  return gate;
}

// The plan on stderr, every parameter count printed.
void print_plan(const SweepSpec& spec, const Plan& plan, const train::TrainConfig& tc0) {
  say(cat(spec.source, ": ", plan.variants.size(), " variants x ", spec.seeds.size(), " seeds, ",
          thousands(spec.tokens), " tokens per run (", tc0.steps, " steps of ", thousands(tc0.tokens_per_step()),
          " tokens, warmup ", tc0.warmup, ", cosine to min_lr), data ", spec.data));
  std::fprintf(stderr, "  %-24s %-46s %9s %12s %20s %10s\n", "variant", "gate", "ffn", "params", "vs base",
               "gate par.");
  for (const PlannedVariant& v : plan.variants) {
    const int64_t diff = v.params - plan.base_params;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%+.2f%%", 100.0 * static_cast<double>(diff) / static_cast<double>(plan.base_params));
    std::fprintf(stderr, "  %-24s %-46s %9lld %12s %20s %10s%s\n", v.variant.name.c_str(),
                 gate_description(v.config).c_str(), static_cast<long long>(v.config.ffn_hidden),
                 thousands(v.params).c_str(), cat(diff >= 0 ? "+" : "", thousands(diff), " ", pct).c_str(),
                 thousands(v.gate_params).c_str(), v.variant.match == Match::none ? "  (unmatched: adds parameters)" : "");
  }
}

// DIR/configs/VARIANT.json and DIR/plan.json.
void write_plan(const fs::path& out, const SweepSpec& spec, const Plan& plan) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) fail("--out ", out.string(), ": exists and is not a directory");
  fs::create_directories(out / "configs", ec);
  if (ec) fail("--out ", out.string(), ": cannot create it (", ec.message(), ")");
  json plan_json{{"source", spec.source}, {"spec", spec.raw}, {"tokens", spec.tokens}, {"seeds", spec.seeds},
                 {"data", fs::absolute(spec.data).string()}, {"base_params", plan.base_params},
                 {"baseline", spec.baseline}, {"variants", json::array()}};
  for (const PlannedVariant& v : plan.variants) {
    write_if_changed((out / "configs" / (v.variant.name + ".json")).string(), model::config_to_json(v.config).dump(2) + "\n");
    plan_json["variants"].push_back(
        {{"name", v.variant.name}, {"params", v.params}, {"params_vs_base", v.params - plan.base_params},
         {"gate_params", v.gate_params}, {"ffn_hidden", v.config.ffn_hidden}, {"target_params", v.target_params},
         {"match", v.variant.match == Match::none ? "none" : v.variant.match == Match::baseline ? "baseline" : "added_by"},
         {"config", model::config_to_json(v.config)},
         {"train_config", train::train_config_to_json(train_config_for(spec, v.variant, spec.seeds.front()))}});
  }
  write_file_atomic((out / "plan.json").string(), plan_json.dump(2) + "\n");
}

// Every selected run in seed-major order (after each seed every variant has a paired run).
struct RunsDone {
  std::map<std::string, std::vector<json>> results;  // variant -> per seed (null: not run)
  int64_t total = 0, trained = 0;
  bool interrupted = false;
};

RunsDone run_all(SweepContext& ctx, const Plan& plan, const std::set<std::string>& selected, const fs::path& out) {
  const SweepSpec& spec = *ctx.spec;
  RunsDone done;
  for (const PlannedVariant& v : plan.variants) {
    done.results[v.variant.name].assign(spec.seeds.size(), nullptr);
    if (selected.count(v.variant.name)) done.total += static_cast<int64_t>(spec.seeds.size());
  }
  int64_t index = 0;
  double trained_s = 0;
  for (size_t si = 0; si < spec.seeds.size(); ++si) {
    for (const PlannedVariant& v : plan.variants) {
      if (!selected.count(v.variant.name)) continue;
      SweepRun run = make_sweep_run(ctx, v, spec.seeds[si], out);
      run.label = cat("run ", ++index, "/", done.total, ": ", v.variant.name, " seed ", run.seed);
      const double per_run = done.trained > 0 ? trained_s / static_cast<double>(done.trained) : 0.0;
      const std::string eta =
          done.trained > 0
              ? cat(", about ", Progress::format_duration(per_run * static_cast<double>(done.total - index + 1)),
                    " left for the sweep")
              : "";
      const auto t0 = Clock::now();
      bool trained = false;
      if (complete_run(ctx, run, eta, g_log, done.results[v.variant.name][si], trained) == RunOutcome::interrupted) {
        done.interrupted = true;
        return done;
      }
      if (trained) {
        trained_s += std::chrono::duration<double>(Clock::now() - t0).count();
        ++done.trained;
      }
    }
  }
  return done;
}

// DIR/sweep.json: the runs of each selected variant with the statistics over seeds.
json sweep_tables(const SweepOptions& opt, const SweepContext& ctx, const Plan& plan,
                  const std::set<std::string>& selected, const RunsDone& done, const fs::path& out) {
  const SweepSpec& spec = *ctx.spec;
  json sweep{{"format", "gatedlm-sweep"},
             {"format_version", 1},
             {"command", opt.command_line},
             {"source", spec.source},
             {"description", spec.description},
             {"tokens_per_run", spec.tokens},
             {"seeds", spec.seeds},
             {"data", fs::absolute(spec.data).string()},
             {"heldout", ctx.heldout_name.empty() ? json(nullptr) : json(fs::absolute(spec.heldout).string())},
             {"train_config", train::train_config_to_json(train_config_for(spec, plan.variants.front().variant,
                                                                           spec.seeds.front()))},
             {"base_params", plan.base_params},
             {"baseline", spec.baseline},
             {"final_windows", spec.final_windows},
             {"variants", json::array()}};
  sweep["train_config"].erase("seed");
  for (const PlannedVariant& v : plan.variants) {
    if (!selected.count(v.variant.name)) continue;
    sweep["variants"].push_back({{"name", v.variant.name},
                                 {"label", v.variant.label},
                                 {"series", v.variant.series},
                                 {"compare_to", v.variant.compare_to.empty() ? spec.baseline : v.variant.compare_to},
                                 {"gate", gate_description(v.config)},
                                 {"ffn_hidden", v.config.ffn_hidden},
                                 {"n_layers", v.config.n_layers},
                                 {"params", v.params},
                                 {"params_vs_base", v.params - plan.base_params},
                                 {"gate_params", v.gate_params},
                                 {"lr", train_config_for(spec, v.variant, spec.seeds.front()).lr},
                                 {"dir", (out / "runs" / v.variant.name).string()},
                                 {"runs", done.results.at(v.variant.name)}});
  }
  add_statistics(sweep);
  return sweep;
}

// DIR/report/ through gatedlm report; a failure is a note, the tables stand.
void write_sweep_report(const fs::path& out, const SweepSpec& spec) {
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

}  // namespace

SweepOutcome run_sweep(const SweepOptions& opt) {
  g_log.restart();
  const SweepSpec spec = load_spec_with_overrides(opt);
  const io::TokenDataset dataset = io::TokenDataset::open(spec.data);
  const Plan plan = plan_variants(spec, dataset.manifest().vocab_size);
  const std::set<std::string> selected = selected_variants(opt, spec, plan);
  print_plan(spec, plan, train_config_for(spec, plan.variants.front().variant, spec.seeds.front()));
  const fs::path out(opt.out);
  write_plan(out, spec, plan);
  if (opt.plan_only) {
    say(cat("plan written to ", (out / "plan.json").string(), " (--plan: nothing trained)"));
    return SweepOutcome::planned;
  }

  SweepContext ctx = open_sweep_context(spec, dataset);
  const RunsDone done = run_all(ctx, plan, selected, out);
  if (done.interrupted) {
    say("interrupted: the run is saved; the same command continues the sweep where it stopped");
    return SweepOutcome::interrupted;
  }
  const json sweep = sweep_tables(opt, ctx, plan, selected, done, out);
  write_file_atomic((out / "sweep.json").string(), sweep.dump(2) + "\n");
  const std::string md = sweep_markdown(sweep);
  write_file_atomic((out / "sweep.md").string(), md);
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  if (opt.report) write_sweep_report(out, spec);
  say(cat("done: ", done.trained, " runs trained, ", done.total - done.trained, " reused; tables in ",
          (out / "sweep.md").string(), " and ", (out / "sweep.json").string()));
  return SweepOutcome::completed;
}

}  // namespace gatedlm::sweep
