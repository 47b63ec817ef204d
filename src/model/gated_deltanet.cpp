// The Gated DeltaNet layer's forward (gated_deltanet.h has the formulas and layouts).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/activations.h"
#include "kernels/delta_rule.h"
#include "kernels/matmul.h"
#include "kernels/parallel_work.h"
#include "kernels/rmsnorm.h"
#include "model/gated_deltanet.h"
#include "model/gated_deltanet_parts.h"

namespace gatedlm::model {

namespace k = kernels;
using namespace deltanet;

template <typename T>
void DeltaNetActivations<T>::resize(int64_t n, const LinearAttentionConfig& la) {
  auto size = [](std::vector<T>& v, int64_t count) { v.assign(static_cast<size_t>(count), T(0)); };
  size(proj, n * la.in_width());
  size(conv_pre, n * la.conv_dim());
  size(q, n * la.n_v_heads * la.k_head_dim);
  size(k, n * la.n_v_heads * la.k_head_dim);
  size(v, n * la.value_dim());
  size(rnorm_q, n * la.n_k_heads);
  size(rnorm_k, n * la.n_k_heads);
  size(g, n * la.n_v_heads);
  size(beta, n * la.n_v_heads);
  for (std::vector<T>* buf : {&o, &normed, &z_gate, &y}) size(*buf, n * la.value_dim());
  size(rstd_o, n * la.n_v_heads);
}

template <typename T>
void DeltaNetScratch<T>::resize(int64_t n, const LinearAttentionConfig& la) {
  auto size = [](std::vector<T>& v, int64_t count) { v.assign(static_cast<size_t>(count), T(0)); };
  size(dproj, n * la.in_width());
  for (std::vector<T>* buf : {&dy, &dnormed, &d_o, &dv}) size(*buf, n * la.value_dim());
  size(dq, n * la.n_v_heads * la.k_head_dim);
  size(dk, n * la.n_v_heads * la.k_head_dim);
  size(dg, n * la.n_v_heads);
  size(dbeta, n * la.n_v_heads);
  size(dconv, n * la.conv_dim());
}

namespace {

// Row t of the causal depthwise convolution of one sequence's rows of proj (row stride ld):
// out[c] = sum_j w[c, j] x[t - (K-1) + j, c], where rows before the first come from history
// [K-1, C] (null: zeros). taps = taps_by_channel(w).
template <typename T>
void conv_row(T* out, const T* proj, int64_t ld, int64_t t, const std::vector<T>& taps, const T* history,
              const LinearAttentionConfig& la) {
  const int64_t C = la.conv_dim(), K = la.conv_kernel;
  std::fill_n(out, C, T(0));
  for (int64_t j = 0; j < K; ++j) {
    const int64_t u = t - (K - 1) + j;
    const T* x = u >= 0 ? proj + u * ld : history ? history + (K - 1 + u) * C : nullptr;
    if (!x) continue;
    const T* tap = taps.data() + j * C;
    for (int64_t c = 0; c < C; ++c) out[c] += tap[c] * x[c];
  }
}

// conv_pre [count, C] <- the convolution of one sequence's `count` rows of proj (conv_row).
template <typename T>
void conv_forward(T* conv_pre, const T* proj, int64_t ld, int64_t count, const std::vector<T>& taps,
                  const T* history, const LinearAttentionConfig& la) {
  const int64_t C = la.conv_dim();
#pragma omp parallel for schedule(static) if (k::rows_in_parallel(count, C * la.conv_kernel))
  for (int64_t t = 0; t < count; ++t) conv_row(conv_pre + t * C, proj, ld, t, taps, history, la);
}

// history [K-1, C] <- the last K-1 convolution inputs after a run of `count` rows, in place: the
// newest rows of the old history that stay (zeros when fresh) move to the front, the run's last
// rows fill the rest (a decode step of a batch did this for every sequence and layer through a
// vector of its own).
template <typename T>
void conv_history_update(T* history, const T* proj, int64_t ld, int64_t count, bool fresh,
                         const LinearAttentionConfig& la) {
  const int64_t C = la.conv_dim(), keep = la.conv_kernel - 1;
  const int64_t kept = std::max<int64_t>(keep - count, 0);  // old rows that stay: old row i + count -> row i
  if (fresh) std::fill_n(history, kept * C, T(0));
  else std::copy(history + (keep - kept) * C, history + keep * C, history);  // to the front: a forward copy is safe
  for (int64_t i = kept; i < keep; ++i) std::copy_n(proj + (count - keep + i) * ld, C, history + i * C);
}

// One row's q and k from act = SiLU(its convolution) [conv_dim]: L2-normalised per key head
// (q also scaled by 1/sqrt(d_k)) and repeated to the value heads it serves (la.value_head).
template <typename T>
void normalise_keys(DeltaNetActivations<T>& a, int64_t r, const T* act, const LinearAttentionConfig& la) {
  const int64_t nk = la.n_k_heads, nv = la.n_v_heads, dk = la.k_head_dim, rep = la.heads_per_key(), kd = la.key_dim();
  const T q_scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dk)));
  for (int64_t j = 0; j < nk; ++j) {
    for (int which = 0; which < 2; ++which) {  // q, then k
      const T* x = act + which * kd + j * dk;
      T sum = 0;
      for (int64_t i = 0; i < dk; ++i) sum += x[i] * x[i];
      const T rn = T(1) / std::sqrt(sum + static_cast<T>(kL2Eps));
      (which == 0 ? a.rnorm_q : a.rnorm_k)[r * nk + j] = rn;
      const T scale = rn * (which == 0 ? q_scale : T(1));
      T* dst = (which == 0 ? a.q : a.k).data();
      for (int64_t m = 0; m < rep; ++m) {
        const int64_t h = la.value_head(j, m);
        for (int64_t i = 0; i < dk; ++i) dst[(r * nv + h) * dk + i] = x[i] * scale;
      }
    }
  }
}

