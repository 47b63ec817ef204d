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
// checkpoint loadable. The directory `latest` names is never removed or overwritten: a
// step saved again while `latest` names it goes to step_NNNNNNNN.resaved (and back to
// step_NNNNNNNN the time after), and the older copy is removed once `latest` has moved.
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
  // The hyper-parameters in force when the checkpoint was written (train_config.json's
  // keys); null in checkpoints written before it was recorded.
  nlohmann::json train_config;
};

struct TrainingCheckpoint {
  model::ModelConfig config;
  std::vector<float> params, adam_m, adam_v;
  TrainingState state;
};

void save_training_checkpoint(const std::string& run_dir, const model::ModelConfig& config,
                              const std::vector<float>& params, const std::vector<float>& adam_m,
                              const std::vector<float>& adam_v, const TrainingState& state, int64_t keep);
// Checks trainer_state.json (step agrees with the checkpoint's directory name, counts are
// non-negative, the loss history finite) and throws naming the file and key.
TrainingCheckpoint load_training_checkpoint(const std::string& run_dir);

// trainer_state.json's content (also how rank 0 hands the state to the other ranks).
nlohmann::json training_state_to_json(const TrainingState& state);
TrainingState training_state_from_json(const nlohmann::json& j, const std::string& source);
// An exclusive flock on RUN/.lock for as long as the object lives: a second writer (train
// or resume of the same run) is refused with a message naming the run and the holder's pid.
// Once held, the temporaries of killed writers are removed (remove_stale_temporaries).
class RunLock {
 public:
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// Removes RUN's "<file>.tmp.<pid>" files (core/atomic_file.h) whose writer no longer runs:
// what a train killed in the middle of a write left behind.
void remove_stale_temporaries(const std::string& run_dir);

// A run directory that never reached its first checkpoint (no `latest`, and only the files
// a starting run writes): it may be started again from scratch without manual cleanup.
bool is_unstarted_run(const std::string& run_dir);
// Removes what a starting run wrote (the lock file stays, it is held by the caller).
void clear_unstarted_run(const std::string& run_dir);

}  // namespace gatedlm::train
