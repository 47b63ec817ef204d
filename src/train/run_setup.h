#pragma once
// What a training run starts from, set up and checked before anything is written: a new
// run (model config or --init-from weights, checked against its data and memory, then its
// directory created, locked and described) or a resumed one (locked, its checkpoint loaded,
// the budget flags merged into the checkpoint's hyper-parameters, metrics.jsonl cut back to
// the checkpoint's step). Rank 0 does it and hands the result to every rank.
#include <optional>

#include "train/data_parallel.h"
#include "train/run_dir.h"
#include "train/train_request.h"

namespace gatedlm::dist {
class Communicator;
}

namespace gatedlm::train {

// Rank 0's hold on the run directory for the whole run.
struct RunDirHold {
  std::optional<RunLock> lock;
  bool created = false;  // made by this run: removed again if the run fails before its first checkpoint
};

// The run's setup on every rank (SharedFailure on the other ranks when rank 0 fails).
// req.config.grad_accum is already the step's global count.
RunSetup set_up_run(const TrainRequest& req, dist::Communicator& comm, RunDirHold& hold);

// After a failure: a new run that never reached its first checkpoint leaves nothing behind
// (what it wrote is cleared, the directory removed if it made it); a diverged run keeps its
// summary ("non-finite") for the record. Rank 0 only.
void clean_up_failed_start(const TrainRequest& req, const dist::Communicator& comm, const RunDirHold& hold);

}  // namespace gatedlm::train
