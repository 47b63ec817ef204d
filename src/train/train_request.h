#pragma once
// What a training run is asked to do (TrainRequest) and how it ended (TrainOutcome): the
// trainer's input, read by the run's setup (train/run_setup.h) and its session
// (train/training_session.h) as well as by the loop (train/trainer.h).
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "train/train_config.h"

namespace gatedlm::dist {
class Communicator;
}

namespace gatedlm::model {
struct ModelConfig;
}

namespace gatedlm::train {

// What a probe during training sees: the validation split it takes its windows from.
struct ProbeInput {
  std::span<const int32_t> val;  // the validation token stream
  int32_t bos_id = 0;
  int64_t seq_len = 0;   // window length, BOS included
  int64_t windows = 0;   // number of windows
};
// Probes the weights after a step and returns the fields to record in metrics.jsonl (the
// trainer adds "step"). The probes live in analysis/, above train/: the caller (cli, sweep)
// hands them in. The weights are the training model's; a probe must not change them.
using ProbeFn = std::function<nlohmann::json(const model::ModelConfig& config, std::span<const float> params,
                                             const ProbeInput& input)>;

struct TrainRequest {
  std::string out;             // the run directory
  std::string model_config;    // model config JSON (new runs)
  std::string data;            // dataset directory (new runs; optional on resume)
  std::string init_from;       // optional: start from this checkpoint's weights
  bool resume = false;
  TrainConfig config;          // hyper-parameters after file + flags
  // On resume: the flags the user gave explicitly (only budget flags may change).
  std::vector<std::string> explicit_flags;
  // The ranks of a data-parallel run (null: one process). grad_accum above is per rank.
  dist::Communicator* comm = nullptr;
  // Stop once this many steps are done (0 = run to the budget), keeping the schedule planned
  // for the whole budget: the demo trains two models in interleaved segments under one
  // wall-clock cap. At a non-final stop the run is checkpointed and "paused"; a final stop
  // (stop_is_final) ends it like a completed run (final evaluation, outcome completed).
  int64_t stop_at_step = 0;
  bool stop_is_final = false;
  double stop_after_s = 0;  // > 0: also pause once this call has trained this many seconds
  // Called every config.probe_every steps and at the final step (required when probe_every > 0).
  ProbeFn probe;
  // Called on rank 0 with every record written to metrics.jsonl (steps, evaluations,
  // probes), after it is written: the Python package's live view of a run. False asks this
  // run (and no other) to stop as on Ctrl-C, checkpointed and resumable.
  std::function<bool(const nlohmann::json& record)> on_record;
};

enum class TrainOutcome { completed, interrupted, paused };

}  // namespace gatedlm::train
