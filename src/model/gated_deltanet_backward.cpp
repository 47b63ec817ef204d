// The Gated DeltaNet layer's backward: gated_deltanet.cpp's forward in reverse, written by
// hand (checked against fp64 finite differences in tests/unit/model/test_gated_deltanet.cpp).
#include <algorithm>
#include <cmath>

#include "kernels/activations.h"
#include "kernels/delta_rule.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "model/gated_deltanet_parts.h"

namespace gatedlm::model {

namespace k = kernels;
using namespace deltanet;

namespace {

// out_proj, then the gated RMSNorm: y = normed * SiLU(z), normed = RMSNorm(o) * w.
// Writes d loss / d z into dproj's z columns and d loss / d o into scratch.d_o.
template <typename T>
void gated_norm_backward(DeltaNetScratch<T>& sc, const DeltaNetGrads<T>& g, const T* dout, int64_t n,
                         const DeltaNetShape& s, const DeltaNetWeights<T>& w, const DeltaNetActivations<T>& a) {
  const LinearAttentionConfig& la = s.la;
  const ProjColumns col(la);
  const int64_t vd = la.value_dim();
  k::linear_backward(sc.dy.data(), g.out_proj, dout, a.y.data(), w.out_proj, n, vd, s.d_model,
                     /*accumulate_dx=*/false);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < vd; ++i) {
      const int64_t e = r * vd + i;
      sc.dnormed[e] = sc.dy[e] * a.z_gate[e];
      const T z = a.proj[r * col.width + col.z + i];
      sc.dproj[r * col.width + col.z + i] = sc.dy[e] * a.normed[e] * k::activate_grad(k::Activation::silu, z);
    }
  }
  std::fill(sc.d_o.begin(), sc.d_o.end(), T(0));
  k::rmsnorm_backward(sc.d_o.data(), g.norm, sc.dnormed.data(), a.o.data(), w.norm, a.rstd_o.data(),
                      n * la.n_v_heads, la.v_head_dim);
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

// From d loss / d (q, k repeated to value heads, v) back through the L2 norms and the SiLU to
// d loss / d conv_pre (scratch.dconv). For out = s x / sqrt(|x|^2 + eps) = s r x:
// dx = s (r du - r^3 x (x . du)), du summed over the value heads that share the key head.
template <typename T>
void qkv_backward(DeltaNetScratch<T>& sc, int64_t n, const LinearAttentionConfig& la, const DeltaNetActivations<T>& a) {
  const int64_t C = la.conv_dim(), nk = la.n_k_heads, nv = la.n_v_heads, dk = la.k_head_dim, kd = la.key_dim();
  const int64_t rep = la.heads_per_key(), vd = la.value_dim();
  const T q_scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dk)));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    std::vector<T> dact(static_cast<size_t>(C)), du(static_cast<size_t>(dk));
    const T* pre = a.conv_pre.data() + r * C;
    for (int64_t j = 0; j < nk; ++j) {
      for (int which = 0; which < 2; ++which) {  // q, then k
        const T* grad = (which == 0 ? sc.dq : sc.dk).data();
        std::fill(du.begin(), du.end(), T(0));
        for (int64_t h = j * rep; h < (j + 1) * rep; ++h)
          for (int64_t i = 0; i < dk; ++i) du[i] += grad[(r * nv + h) * dk + i];
        const int64_t c0 = which * kd + j * dk;
        T dot = 0;
        for (int64_t i = 0; i < dk; ++i) dot += k::activate(k::Activation::silu, pre[c0 + i]) * du[i];
        const T rn = (which == 0 ? a.rnorm_q : a.rnorm_k)[r * nk + j];
        const T s = which == 0 ? q_scale : T(1);
        for (int64_t i = 0; i < dk; ++i) {
          const T x = k::activate(k::Activation::silu, pre[c0 + i]);
          dact[c0 + i] = s * (rn * du[i] - rn * rn * rn * x * dot);
        }
      }
    }
    std::copy_n(sc.dv.data() + r * vd, vd, dact.data() + 2 * kd);
    for (int64_t c = 0; c < C; ++c) sc.dconv[r * C + c] = dact[c] * k::activate_grad(k::Activation::silu, pre[c]);
  }
}

