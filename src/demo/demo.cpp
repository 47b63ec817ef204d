#include "demo/demo.h"

#include <cstdio>
#include <filesystem>

#include "analysis/report.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/format.h"
#include "core/progress.h"
#include "core/stage_cache.h"
#include "demo/final_eval.h"
#include "demo/models.h"
#include "demo/plan_stage.h"
#include "demo/prepare.h"
#include "demo/preset.h"
#include "demo/results.h"
#include "demo/segments.h"
#include "demo/text_sources.h"
#include "io/token_dataset.h"
#include "train/train_config.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The stages' shared setting: the options, the output directory and the log.
struct Demo {
  explicit Demo(const DemoOptions& o)
      : opt(o),
        preset(load_preset(o.preset)),
        minutes(o.minutes > 0 ? o.minutes : preset.minutes),
        fixed_steps(o.steps > 0 ? o.steps : (o.minutes > 0 ? 0 : preset.steps)),
        out(o.out) {}
  StageLog log{"demo"};  // first: the clock starts with the command
  const DemoOptions& opt;
  Preset preset;
  double minutes = 0;       // the budget
  int64_t fixed_steps = 0;  // > 0: a step count instead of the budget
  fs::path out;
};

io::DatasetManifest describe_data(const PreparedData& data, const StageLog& log) {
  const io::TokenDataset dataset = io::TokenDataset::open(data.data_dir);
  const io::DatasetManifest mf = dataset.manifest();
  log.say("data",
          cat(thousands(mf.train.tokens), " training tokens, ", thousands(mf.val.tokens), " validation tokens (",
              static_cast<double>(mf.train.bytes) / std::max<int64_t>(mf.train.tokens, 1), " bytes/token)"));
  if (mf.val.tokens < 2) fail("demo: the validation split is empty; the corpus is too small");
  return mf;
}

// 8. gatedlm report of both runs; a failure leaves a note instead.
std::pair<std::string, std::string> write_report(const Demo& d, const std::vector<RunInfo>& runs) {
  const fs::path report_dir = d.out / "report";
  analysis::ReportOptions ro;
  for (const RunInfo& r : runs)
    if (fs::exists(fs::path(r.dir) / "summary.json")) ro.inputs.push_back(r.dir);
  ro.out_dir = report_dir.string();
  ro.title = "gatedlm demo: baseline vs SDPA-output gated attention (G1)";
  d.log.say("report", cat("writing ", (report_dir / "index.html").string(), " ..."));
  try {
    const analysis::ReportResult rr = analysis::render_report(ro);
    for (const auto& w : rr.warnings) d.log.say("report", "warning: " + w);
    return {rr.html_path, ""};
  } catch (const Error& e) {
    const std::string note = cat("no report: ", e.what());
    d.log.say("report", "NOTE: " + note);
    return {"", note};
  }
}

struct Stages {  // what the table is made from
  TextSources texts;
  PreparedData data;
  io::DatasetManifest manifest;
  ModelPair models;
  std::vector<RunInfo> runs;
  DemoPlan plan;
  TrainingResult training;
};

// 9. The table: DIR/results.json, DIR/results.md and stdout.
void write_results(const Demo& d, const Stages& s, const std::pair<std::string, std::string>& report) {
  ResultsInput in;
  in.command = d.opt.command_line;
  in.preset = d.preset.name;
  in.out_dir = d.out.string();
  in.minutes = d.fixed_steps > 0 ? 0.0 : d.minutes;
  in.corpus = s.texts.corpus_info;
  in.heldout = s.texts.heldout_info;
  in.heldout_name = s.texts.heldout_name;
  in.heldout_note = s.texts.heldout_note;
  const int64_t vocab = s.manifest.vocab_size;
  in.tokenizer = s.data.byte_tokenizer
                     ? json{{"type", "byte"}, {"vocab_size", vocab}}
                     : json{{"type", "sentencepiece-bpe"}, {"vocab_size", vocab}, {"path", s.data.tokenizer_path}};
  in.data = {{"dir", s.data.data_dir},
             {"train_tokens", s.manifest.train.tokens},
             {"val_tokens", s.manifest.val.tokens},
             {"val_bytes", s.manifest.val.bytes},
             {"val_fraction", d.preset.synthetic ? d.preset.data.val_fraction : d.preset.val_fraction}};
  if (d.preset.synthetic) in.data["synthetic"] = s.data.synthetic;
  // The steps that ran (a budget re-plan may have ended the runs before the planned step).
  in.train_config = train::train_config_to_json(s.plan.tc);
  in.train_config["steps"] = s.training.final_step;
  in.planned_steps = s.plan.tc.steps;
  in.param_difference = s.models.gated_params - s.models.baseline_params;
  in.ffn_hidden = {s.models.baseline.ffn_hidden, s.models.gated.ffn_hidden};
  in.report = report.first;
  in.report_note = report.second;
  in.wall_s = d.log.elapsed_s();
  in.contention_note = s.training.contention_note;
  for (const RunInfo& r : s.runs) in.runs.push_back({r.name, r.label, r.dir, r.diverged});
  const Results results = collect_results(in);
  write_file_atomic((d.out / "results.json").string(), results.json_text);
  write_file_atomic((d.out / "results.md").string(), results.markdown);
  std::fputs(results.terminal.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

DemoOutcome run_demo(const DemoOptions& opt) {
  const Demo d(opt);
  fs::create_directories(d.out / "runs");
  fs::create_directories(d.out / "configs");
  d.log.say("start",
            cat("preset ", d.preset.name, " (", d.preset.path, "), ",
                d.fixed_steps > 0 ? cat(d.fixed_steps, " steps per model") : cat("budget ", d.minutes, " minutes"),
                ", output in ", d.out.string(), opt.fresh ? ", --fresh: nothing is reused" : ""));
  Stages s;
  s.texts = gather_texts(opt, d.preset, d.log);                       // 1. corpus and held-out text
  s.data = prepare_data(d.out, d.preset, s.texts, opt.fresh, d.log);  // 2-3. tokenizer and shards
  s.manifest = describe_data(s.data, d.log);
  s.models = make_models(d.preset, s.manifest.vocab_size);  // 4. the two models
  d.log.say("models", describe_models(s.models));
  s.runs = make_runs(d.out, s.models);
  const PlanInputs plan_in{d.preset, d.minutes, d.fixed_steps, s.data, s.models, !s.texts.heldout_path.empty()};
  s.plan = make_plan(d.out, plan_in, opt.fresh, d.log);                             // 5. steps per model
  s.training = train_in_segments(s.runs, s.plan, s.data, d.out, opt.fresh, d.log);  // 6. training
  if (s.training.interrupted) return DemoOutcome::interrupted;
  evaluate_runs(s.runs, {d.preset, s.texts, s.data, s.plan.tc}, opt.fresh, d.log);  // 7. held-out, probes
  const auto report = write_report(d, s.runs);                                      // 8. report
  write_results(d, s, report);                                                      // 9. the table
  d.log.say("done", cat("in ", Progress::format_duration(d.log.elapsed_s()), "; table in ",
                        (d.out / "results.md").string(), report.first.empty() ? "" : cat(", report: ", report.first)));
  return DemoOutcome::completed;
}

}  // namespace gatedlm::demo
