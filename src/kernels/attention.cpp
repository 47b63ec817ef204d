#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace gatedlm::kernels {
namespace {

template <typename T>
inline T dot(const T* a, const T* b, int64_t n) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// Softpick over the keys first..t that query t of (b, head h, kv head g) sees (attention.h):
// the row's output into ot, and its L = log sum |e^a - 1|. Stable: with m = max(0, max a),
// e^(a-m) - e^(-m) is (e^a - 1) e^(-m), and the common factor cancels. a: scratch.
template <typename T>
T softpick_row(T* ot, const T* qt, const T* k, const T* v, const AttentionShape& s, int64_t b, int64_t g, int64_t t,
               std::vector<T>& a) {
  const int64_t D = s.head_dim, first = s.first_key(t);
  a.resize(static_cast<size_t>(t + 1 - first));
  T m = 0;
  for (int64_t j = first; j <= t; ++j)
    m = std::max(m, a[j - first] = dot(qt, k + ((b * s.seq + j) * s.n_kv + g) * D, D) * static_cast<T>(s.scale));
  const T below = std::exp(-m);
  T z = 0;
  std::fill_n(ot, D, T(0));
  for (int64_t j = first; j <= t; ++j) {
    const T e = std::exp(a[j - first] - m) - below;
    z += std::abs(e);
    if (e <= 0) continue;
    const T* vj = v + ((b * s.seq + j) * s.n_kv + g) * D;
    for (int64_t i = 0; i < D; ++i) ot[i] += e * vj[i];
  }
  if (z == 0) return std::numeric_limits<T>::infinity();  // every score 0: no weights, output 0
  for (int64_t i = 0; i < D; ++i) ot[i] /= z;
  return m + std::log(z);
}

}  // namespace

template <typename T>
void attention_forward_reference(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& s) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv;
  const T scale = static_cast<T>(s.scale);
#pragma omp parallel
  {
    std::vector<T> acc(D);
#pragma omp for collapse(3) schedule(dynamic, 4)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.n_q; ++h)
        for (int64_t t = 0; t < s.seq; ++t) {
          const int64_t g = h / group;
          const T* qt = q + ((b * s.seq + t) * s.n_q + h) * D;
          if (s.softpick) {
            lse[(b * s.n_q + h) * s.seq + t] = softpick_row(out + ((b * s.seq + t) * s.n_q + h) * D, qt, k, v, s, b, g, t, acc);
            continue;
          }
          T m = -std::numeric_limits<T>::infinity(), l = 0;
          std::fill(acc.begin(), acc.end(), T(0));
          for (int64_t j = s.first_key(t); j <= t; ++j) {
            const T* kj = k + ((b * s.seq + j) * s.n_kv + g) * D;
            const T* vj = v + ((b * s.seq + j) * s.n_kv + g) * D;
            T score = dot(qt, kj, D) * scale;
            if (score > m) {  // rescale what was accumulated under the old maximum
              T c = std::exp(m - score);
              l *= c;
              for (int64_t i = 0; i < D; ++i) acc[i] *= c;
              m = score;
            }
            T p = std::exp(score - m);
            l += p;
            for (int64_t i = 0; i < D; ++i) acc[i] += p * vj[i];
          }
          T* ot = out + ((b * s.seq + t) * s.n_q + h) * D;
          for (int64_t i = 0; i < D; ++i) ot[i] = acc[i] / l;
          lse[(b * s.n_q + h) * s.seq + t] = m + std::log(l);
        }
  }
}

// Each (batch, kv head) is one task: it owns dk and dv of that kv head, so no two
// threads write the same gradient row. Softmax: ds = p (dp - D); softpick, with P = e^(a - L)
// = e^a / Z and p = relu(P - e^-L): ds = P ([a > 0] dp - sign(a) D), since d|e^a - 1|/da =
// sign(a) e^a.
template <typename T>
void attention_backward_reference(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                                  const T* out, const T* lse, const AttentionShape& s) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv;
  const T scale = static_cast<T>(s.scale);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.n_kv; ++g)
      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t t = 0; t < s.seq; ++t) {
          const int64_t row = (b * s.seq + t) * s.n_q + h;
          const T* qt = q + row * D;
          const T* dot_ = dout + row * D;
          T* dqt = dq + row * D;
          const T Dt = dot(dot_, out + row * D, D);  // sum_j p_j dp_j
          const T l = lse[(b * s.n_q + h) * s.seq + t];
          for (int64_t j = s.first_key(t); j <= t; ++j) {
            const int64_t kv_row = (b * s.seq + j) * s.n_kv + g;
            const T* kj = k + kv_row * D;
            const T* vj = v + kv_row * D;
            const T a = dot(qt, kj, D) * scale;
            T p = std::exp(a - l);
            T dp = dot(dot_, vj, D);
            T ds = p * (dp - Dt) * scale;
            if (s.softpick) {
              const T sign = a > 0 ? T(1) : a < 0 ? T(-1) : T(0);
              ds = p * ((a > 0 ? dp : T(0)) - sign * Dt) * scale;
              p = std::max(p - std::exp(-l), T(0));
            }
            T* dkj = dk + kv_row * D;
            T* dvj = dv + kv_row * D;
            for (int64_t i = 0; i < D; ++i) {
              dqt[i] += ds * kj[i];
              dkj[i] += ds * qt[i];
              dvj[i] += p * dot_[i];
            }
          }
        }
}

