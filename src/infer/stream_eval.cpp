#include "infer/stream_eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "infer/decoder.h"

namespace gatedlm::infer {

namespace {

// -log softmax(logits)[target], in double.
double token_nll(const float* logits, int64_t vocab, int32_t target) {
  double m = logits[0];
  for (int64_t i = 1; i < vocab; ++i) m = std::max(m, static_cast<double>(logits[i]));
  double s = 0;
  for (int64_t i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(logits[i]) - m);
  return m + std::log(s) - static_cast<double>(logits[target]);
}

}  // namespace

StreamEvalResult stream_eval(model::Model<float>& model, const std::vector<int32_t>& tokens, int64_t window,
                             int64_t sinks, kernels::ElementType kv_type,
                             const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t n = static_cast<int64_t>(tokens.size()) - 1, V = model.config().vocab_size;
  if (n < 1) fail("stream-eval: needs at least two tokens");
  StreamEvalResult r{window, sinks};
  Decoder dec(model, {.slots = 1, .capacity = window > 0 ? 0 : n, .window = window, .sinks = sinks, .kv_type = kv_type});
  const int64_t fill = window > 0 ? sinks + window : n;  // tokens held before the first eviction
  const int64_t first = std::min(fill, n);
  double total = 0, after = 0;
  auto score = [&](const float* logits, int64_t t) {  // logits of token t predict token t + 1
    const double nll = token_nll(logits, V, tokens[t + 1]);
    total += nll;
    ++r.scored;
    if (window > 0 && t >= fill) {
      after += nll;
      ++r.scored_after_fill;
    }
  };
  const float* logits = dec.step(std::vector<Chunk>{{0, std::span(tokens).first(first)}}, /*all_rows=*/true);
  for (int64_t t = 0; t < first; ++t) score(logits + t * V, t);
  const int64_t every = std::max<int64_t>(1, n / 10);
  for (int64_t t = first; t < n; ++t) {
    logits = dec.step(std::vector<Chunk>{{0, std::span(tokens).subspan(t, 1)}});
    score(logits, t);
    if (progress && (t + 1) % every == 0) progress(t + 1, n);
  }
  r.nll = total / static_cast<double>(r.scored);
  r.nll_after_fill = r.scored_after_fill ? after / static_cast<double>(r.scored_after_fill) : 0.0;
  return r;
}

}  // namespace gatedlm::infer
