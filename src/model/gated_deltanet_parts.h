#pragma once
// The pieces of the Gated DeltaNet layer that gated_deltanet.cpp (forward) and
// gated_deltanet_backward.cpp share: where the fused input product keeps its columns, and
// the softplus. Only those two files include this header.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/deltanet_chunks.h"
#include "model/deltanet_times.h"
#include "model/hybrid_config.h"

namespace gatedlm::model::deltanet {

// Column offsets of the fused product proj [n, in_width]: q|k|v (conv_dim), z (value_dim),
// b (n_v), a (n_v).
struct ProjColumns {
  int64_t width, z, b, a;
  explicit ProjColumns(const LinearAttentionConfig& la)
      : width(la.in_width()),
        z(la.conv_dim()),
        b(la.conv_dim() + la.value_dim()),
        a(la.conv_dim() + la.value_dim() + la.n_v_heads) {}
};

// The L2 normalisation's epsilon (transformers' l2norm and the FLA kernels use 1e-6).
inline constexpr double kL2Eps = 1e-6;

// softplus(x) = log(1 + e^x), without overflow for large x.
template <typename T>
inline T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}

// The convolution's kernel w [C, K] as [K, C] (tap-major), so that a tap's weights lie along
// the channels that the convolution's loops run over.
template <typename T>
std::vector<T> taps_by_channel(const T* w, const LinearAttentionConfig& la) {
  const int64_t C = la.conv_dim(), K = la.conv_kernel;
  std::vector<T> taps(static_cast<size_t>(K * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) taps[j * C + c] = w[c * K + j];
  return taps;
}

// The delta rule's chunk and the shortest chunked run (deltanet_chunks.h).
inline constexpr int64_t kChunk = kDeltaRuleChunk;
inline constexpr int64_t kChunkedFrom = kDeltaRuleChunkedFrom;

// Charges the time since the previous charge (or construction) to one part of DeltaNetTimes:
// one clock read per part of a layer, nothing when times is null.
class PartClock {
 public:
  explicit PartClock(DeltaNetTimes* times) : times_(times), last_(times ? Clock::now() : Clock::time_point{}) {}
  void charge(double DeltaNetTimes::* part) {
    if (!times_) return;
    const Clock::time_point now = Clock::now();
    times_->*part += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  using Clock = std::chrono::steady_clock;
  DeltaNetTimes* times_;
  Clock::time_point last_;
};

}  // namespace gatedlm::model::deltanet