// SiLU of the convolution, then q and k (normalise_keys), v copied per value head; beta, g
// and SiLU(z) from the other columns of proj. Rows are independent; the SiLUs run through the
// kernel set's vector rows.
template <typename T>
void mix_inputs(DeltaNetActivations<T>& a, int64_t n, const DeltaNetWeights<T>& w, const LinearAttentionConfig& la) {
  const ProjColumns col(la);
  const int64_t C = la.conv_dim(), nv = la.n_v_heads, vd = la.value_dim(), kd = la.key_dim();
#pragma omp parallel if (k::rows_in_parallel(n, C + vd))
  {
    std::vector<T> act(static_cast<size_t>(2 * kd));  // this thread's row of SiLU(q|k)
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const T* pre = a.conv_pre.data() + r * C;
      k::activate_row(act.data(), pre, 2 * kd, k::Activation::silu);
      normalise_keys(a, r, act.data(), la);
      k::activate_row(a.v.data() + r * vd, pre + 2 * kd, vd, k::Activation::silu);
      const T* p = a.proj.data() + r * col.width;
      for (int64_t h = 0; h < nv; ++h) {
        a.beta[r * nv + h] = k::sigmoid(p[col.b + h]);
        a.g[r * nv + h] = -std::exp(w.A_log[h]) * softplus(p[col.a + h] + w.dt_bias[h]);
      }
      k::activate_row(a.z_gate.data() + r * vd, p + col.z, vd, k::Activation::silu);
    }
  }
}

// The gated RMSNorm and the output projection: o -> normed -> y -> out [n, d].
template <typename T>
void gated_norm_out(T* out, DeltaNetActivations<T>& a, int64_t n, const DeltaNetShape& s,
                    const DeltaNetWeights<T>& w, PartClock& clock) {
  const LinearAttentionConfig& la = s.la;
  const int64_t vd = la.value_dim();
  k::rmsnorm_forward(a.normed.data(), a.rstd_o.data(), a.o.data(), w.norm, n * la.n_v_heads, la.v_head_dim,
                     s.norm_eps);
#pragma omp parallel for simd schedule(static) if (k::elementwise_in_parallel(n * vd))
  for (int64_t i = 0; i < n * vd; ++i) a.y[i] = a.normed[i] * a.z_gate[i];
  clock.charge(&DeltaNetTimes::elementwise);
  k::linear_forward(out, a.y.data(), w.out_proj, n, vd, s.d_model);
  clock.charge(&DeltaNetTimes::products);
}

