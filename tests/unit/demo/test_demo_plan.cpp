// demo/plan.h: the demo's budget plan, driven by simulated segment timings (no wall time):
// the step count a budget allows, the cadence of evaluations, probes and checkpoints, and the
// segment planner, which re-plans the final step after every segment in both directions while
// the learning-rate schedule keeps ending where training ends.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "demo/plan.h"
#include "train/train_config.h"

namespace gatedlm::demo {
namespace {

Preset small_preset() {
  Preset p;
  p.path = "test-preset.json";
  p.train = {{"batch_size", 8}, {"seq_len", 256}, {"lr", 0.003}, {"min_lr", 0.0003}, {"eval_tokens", 32768}};
  p.warmup_fraction = 0.1;
  p.evals = 16;
  p.probes = 12;
  p.saves = 4;
  return p;
}

// A machine whose seconds per step pair are `quiet_s`, times `busy_factor` from busy_from_s
// until busy_until_s (other programs on the cores).
struct Machine {
  double quiet_s = 1.0;
  double busy_from_s = 1e18, busy_until_s = 1e18, busy_factor = 1.0;
  double pair_s_at(double t) const { return t >= busy_from_s && t < busy_until_s ? quiet_s * busy_factor : quiet_s; }
};

struct Simulated {
  double end_s = 0;  // when the last segment ended
  int64_t final_step = 0;
  std::vector<Replan> replans;
  Segment last;
};

// Runs the planner's segments on the machine, step by step, from `start_s`: each segment's
// speed is what its steps took, as the demo measures it from the runs' summaries.
Simulated simulate(SegmentPlanner planner, const Machine& machine, double start_s) {
  double now = start_s;
  Simulated out;
  for (int segment = 0; segment < 100000; ++segment) {
    const Segment seg = planner.next(now);
    const int64_t from = planner.done();
    const double t0 = now;
    for (int64_t s = from; s < seg.target; ++s) now += machine.pair_s_at(now);
    const double pair_s = seg.target > from ? (now - t0) / static_cast<double>(seg.target - from) : 0.0;
    planner.record(seg.target, pair_s, now);
    out.last = seg;
    if (seg.final && planner.final_step() == seg.target) break;
  }
  out.end_s = now;
  out.final_step = planner.final_step();
  out.replans = planner.replans();
  return out;
}

// 15 minutes, 60 s after training, 1 s per step pair on a quiet machine, planning at 20 s.
BudgetClock fifteen_minutes() {
  BudgetClock c;
  c.deadline_s = 900;
  c.reserve_s = 60;
  c.probe_pair_s = 1.0;
  c.baseline_share = 0.5;
  c.planned_steps = steps_for_budget(c.deadline_s - 20, c.reserve_s, c.probe_pair_s).steps;
  return c;
}

TEST(DemoPlan, StepsForABudgetLeaveTheReserveAndKeepAMinimum) {
  const StepPlan p = steps_for_budget(600, 100, 2.0);
  EXPECT_EQ(p.steps, 250);
  EXPECT_DOUBLE_EQ(p.training_s, 500);
  EXPECT_FALSE(p.below_minimum);
  const StepPlan tiny = steps_for_budget(30, 25, 2.0, 10);  // 2.5 steps fit
  EXPECT_EQ(tiny.steps, 10);
  EXPECT_TRUE(tiny.below_minimum);
}

TEST(DemoPlan, TrainConfigSpreadsEvaluationsProbesAndCheckpointsOverTheRun) {
  const Preset preset = small_preset();
  for (int64_t steps : {8, 100, 904, 1000}) {
    const train::TrainConfig tc = planned_train_config(preset, steps);
    EXPECT_EQ(tc.steps, steps);
    EXPECT_EQ(tc.warmup, std::max<int64_t>(1, std::llround(0.1 * static_cast<double>(steps))));
    // Every eval_every steps and once at the end: the preset's count, never more.
    const auto count = [&](int64_t every) { return steps / every + (steps % every ? 1 : 0); };
    EXPECT_LE(count(tc.eval_every), preset.evals) << steps;
    EXPECT_GE(count(tc.eval_every), std::min<int64_t>(steps, preset.evals - 1)) << steps;
    EXPECT_LE(count(tc.probe_every), preset.probes) << steps;
    EXPECT_GE(count(tc.probe_every), std::min<int64_t>(steps, preset.probes - 1)) << steps;
    EXPECT_LE(count(tc.save_every), preset.saves) << steps;
    EXPECT_EQ(tc.eval_tokens, 32768);
  }
}

TEST(DemoPlan, ReserveGrowsWithTheWorkBesidesTraining) {
  const Preset preset = small_preset();
  const train::TrainConfig tc = planned_train_config(preset, 900);
  const SideWork with = side_work(preset, tc, 500000, true);
  EXPECT_EQ(with.eval_tokens, 32768);
  EXPECT_EQ(with.probe_tokens, tc.probe_windows * 256);
  const SideWork without = side_work(preset, tc, 500000, false);
  EXPECT_EQ(without.heldout_tokens, 0);
  EXPECT_GT(reserve_seconds(with, 10000), reserve_seconds(without, 10000));
  // Evaluation over a validation split smaller than eval_tokens reads the split.
  EXPECT_EQ(side_work(preset, tc, 1000, true).eval_tokens, 1000);
  // 16 evaluations of 32,768 tokens and 12 probes of 8 x 256 tokens (at a third of the speed).
  EXPECT_NEAR(in_training_side_s(with, 10000), (16 * 32768 + 3.0 * 12 * 2048) / 10000.0, 1e-9);
}

TEST(DemoPlan, AQuietMachineTrainsThePlannedStepsWithinTheBudget) {
  const BudgetClock clock = fifteen_minutes();
  const Simulated run = simulate(SegmentPlanner(clock, 0, clock.planned_steps), Machine{}, 20);
  EXPECT_TRUE(run.replans.empty());
  EXPECT_EQ(run.final_step, clock.planned_steps);
  EXPECT_LE(run.end_s, clock.deadline_s - clock.reserve_s);
}

// Issue 28 row 14: other programs take the cores for two minutes, then stop. The cut made
// while they run is taken back when the machine is quiet again, and the budget is used.
TEST(DemoPlan, ACutIsTakenBackWhenTheMachineIsQuietAgain) {
  const BudgetClock clock = fifteen_minutes();
  Machine machine;
  machine.busy_from_s = 300;
  machine.busy_until_s = 420;
  machine.busy_factor = 1.66;
  const Simulated run = simulate(SegmentPlanner(clock, 0, clock.planned_steps), machine, 20);
  ASSERT_GE(run.replans.size(), 2u);
  EXPECT_LT(run.replans.front().to, run.replans.front().from);  // cut while slow
  bool taken_back = false;
  for (const Replan& r : run.replans) taken_back |= r.to > r.from;
  EXPECT_TRUE(taken_back);
  // The two busy minutes cost about 120 x (1 - 1/1.66) = 48 steps; no more than that is lost.
  EXPECT_GE(run.final_step, clock.planned_steps - 48 - 10);
  EXPECT_LT(run.final_step, clock.planned_steps);
  // Within the budget, with little of it left unused.
  EXPECT_LE(run.end_s, clock.deadline_s - clock.reserve_s);
  EXPECT_GE(run.end_s, clock.deadline_s - clock.reserve_s - 30);
}

TEST(DemoPlan, AMachineSlowToTheEndIsCutNeverGrownBackAndHoldsTheBudget) {
  const BudgetClock clock = fifteen_minutes();
  Machine machine;
  machine.busy_from_s = 300;
  machine.busy_factor = 1.66;
  const Simulated run = simulate(SegmentPlanner(clock, 0, clock.planned_steps), machine, 20);
  ASSERT_FALSE(run.replans.empty());
  for (const Replan& r : run.replans) EXPECT_LT(r.to, r.from) << "at step " << r.at_step;  // never grown back
  // About 280 steps before the slowdown, then the rest of the training time at 1.66 s a step
  // pair, less the reserve's own slowdown.
  const double after_s = clock.deadline_s - 300 - clock.reserve_s * 1.66;
  const double ideal = 280 + after_s / 1.66;
  EXPECT_LE(static_cast<double>(run.final_step), ideal + 2);
  EXPECT_GE(static_cast<double>(run.final_step), ideal - 15);
  // (A cut of less than 0.5 % of the plan is not made: at most that many steps over.)
  const double tolerance_steps = std::floor(0.005 * static_cast<double>(clock.planned_steps));
  EXPECT_LE(run.end_s, clock.deadline_s - clock.reserve_s * 1.66 + 1.66 * (1 + tolerance_steps));
}

// The speed probe caught a busy moment: the machine trains twice as fast, and the budget
// is used for more steps than planned instead of ending early.
TEST(DemoPlan, AMachineQuickerThanTheProbeTrainsMoreStepsWithinTheBudget) {
  const BudgetClock clock = fifteen_minutes();
  Machine machine;
  machine.quiet_s = 0.5;
  const Simulated run = simulate(SegmentPlanner(clock, 0, clock.planned_steps), machine, 20);
  ASSERT_FALSE(run.replans.empty());
  for (const Replan& r : run.replans) EXPECT_GT(r.to, r.from) << "at step " << r.at_step;
  // (900 - 20 - 60) s at 0.5 s per step pair.
  EXPECT_GE(run.final_step, 2 * clock.planned_steps - 40);
  EXPECT_LE(run.end_s, clock.deadline_s - clock.reserve_s);
  EXPECT_GE(run.end_s, clock.deadline_s - clock.reserve_s - 20);
}

TEST(DemoPlan, ACutToTheStepReachedEndsTheRunsThere) {
  BudgetClock clock = fifteen_minutes();
  SegmentPlanner planner(clock, 0, clock.planned_steps);
  planner.record(100, 1.0, 20 + 100);
  // Then so slow that nothing more fits: the final step becomes the one reached.
  const std::optional<Replan> cut = planner.record(120, 50.0, 880);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(planner.final_step(), 120);
  const Segment last = planner.next(880);
  EXPECT_TRUE(last.final);
  EXPECT_EQ(last.target, 120);
}

TEST(DemoPlan, AFixedStepCountIsOneFinalSegmentNeverReplanned) {
  SegmentPlanner planner = SegmentPlanner::fixed_steps(8);
  const Segment s = planner.next(0);
  EXPECT_TRUE(s.final);
  EXPECT_EQ(s.target, 8);
  EXPECT_EQ(s.baseline_cap_s, 0);
  EXPECT_FALSE(planner.record(8, 100.0, 1e6).has_value());
  EXPECT_EQ(planner.final_step(), 8);
}

TEST(DemoPlan, SegmentsStartShortAndCapTheBaselineToItsShare) {
  BudgetClock clock = fifteen_minutes();
  clock.baseline_share = 0.4;
  SegmentPlanner planner(clock, 0, clock.planned_steps);
  const Segment first = planner.next(20);
  EXPECT_NEAR(first.seconds, (900 - 20 - 60) / 16.0, 1e-9);
  EXPECT_EQ(first.target, static_cast<int64_t>(first.seconds / clock.probe_pair_s));
  EXPECT_NEAR(first.baseline_cap_s, 1.5 * first.seconds * 0.4, 1e-9);
  const double now = 20 + static_cast<double>(first.target) * 1.0;
  EXPECT_FALSE(planner.record(first.target, 1.0, now).has_value());  // on plan: nothing to change
  const Segment second = planner.next(now);
  EXPECT_NEAR(second.seconds, (900 - now - 60) / 8.0, 1e-9);
  EXPECT_EQ(second.target, first.target + static_cast<int64_t>(second.seconds / 1.0));
}

// The request hands the trainer the re-planned final step as its step budget, so that its
// cosine reaches min_lr at the last step that runs, not at the step first planned.
TEST(DemoPlan, TheScheduleEndsWhereTrainingEnds) {
  const Preset preset = small_preset();
  const train::TrainConfig planned = planned_train_config(preset, 904);
  RunInfo run;
  run.name = "baseline";
  run.dir = "/tmp/demo/runs/baseline";
  run.config_path = "/tmp/demo/configs/baseline.json";
  const int64_t final_step = 587;
  const train::TrainRequest mid = segment_request(run, planned, "/tmp/demo/data", final_step, 400, true, 12.0);
  EXPECT_EQ(mid.config.steps, final_step);
  EXPECT_EQ(mid.stop_at_step, 400);
  EXPECT_FALSE(mid.stop_is_final);
  EXPECT_DOUBLE_EQ(mid.stop_after_s, 12.0);
  EXPECT_TRUE(mid.resume);
  EXPECT_EQ(mid.explicit_flags, std::vector<std::string>{"steps"});
  EXPECT_TRUE(static_cast<bool>(mid.probe));  // probes during training (probe_every > 0)
  EXPECT_GT(mid.config.probe_every, 0);
  const train::TrainRequest last = segment_request(run, planned, "/tmp/demo/data", final_step, final_step, true, 0);
  EXPECT_TRUE(last.stop_is_final);
  // The last step that runs (0-based final_step - 1) is at the cosine's floor.
  const double span = planned.lr - planned.min_lr;
  EXPECT_NEAR(train::learning_rate(last.config, final_step - 1, last.config.steps), planned.min_lr, 1e-4 * span);
  // (With the first plan's 904 steps it would still be far above it.)
  EXPECT_GT(train::learning_rate(planned, final_step - 1, planned.steps), planned.min_lr + 0.2 * span);
  // A new run starts from the model config and the data.
  const train::TrainRequest start = segment_request(run, planned, "/tmp/demo/data", 904, 50, false, 0);
  EXPECT_FALSE(start.resume);
  EXPECT_TRUE(start.explicit_flags.empty());
  EXPECT_EQ(start.model_config, run.config_path);
  EXPECT_EQ(start.data, "/tmp/demo/data");
}

}  // namespace
}  // namespace gatedlm::demo
