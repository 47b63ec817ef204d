#pragma once
// One segment of a training run (from a new run's first step, or a checkpoint's, to the end
// of the budget, a pause or an interrupt): the model, optimizer, spike detector, metrics log
// and clocks the parts of the loop share, and one method per job (a step, its record, an
// evaluation, a probe, a checkpoint, the summary, stopping).
//
// Every rank runs the same sequence of collective calls (gradient sums, loss gathers,
// evaluation, the stop decisions); rank 0 alone writes the run directory.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/progress.h"
#include "dist/gradient_sum.h"
#include "io/token_dataset.h"
#include "model/model.h"
#include "train/data_parallel.h"
#include "train/interrupt.h"
#include "train/metrics_log.h"
#include "train/moe_balance.h"
#include "train/optimizer.h"
#include "train/spikes.h"
#include "train/train_request.h"

namespace gatedlm::train {

// The run's elapsed seconds: those of earlier segments (from the checkpoint) plus this one's.
class RunClock {
 public:
  explicit RunClock(double before) : before_(before), start_(std::chrono::steady_clock::now()) {}
  double elapsed() const {
    return before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  double before() const { return before_; }

 private:
  double before_;
  std::chrono::steady_clock::time_point start_;
};

// The token streams a run trains and evaluates on.
struct TrainingData {
  const io::DatasetManifest& manifest;
  const std::vector<int32_t>& train;
  const std::vector<int32_t>& val;
};

class TrainingSession {
 public:
  TrainingSession(const TrainRequest& req, RunSetup& setup, const TrainingData& data, dist::Communicator& comm,
                  const MicroBatchShare& share);
  // Trains to the end of the budget, a pause (stop_at_step, stop_after_s) or a signal.
  TrainOutcome run();

 private:
  // One optimizer step's numbers.
  struct Step {
    double loss = 0, grad_norm = 0, lr = 0, seconds = 0;
  };

  TrainOutcome run_steps();
  void announce() const;
  bool resume_evaluation_missing();
  bool at_stop_step() const;
  bool budget_left() const;
  bool time_is_up();
  std::optional<Step> train_step();
  bool accumulate_gradients();
  void fail_if_not_finite(double loss, double norm);
  void record_step(const Step& step);
  double tokens_per_s(const Step& step) const;
  void fix_minutes_budget();
  void bookkeeping_after_step(const Step& step);
  TrainOutcome finish();

  void save();
  bool evaluate();
  void probe();
  void write_summary(const std::string& outcome);
  TrainOutcome stop_interrupted();
  void record(const nlohmann::json& rec);

  const TrainRequest& req_;
  const RunSetup& setup_;
  const TrainConfig& tc_;
  TrainingState& state_;
  const TrainingData data_;
  const std::filesystem::path run_;
  dist::Communicator& comm_;
  const MicroBatchShare share_;
  const bool rank0_;
  const double val_bytes_per_token_;

  model::Model<float> model_;
  AdamW<float> optimizer_;
  SpikeDetector spikes_;
  std::optional<MetricsWriter> metrics_;  // rank 0 writes the run directory
  dist::GradientSum grad_sum_;
  StepBalance balance_;  // MoE: the step's expert loads (train/moe_balance.h)
  RunClock clock_;
  std::optional<Progress> progress_;
  std::optional<InterruptHandling> interrupts_;  // this run's stop requests, while run() runs

  // This rank's micro-batch losses and MoE auxiliary losses of the current step.
  std::vector<double> micro_losses_, micro_lb_, micro_z_;
  double train_seconds_ = 0;   // time in training steps (not evaluation or saving), this segment
  int64_t trained_tokens_ = 0;  // tokens trained this segment
  nlohmann::json last_eval_;    // the last evaluation record
  int64_t first_step_ = 0;      // the step this segment started from
  bool out_of_time_ = false;    // req.stop_after_s reached: a pause, never the end of the run
  // What the current step has done already (a resumed run's step is already checkpointed).
  bool saved_at_step_ = false, evaluated_at_step_ = false, probed_at_step_ = false;
};

}  // namespace gatedlm::train