template <typename T>
k::DeltaRuleShape rule_shape(int64_t batch, int64_t seq, const LinearAttentionConfig& la) {
  return {batch, seq, la.n_v_heads, la.k_head_dim, la.v_head_dim};
}

// a.conv_pre <- the convolution of every run's rows from its state's history (none when
// fresh), in one loop over the rows of all runs (a decode batch has one row per run); then each
// run's history moves on to its last inputs.
template <typename T>
void convolve_runs(DeltaNetActivations<T>& a, int64_t n, std::span<const DeltaNetRun<T>> runs,
                   const DeltaNetWeights<T>& w, const LinearAttentionConfig& la) {
  const int64_t ld = la.in_width(), C = la.conv_dim();
  const std::vector<T> taps = taps_by_channel(w.conv, la);
  std::vector<int64_t> run_of(static_cast<size_t>(n), -1);
  for (size_t i = 0; i < runs.size(); ++i) {
    const DeltaNetRun<T>& run = runs[i];
    if (run.first < 0 || run.count < 1 || run.first + run.count > n)
      fail("deltanet: run [", run.first, ", +", run.count, ") outside the ", n, " rows");
    std::fill_n(run_of.begin() + run.first, run.count, static_cast<int64_t>(i));
  }
#pragma omp parallel for schedule(static) if (k::rows_in_parallel(n, C * la.conv_kernel))
  for (int64_t r = 0; r < n; ++r) {
    if (run_of[r] < 0) continue;  // a row of no run: its output is not read
    const DeltaNetRun<T>& run = runs[run_of[r]];
    conv_row(a.conv_pre.data() + r * C, a.proj.data() + run.first * ld, ld, r - run.first, taps,
             run.fresh ? nullptr : run.state.conv, la);
  }
  for (const DeltaNetRun<T>& run : runs)
    conv_history_update(run.state.conv, a.proj.data() + run.first * ld, ld, run.count, run.fresh, la);
}

}  // namespace

template <typename T>
void deltanet_forward(T* out, const T* h, int64_t batch, int64_t seq, const DeltaNetShape& s,
                      const DeltaNetWeights<T>& w, DeltaNetActivations<T>& a, DeltaNetTimes* times,
                      const HookCaller<T>& hooks, int64_t layer) {
  const LinearAttentionConfig& la = s.la;
  const int64_t n = batch * seq, ld = la.in_width();
  PartClock clock(times);
  if (static_cast<int64_t>(a.proj.size()) != n * ld) a.resize(n, la);
  k::linear_forward(a.proj.data(), h, w.in_proj, n, s.d_model, ld);
  clock.charge(&DeltaNetTimes::products);
  const std::vector<T> taps = taps_by_channel(w.conv, la);
  for (int64_t b = 0; b < batch; ++b)
    conv_forward(a.conv_pre.data() + b * seq * la.conv_dim(), a.proj.data() + b * seq * ld, ld, seq, taps,
                 static_cast<const T*>(nullptr), la);
  mix_inputs(a, n, w, la);
  hooks.forward(layer, HookPoint::lin_beta, a.beta.data(), {la.n_v_heads});
  hooks.forward(layer, HookPoint::lin_decay, a.g.data(), {la.n_v_heads});
  hooks.forward(layer, HookPoint::lin_out_gate, a.z_gate.data(), {la.n_v_heads, la.v_head_dim});
  clock.charge(&DeltaNetTimes::elementwise);
  const k::DeltaRuleInputs<T> in{a.q.data(), a.k.data(), a.v.data(), a.g.data(), a.beta.data(), nullptr};
  const k::DeltaRuleShape shape = rule_shape<T>(batch, seq, la);
  a.chunk_states.resize(static_cast<size_t>(k::delta_rule_chunk_states_size(shape, kChunk)));
  std::vector<T> last_state;  // [batch, n_v, d_k, d_v], for hook_state only
  if (hooks.wants(layer, HookPoint::lin_state)) last_state.resize(batch * delta_state_size(la));
  k::delta_rule_chunked_forward<T>(a.o.data(), last_state.empty() ? nullptr : last_state.data(), in, shape, kChunk,
                                   a.chunk_states.data());
  if (!last_state.empty())
    hooks.forward_shaped(layer, HookPoint::lin_state, last_state.data(),
                         {batch, la.n_v_heads, la.k_head_dim, la.v_head_dim});
  clock.charge(&DeltaNetTimes::delta_rule);
  gated_norm_out(out, a, n, s, w, clock);
}

