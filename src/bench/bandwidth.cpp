// The streaming read bound and a decode step's weight bytes (bandwidth.h).
#include "bench/bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/median.h"
#include "core/error.h"
#include "kernels/element_types.h"

namespace gatedlm::bench {

namespace {

// XOR of the words (integer: the compiler vectorises it without reassociating floats); the
// result is returned so that the reads cannot be dropped.
uint64_t read_pass(const uint64_t* words, int64_t n, int threads) {
  uint64_t acc = 0;
#pragma omp parallel for simd num_threads(threads) schedule(static) reduction(^ : acc)
  for (int64_t i = 0; i < n; ++i) acc ^= words[i];
  return acc;
}

}  // namespace

BandwidthResult measure_read_bandwidth(int64_t bytes, int reps, int threads) {
  if (bytes < (int64_t{1} << 20)) fail("bench bandwidth: --size-mib must be at least 1");
  if (reps < 1) fail("bench bandwidth: --reps must be at least 1");
  if (threads < 1) threads = omp_get_max_threads();
  const int64_t n = bytes / 8;
  std::vector<uint64_t> words(static_cast<size_t>(n));
#pragma omp parallel for num_threads(threads) schedule(static)  // each thread's pages on its node
  for (int64_t i = 0; i < n; ++i) words[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  volatile uint64_t sink = read_pass(words.data(), n, threads);  // warm-up
  std::vector<double> gbs;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    sink = sink ^ read_pass(words.data(), n, threads);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    gbs.push_back(8.0 * static_cast<double>(n) / s / 1e9);
  }
  return {8 * n, threads, *std::max_element(gbs.begin(), gbs.end()), median(gbs)};
}

int64_t decode_bytes_per_token(const model::Model<float>& m, const model::QuantizedWeights* quantized) {
  const model::ModelConfig& c = m.config();
  const double expert_share =
      c.has_moe() ? static_cast<double>(c.moe.top_k) / static_cast<double>(c.moe.n_experts) : 1.0;
  double total = 0;
  for (const model::ParamSpec& s : m.layout().specs()) {
    const int64_t cols = s.shape.back(), rows = s.numel / cols;
    std::optional<kernels::ElementType> type;
    if (quantized) type = quantized->formats().of(s);
    const double row_bytes = type ? static_cast<double>(kernels::element_row_bytes(*type, cols)) : 4.0 * cols;
    double read_rows = static_cast<double>(rows);
    if (s.kind == model::ParamKind::embedding && !c.tie_embeddings) read_rows = 1;
    if (s.name.find(".experts.") != std::string::npos) read_rows *= expert_share;
    total += read_rows * row_bytes;
  }
  return static_cast<int64_t>(total);
}

}  // namespace gatedlm::bench
