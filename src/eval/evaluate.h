#pragma once
// Held-out loss, perplexity and bits per byte over non-overlapping BOS-prefixed windows.
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace gatedlm::eval {

struct EvalResult {
  double loss = 0;  // mean next-token cross-entropy, nats
  double ppl = 0;   // exp(loss)
  double bpb = 0;   // loss * tokens / (bytes * ln 2)
  int64_t tokens = 0;
};

// bytes_per_token: source bytes behind an average token of this stream (for bpb).
EvalResult evaluate(model::Model<float>& model, const std::vector<int32_t>& stream, int32_t bos, int64_t seq_len,
                    int64_t max_tokens, int64_t batch_size, double bytes_per_token);

}  // namespace gatedlm::eval
