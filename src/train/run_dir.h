#pragma once
// A training run directory:
//   RUN/config.json           the model config
//   RUN/train_config.json     the hyper-parameters
//   RUN/run.json              where the data came from
//   RUN/metrics.jsonl         one record per step and per evaluation
//   RUN/summary.json          written at the end (and on interrupt)
//   RUN/checkpoints/step_00000100/  config.json, model.safetensors, optimizer.safetensors,
//                                   trainer_state.json
//   RUN/latest                the name of the newest complete checkpoint
// A checkpoint is written into a temporary directory, fsynced, renamed into place, and
// only then named in `latest` (atomically), so a crash at any instant leaves the previous
// checkpoint loadable.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"

namespace gatedlm::train {

struct TrainingState {
  int64_t step = 0;  // steps completed
  int64_t tokens_seen = 0;
  double elapsed_s = 0;
  int64_t planned_steps = 0;
  std::vector<double> loss_history;  // the spike detector's window
  std::vector<int64_t> spike_steps;
};

struct TrainingCheckpoint {
  model::ModelConfig config;
  std::vector<float> params, adam_m, adam_v;
  TrainingState state;
};

void save_training_checkpoint(const std::string& run_dir, const model::ModelConfig& config,
                              const std::vector<float>& params, const std::vector<float>& adam_m,
                              const std::vector<float>& adam_v, const TrainingState& state, int64_t keep);
TrainingCheckpoint load_training_checkpoint(const std::string& run_dir);

// trainer_state.json's content (also how rank 0 hands the state to the other ranks).
nlohmann::json training_state_to_json(const TrainingState& state);
TrainingState training_state_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace gatedlm::train
