#include "model/moe.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/grow.h"
#include "kernels/activations.h"
#include "kernels/matmul.h"
#include "kernels/parallel_work.h"

namespace gatedlm::model {

namespace k = kernels;

namespace {

using Clock = std::chrono::steady_clock;
// Adds the seconds since it was made to `total` when it goes out of scope.
struct Timed {
  double& total;
  Clock::time_point t0 = Clock::now();
  ~Timed() { total += std::chrono::duration<double>(Clock::now() - t0).count(); }
};

// Rows an expert's products run over: its token count rounded up so that few distinct
// shapes occur (the matrix products keep one oneDNN primitive per shape, and a new shape
// costs far more to create than these products take to run): multiples of 16 up to 128,
// then 4 sizes per doubling, so at most a quarter of the rows are padding. The padding rows
// are zeros in the inputs and in the output gradients, so they change no result.
int64_t padded_rows(int64_t m) {
  // Up to kSkinnyRows (decode: a token or a few per expert) none: those products take the
  // skinny kernel, which reads the expert's weights once; 16 padded rows went to oneDNN's
  // gemm at 16x the arithmetic.
  if (m <= kernels::kSkinnyRows) return m;
  int64_t step = 16;
  while (step * 8 < m) step *= 2;
  return (m + step - 1) / step * step;
}

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace

template <typename T>
MoeBlock<T>::MoeBlock(const MoeConfig& moe, int64_t d_model) : c_(moe), d_(d_model) {
  counts_.assign(c_.n_experts, 0);
  offsets_.assign(c_.n_experts + 1, 0);
  mean_p_.assign(c_.n_experts, 0.0);
}

// Router logits, softmax, top-k, weights, P_i and Z.
template <typename T>
void MoeBlock<T>::route(const T* h, int64_t n, const MoeWeights<T>& w) {
  const int64_t E = c_.n_experts, K = c_.top_k;
  grow(logits_, n * E);
  grow(probs_, n * E);
  grow(lse_, n);
  chosen_.resize(n * K);
  grow(weight_, n * K);
  k::linear_forward(logits_.data(), h, w.router, n, d_, E);
  if (router_hook_) router_hook_(logits_.data(), n);
#pragma omp parallel for schedule(static) if (k::rows_in_parallel(n, E))
  for (int64_t t = 0; t < n; ++t) {
    const T* z = logits_.data() + t * E;
    T* p = probs_.data() + t * E;
    const T zmax = *std::max_element(z, z + E);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(z[e] - zmax));
    for (int64_t e = 0; e < E; ++e) p[e] = static_cast<T>(std::exp(static_cast<double>(z[e] - zmax)) / sum);
    lse_[t] = static_cast<T>(static_cast<double>(zmax) + std::log(sum));
    // Top-k by logit, best first; strict > keeps the lower index on a tie.
    int32_t* sel = chosen_.data() + t * K;
    for (int64_t j = 0; j < K; ++j) {
      int32_t best = -1;
      for (int32_t e = 0; e < E; ++e) {
        if (std::find(sel, sel + j, e) != sel + j) continue;
        if (best < 0 || z[e] > z[best]) best = e;
      }
      sel[j] = best;
    }
    double chosen_sum = 0;
    for (int64_t j = 0; j < K; ++j) chosen_sum += p[sel[j]];
    for (int64_t j = 0; j < K; ++j)
      weight_[t * K + j] = c_.norm_topk_prob ? static_cast<T>(p[sel[j]] / chosen_sum) : p[sel[j]];
  }
  double z2 = 0;
  std::fill(mean_p_.begin(), mean_p_.end(), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    z2 += static_cast<double>(lse_[t]) * static_cast<double>(lse_[t]);
    for (int64_t e = 0; e < E; ++e) mean_p_[e] += probs_[t * E + e];
  }
  for (double& v : mean_p_) v /= static_cast<double>(n);
  z_loss_ = z2 / static_cast<double>(n);
}

// Counting sort of the (token, slot) pairs by expert, token order kept within an expert;
// each expert's segment is padded to padded_rows (token_of_ -1 on padding rows).
template <typename T>
void MoeBlock<T>::group() {
  const int64_t E = c_.n_experts, nk = n_ * c_.top_k;
  std::fill(counts_.begin(), counts_.end(), 0);
  for (int64_t i = 0; i < nk; ++i) ++counts_[chosen_[i]];
  // One batched product over equal segments (the largest count, padded) when that wastes
  // at most half the rows; otherwise a product per expert over its own padded rows.
  const int64_t largest = padded_rows(*std::max_element(counts_.begin(), counts_.end()));
  uniform_ = E > 1 && E * largest <= 2 * nk;
  offsets_[0] = 0;
  for (int64_t e = 0; e < E; ++e) offsets_[e + 1] = offsets_[e] + (uniform_ ? largest : padded_rows(counts_[e]));
  rows_ = offsets_[E];
  std::vector<int64_t> next(offsets_.begin(), offsets_.end() - 1);
  row_of_.resize(nk);
  token_of_.assign(rows_, -1);
  for (int64_t i = 0; i < nk; ++i) {
    const int64_t r = next[chosen_[i]]++;
    row_of_[i] = r;
    token_of_[r] = i / c_.top_k;
  }
}

template <typename T>
void MoeBlock<T>::forward(T* y, const T* h, int64_t n, const MoeWeights<T>& w, bool keep) {
  (void)keep;  // every buffer below is reused by the next forward; backward reads them
  const int64_t K = c_.top_k, f = c_.expert_hidden, d = d_;
  n_ = n;
  {
    Timed timer{times_.routing};
    route(h, n, w);
    group();
  }
  const int64_t rows = rows_;
  grow(x_, rows * d);
  grow(gu_, rows * 2 * f);
  grow(act_, rows * f);
  grow(out_, rows * d);
  {
    Timed timer{times_.permute};
#pragma omp parallel for schedule(static) if (k::rows_in_parallel(rows, d))
    for (int64_t r = 0; r < rows; ++r) {
      if (token_of_[r] >= 0) std::copy_n(h + token_of_[r] * d, d, x_.data() + r * d);
      else std::fill_n(x_.data() + r * d, d, T(0));
    }
  }
  {
    Timed timer{times_.experts};
    if (uniform_) {  // [E, M, .] segments: x W_gu^T, SwiGLU, act W_down^T, one call each
      const int64_t E = c_.n_experts, M = rows / E, stride_w = 3 * f * d;
      k::batched_matmul(gu_.data(), x_.data(), w.experts, k::MatmulShape{.M = M, .N = 2 * f, .K = d, .trans_b = true},
                        k::BatchStrides{E, M * d, stride_w, M * 2 * f});
      k::swiglu_forward(act_.data(), gu_.data(), rows, f);
      k::batched_matmul(out_.data(), act_.data(), w.experts.at(2 * f * d),
                        k::MatmulShape{.M = M, .N = d, .K = f, .trans_b = true},
                        k::BatchStrides{E, M * f, stride_w, M * d});
    } else {
      for (int64_t e = 0; e < c_.n_experts; ++e) {
        const int64_t m = offsets_[e + 1] - offsets_[e], r0 = offsets_[e];
        if (m == 0) continue;
        const k::Weight<T> we = w.experts.at(e * 3 * f * d);
        k::linear_forward(gu_.data() + r0 * 2 * f, x_.data() + r0 * d, we, m, d, 2 * f);
        k::swiglu_forward(act_.data() + r0 * f, gu_.data() + r0 * 2 * f, m, f);
        k::linear_forward(out_.data() + r0 * d, act_.data() + r0 * f, we.at(2 * f * d), m, f, d);
      }
    }
  }
  {
    Timed timer{times_.permute};
#pragma omp parallel for schedule(static) if (k::rows_in_parallel(n, K * d))
    for (int64_t t = 0; t < n; ++t) {
      T* yt = y + t * d;
      std::fill_n(yt, d, T(0));
      for (int64_t j = 0; j < K; ++j) {
        const T wj = weight_[t * K + j];
        const T* o = out_.data() + row_of_[t * K + j] * d;
        for (int64_t i = 0; i < d; ++i) yt[i] += wj * o[i];
      }
    }
  }
  if (c_.n_shared == 0) return;
  Timed timer{times_.shared};
  const int64_t fs = c_.shared_width();
  grow(sgu_, n * 2 * fs);
  grow(sact_, n * fs);
  grow(sout_, n * d);
  grow(sgate_, n);
  k::linear_forward(sgu_.data(), h, w.shared, n, d, 2 * fs);
  k::swiglu_forward(sact_.data(), sgu_.data(), n, fs);
  k::linear_forward(sout_.data(), sact_.data(), w.shared_down, n, fs, d);
  k::linear_forward(sgate_.data(), h, w.shared_gate, n, d, 1);
#pragma omp parallel for schedule(static) if (k::rows_in_parallel(n, d))
  for (int64_t t = 0; t < n; ++t) {
    const T s = sigmoid(sgate_[t]);
    sgate_[t] = s;
    for (int64_t i = 0; i < d; ++i) y[t * d + i] += s * sout_[t * d + i];
  }
}

template <typename T>
void MoeBlock<T>::backward(T* dh, const MoeGrads<T>& g, const T* dy, const T* h, const MoeWeights<T>& w,
                           std::span<const double> lb_weight, double z_weight) {
  const int64_t n = n_, E = c_.n_experts, f = c_.expert_hidden, d = d_, rows = rows_;
  grow(dout_, rows * d);
  grow(dact_, rows * f);
  grow(dgu_, rows * 2 * f);
  grow(dx_, rows * d);
  grow(dz_, n * E);
  std::vector<T> dweight(n * c_.top_k);  // d loss / d w_j [n * k]
  combine_backward(dweight.data(), dy);
  experts_backward(g, w);
  gather_backward(dh);
  if (c_.n_shared > 0) shared_backward(dh, g, dy, h, w);
  router_backward(dh, g, h, w, dweight.data(), lb_weight, z_weight);
}

// y_t = sum_j w_j out[row(t, j)]: d loss / d w_j = dy_t . out_row into dweight [n * k], and
// the gradient of each grouped output row, w_j dy_t, into dout_ (zero on padding rows).
template <typename T>
void MoeBlock<T>::combine_backward(T* dweight, const T* dy) {
  Timed timer{times_.permute};
  const int64_t n = n_, K = c_.top_k, d = d_, rows = rows_;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < K; ++j) {
      const int64_t r = row_of_[t * K + j];
      const T* o = out_.data() + r * d;
      const T* dyt = dy + t * d;
      const T wj = weight_[t * K + j];
      double dot = 0;
      T* dr = dout_.data() + r * d;
      for (int64_t i = 0; i < d; ++i) {
        dot += static_cast<double>(dyt[i]) * static_cast<double>(o[i]);
        dr[i] = wj * dyt[i];
      }
      dweight[t * K + j] = static_cast<T>(dot);
    }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)  // padding rows: no gradient
    if (token_of_[r] < 0) std::fill_n(dout_.data() + r * d, d, T(0));
}

