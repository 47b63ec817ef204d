#include "eval/evaluate.h"

#include <cmath>

#include "core/error.h"
#include "io/token_windows.h"

namespace gatedlm::eval {

BatchLosses evaluate_batches(model::Model<float>& model, const std::vector<int32_t>& stream, int32_t bos,
                             int64_t seq_len, int64_t max_tokens, int64_t batch_size, int64_t shard,
                             int64_t shards, const std::function<bool()>& should_stop) {
  const auto offsets = io::evaluation_offsets(static_cast<int64_t>(stream.size()), seq_len, max_tokens);
  if (offsets.empty())
    fail("evaluation needs at least ", seq_len, " tokens, the held-out stream has ", stream.size());
  const size_t batches = (offsets.size() + batch_size - 1) / batch_size;
  BatchLosses sums{std::vector<double>(batches, 0.0), std::vector<double>(batches, 0.0)};
  for (size_t k = static_cast<size_t>(shard); k < batches; k += static_cast<size_t>(shards)) {
    if (should_stop && should_stop()) {
      sums.stopped = true;
      break;
    }
    const size_t first = k * batch_size;
    const int64_t rows = std::min<int64_t>(batch_size, static_cast<int64_t>(offsets.size() - first));
    io::Batch b{rows, seq_len, std::vector<int32_t>(rows * seq_len), std::vector<int32_t>(rows * seq_len)};
    for (int64_t r = 0; r < rows; ++r) io::fill_window(b, r, stream, offsets[first + r], bos);
    const double mean = model.forward(b.inputs.data(), b.targets.data(), rows, seq_len);
    sums.loss_sum[k] = mean * static_cast<double>(model.counted_targets());
    sums.tokens[k] = static_cast<double>(model.counted_targets());
  }
  return sums;
}

EvalResult eval_result(const BatchLosses& sums, double bytes_per_token) {
  double total = 0.0, tokens = 0.0;
  for (size_t k = 0; k < sums.loss_sum.size(); ++k) {
    total += sums.loss_sum[k];
    tokens += sums.tokens[k];
  }
  if (!(bytes_per_token > 0) || !std::isfinite(bytes_per_token))
    fail("evaluation: ", bytes_per_token, " source bytes per token cannot give bits per byte (the data's byte count "
         "is missing or zero)");
  if (!std::isfinite(total))
    fail("evaluation: the loss is ", total, " (non-finite) over ", tokens,
         " tokens: the model gives NaN or Inf logits (check the checkpoint's weights)");
  EvalResult r;
  r.tokens = static_cast<int64_t>(tokens);
  r.loss = total / tokens;
  r.ppl = std::exp(r.loss);
  r.bpb = r.loss / (bytes_per_token * std::log(2.0));
  return r;
}

EvalResult evaluate(model::Model<float>& model, const std::vector<int32_t>& stream, int32_t bos, int64_t seq_len,
                    int64_t max_tokens, int64_t batch_size, double bytes_per_token) {
  return eval_result(evaluate_batches(model, stream, bos, seq_len, max_tokens, batch_size), bytes_per_token);
}

}  // namespace gatedlm::eval
