#include "demo/segments.h"

#include <filesystem>

#include "core/error.h"
#include "core/format.h"
#include "model/config.h"
#include "train/trainer.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

enum class RunAction { reuse, resume, start, diverged };

json summary_of(const RunInfo& r) { return read_json_or_null((fs::path(r.dir) / "summary.json").string()); }

int64_t steps_in(const json& summary) {
  return summary.is_object() && summary.value("steps", json()).is_number_integer() ? summary["steps"].get<int64_t>()
                                                                                   : 0;
}

// The run directory was started with this run's inputs (and --fresh does not discard it).
bool is_ours(const RunInfo& r, bool fresh) {
  std::error_code ec;
  return !fresh && fs::exists(r.dir, ec) && stamp_matches(r.dir + ".key", r.key);
}

RunAction decide_run(const RunInfo& r, bool fresh) {
  if (!is_ours(r, fresh)) return RunAction::start;
  const json s = summary_of(r);
  const std::string outcome = s.is_object() ? s.value("outcome", "") : "";
  if (outcome == "completed") return RunAction::reuse;
  // The same seed, data and schedule would diverge again.
  if (outcome == "non-finite") return RunAction::diverged;
  std::error_code ec;
  return fs::exists(fs::path(r.dir) / "latest", ec) ? RunAction::resume : RunAction::start;
}

// Where an earlier invocation left both runs: the step both reached and the final step of
// their schedule (RUN/train_config.json's steps, re-planned or not); the plan's otherwise.
std::pair<int64_t, int64_t> resume_point(const std::vector<RunInfo>& runs, int64_t planned, bool fresh) {
  int64_t done = -1, schedule = -1;
  for (const RunInfo& r : runs) {
    const bool ours = is_ours(r, fresh);
    const int64_t at = ours ? steps_in(summary_of(r)) : 0;
    const json tc = ours ? read_json_or_null((fs::path(r.dir) / "train_config.json").string()) : json();
    const int64_t steps =
        tc.is_object() && tc.value("steps", json()).is_number_integer() ? tc["steps"].get<int64_t>() : 0;
    done = done < 0 ? at : std::min(done, at);
    schedule = schedule < 0 ? steps : std::min(schedule, steps);
  }
  done = std::max<int64_t>(done, 0);
  if (schedule < std::max<int64_t>(done, 1)) schedule = planned;  // a new run: the plan's
  return {done, schedule};
}

struct SegmentOutcome {
  int64_t reached = 0;  // the baseline's step after the segment; the gated model follows it
  double pair_s = 0;    // seconds per step of both models over the segment (0: not measured)
  int ran = 0;          // runs the trainer was called for
  bool interrupted = false;
};

void start_run(const RunInfo& r, const train::TrainConfig& tc, int64_t final_step, const StageLog& log) {
  std::error_code ec;
  fs::remove_all(r.dir, ec);
  write_stamp(r.dir + ".key", r.key);
  log.say("train", cat(r.name, " (", model::describe_gate(r.config), "): ", final_step, " steps of ",
                       thousands(tc.tokens_per_step()), " tokens, lr ", tc.lr, " (warmup ", tc.warmup, ", cosine to ",
                       tc.min_lr, "), seed ", tc.seed, " -> ", r.dir));
}

// Trains run i of the segment; false when it was interrupted.
bool train_run(RunInfo& r, const train::TrainRequest& req, const StageLog& log) {
  try {
    return train::run_training(req) != train::TrainOutcome::interrupted;
  } catch (const Error& e) {
    const json s = summary_of(r);
    if (!(s.is_object() && s.value("outcome", "") == "non-finite")) throw;
    log.say("train", cat(r.name, ": DIVERGED: ", e.what()));
    r.diverged = true;
    return true;
  }
}