template <typename T>
void attention_probs(T* probs, const T* q, const T* k, const AttentionShape& s, int64_t b, const T* sinks) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv, S = s.seq;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t h = 0; h < s.n_q; ++h)
    for (int64_t t = 0; t < S; ++t) {
      T* row = probs + (h * S + t) * S;
      const T* qt = q + ((b * S + t) * s.n_q + h) * D;
      const int64_t first = s.first_key(t);
      // Softmax: m the maximum (with the sink), weights e^(a-m) / their sum. Softpick: m =
      // max(0, max a), |e^(a-m) - e^-m| summed, the weights the positive ones.
      T m = sinks ? sinks[h] : s.softpick ? T(0) : -std::numeric_limits<T>::infinity();
      for (int64_t j = first; j <= t; ++j) {
        row[j] = dot(qt, k + ((b * S + j) * s.n_kv + h / group) * D, D) * static_cast<T>(s.scale);
        m = std::max(m, row[j]);
      }
      const T below = s.softpick ? std::exp(-m) : T(0);
      T sum = sinks ? std::exp(sinks[h] - m) : T(0);
      for (int64_t j = first; j <= t; ++j) sum += std::abs(row[j] = std::exp(row[j] - m) - below);
      for (int64_t j = first; j <= t; ++j) row[j] = sum > 0 ? std::max(row[j], T(0)) / sum : T(0);
      for (int64_t j = 0; j < first; ++j) row[j] = 0;
      for (int64_t j = t + 1; j < S; ++j) row[j] = 0;
    }
}

// The reference kernels with the gate epilogue as plain elementwise loops.
template <typename T>
void attention_forward_simple(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& s,
                              const T* gate_score, T* gated_out) {
  attention_forward_reference(out, lse, q, k, v, s);
  if (!gate_score) return;
  const int64_t n = s.batch * s.seq * s.n_q * s.head_dim;
  for (int64_t i = 0; i < n; ++i) gated_out[i] = out[i] * gate_score[i];
}
template <typename T>
void attention_backward_simple(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                               const T* lse, const AttentionShape& s, const T* gate_score, T* dgate_score,
                               GateGradLayout layout) {
  if (!gate_score) {
    attention_backward_reference(dq, dk, dv, dout, q, k, v, out, lse, s);
    return;
  }
  const int64_t width = s.n_q * s.head_dim, tokens = s.batch * s.seq, ld = layout.ld ? layout.ld : width;
  std::vector<T> dy(tokens * width);  // gradient with respect to the un-gated output
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < width; ++e) {
      const int64_t i = t * width + e;
      const T sigmoid_grad = layout.through_sigmoid ? gate_score[i] * (T(1) - gate_score[i]) : T(1);
      dy[i] = dout[i] * gate_score[i];
      dgate_score[t * ld + e] = dout[i] * out[i] * sigmoid_grad;
    }
  attention_backward_reference(dq, dk, dv, dy.data(), q, k, v, out, lse, s);
}

// The fp64 path: the simple kernels.
template <>
void attention_forward<double>(double* out, double* lse, const double* q, const double* k, const double* v,
                               const AttentionShape& s, const double* gate_score, double* gated_out) {
  attention_forward_simple(out, lse, q, k, v, s, gate_score, gated_out);
}
template <>
void attention_backward<double>(double* dq, double* dk, double* dv, const double* dout, const double* q,
                                const double* k, const double* v, const double* out, const double* lse,
                                const AttentionShape& s, const double* gate_score, double* dgate_score,
                                GateGradLayout layout) {
  attention_backward_simple(dq, dk, dv, dout, q, k, v, out, lse, s, gate_score, dgate_score, layout);
}

#define GATEDLM_INSTANTIATE(T)                                                                              \
  template void attention_forward_reference<T>(T*, T*, const T*, const T*, const T*, const AttentionShape&); \
  template void attention_backward_reference<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, \
                                                const T*, const AttentionShape&);                           \
  template void attention_probs<T>(T*, const T*, const T*, const AttentionShape&, int64_t, const T*);       \
  template void attention_forward_simple<T>(T*, T*, const T*, const T*, const T*, const AttentionShape&,     \
                                            const T*, T*);                                                  \
  template void attention_backward_simple<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*,  \
                                             const T*, const AttentionShape&, const T*, T*, GateGradLayout);
GATEDLM_INSTANTIATE(float)
GATEDLM_INSTANTIATE(double)
#undef GATEDLM_INSTANTIATE

}  // namespace gatedlm::kernels
