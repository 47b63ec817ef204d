#include "eval/score.h"

#include <cmath>

#include "core/error.h"

namespace gatedlm::eval {

ScoreResult score_sequences(model::Model<float>& m, const std::vector<std::vector<int32_t>>& sequences,
                            const std::string& source, const std::string& checkpoint) {
  ScoreResult r;
  double total = 0.0;
  for (const auto& seq : sequences) {
    const int64_t len = static_cast<int64_t>(seq.size());
    if (len < 2) fail(source, ": a sequence of ", len, " token(s); scoring needs 2 or more");
    std::vector<int32_t> targets(len, -1);
    for (int64_t t = 0; t + 1 < len; ++t) targets[t] = seq[t + 1];
    m.forward(seq.data(), targets.data(), 1, len);
    std::vector<double> lp;
    lp.reserve(static_cast<size_t>(len - 1));
    for (int64_t t = 0; t + 1 < len; ++t) {
      total += m.token_losses()[t];
      lp.push_back(-static_cast<double>(m.token_losses()[t]));
    }
    r.tokens += len - 1;
    r.logprobs.push_back(std::move(lp));
  }
  if (r.tokens == 0) fail(source, ": no sequences to score");
  r.mean_loss = total / static_cast<double>(r.tokens);
  if (!std::isfinite(r.mean_loss))
    fail("the mean loss over ", source, " is ", r.mean_loss, " (non-finite): the checkpoint ", checkpoint,
         " gives NaN or Inf logits");
  return r;
}

}  // namespace gatedlm::eval
