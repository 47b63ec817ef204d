#pragma once
// The data-parallel side of training (design.md: train/ receives a dist::Communicator;
// one process is the same code with one rank).
//
//   - rank 0 alone sets the run up (new run or resume) and writes the run directory;
//     it hands the weights, optimizer moments and state to the other ranks;
//   - a step's grad_accum micro-batches (as saved in RUN/train_config.json) are those
//     one process would draw; rank r takes the contiguous share
//     [r * grad_accum / N, (r+1) * grad_accum / N);
//   - losses and evaluation sums are gathered and added in the order one process adds
//     them, gradients through dist::GradientSum, so every rank holds the same gradient
//     and takes the same optimizer step.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "eval/evaluate.h"
#include "model/config.h"
#include "train/run_dir.h"
#include "train/train_config.h"

namespace gatedlm::train {

// An error every rank raises at the same point, with the same message: only rank 0
// needs to report it.
struct SharedFailure : Error {
  using Error::Error;
};

// What a run starts from, the same on every rank.
struct RunSetup {
  model::ModelConfig model;
  TrainConfig config;
  std::string data;
  std::vector<float> params, adam_m, adam_v;
  TrainingState state;
};

// Runs `setup` on rank 0 and gives its result to every rank. If it fails on rank 0, every
// rank throws SharedFailure with its message.
RunSetup set_up_on_rank0(dist::Communicator& comm, const std::function<RunSetup()>& setup);

// This rank's micro-batches of every step: global indices [first, first + count).
struct MicroBatchShare {
  int64_t first = 0, count = 1;
};
// Throws SharedFailure when the step's micro-batches cannot be split evenly.
MicroBatchShare micro_batch_share(const TrainConfig& config, const dist::Communicator& comm);

// The step's mean loss from each rank's micro-batch losses, added in micro-batch order.
double step_mean_loss(dist::Communicator& comm, std::span<const double> mine);

// eval::evaluate with the evaluation batches shared among the ranks: the same numbers.
// Nothing (on every rank alike) when should_stop cut the evaluation short on any rank.
std::optional<eval::EvalResult> evaluate_shared(dist::Communicator& comm, model::Model<float>& model,
                                                const std::vector<int32_t>& stream, int32_t bos, int64_t seq_len,
                                                int64_t max_tokens, int64_t batch_size, double bytes_per_token,
                                                const std::function<bool()>& should_stop = {});

}  // namespace gatedlm::train
