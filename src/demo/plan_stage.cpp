#include "demo/plan_stage.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/format.h"
#include "core/progress.h"
#include "demo/speed_probe.h"
#include "io/token_dataset.h"
#include "train/train_config.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kMinSteps = 10;

BudgetClock clock_from(const json& calibration, double minutes, int64_t steps) {
  BudgetClock c;
  c.deadline_s = minutes * 60.0;
  c.reserve_s = calibration.value("reserve_s", 0.0);
  const double b = calibration.value("baseline_step_s", 0.0), g = calibration.value("gated_step_s", 0.0);
  c.probe_pair_s = b + g;
  c.baseline_share = c.probe_pair_s > 0 ? b / c.probe_pair_s : 0.5;
  c.planned_steps = steps;
  return c;
}

// Measures both models and plans the steps the budget allows; returns plan["calibration"].
json calibrate(const PlanInputs& in, const train::TrainConfig& tc, int64_t& steps, const StageLog& log) {
  log.say("plan", "measuring the speed of both models on this machine ...");
  const io::TokenDataset dataset = io::TokenDataset::open(in.data.data_dir);
  const std::vector<int32_t> train_ids = dataset.load_split("train");
  const std::vector<int32_t> val_ids = dataset.load_split("val");
  if (static_cast<int64_t>(train_ids.size()) < tc.seq_len + 1)
    fail(in.data.data_dir, ": the training split has ", train_ids.size(), " tokens, fewer than one sequence");
  const int32_t bos = dataset.manifest().bos_id;
  const Speed sb = measure_speed(in.models.baseline, tc, train_ids, val_ids, bos);
  const Speed sg = measure_speed(in.models.gated, tc, train_ids, val_ids, bos);
  const Calibration cal{sb.step_s, sg.step_s, std::min(sb.fwd_tps, sg.fwd_tps)};
  const SideWork work = side_work(in.preset, tc, dataset.manifest().val.tokens, in.heldout);
  const double reserve_s = reserve_seconds(work, cal.forward_tokens_per_s);
  const double side_s = in_training_side_s(work, cal.forward_tokens_per_s);
  const double elapsed_s = log.elapsed_s();
  const StepPlan sp = steps_for_budget(in.minutes * 60.0 - elapsed_s, reserve_s, cal.pair_step_s(), kMinSteps);
  steps = sp.steps;
  log.say("plan", cat("a step takes ", sb.step_s, " s (baseline) and ", sg.step_s, " s (gated); ",
                      Progress::format_duration(sp.training_s), " left for training -> ", steps, " steps per model (",
                      thousands(steps * tc.tokens_per_step()), " tokens each); ", work.evals, " evaluations of ",
                      thousands(work.eval_tokens), " tokens and ", work.probes, " probes during training take about ",
                      fixed(side_s, 1), " s per model"));
  if (sp.below_minimum)
    log.say("plan", cat("NOTE: the budget of ", in.minutes, " minutes is too small for this machine; training ",
                        kMinSteps, " steps anyway (give more --minutes or a smaller --preset)"));
  return {{"baseline_step_s", sb.step_s},
          {"gated_step_s", sg.step_s},
          {"forward_tokens_per_s", cal.forward_tokens_per_s},
          {"reserve_s", reserve_s},
          {"evaluation_and_probes_s", side_s},
          {"training_s", sp.training_s},
          {"elapsed_before_training_s", elapsed_s}};
}

}  // namespace

DemoPlan make_plan(const fs::path& out, const PlanInputs& in, bool fresh, const StageLog& log) {
  const Preset& preset = in.preset;
  json train_json = preset.train;
  train_json["steps"] = 1;  // a placeholder: the batch shape is what the speed probe needs
  const train::TrainConfig shape = train::train_config_from_json(train_json, preset.path + " (train)");
  if (shape.seq_len > in.models.baseline.max_seq_len)
    fail(preset.path, ": train.seq_len ", shape.seq_len, " exceeds model.max_seq_len ", in.models.baseline.max_seq_len);
  const std::string key = stage_key({"plan", 2, preset.file_sha, in.minutes, in.fixed_steps, in.data.data_key});
  const fs::path path = out / "plan.json";
  DemoPlan p;
  p.record = read_json_or_null(path.string());
  int64_t steps = 0;
  if (!fresh && p.record.is_object() && p.record.value("key", "") == key &&
      p.record.value("steps", json()).is_number_integer() && p.record["steps"].get<int64_t>() > 0) {
    steps = p.record["steps"].get<int64_t>();
    log.say("plan", cat("reusing the plan in ", path.string(), ": ", steps, " steps per model"));
  } else {
    p.record = {{"key", key}, {"preset", preset.name}, {"preset_file", preset.path}, {"minutes", in.minutes}};
    if (in.fixed_steps > 0) {
      steps = in.fixed_steps;
      p.record["budget"] = "steps";
      log.say("plan", cat(steps, " steps per model (fixed)"));
    } else {
      p.record["budget"] = "minutes";
      p.record["calibration"] = calibrate(in, shape, steps, log);
    }
    p.record["steps"] = steps;
  }
  if (p.record.contains("calibration") && p.record["calibration"].is_object()) {
    const BudgetClock clock = clock_from(p.record["calibration"], in.minutes, steps);
    if (clock.probe_pair_s > 0) p.clock = clock;
  }
  p.tc = planned_train_config(preset, steps);
  p.record["train_config"] = train::train_config_to_json(p.tc);
  p.record["tokens_per_model"] = steps * p.tc.tokens_per_step();
  save_plan(out, p);
  return p;
}

void save_plan(const fs::path& out, const DemoPlan& plan) {
  write_file_atomic((out / "plan.json").string(), plan.record.dump(2) + "\n");
}

}  // namespace gatedlm::demo