// The causal convolution of each sequence: d loss / d its input into dproj's q|k|v columns,
// and the kernel's gradient (per channel, summed in row order).
template <typename T>
void conv_backward(DeltaNetScratch<T>& sc, const DeltaNetGrads<T>& g, int64_t batch, int64_t seq,
                   const LinearAttentionConfig& la, const DeltaNetWeights<T>& w, const DeltaNetActivations<T>& a) {
  const int64_t C = la.conv_dim(), K = la.conv_kernel, ld = la.in_width();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < batch * seq; ++r) {
    const int64_t t = r % seq;
    T* dx = sc.dproj.data() + r * ld;
    std::fill_n(dx, C, T(0));
    for (int64_t j = 0; j < K; ++j) {  // output row t + (K-1) - j read this row with tap j
      const int64_t out = t + (K - 1) - j;
      if (out >= seq) continue;
      const T* dpre = sc.dconv.data() + (r + (K - 1) - j) * C;
      for (int64_t c = 0; c < C; ++c) dx[c] += dpre[c] * w.conv[c * K + j];
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t j = 0; j < K; ++j) {
      T sum = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = std::max<int64_t>(0, (K - 1) - j); t < seq; ++t) {
          const int64_t r = b * seq + t;
          sum += sc.dconv[r * C + c] * a.proj[(r - (K - 1) + j) * ld + c];
        }
      g.conv[c * K + j] += sum;
    }
  }
}

}  // namespace

template <typename T>
void deltanet_backward(T* dh, const DeltaNetGrads<T>& g, const T* dout, const T* h, int64_t batch, int64_t seq,
                       const DeltaNetShape& s, const DeltaNetWeights<T>& w, const DeltaNetActivations<T>& a,
                       DeltaNetScratch<T>& sc) {
  const LinearAttentionConfig& la = s.la;
  const int64_t n = batch * seq;
  if (static_cast<int64_t>(sc.dproj.size()) != n * la.in_width()) sc.resize(n, la);
  gated_norm_backward(sc, g, dout, n, s, w, a);
  const k::DeltaRuleInputs<T> in{a.q.data(), a.k.data(), a.v.data(), a.g.data(), a.beta.data(), nullptr};
  const k::DeltaRuleGrads<T> rule{sc.dq.data(), sc.dk.data(), sc.dv.data(), sc.dg.data(), sc.dbeta.data(), nullptr};
  k::delta_rule_chunked_backward<T>(rule, sc.d_o.data(), nullptr, in,
                                    {batch, seq, la.n_v_heads, la.k_head_dim, la.v_head_dim}, kChunk);
  gates_backward(sc, g, n, la, w, a);
  qkv_backward(sc, n, la, a);
  conv_backward(sc, g, batch, seq, la, w, a);
  k::linear_backward(dh, g.in_proj, sc.dproj.data(), h, w.in_proj, n, s.d_model, la.in_width(),
                     /*accumulate_dx=*/false);
}

template void deltanet_backward<float>(float*, const DeltaNetGrads<float>&, const float*, const float*, int64_t,
                                       int64_t, const DeltaNetShape&, const DeltaNetWeights<float>&,
                                       const DeltaNetActivations<float>&, DeltaNetScratch<float>&);
template void deltanet_backward<double>(double*, const DeltaNetGrads<double>&, const double*, const double*, int64_t,
                                        int64_t, const DeltaNetShape&, const DeltaNetWeights<double>&,
                                        const DeltaNetActivations<double>&, DeltaNetScratch<double>&);

}  // namespace gatedlm::model
