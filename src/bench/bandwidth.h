#pragma once
// The machine's streaming read bound (`gatedlm bench bandwidth`), and what a batch-1 decode
// step reads, so that decode benchmarks report tokens/s as a share of the bound:
//   share = decode tokens/s * weight bytes per token / read bytes per second.
#include <cstdint>

#include "model/model.h"
#include "model/quantized_weights.h"

namespace gatedlm::bench {

struct BandwidthResult {
  int64_t bytes = 0;  // the buffer read each pass
  int threads = 0;
  double best_gbs = 0, median_gbs = 0;  // 1e9 bytes per second: the best read pattern's
  // Best of each pattern: one stream, four prefetched streams, one prefetched stream per thread.
  double pattern_best_gbs[3] = {};
};

// Reads a buffer of `bytes` (touched first) `reps` times in each of three patterns, alternated,
// with `threads` OpenMP threads, each pass a vectorised XOR over 64-bit words split evenly
// between the threads: front to back, in four parts per thread read side by side with
// software prefetches (faster on some CPUs, bandwidth.cpp), and front to back with software
// prefetches (the decode kernels' order). best_gbs is the best pass of any, median_gbs the
// highest of the patterns' medians.
BandwidthResult measure_read_bandwidth(int64_t bytes, int reps, int threads);

// The weight bytes one batch-1 decode step reads: every weight matrix once in its stored type
// (`quantized` null: fp32), the embedding table only when it is also the LM head (else one
// row), norms and other vectors included. MoE layers count top_k of their n_experts experts
// (plus the shared ones).
int64_t decode_bytes_per_token(const model::Model<float>& m, const model::QuantizedWeights* quantized);

}  // namespace gatedlm::bench