// The experts' SwiGLU backward over their grouped rows: dout_ -> dx_, weight gradients into g.experts.
template <typename T>
void MoeBlock<T>::experts_backward(const MoeGrads<T>& g, const MoeWeights<T>& w) {
  Timed timer{times_.experts};
  const int64_t E = c_.n_experts, f = c_.expert_hidden, d = d_, rows = rows_;
  if (uniform_) {  // the per-expert products below as one batched call each
    const int64_t M = rows / E, stride_w = 3 * f * d;
    T* dact = dact_.data();
    T* dgu = dgu_.data();
    // dact = dout W_down; dW_down += dout^T act; SwiGLU; dx = dgu W_gu; dW_gu += dgu^T x.
    k::batched_matmul(dact, dout_.data(), w.experts.values + 2 * f * d, k::MatmulShape{.M = M, .N = f, .K = d},
                      k::BatchStrides{E, M * d, stride_w, M * f});
    k::batched_matmul(g.experts + 2 * f * d, dout_.data(), act_.data(),
                      k::MatmulShape{.M = d, .N = f, .K = M, .trans_a = true, .accumulate = true},
                      k::BatchStrides{E, M * d, M * f, stride_w});
    k::swiglu_backward(dgu, dact, gu_.data(), rows, f);
    k::batched_matmul(dx_.data(), dgu, w.experts.values, k::MatmulShape{.M = M, .N = d, .K = 2 * f},
                      k::BatchStrides{E, M * 2 * f, stride_w, M * d});
    k::batched_matmul(g.experts, dgu, x_.data(),
                      k::MatmulShape{.M = 2 * f, .N = d, .K = M, .trans_a = true, .accumulate = true},
                      k::BatchStrides{E, M * 2 * f, M * d, stride_w});
    return;
  }
  for (int64_t e = 0; e < E; ++e) {
    const int64_t m = offsets_[e + 1] - offsets_[e], r0 = offsets_[e];
    if (m == 0) continue;
    const T* we = w.experts.values + e * 3 * f * d;
    T* ge = g.experts + e * 3 * f * d;
    k::linear_backward(dact_.data() + r0 * f, ge + 2 * f * d, dout_.data() + r0 * d, act_.data() + r0 * f,
                       we + 2 * f * d, m, f, d, /*accumulate_dx=*/false);
    k::swiglu_backward(dgu_.data() + r0 * 2 * f, dact_.data() + r0 * f, gu_.data() + r0 * 2 * f, m, f);
    k::linear_backward(dx_.data() + r0 * d, ge, dgu_.data() + r0 * 2 * f, x_.data() + r0 * d, we, m, d, 2 * f,
                       /*accumulate_dx=*/false);
  }
}

