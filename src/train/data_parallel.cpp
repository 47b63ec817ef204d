#include "train/data_parallel.h"

#include <exception>
#include <nlohmann/json.hpp>

#include "dist/collectives.h"

namespace gatedlm::train {

RunSetup set_up_on_rank0(dist::Communicator& comm, const std::function<RunSetup()>& setup) {
  if (comm.size() == 1) return setup();
  RunSetup s;
  std::string failure;
  if (comm.rank() == 0) {
    try {
      s = setup();
    } catch (const std::exception& e) {
      failure = e.what();
      if (failure.empty()) failure = "run setup failed";
    }
  }
  failure = dist::broadcast_string(comm, failure);
  if (!failure.empty()) throw SharedFailure(failure);
  // The small part as JSON, then the three parameter-sized buffers as they are.
  nlohmann::json head;
  if (comm.rank() == 0)
    head = {{"model", model::config_to_json(s.model)},
            {"config", train_config_to_json(s.config)},
            {"data", s.data},
            {"state", training_state_to_json(s.state)},
            {"params", s.params.size()}};
  head = nlohmann::json::parse(dist::broadcast_string(comm, comm.rank() == 0 ? head.dump() : ""));
  if (comm.rank() != 0) {
    s.model = model::config_from_json(head.at("model"), "rank 0's model config");
    s.config = train_config_from_json(head.at("config"), "rank 0's training config");
    s.data = head.at("data").get<std::string>();
    s.state = training_state_from_json(head.at("state"), "rank 0's trainer state");
    const size_t n = head.at("params").get<size_t>();
    s.params.resize(n);
    s.adam_m.resize(n);
    s.adam_v.resize(n);
  }
  for (std::vector<float>* v : {&s.params, &s.adam_m, &s.adam_v}) dist::broadcast_values(comm, std::span<float>(*v));
  return s;
}

MicroBatchShare micro_batch_share(const TrainConfig& config, const dist::Communicator& comm) {
  const int64_t ranks = comm.size();
  if (config.grad_accum % ranks != 0)
    throw SharedFailure(cat("a step of this run is ", config.grad_accum,
                            " micro-batches (grad_accum in its train_config.json, over all ranks); ", ranks,
                            " ranks cannot share them evenly: use a number of ranks that divides ",
                            config.grad_accum));
  const int64_t count = config.grad_accum / ranks;
  return {comm.rank() * count, count};
}

double step_mean_loss(dist::Communicator& comm, std::span<const double> mine) {
  const std::vector<double> all = dist::allgather_values(comm, mine);  // in micro-batch order
  double sum = 0.0;
  for (double l : all) sum += l;
  return sum / static_cast<double>(all.size());
}

std::optional<eval::EvalResult> evaluate_shared(dist::Communicator& comm, model::Model<float>& model,
                                                const std::vector<int32_t>& stream, int32_t bos, int64_t seq_len,
                                                int64_t max_tokens, int64_t batch_size, double bytes_per_token,
                                                const std::function<bool()>& should_stop) {
  eval::BatchLosses sums = eval::evaluate_batches(model, stream, bos, seq_len, max_tokens, batch_size, comm.rank(),
                                                  comm.size(), should_stop);
  // Each batch was computed by one rank and is 0 elsewhere; a sum with zeros is exact.
  comm.allreduce_sum(std::span<double>(sums.loss_sum));
  comm.allreduce_sum(std::span<double>(sums.tokens));
  if (dist::any_rank(comm, sums.stopped)) return std::nullopt;
  return eval::eval_result(sums, bytes_per_token);
}

}  // namespace gatedlm::train
