#include "demo/plan.h"

#include <algorithm>
#include <cmath>

#include "analysis/training_probe.h"
#include "core/error.h"
#include "model/config.h"

namespace gatedlm::demo {

using nlohmann::json;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A probe or an analysis pass runs at batch 1 with every layer's attention kept: about a
// third of the batched evaluation's speed.
constexpr double kProbeSlowdown = 3.0;
// Growing the final step is worth a schedule change only when it adds this share of the
// plan (at least one step): the measured speed wobbles by a few percent from segment to
// segment, and each change moves the learning rate of the steps still to come.
constexpr double kTakeBackShare = 0.02;
// A cut smaller than this share of the plan (rounded down) is not made: the reserve's margins
// absorb the few seconds, and the wobble does not ratchet the schedule down step by step.
constexpr double kCutTolerance = 0.005;

}  // namespace

SideWork side_work(const Preset& preset, const train::TrainConfig& tc, int64_t val_tokens, bool heldout) {
  SideWork w;
  w.evals = preset.evals;
  w.eval_tokens = std::min<int64_t>(tc.eval_tokens > 0 ? tc.eval_tokens : val_tokens, val_tokens);
  w.probes = preset.probes;
  w.probe_tokens = tc.probe_windows * tc.seq_len;
  w.saves = preset.saves;
  w.heldout_tokens = heldout ? preset.heldout_tokens : 0;
  w.analyze_tokens = preset.analyze_sequences * preset.analyze_seq_len;
  return w;
}

double in_training_side_s(const SideWork& w, double fwd_tps) {
  const double eval_s = static_cast<double>(w.evals * w.eval_tokens) / fwd_tps;
  const double probe_s = kProbeSlowdown * static_cast<double>(w.probes * w.probe_tokens) / fwd_tps;
  return eval_s + probe_s;
}

double reserve_seconds(const SideWork& w, double fwd_tps) {
  const double heldout_s = static_cast<double>(w.heldout_tokens) / fwd_tps;
  const double save_s = 1.0 * static_cast<double>(w.saves + 1);
  // Per model, twice over (the machine may be slower than the probe said): evaluations and
  // probes during training, the held-out evaluation, checkpoints and 2 s of loading; then the
  // analysis (the gated model's takes a second pass) and 10 s for the report.
  const double analyze_s = kProbeSlowdown * static_cast<double>(w.analyze_tokens) / fwd_tps;
  return 2 * (in_training_side_s(w, fwd_tps) + heldout_s + save_s + 2.0) + analyze_s + 10.0;
}

StepPlan steps_for_budget(double seconds_left, double reserve_s, double pair_step_s, int64_t min_steps) {
  StepPlan p;
  p.training_s = seconds_left - reserve_s;
  const double fits = p.training_s / pair_step_s;
  p.below_minimum = !(fits >= static_cast<double>(min_steps));
  p.steps = p.below_minimum ? min_steps : static_cast<int64_t>(fits);
  return p;
}

train::TrainConfig planned_train_config(const Preset& preset, int64_t steps) {
  json j = preset.train;
  j["steps"] = steps;
  j["warmup"] = std::max<int64_t>(1, std::llround(preset.warmup_fraction * static_cast<double>(steps)));
  j["eval_every"] = std::max<int64_t>(1, ceil_div(steps, preset.evals));
  j["save_every"] = std::max<int64_t>(1, ceil_div(steps, preset.saves));
  j["probe_every"] = std::max<int64_t>(1, ceil_div(steps, preset.probes));
  train::TrainConfig tc = train::train_config_from_json(j, preset.path + " (train)");
  tc.validate();
  return tc;
}

// ---------------------------------------------------------------------------------------
// Segments

SegmentPlanner::SegmentPlanner(const BudgetClock& clock, int64_t done, int64_t final_step)
    : clock_(clock), capped_(true), done_(done), final_(final_step), pair_s_(clock.probe_pair_s) {
  if (!(clock.probe_pair_s > 0)) fail("demo: a time-capped plan needs the probe's seconds per step");
}

