#pragma once
// Next-token scoring of given token-id sequences (`gatedlm score`, the Python package's
// Model.score): each sequence on its own, batch 1, ids used exactly as given.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace gatedlm::eval {

struct ScoreResult {
  int64_t tokens = 0;      // predicted tokens: sum over sequences of (length - 1)
  double mean_loss = 0;    // mean next-token cross-entropy over them, nats
  std::vector<std::vector<double>> logprobs;  // [sequence][t]: log p(s[t+1] | s[..t])
};

// Every sequence needs 2 ids or more (checked by the caller, e.g. io::read_token_ids).
// Throws naming `source` and `checkpoint` when the mean loss is NaN or infinite.
ScoreResult score_sequences(model::Model<float>& m, const std::vector<std::vector<int32_t>>& sequences,
                            const std::string& source, const std::string& checkpoint);

}  // namespace gatedlm::eval
