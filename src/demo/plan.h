#pragma once
// The demo's budget plan, as pure functions of what was measured (no clock, no files), so
// that it is tested with simulated timings (tests/unit/demo/test_demo_plan.cpp):
//   - the step count a time budget allows: the speed probe's seconds per step of both models
//     against the time left after everything the demo does besides training;
//   - the training config for a step count: warmup, and the evaluations, probes and
//     checkpoints of the preset spread evenly over the run;
//   - the segment plan: both models train in interleaved segments (the baseline for about
//     its share of the segment's time, the gated model then to exactly the same step); after
//     each segment the final step is planned again from the speed just measured.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "demo/models.h"
#include "demo/preset.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace gatedlm::demo {

// What the speed probe measured on this machine.
struct Calibration {
  double baseline_step_s = 0, gated_step_s = 0;  // one optimizer step
  double forward_tokens_per_s = 0;               // evaluation speed (the slower model's)
  double pair_step_s() const { return baseline_step_s + gated_step_s; }
};

// The work besides training steps, per model.
struct SideWork {
  int64_t evals = 0, eval_tokens = 0;    // validation evaluations (the last is the final one), tokens each
  int64_t probes = 0, probe_tokens = 0;  // probes during training, tokens each (batch 1, attention kept)
  int64_t saves = 0;                     // checkpoints
  int64_t heldout_tokens = 0;            // 0: no held-out evaluation
  int64_t analyze_tokens = 0;            // the final analysis's windows
};
SideWork side_work(const Preset& preset, const train::TrainConfig& tc, int64_t val_tokens, bool heldout);
// Seconds of evaluation and probing during training, per model, at `forward_tokens_per_s`.
double in_training_side_s(const SideWork& work, double forward_tokens_per_s);
// Seconds the whole demo needs besides training steps (both models, report included), with margins.
double reserve_seconds(const SideWork& work, double forward_tokens_per_s);

struct StepPlan {
  int64_t steps = 0;
  double training_s = 0;       // the time the budget leaves for training
  bool below_minimum = false;  // the budget fits fewer than min_steps: min_steps are trained anyway
};
StepPlan steps_for_budget(double seconds_left, double reserve_s, double pair_step_s, int64_t min_steps = 10);

// The preset's train config for `steps` steps: warmup = warmup_fraction of them, and
// eval_every / probe_every / save_every that spread the preset's evals, probes and saves.
train::TrainConfig planned_train_config(const Preset& preset, int64_t steps);

// The budget a time-capped plan holds, fixed when the steps are planned.
struct BudgetClock {
  double deadline_s = 0;        // the demo's budget, in seconds since it started
  double reserve_s = 0;         // time needed besides training steps at the probe's speed
  double probe_pair_s = 0;      // seconds per step of both models, as the probe measured
  double baseline_share = 0.5;  // the baseline's part of probe_pair_s
  int64_t planned_steps = 0;    // the plan's step count (a re-plan by less than a share of it is not made)
};

struct Segment {
  int64_t target = 0;         // both models train to this step
  double seconds = 0;         // the segment's expected length
  double baseline_cap_s = 0;  // the baseline's wall-clock cap (0: none); the gated model follows its step
  bool final = false;         // target is the final step: the runs end there
};

// A change of the final step, in plan.json's "replans".
struct Replan {
  int64_t at_step = 0, from = 0, to = 0;
  double slowdown = 0;  // seconds per step pair against the probe's
};

class SegmentPlanner {
 public:
  // A time budget. `done`: the step both runs have reached (a resumed demo); `final_step`:
  // the final step their schedule has so far (the plan's, or an earlier re-plan's).
  SegmentPlanner(const BudgetClock& clock, int64_t done, int64_t final_step);
  // A fixed step count: one segment to it, never re-planned.
  static SegmentPlanner fixed_steps(int64_t steps);

  // The next segment, `now_s` seconds after the demo started: about 1/8 of the training time
  // left (1/16 first, to notice a slowdown early), at least 2 seconds, at the speed measured
  // last. When the final step is reached (or a cut made it the step already reached), the
  // segment ends the runs there.
  Segment next(double now_s) const;
  // Both models reached `reached`, at `pair_s` seconds per step pair over the segment (0: not
  // measured); plans the final step again from the time left at `now_s`. Returns the change,
  // if the final step moved.
  std::optional<Replan> record(int64_t reached, double pair_s, double now_s);

  int64_t done() const { return done_; }
  int64_t final_step() const { return final_; }
  bool capped() const { return capped_; }
  double slowest() const { return slowest_; }  // the largest seconds per step pair against the probe's (0: none)
  const std::vector<Replan>& replans() const { return replans_; }

 private:
  SegmentPlanner() = default;
  double training_left_s(double now_s) const;
  BudgetClock clock_;
  bool capped_ = false;
  int64_t done_ = 0, final_ = 0;
  double pair_s_ = 0;  // the speed measured last (the probe's at first)
  double slowest_ = 0;
  bool first_ = true;
  std::vector<Replan> replans_;
};

// The trainer's request for one run in one segment: train to `stop_at` (ending the run
// there when it is the final step), on the schedule of `final_step` steps, probing as it goes.
// `resume`: continue the run in run.dir (the step count is then handed over as the budget
// flag a resume may change). cap_s > 0: pause after that many seconds of this call.
train::TrainRequest segment_request(const RunInfo& run, const train::TrainConfig& planned, const std::string& data_dir,
                                    int64_t final_step, int64_t stop_at, bool resume, double cap_s);

}  // namespace gatedlm::demo