// dh [n, d] (overwritten) = the sum of each token's k rows of dx_.
template <typename T>
void MoeBlock<T>::gather_backward(T* dh) {
  Timed timer{times_.permute};
  const int64_t n = n_, K = c_.top_k, d = d_;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    T* dht = dh + t * d;
    std::fill_n(dht, d, T(0));
    for (int64_t j = 0; j < K; ++j) {
      const T* dr = dx_.data() + row_of_[t * K + j] * d;
      for (int64_t i = 0; i < d; ++i) dht[i] += dr[i];
    }
  }
}

// The shared expert sigmoid(h g^T) S(h): its gradients, and d loss / d h added into dh.
template <typename T>
void MoeBlock<T>::shared_backward(T* dh, const MoeGrads<T>& g, const T* dy, const T* h, const MoeWeights<T>& w) {
  Timed timer{times_.shared};
  const int64_t n = n_, d = d_, fs = c_.shared_width();
  grow(dsout_, n * d);
  grow(dsact_, n * fs);
  grow(dsgu_, n * 2 * fs);
  std::vector<T> dgate_pre(n);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const T s = sgate_[t];
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) {
      dot += static_cast<double>(dy[t * d + i]) * static_cast<double>(sout_[t * d + i]);
      dsout_[t * d + i] = s * dy[t * d + i];
    }
    dgate_pre[t] = static_cast<T>(dot) * s * (T(1) - s);
  }
  k::linear_backward(dsact_.data(), g.shared_down, dsout_.data(), sact_.data(), w.shared_down.values, n, fs, d, false);
  k::swiglu_backward(dsgu_.data(), dsact_.data(), sgu_.data(), n, fs);
  k::linear_backward(dh, g.shared, dsgu_.data(), h, w.shared.values, n, d, 2 * fs, /*accumulate_dx=*/true);
  k::linear_backward(dh, g.shared_gate, dgate_pre.data(), h, w.shared_gate.values, n, d, 1, /*accumulate_dx=*/true);
}

