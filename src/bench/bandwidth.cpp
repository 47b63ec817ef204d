// The streaming read bound and a decode step's weight bytes (bandwidth.h).
#include "bench/bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <vector>

#include "bench/median.h"
#include "core/error.h"
#include "kernels/element_types.h"

namespace gatedlm::bench {

namespace {

// How a pass walks each thread's share of the buffer. A plain front-to-back loop leaves the
// hardware prefetcher alone to keep the misses in flight; on some CPUs (an Intel Xeon with AVX-512
// read 1.6x as much the other way, bench/RESULTS.md) one core reads faster from four parts of its
// share at once with software prefetches ahead of each, as fast as the decode kernels read their
// tiles there. The bound is the best of them. A third pattern, each share front to back with
// every line requested 4 KiB ahead, is the order in which the decode kernels read a thread's
// share of a product (one contiguous stream, prefetched; quant_kernels.h): what the kernels can
// read at most where a product's share is too small for streams far apart (on AMD Zen 5 four
// streams read faster only when at least 8 MiB apart, bench/RESULTS.md).
enum class ReadPattern { one_stream, four_streams_prefetched, one_stream_prefetched };

// XOR of the words (integer: the compiler vectorises it without reassociating floats); the
// result is returned so that the reads cannot be dropped.
uint64_t read_one_stream(const uint64_t* words, int64_t n, int threads) {
  uint64_t acc = 0;
#pragma omp parallel for simd num_threads(threads) schedule(static) reduction(^ : acc)
  for (int64_t i = 0; i < n; ++i) acc ^= words[i];
  return acc;
}

// Each thread's share in four equal parts read side by side, a cache line (8 words) of each in
// turn, each part prefetched 1 KiB ahead.
uint64_t read_four_streams(const uint64_t* words, int64_t n, int threads) {
  constexpr int64_t kStreams = 4, kLine = 8, kAhead = 1024 / 8;
  uint64_t acc = 0;
#pragma omp parallel num_threads(threads) reduction(^ : acc)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t part = n / team / kStreams / kLine * kLine;  // words per stream, whole lines
    const uint64_t* share = words + t * part * kStreams;
    uint64_t lanes[kLine] = {};
    for (int64_t i = 0; i < part; i += kLine)
      for (int64_t s = 0; s < kStreams; ++s) {
        const uint64_t* line = share + s * part + i;
        __builtin_prefetch(line + kAhead);
#pragma omp simd
        for (int64_t w = 0; w < kLine; ++w) lanes[w] ^= line[w];
      }
    for (uint64_t v : lanes) acc ^= v;
    // The words the equal parts left over (fewer than team * 32), by thread 0.
    if (t == 0)
      for (int64_t i = team * part * kStreams; i < n; ++i) acc ^= words[i];
  }
  return acc;
}

// Each thread's share (OpenMP's static split, as read_one_stream's) front to back, a line at a
// time, the line 4 KiB further on requested first.
uint64_t read_one_stream_prefetched(const uint64_t* words, int64_t n, int threads) {
  constexpr int64_t kLine = 8, kAhead = 4096 / 8;
  uint64_t acc = 0;
#pragma omp parallel num_threads(threads) reduction(^ : acc)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t begin = n * t / team, end = n * (t + 1) / team;
    uint64_t lanes[kLine] = {};
    int64_t i = begin;
    for (; i + kLine <= end; i += kLine) {
      __builtin_prefetch(words + i + kAhead);
#pragma omp simd
      for (int64_t w = 0; w < kLine; ++w) lanes[w] ^= words[i + w];
    }
    for (; i < end; ++i) lanes[0] ^= words[i];
    for (uint64_t v : lanes) acc ^= v;
  }
  return acc;
}

const char* pattern_name(ReadPattern pattern) {
  switch (pattern) {
    case ReadPattern::one_stream: return "one-stream";
    case ReadPattern::four_streams_prefetched: return "four-stream";
    case ReadPattern::one_stream_prefetched: return "prefetched one-stream";
  }
  return "?";
}

uint64_t read_pass(ReadPattern pattern, const uint64_t* words, int64_t n, int threads) {
  switch (pattern) {
    case ReadPattern::one_stream: return read_one_stream(words, n, threads);
    case ReadPattern::four_streams_prefetched: return read_four_streams(words, n, threads);
    case ReadPattern::one_stream_prefetched: return read_one_stream_prefetched(words, n, threads);
  }
  return 0;
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
  constexpr ReadPattern kPatterns[] = {ReadPattern::one_stream, ReadPattern::four_streams_prefetched,
                                       ReadPattern::one_stream_prefetched};
  constexpr int kCount = static_cast<int>(std::size(kPatterns));
  static_assert(kCount == std::size(BandwidthResult{}.pattern_best_gbs), "a best figure for every pattern");
  // Warm-up, and a check that the patterns read the same words: the XORs of the whole buffer agree.
  const uint64_t whole = read_pass(kPatterns[0], words.data(), n, threads);
  for (int p = 1; p < kCount; ++p)
    if (read_pass(kPatterns[p], words.data(), n, threads) != whole)
      fail("bench bandwidth: the ", pattern_name(kPatterns[p]), " pass did not read every word once (", threads,
           " threads, ", n, " words)");
  volatile uint64_t sink = whole;
  // The patterns alternate pass by pass (the host's bandwidth moves from minute to minute).
  std::vector<double> gbs[kCount];
  for (int r = 0; r < reps; ++r)
    for (int p = 0; p < kCount; ++p) {
      const auto start = std::chrono::steady_clock::now();
      sink = sink ^ read_pass(kPatterns[p], words.data(), n, threads);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      gbs[p].push_back(8.0 * static_cast<double>(n) / s / 1e9);
    }
  BandwidthResult out{8 * n, threads};
  for (int p = 0; p < kCount; ++p) {
    out.pattern_best_gbs[p] = *std::max_element(gbs[p].begin(), gbs[p].end());
    out.best_gbs = std::max(out.best_gbs, out.pattern_best_gbs[p]);
    out.median_gbs = std::max(out.median_gbs, median(gbs[p]));
  }
  return out;
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
