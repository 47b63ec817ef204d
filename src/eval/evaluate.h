#pragma once
// Held-out loss, perplexity and bits per byte over non-overlapping BOS-prefixed windows.
#include <cstdint>
#include <functional>
#include <vector>

#include "model/model.h"

namespace gatedlm::eval {

struct EvalResult {
  double loss = 0;  // mean next-token cross-entropy, nats
  double ppl = 0;   // exp(loss)
  double bpb = 0;   // loss * tokens / (bytes * ln 2)
  int64_t tokens = 0;
};

// The sums behind an evaluation, per batch of batch_size windows (batch k holds windows
// k*batch_size ...): summed next-token loss and counted targets. With shards > 1 only the
// batches k with k % shards == shard are computed and the others stay 0, so that several
// processes can share the windows and add the per-batch sums afterwards.
// should_stop, when given, is asked before each batch: once it says true the evaluation
// ends there with `stopped` set and the sums incomplete (a signal is honoured within one
// forward pass, not after the whole held-out stream).
struct BatchLosses {
  std::vector<double> loss_sum;
  std::vector<double> tokens;  // counts, as doubles so that they can be summed with the losses
  bool stopped = false;
};
BatchLosses evaluate_batches(model::Model<float>& model, const std::vector<int32_t>& stream, int32_t bos,
                             int64_t seq_len, int64_t max_tokens, int64_t batch_size, int64_t shard = 0,
                             int64_t shards = 1, const std::function<bool()>& should_stop = {});
// Adds the per-batch sums in batch order. bytes_per_token: source bytes behind an average
// token of this stream (for bpb).
EvalResult eval_result(const BatchLosses& sums, double bytes_per_token);

EvalResult evaluate(model::Model<float>& model, const std::vector<int32_t>& stream, int32_t bos, int64_t seq_len,
                    int64_t max_tokens, int64_t batch_size, double bytes_per_token);

}  // namespace gatedlm::eval
