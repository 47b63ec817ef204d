#include "kernels/attention_sinks.h"

#include <algorithm>
#include <cmath>

namespace gatedlm::kernels {

template <typename T>
T sink_probability(T sink, T lse) {
  return std::exp(sink - lse);
}

// logaddexp(lse, sink) and sigmoid(lse - sink) from one exp of a non-positive number, so
// that neither overflows for logits of any size.
template <typename T>
void attention_sinks_forward(T* out, T* gated_out, T* lse, const T* sinks, const AttentionShape& s) {
  const int64_t D = s.head_dim;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq; ++t)
      for (int64_t h = 0; h < s.n_q; ++h) {
        T& l = lse[(b * s.n_q + h) * s.seq + t];
        const T sink = sinks[h], hi = std::max(l, sink), e = std::exp(-std::abs(l - sink));
        const T keys_share = l >= sink ? T(1) / (T(1) + e) : e / (T(1) + e);  // sigmoid(l - sink)
        l = hi + std::log1p(e);
        const int64_t row = ((b * s.seq + t) * s.n_q + h) * D;
        for (int64_t i = 0; i < D; ++i) out[row + i] *= keys_share;
        if (gated_out)
          for (int64_t i = 0; i < D; ++i) gated_out[row + i] *= keys_share;
      }
}

// One task per head: it alone writes dsinks[h], summing its rows in a fixed order (the bits
// do not depend on the thread count).
template <typename T>
void attention_sinks_backward(T* dsinks, const T* dout, const T* gate_score, const T* out, const T* lse,
                              const T* sinks, const AttentionShape& s) {
  const int64_t D = s.head_dim;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < s.n_q; ++h) {
    double sum = 0;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t t = 0; t < s.seq; ++t) {
        const int64_t row = ((b * s.seq + t) * s.n_q + h) * D;
        double d_row = 0;  // rowsum(dO * O)
        for (int64_t i = 0; i < D; ++i) {
          const double dO = gate_score ? dout[row + i] * gate_score[row + i] : dout[row + i];
          d_row += dO * out[row + i];
        }
        sum += sink_probability(sinks[h], lse[(b * s.n_q + h) * s.seq + t]) * d_row;
      }
    dsinks[h] -= static_cast<T>(sum);
  }
}

#define GATEDLM_INSTANTIATE(T)                                                                             \
  template T sink_probability<T>(T, T);                                                                    \
  template void attention_sinks_forward<T>(T*, T*, T*, const T*, const AttentionShape&);                   \
  template void attention_sinks_backward<T>(T*, const T*, const T*, const T*, const T*, const T*,          \
                                            const AttentionShape&);
GATEDLM_INSTANTIATE(float)
GATEDLM_INSTANTIATE(double)
#undef GATEDLM_INSTANTIATE

}  // namespace gatedlm::kernels