SegmentPlanner SegmentPlanner::fixed_steps(int64_t steps) {
  SegmentPlanner p;
  p.final_ = steps;
  return p;
}

double SegmentPlanner::training_left_s(double now_s) const {
  // The time after training grows with the slowdown (evaluations run on the same cores).
  const double slowdown = std::max(1.0, pair_s_ / clock_.probe_pair_s);
  return clock_.deadline_s - now_s - clock_.reserve_s * slowdown;
}

Segment SegmentPlanner::next(double now_s) const {
  Segment s;
  s.target = final_;
  s.final = true;
  if (!capped_ || done_ >= final_) return s;
  s.seconds = std::max(2.0, training_left_s(now_s) / (first_ ? 16.0 : 8.0));
  s.target = std::min(final_, done_ + std::max<int64_t>(1, static_cast<int64_t>(s.seconds / pair_s_)));
  s.final = s.target == final_;
  // 1.5x slack: the cap is there for a slowdown, which then costs at most one short segment.
  s.baseline_cap_s = 1.5 * s.seconds * clock_.baseline_share;
  return s;
}

// Why the final step is planned again at every segment, and how the learning rate follows:
// the machine's speed can change at any time (other programs take the cores for a few
// minutes, then leave), so no step count fixed before training can both hold the budget and
// use it. The planner therefore keeps one final step, which every segment's request hands
// the trainer as its step budget: the trainer's cosine always ends at min_lr at its planned
// step count, so the schedule ends where training ends, whatever was re-planned on the way.
// Both directions: a cut when the machine is slower than planned, taken back when it is
// quiet again, and more steps than planned when it is quicker than the speed probe said
// (which ran on a busier moment). A change after warmup moves the learning rate of the steps
// still to come (a cut lowers it, a take-back raises it); kTakeBackShare and kCutTolerance
// keep the wobble of the measured speed from moving it back and forth. (Keeping the rate
// continuous would need the trainer to store where a re-plan stretched its cosine.)
std::optional<Replan> SegmentPlanner::record(int64_t reached, double pair_s, double now_s) {
  first_ = false;
  done_ = std::max(done_, reached);
  if (!capped_ || !(pair_s > 0)) return std::nullopt;
  pair_s_ = pair_s;
  const double slowdown = pair_s / clock_.probe_pair_s;
  slowest_ = std::max(slowest_, slowdown);
  if (done_ >= final_) return std::nullopt;  // the runs have ended
  const double left_s = std::max(0.0, training_left_s(now_s));
  const int64_t fits = done_ + static_cast<int64_t>(left_s / pair_s);
  const int64_t wanted = std::max(fits, done_);
  const double planned = static_cast<double>(clock_.planned_steps);
  const bool cut = wanted < final_ - static_cast<int64_t>(kCutTolerance * planned);
  const bool grow = wanted >= final_ + std::max<int64_t>(1, std::llround(kTakeBackShare * planned));
  if (!cut && !grow) return std::nullopt;
  const Replan change{done_, final_, wanted, slowdown};
  final_ = wanted;
  replans_.push_back(change);
  return change;
}

train::TrainRequest segment_request(const RunInfo& run, const train::TrainConfig& planned, const std::string& data_dir,
                                    int64_t final_step, int64_t stop_at, bool resume, double cap_s) {
  train::TrainRequest req;
  req.out = run.dir;
  req.config = planned;
  req.config.steps = final_step;  // the schedule's length: the cosine reaches min_lr at the final step
  req.stop_at_step = stop_at;
  req.stop_is_final = stop_at == final_step;
  req.stop_after_s = cap_s;
  req.probe = analysis::make_training_probe();
  req.model_config = run.config_path;  // on a resume: checked against the run's
  req.data = data_dir;
  req.resume = resume;
  if (resume) req.explicit_flags = {"steps"};  // the one hyper-parameter a re-plan changes
  return req;
}

}  // namespace gatedlm::demo
