#pragma once
// Perplexity over a long token stream read through a cache: a streaming window (the
// last W tokens plus K sinks, StreamingLLM) or the full cache. Token t's prediction of
// token t+1 is scored as the text goes by, one token at a time after a first prefill
// of as many tokens as the cache holds without evicting.
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/element_types.h"
#include "model/model.h"

namespace gatedlm::infer {

struct StreamEvalResult {
  int64_t window = 0, sinks = 0;  // window 0: full cache
  int64_t scored = 0;             // predictions scored
  double nll = 0;                 // mean negative log-likelihood (nats)
  int64_t scored_after_fill = 0;  // predictions made once the window had started evicting
  double nll_after_fill = 0;
};

// tokens: the stream (N + 1 ids for N predictions); kv_type: the cache's rows (f32 or f16,
// DecoderOptions::kv_type). progress(done, total) is called now and then.
StreamEvalResult stream_eval(model::Model<float>& model, const std::vector<int32_t>& tokens, int64_t window,
                             int64_t sinks, kernels::ElementType kv_type = kernels::ElementType::f32,
                             const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace gatedlm::infer