// Router: d loss / d p from the chosen weights and the balance loss, then through the
// softmax; the z-loss adds 2 Z_t / n * p to d loss / d z. d loss / d h is added into dh.
template <typename T>
void MoeBlock<T>::router_backward(T* dh, const MoeGrads<T>& g, const T* h, const MoeWeights<T>& w,
                                  const T* dweight, std::span<const double> lb_weight, double z_weight) {
  Timed timer{times_.routing};
  const int64_t n = n_, E = c_.n_experts, K = c_.top_k, d = d_;
  const double inv_n = 1.0 / static_cast<double>(n);
#pragma omp parallel
  {
  std::vector<double> dp(E);  // d loss / d p of one token
#pragma omp for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const T* p = probs_.data() + t * E;
    T* dz = dz_.data() + t * E;
    for (int64_t e = 0; e < E; ++e) dp[e] = lb_weight[e] * inv_n;
    const int32_t* sel = chosen_.data() + t * K;
    const T* dw = dweight + t * K;
    if (c_.norm_topk_prob) {  // w_j = p_j / S: d/dp_j = (dw_j - sum_l dw_l w_l) / S
      double S = 0, mix = 0;
      for (int64_t j = 0; j < K; ++j) S += p[sel[j]];
      for (int64_t j = 0; j < K; ++j) mix += static_cast<double>(dw[j]) * weight_[t * K + j];
      for (int64_t j = 0; j < K; ++j) dp[sel[j]] += (dw[j] - mix) / S;
    } else {
      for (int64_t j = 0; j < K; ++j) dp[sel[j]] += dw[j];
    }
    double pdp = 0;
    for (int64_t e = 0; e < E; ++e) pdp += static_cast<double>(p[e]) * dp[e];
    const double zt = 2.0 * z_weight * inv_n * static_cast<double>(lse_[t]);
    for (int64_t e = 0; e < E; ++e) dz[e] = static_cast<T>(static_cast<double>(p[e]) * (dp[e] - pdp + zt));
  }
  }
  k::linear_backward(dh, g.router, dz_.data(), h, w.router.values, n, d, E, /*accumulate_dx=*/true);
}

template class MoeBlock<float>;
template class MoeBlock<double>;

}  // namespace gatedlm::model
