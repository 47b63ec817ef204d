#include "train/trainer.h"

#include <filesystem>
#include <memory>

#include "dist/communicator.h"
#include "io/token_dataset.h"
#include "train/data_parallel.h"
#include "train/run_setup.h"
#include "train/training_session.h"

namespace gatedlm::train {

TrainOutcome run_training(const TrainRequest& request) {
  std::unique_ptr<dist::Communicator> own_comm = request.comm ? nullptr : dist::single_process();
  dist::Communicator& comm = request.comm ? *request.comm : *own_comm;
  // --grad-accum is per rank; the run directory records the step's global micro-batches.
  TrainRequest req = request;
  req.config.grad_accum *= comm.size();
  RunDirHold hold;  // rank 0 holds the run's lock for the whole run
  RunSetup setup = set_up_run(req, comm, hold);
  const MicroBatchShare share = micro_batch_share(setup.config, comm);
  const io::TokenDataset data = io::TokenDataset::open(setup.data);
  const std::vector<int32_t> train_stream = data.load_split("train");
  const std::vector<int32_t> val_stream = data.load_split("val");
  try {
    TrainingSession session(req, setup, TrainingData{data.manifest(), train_stream, val_stream}, comm, share);
    return session.run();
  } catch (...) {
    clean_up_failed_start(req, comm, hold);
    throw;
  }
}

}  // namespace gatedlm::train
