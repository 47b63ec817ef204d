// The Gated DeltaNet layer's backward: gated_deltanet.cpp's forward in reverse, written by
// hand (checked against fp64 finite differences in tests/unit/model/test_gated_deltanet.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/activations.h"
#include "kernels/delta_rule.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "model/gated_deltanet.h"
#include "model/gated_deltanet_parts.h"

namespace gatedlm::model {

namespace k = kernels;
using namespace deltanet;

namespace {

// out_proj, then the gated RMSNorm: y = normed * SiLU(z), normed = RMSNorm(o) * w.
// Writes d loss / d z into dproj's z columns and d loss / d o into scratch.d_o.
template <typename T>
void gated_norm_backward(DeltaNetScratch<T>& sc, const DeltaNetGrads<T>& g, const T* dout, int64_t n,
                         const DeltaNetShape& s, const DeltaNetWeights<T>& w, const DeltaNetActivations<T>& a,
                         PartClock& clock) {
  const LinearAttentionConfig& la = s.la;
  const ProjColumns col(la);
  const int64_t vd = la.value_dim();
  k::linear_backward(sc.dy.data(), g.out_proj, dout, a.y.data(), w.out_proj.values, n, vd, s.d_model,
                     /*accumulate_dx=*/false);
  clock.charge(&DeltaNetTimes::products);
#pragma omp parallel
  {
    std::vector<T> d_gate(static_cast<size_t>(vd));  // this thread's row of d loss / d SiLU(z)
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const int64_t e = r * vd;
      for (int64_t i = 0; i < vd; ++i) {
        sc.dnormed[e + i] = sc.dy[e + i] * a.z_gate[e + i];
        d_gate[i] = sc.dy[e + i] * a.normed[e + i];
      }
      const int64_t z = r * col.width + col.z;
      k::activate_grad_row(sc.dproj.data() + z, d_gate.data(), a.proj.data() + z, vd, k::Activation::silu);
    }
  }
  std::fill(sc.d_o.begin(), sc.d_o.end(), T(0));
  k::rmsnorm_backward(sc.d_o.data(), g.norm, sc.dnormed.data(), a.o.data(), w.norm, a.rstd_o.data(),
                      n * la.n_v_heads, la.v_head_dim);
  clock.charge(&DeltaNetTimes::elementwise);
}

// beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias): d loss / d b and d a into dproj's
// columns; dA_log and ddt_bias summed over the rows per head (in row order, so the sums do not
// depend on the thread count).
template <typename T>
void gates_backward(DeltaNetScratch<T>& sc, const DeltaNetGrads<T>& g, int64_t n, const LinearAttentionConfig& la,
                    const DeltaNetWeights<T>& w, const DeltaNetActivations<T>& a) {
  const ProjColumns col(la);
  const int64_t nv = la.n_v_heads;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < nv; ++h) {
    const T A = std::exp(w.A_log[h]);
    T dA_log = 0, ddt = 0;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t e = r * nv + h;
      const T beta = a.beta[e];
      sc.dproj[r * col.width + col.b + h] = sc.dbeta[e] * beta * (T(1) - beta);
      const T u = a.proj[r * col.width + col.a + h] + w.dt_bias[h];
      const T du = sc.dg[e] * (-A) * k::sigmoid(u);  // softplus' = sigmoid
      sc.dproj[r * col.width + col.a + h] = du;
      ddt += du;
      dA_log += sc.dg[e] * a.g[e];  // d g / d A_log = g
    }
    g.A_log[h] += dA_log;
    g.dt_bias[h] += ddt;
  }
}

// One row's d loss / d SiLU(q|k) (dact [2 key_dim]) from d loss / d (q, k repeated to value
// heads), act = SiLU(q|k) of the row. For out = s x / sqrt(|x|^2 + eps) = s r x:
// dx = s (r du - r^3 x (x . du)), du summed over the value heads that share the key head.
template <typename T>
void unnormalise_keys(T* dact, const T* act, int64_t r, const DeltaNetScratch<T>& sc, const LinearAttentionConfig& la,
                      const DeltaNetActivations<T>& a) {
  const int64_t nk = la.n_k_heads, nv = la.n_v_heads, dk = la.k_head_dim, kd = la.key_dim(), rep = la.heads_per_key();
  const T q_scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dk)));
  for (int64_t j = 0; j < nk; ++j) {
    for (int which = 0; which < 2; ++which) {  // q, then k
      const T* grad = (which == 0 ? sc.dq : sc.dk).data() + r * nv * dk;  // [n_v, d_k] of row r
      const int64_t c0 = which * kd + j * dk;
      T* du = dact + c0;
      std::copy_n(grad + la.value_head(j, 0) * dk, dk, du);
      for (int64_t m = 1; m < rep; ++m) {
        const T* g = grad + la.value_head(j, m) * dk;
        for (int64_t i = 0; i < dk; ++i) du[i] += g[i];
      }
      const T* x = act + c0;
      T dot = 0;
      for (int64_t i = 0; i < dk; ++i) dot += x[i] * du[i];
      const T rn = (which == 0 ? a.rnorm_q : a.rnorm_k)[r * nk + j];
      const T s = which == 0 ? q_scale : T(1), rn3_dot = rn * rn * rn * dot;
      for (int64_t i = 0; i < dk; ++i) du[i] = s * (rn * du[i] - rn3_dot * x[i]);
    }
  }
}

