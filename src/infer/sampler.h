#pragma once
// Next-token sampling from logits [vocab]. In order (the usual order of llama.cpp and
// Hugging Face):
//   1. repetition penalty (CTRL): a token already in the history has its logit divided
//      by the penalty when positive, multiplied when negative;
//   2. temperature 0: greedy (the largest logit, the lowest id on ties); stop here;
//   3. p = softmax(logits / temperature);
//   4. top-k: keep the k most probable tokens (ties at the k-th broken by lower id);
//   5. top-p (nucleus): keep the most probable tokens, in descending order, until their
//      mass reaches top_p (at least one);
//   6. min-p: drop tokens with p < min_p * max p;
//   7. renormalise and draw with the seeded generator (one uniform per token).
// Same seed, same logits, same history: same token, on every platform.
#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace gatedlm::infer {

struct SamplingParams {
  double temperature = 1.0;         // 0: greedy
  int64_t top_k = 0;                // 0: off
  double top_p = 1.0;               // 1: off
  double min_p = 0.0;               // 0: off
  double repetition_penalty = 1.0;  // 1: off
  uint64_t seed = 0;
};

// Throws naming the parameter (--temperature, ...) when out of range.
void validate(const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  const SamplingParams& params() const { return p_; }
  // The next token; history = the tokens so far (prompt and generated) for the penalty.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  // The distribution step 7 draws from ([vocab], zeros for filtered tokens; one-hot for
  // greedy): what sample() uses, exposed for tests.
  std::vector<double> distribution(std::span<const float> logits, std::span<const int32_t> history) const;

 private:
  SamplingParams p_;
  Rng rng_;
};

}  // namespace gatedlm::infer