// Each run: the convolution over its rows with its state's history, then (after the rows'
// inputs are mixed) the delta rule from its state; runs of kChunkedFrom tokens or more (a
// prompt) take the chunked form, shorter ones (decode) the recurrence.
template <typename T>
void deltanet_forward_runs(T* out, const T* h, int64_t n, std::span<const DeltaNetRun<T>> runs,
                           const DeltaNetShape& s, const DeltaNetWeights<T>& w, DeltaNetActivations<T>& a) {
  const LinearAttentionConfig& la = s.la;
  const int64_t ld = la.in_width(), nv = la.n_v_heads, dk = la.k_head_dim;
  if (static_cast<int64_t>(a.proj.size()) < n * ld) a.resize(n, la);
  k::linear_forward(a.proj.data(), h, w.in_proj, n, s.d_model, ld);
  convolve_runs(a, n, runs, w, la);
  mix_inputs(a, n, w, la);
  std::vector<T> initial;
  std::vector<k::DeltaRuleRun<T>> recurrent;
  for (const DeltaNetRun<T>& run : runs) {
    // Short runs (decode) take the recurrence, all in one call below, each updating its carried
    // state in place (a fresh one from zeros); the chunked form reads a copy of the state.
    if (run.count < kChunkedFrom) {
      if (run.fresh) std::fill_n(run.state.delta, delta_state_size(la), T(0));
      recurrent.push_back({run.first, run.count, run.state.delta});
      continue;
    }
    const int64_t r = run.first;
    if (!run.fresh) initial.assign(run.state.delta, run.state.delta + delta_state_size(la));
    const k::DeltaRuleInputs<T> in{a.q.data() + r * nv * dk,     a.k.data() + r * nv * dk, a.v.data() + r * la.value_dim(),
                                   a.g.data() + r * nv,          a.beta.data() + r * nv,
                                   run.fresh ? nullptr : initial.data()};
    k::delta_rule_chunked_forward<T>(a.o.data() + r * la.value_dim(), run.state.delta, in,
                                     rule_shape<T>(1, run.count, la), kChunk);
  }
  const k::DeltaRuleInputs<T> rows{a.q.data(), a.k.data(), a.v.data(), a.g.data(), a.beta.data(), nullptr};
  k::delta_rule_recurrent_runs<T>(a.o.data(), recurrent, rows, rule_shape<T>(1, n, la));
  PartClock untimed(nullptr);
  gated_norm_out(out, a, n, s, w, untimed);
}

template struct DeltaNetActivations<float>;
template struct DeltaNetActivations<double>;
template struct DeltaNetScratch<float>;
template struct DeltaNetScratch<double>;
template void deltanet_forward<float>(float*, const float*, int64_t, int64_t, const DeltaNetShape&,
                                      const DeltaNetWeights<float>&, DeltaNetActivations<float>&, DeltaNetTimes*,
                                      const HookCaller<float>&, int64_t);
template void deltanet_forward<double>(double*, const double*, int64_t, int64_t, const DeltaNetShape&,
                                       const DeltaNetWeights<double>&, DeltaNetActivations<double>&, DeltaNetTimes*,
                                       const HookCaller<double>&, int64_t);
template void deltanet_forward_runs<float>(float*, const float*, int64_t, std::span<const DeltaNetRun<float>>,
                                           const DeltaNetShape&, const DeltaNetWeights<float>&,
                                           DeltaNetActivations<float>&);
template void deltanet_forward_runs<double>(double*, const double*, int64_t, std::span<const DeltaNetRun<double>>,
                                            const DeltaNetShape&, const DeltaNetWeights<double>&,
                                            DeltaNetActivations<double>&);

}  // namespace gatedlm::model