// From d loss / d (q, k repeated to value heads, v) back through the L2 norms
// (unnormalise_keys) and the SiLU to d loss / d conv_pre (scratch.dconv).
template <typename T>
void qkv_backward(DeltaNetScratch<T>& sc, int64_t n, const LinearAttentionConfig& la, const DeltaNetActivations<T>& a) {
  const int64_t C = la.conv_dim(), kd = la.key_dim(), vd = la.value_dim();
#pragma omp parallel
  {
    // this thread's row of SiLU(q|k) and of d loss / d SiLU(conv)
    std::vector<T> act(static_cast<size_t>(2 * kd)), dact(static_cast<size_t>(C));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const T* pre = a.conv_pre.data() + r * C;
      k::activate_row(act.data(), pre, 2 * kd, k::Activation::silu);
      unnormalise_keys(dact.data(), act.data(), r, sc, la, a);
      std::copy_n(sc.dv.data() + r * vd, vd, dact.data() + 2 * kd);
      k::activate_grad_row(sc.dconv.data() + r * C, dact.data(), pre, C, k::Activation::silu);
    }
  }
}

// The causal convolution of each sequence: d loss / d its input into dproj's q|k|v columns,
// and the kernel's gradient (per channel, summed in row order, so that the sums do not depend
// on the thread count; threads take blocks of channels).
template <typename T>
void conv_backward(DeltaNetScratch<T>& sc, const DeltaNetGrads<T>& g, int64_t batch, int64_t seq,
                   const LinearAttentionConfig& la, const DeltaNetWeights<T>& w, const DeltaNetActivations<T>& a) {
  const int64_t C = la.conv_dim(), K = la.conv_kernel, ld = la.in_width();
  const std::vector<T> taps = taps_by_channel(w.conv, la);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < batch * seq; ++r) {
    const int64_t t = r % seq;
    T* dx = sc.dproj.data() + r * ld;
    std::fill_n(dx, C, T(0));
    for (int64_t j = 0; j < K; ++j) {  // output row t + (K-1) - j read this row with tap j
      const int64_t out = t + (K - 1) - j;
      if (out >= seq) continue;
      const T* dpre = sc.dconv.data() + (r + (K - 1) - j) * C;
      const T* tap = taps.data() + j * C;
      for (int64_t c = 0; c < C; ++c) dx[c] += dpre[c] * tap[c];
    }
  }
  constexpr int64_t kBlock = 64;  // channels per task: a row's block is a few cache lines
  const int64_t blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kBlock, width = std::min(kBlock, C - c0);
    std::vector<T> sums(static_cast<size_t>(K * width), T(0));  // [K, width]
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t r = b * seq + t;
        const T* dpre = sc.dconv.data() + r * C + c0;
        for (int64_t j = std::max<int64_t>(0, (K - 1) - t); j < K; ++j) {
          const T* x = a.proj.data() + (r - (K - 1) + j) * ld + c0;
          T* sum = sums.data() + j * width;
          for (int64_t c = 0; c < width; ++c) sum[c] += dpre[c] * x[c];
        }
      }
    for (int64_t j = 0; j < K; ++j)
      for (int64_t c = 0; c < width; ++c) g.conv[(c0 + c) * K + j] += sums[j * width + c];
  }
}

}  // namespace

template <typename T>
void deltanet_backward(T* dh, const DeltaNetGrads<T>& g, const T* dout, const T* h, int64_t batch, int64_t seq,
                       const DeltaNetShape& s, const DeltaNetWeights<T>& w, const DeltaNetActivations<T>& a,
                       DeltaNetScratch<T>& sc, DeltaNetTimes* times) {
  const LinearAttentionConfig& la = s.la;
  const int64_t n = batch * seq;
  PartClock clock(times);
  if (static_cast<int64_t>(sc.dproj.size()) != n * la.in_width()) sc.resize(n, la);
  gated_norm_backward(sc, g, dout, n, s, w, a, clock);
  const k::DeltaRuleInputs<T> in{a.q.data(), a.k.data(), a.v.data(), a.g.data(), a.beta.data(), nullptr};
  const k::DeltaRuleGrads<T> rule{sc.dq.data(), sc.dk.data(), sc.dv.data(), sc.dg.data(), sc.dbeta.data(), nullptr};
  k::delta_rule_chunked_backward<T>(rule, sc.d_o.data(), nullptr, in,
                                    {batch, seq, la.n_v_heads, la.k_head_dim, la.v_head_dim}, kChunk,
                                    a.chunk_states.data());
  clock.charge(&DeltaNetTimes::delta_rule);
  gates_backward(sc, g, n, la, w, a);
  qkv_backward(sc, n, la, a);
  conv_backward(sc, g, batch, seq, la, w, a);
  clock.charge(&DeltaNetTimes::elementwise);
  k::linear_backward(dh, g.in_proj, sc.dproj.data(), h, w.in_proj.values, n, s.d_model, la.in_width(),
                     /*accumulate_dx=*/false);
  clock.charge(&DeltaNetTimes::products);
}

template void deltanet_backward<float>(float*, const DeltaNetGrads<float>&, const float*, const float*, int64_t,
                                       int64_t, const DeltaNetShape&, const DeltaNetWeights<float>&,
                                       const DeltaNetActivations<float>&, DeltaNetScratch<float>&, DeltaNetTimes*);
template void deltanet_backward<double>(double*, const DeltaNetGrads<double>&, const double*, const double*, int64_t,
                                        int64_t, const DeltaNetShape&, const DeltaNetWeights<double>&,
                                        const DeltaNetActivations<double>&, DeltaNetScratch<double>&,
                                        DeltaNetTimes*);

}  // namespace gatedlm::model
