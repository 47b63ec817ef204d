#pragma once
// The pieces of the Gated DeltaNet layer that gated_deltanet.cpp (forward) and
// gated_deltanet_backward.cpp share: where the fused input product keeps its columns, and
// the softplus. Only those two files include this header.
#include <cmath>
#include <cstdint>

#include "model/gated_deltanet.h"

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

// The delta rule's chunk for training and prefill, and the shortest run that takes the
// chunked form (shorter runs, decode above all, take the recurrence).
inline constexpr int64_t kChunk = 64;
inline constexpr int64_t kChunkedFrom = 16;

}  // namespace gatedlm::model::deltanet
