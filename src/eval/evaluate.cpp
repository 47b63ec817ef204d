#include "eval/evaluate.h"

#include <cmath>

#include "core/error.h"
#include "train/batches.h"

namespace gatedlm::eval {

EvalResult evaluate(model::Model<float>& model, const std::vector<int32_t>& stream, int32_t bos, int64_t seq_len,
                    int64_t max_tokens, int64_t batch_size, double bytes_per_token) {
  const auto offsets = train::evaluation_offsets(static_cast<int64_t>(stream.size()), seq_len, max_tokens);
  if (offsets.empty())
    fail("evaluation needs at least ", seq_len, " tokens, the held-out stream has ", stream.size());
  double total = 0.0;
  int64_t tokens = 0;
  for (size_t first = 0; first < offsets.size(); first += batch_size) {
    const int64_t rows = std::min<int64_t>(batch_size, static_cast<int64_t>(offsets.size() - first));
    train::Batch b{rows, seq_len, std::vector<int32_t>(rows * seq_len), std::vector<int32_t>(rows * seq_len)};
    for (int64_t r = 0; r < rows; ++r) train::fill_window(b, r, stream, offsets[first + r], bos);
    const double mean = model.forward(b.inputs.data(), b.targets.data(), rows, seq_len);
    total += mean * static_cast<double>(model.counted_targets());
    tokens += model.counted_targets();
  }
  if (!(bytes_per_token > 0) || !std::isfinite(bytes_per_token))
    fail("evaluation: ", bytes_per_token, " source bytes per token cannot give bits per byte (the data's byte count "
         "is missing or zero)");
  if (!std::isfinite(total))
    fail("evaluation: the loss is ", total, " (non-finite) over ", tokens,
         " tokens: the model gives NaN or Inf logits (check the checkpoint's weights)");
  EvalResult r;
  r.tokens = tokens;
  r.loss = total / static_cast<double>(tokens);
  r.ppl = std::exp(r.loss);
  r.bpb = r.loss / (bytes_per_token * std::log(2.0));
  return r;
}

}  // namespace gatedlm::eval