SegmentOutcome run_segment(std::vector<RunInfo>& runs, const DemoPlan& plan, const PreparedData& data,
                           const Segment& seg, int64_t final_step, bool fresh, bool first, const StageLog& log) {
  SegmentOutcome o;
  o.reached = seg.target;
  double measured_s = 0;
  int measured = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    RunInfo& r = runs[i];
    if (r.diverged) continue;
    const RunAction action = decide_run(r, fresh);
    if (action == RunAction::reuse) {
      if (first) log.say("train", cat(r.name, ": reusing the finished run ", r.dir));
      continue;
    }
    if (action == RunAction::diverged) {
      log.say("train", cat(r.name, ": this run diverged before (non-finite loss); not training it again"));
      r.diverged = true;
      continue;
    }
    const int64_t before = action == RunAction::resume ? steps_in(summary_of(r)) : 0;
    if (action == RunAction::start) start_run(r, plan.tc, final_step, log);
    if (action == RunAction::resume && first) log.say("train", cat(r.name, ": resuming the interrupted run ", r.dir));
    const double cap_s = i == 0 && runs.size() > 1 ? seg.baseline_cap_s : 0.0;
    const int64_t stop_at = i == 0 ? seg.target : o.reached;
    ++o.ran;
    if (!train_run(r,
                   segment_request(r, plan.tc, data.data_dir, final_step, stop_at, action == RunAction::resume, cap_s),
                   log)) {
      log.say("interrupted", cat("the ", r.name, " run is saved; run the same command again to resume it"));
      o.interrupted = true;
      return o;
    }
    if (r.diverged) continue;
    // This segment's pure training speed (the summary's tokens/s leaves out evaluation, probes and saving).
    const json after = summary_of(r);
    const int64_t now_at = after.is_object() ? after.value("steps", before) : before;
    if (i == 0) o.reached = now_at;
    const double tps = after.is_object() && after.value("tokens_per_s", json()).is_number()
                           ? after["tokens_per_s"].get<double>()
                           : 0.0;
    if (now_at > before && tps > 0) {
      measured_s += static_cast<double>(plan.tc.tokens_per_step()) / tps;
      ++measured;
    }
  }
  if (measured > 0) o.pair_s = measured_s * static_cast<double>(runs.size()) / static_cast<double>(measured);
  return o;
}

void say_replan(const Replan& c, int64_t planned, double minutes, const StageLog& log) {
  log.say("train", cat("steps now take ", fixed(c.slowdown, 2), "x the speed probe's time, so ",
                       c.to < c.from ? "fewer" : "more", " fit the budget: both models now stop at step ", c.to,
                       " (planned ", planned, ", was ", c.from,
                       "); the learning-rate schedule is re-planned to end there, to hold --minutes ", minutes));
}

// plan.json's record of the training: the re-plans (an interrupted demo's continuation adds
// to its earlier invocation's), the slowest segment against the probe and, when the runs end
// before the planned step, the cut.
void record_replans(DemoPlan& plan, const SegmentPlanner& planner, const std::filesystem::path& out) {
  json& record = plan.record;
  json replans = record.value("replans", json::array());
  if (!replans.is_array()) replans = json::array();
  for (const Replan& c : planner.replans())
    replans.push_back({{"at_step", c.at_step}, {"from", c.from}, {"to", c.to}, {"slowdown", c.slowdown}});
  const json earlier = record.value("slowest", json(0.0));
  const double slowest = std::max(planner.slowest(), earlier.is_number() ? earlier.get<double>() : 0.0);
  const int64_t planned = plan.tc.steps;
  record.erase("replans");
  record.erase("budget_cut");
  record["slowest"] = slowest;  // seconds per step pair against the probe's, in the slowest segment
  if (!replans.empty()) record["replans"] = replans;
  if (planner.final_step() < planned)
    record["budget_cut"] = {{"planned_steps", planned}, {"trained_steps", planner.final_step()}, {"slowdown", slowest}};
  save_plan(out, plan);
}

}  // namespace

TrainingResult train_in_segments(std::vector<RunInfo>& runs, DemoPlan& plan, const PreparedData& data,
                                 const fs::path& out, bool fresh, const StageLog& log) {
  for (RunInfo& r : runs)
    r.key = stage_key({"run", data.data_key, model::config_to_json(r.config), train::train_config_to_json(plan.tc)});
  const int64_t planned = plan.tc.steps;
  const auto [done, schedule] = resume_point(runs, planned, fresh);
  SegmentPlanner planner =
      plan.clock ? SegmentPlanner(*plan.clock, done, schedule) : SegmentPlanner::fixed_steps(planned);
  const double minutes = plan.clock ? plan.clock->deadline_s / 60.0 : 0.0;
  TrainingResult result;
  bool trained = false;  // false: every run was reused (plan.json keeps what the training recorded)
  for (bool first = true;; first = false) {
    const Segment seg = planner.next(log.elapsed_s());
    const SegmentOutcome o = run_segment(runs, plan, data, seg, planner.final_step(), fresh && first, first, log);
    if (o.interrupted) {
      result.interrupted = true;
      return result;
    }
    if (const auto change = planner.record(o.reached, o.pair_s, log.elapsed_s()))
      say_replan(*change, planned, minutes, log);
    const bool ended = seg.final && o.reached >= seg.target && planner.final_step() == seg.target;
    trained |= o.ran > 0;
    if (ended || o.ran == 0) break;
  }
  result.final_step = planner.final_step();
  if (planner.capped() && trained) record_replans(plan, planner, out);
  // The slowest segment of the training that made the runs (an earlier invocation's, when every run is reused).
  const json recorded = plan.record.value("slowest", json());
  const double slowest = recorded.is_number() ? recorded.get<double>() : 0.0;
  if (slowest > 1.25)
    result.contention_note = cat("tok/s measured under contention: training steps took up to ", fixed(slowest, 2),
                                 "x as long as in the speed probe (another program was using the cores)");
  return result;
}

}  // namespace gatedlm::demo
