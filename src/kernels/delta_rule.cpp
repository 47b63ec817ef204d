// The gated delta rule's recurrence and its hand-written backward (delta_rule.h).
#include "kernels/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/delta_rule_step.h"

namespace gatedlm::kernels {
namespace {

// Offsets of one (sequence b, head h)'s rows in the layouts of delta_rule.h.
struct HeadRows {
  const DeltaRuleShape& s;
  int64_t b, h;
  int64_t key(int64_t t) const { return ((b * s.seq + t) * s.heads + h) * s.key_dim; }
  int64_t value(int64_t t) const { return ((b * s.seq + t) * s.heads + h) * s.value_dim; }
  int64_t scalar(int64_t t) const { return (b * s.seq + t) * s.heads + h; }
  int64_t state() const { return (b * s.heads + h) * s.key_dim * s.value_dim; }
};

template <typename T>
void load_state(T* S, const T* initial_state, const HeadRows& r) {
  const int64_t n = r.s.key_dim * r.s.value_dim;
  if (initial_state)
    std::copy(initial_state + r.state(), initial_state + r.state() + n, S);
  else
    std::fill(S, S + n, T(0));
}

// Runs tokens [t0, t1) of one head on S; writes out rows when out is not null and, when
// states is not null, the state after each token at states + (t - t0 + 1) * dk * dv.
template <typename T>
void run_tokens(T* S, T* out, T* states, const DeltaRuleInputs<T>& in, const HeadRows& r, int64_t t0, int64_t t1,
                T* scratch) {
  const int64_t dk = r.s.key_dim, dv = r.s.value_dim, n = dk * dv;
  for (int64_t t = t0; t < t1; ++t) {
    delta_rule_step(S, out ? out + r.value(t) : nullptr, in.q + r.key(t), in.k + r.key(t), in.v + r.value(t),
                    in.g[r.scalar(t)], in.beta[r.scalar(t)], dk, dv, scratch);
    if (states) std::copy(S, S + n, states + (t - t0 + 1) * n);
  }
}

// Scratch vectors of one token's backward, each [d_v].
template <typename T>
struct StepScratch {
  std::vector<T> error, d_write;
};

// One token backward. dS [dk, dv] holds the gradient with respect to the state after token t
// (S_cur) and leaves holding the one before it (S_prev); the token's gradients are written.
// Forward: S' = a S_prev (a = e^g); e = v - S'^T k; u = beta e; S_cur = S' + k u^T; o = S_cur^T q.
template <typename T>
void recurrent_step_backward(T* dS, const T* S_prev, const T* S_cur, const T* d_o, const DeltaRuleInputs<T>& in,
                             const DeltaRuleGrads<T>& gr, const HeadRows& r, int64_t t, StepScratch<T>& w) {
  const int64_t dk = r.s.key_dim, dv = r.s.value_dim;
  const T *q = in.q + r.key(t), *k = in.k + r.key(t), *v = in.v + r.value(t);
  const T a = std::exp(in.g[r.scalar(t)]), beta = in.beta[r.scalar(t)];
  T *dq = gr.dq + r.key(t), *dk_out = gr.dk + r.key(t), *dv_out = gr.dv + r.value(t);
  T* e = w.error.data();
  T* du = w.d_write.data();
  // o = S_cur^T q: dq = S_cur do, dS += q do^T. e = v - a S_prev^T k.
  std::copy(v, v + dv, e);
  for (int64_t i = 0; i < dk; ++i) {
    T sum = 0;
    for (int64_t j = 0; j < dv; ++j) {
      sum += S_cur[i * dv + j] * d_o[j];
      dS[i * dv + j] += q[i] * d_o[j];
      e[j] -= a * S_prev[i * dv + j] * k[i];
    }
    dq[i] = sum;
  }
  // S_cur = S' + k u^T: dk = dS u, du = dS^T k.
  std::fill(du, du + dv, T(0));
  for (int64_t i = 0; i < dk; ++i) {
    T sum = 0;
    for (int64_t j = 0; j < dv; ++j) {
      sum += dS[i * dv + j] * beta * e[j];
      du[j] += dS[i * dv + j] * k[i];
    }
    dk_out[i] = sum;
  }
  // u = beta e, e = v - S'^T k: dbeta = du.e, dv = beta du, d(S'^T k) = -beta du.
  T dbeta = 0;
  for (int64_t j = 0; j < dv; ++j) {
    dbeta += du[j] * e[j];
    dv_out[j] = beta * du[j];
  }
  gr.dbeta[r.scalar(t)] = dbeta;
  // dS' = dS - k (beta du)^T, dk += S' (-beta du), dg = <dS', S'>, dS_prev = a dS'.
  T dg = 0;
  for (int64_t i = 0; i < dk; ++i) {
    T sum = 0;
    for (int64_t j = 0; j < dv; ++j) {
      const T s_decayed = a * S_prev[i * dv + j];
      const T d_decayed = dS[i * dv + j] - k[i] * dv_out[j];
      sum -= s_decayed * dv_out[j];
      dg += d_decayed * s_decayed;
      dS[i * dv + j] = a * d_decayed;
    }
    dk_out[i] += sum;
  }
  gr.dg[r.scalar(t)] = dg;
}

// The backward of one head: the state every kCheckpointTokens tokens from a forward pass,
// then segment by segment from the end, the segment's states recomputed and walked back.
template <typename T>
void recurrent_backward_head(const DeltaRuleGrads<T>& gr, const T* d_out, const T* d_final_state,
                             const DeltaRuleInputs<T>& in, const HeadRows& r) {
  const int64_t dk = r.s.key_dim, dv = r.s.value_dim, n = dk * dv, seq = r.s.seq;
  const int64_t segments = (seq + kCheckpointTokens - 1) / kCheckpointTokens;
  std::vector<T> checkpoints(std::max<int64_t>(segments, 1) * n), states((kCheckpointTokens + 1) * n), dS(n);
  std::vector<T> scratch(dv);
  load_state(checkpoints.data(), in.initial_state, r);
  for (int64_t seg = 0; seg + 1 < segments; ++seg) {
    T* next = checkpoints.data() + (seg + 1) * n;
    std::copy(next - n, next, next);
    run_tokens<T>(next, nullptr, nullptr, in, r, seg * kCheckpointTokens, (seg + 1) * kCheckpointTokens,
                  scratch.data());
  }
  if (d_final_state)
    std::copy(d_final_state + r.state(), d_final_state + r.state() + n, dS.begin());
  else
    std::fill(dS.begin(), dS.end(), T(0));
  StepScratch<T> work{std::vector<T>(dv), std::vector<T>(dv)};
  for (int64_t seg = segments - 1; seg >= 0; --seg) {
    const int64_t t0 = seg * kCheckpointTokens, t1 = std::min(seq, t0 + kCheckpointTokens);
    std::copy(checkpoints.data() + seg * n, checkpoints.data() + (seg + 1) * n, states.begin());
    std::vector<T> S(states.begin(), states.begin() + n);
    run_tokens<T>(S.data(), nullptr, states.data(), in, r, t0, t1, scratch.data());
    for (int64_t t = t1 - 1; t >= t0; --t) {
      const T* S_prev = states.data() + (t - t0) * n;
      recurrent_step_backward(dS.data(), S_prev, S_prev + n, d_out + r.value(t), in, gr, r, t, work);
    }
  }
  if (gr.d_initial_state) std::copy(dS.begin(), dS.end(), gr.d_initial_state + r.state());
}

// Below this many multiply-adds in all, threads cost more to start and join than they save
// (a decode step of a small model, the finite-difference tests).
constexpr int64_t kThreadedWork = 1 << 16;

bool worth_threads(const DeltaRuleShape& s) { return s.batch * s.heads * s.seq * s.key_dim * s.value_dim >= kThreadedWork; }

}  // namespace

void check_delta_rule_shape(const DeltaRuleShape& s) {
  if (s.batch < 0 || s.seq < 0 || s.heads < 0 || s.key_dim < 1 || s.value_dim < 1)
    fail("delta rule: bad shape batch=", s.batch, " seq=", s.seq, " heads=", s.heads, " key_dim=", s.key_dim,
         " value_dim=", s.value_dim, " (sizes must be >= 0, head widths >= 1)");
}

template <typename T>
void delta_rule_recurrent_forward(T* out, T* final_state, const DeltaRuleInputs<T>& in, const DeltaRuleShape& s) {
  check_delta_rule_shape(s);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (worth_threads(s))
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const HeadRows r{s, b, h};
      // Per thread, reused: a decode step runs this for every head of every linear layer.
      thread_local std::vector<T> S, scratch;
      scratch.resize(static_cast<size_t>(s.value_dim));
      if (final_state && final_state == in.initial_state) {
        // A carried state updated where it lies, as delta_rule_recurrent_runs does for a decode
        // batch (copying each head's 64 KiB in and out was 11 % of a hybrid batch-8 step, as
        // much as the delta rule itself).
        run_tokens<T>(final_state + r.state(), out, nullptr, in, r, 0, s.seq, scratch.data());
        continue;
      }
      S.resize(static_cast<size_t>(s.key_dim * s.value_dim));
      load_state(S.data(), in.initial_state, r);
      run_tokens<T>(S.data(), out, nullptr, in, r, 0, s.seq, scratch.data());
      if (final_state) std::copy(S.begin(), S.end(), final_state + r.state());
    }
}

template <typename T>
void delta_rule_recurrent_runs(T* out, std::span<const DeltaRuleRun<T>> runs, const DeltaRuleInputs<T>& in,
                               const DeltaRuleShape& s) {
  check_delta_rule_shape(s);
  if (s.batch != 1) fail("delta rule runs: the rows are one sequence (batch 1), not ", s.batch);
  int64_t tokens = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const DeltaRuleRun<T>& run = runs[i];
    if (run.first < 0 || run.count < 0 || run.first + run.count > s.seq || !run.state)
      fail("delta rule runs: run ", i, " (rows [", run.first, ", +", run.count, ") of ", s.seq,
           run.state ? "" : ", no state", ") is not a run of the inputs");
    tokens += run.count;
  }
  const int64_t count = static_cast<int64_t>(runs.size()), n = s.key_dim * s.value_dim;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (worth_threads({1, tokens, s.heads, s.key_dim, s.value_dim}))
  for (int64_t i = 0; i < count; ++i)
    for (int64_t h = 0; h < s.heads; ++h) {
      thread_local std::vector<T> scratch;  // per thread, reused, as the forward's
      scratch.resize(static_cast<size_t>(s.value_dim));
      const DeltaRuleRun<T>& run = runs[i];
      run_tokens<T>(run.state + h * n, out, nullptr, in, HeadRows{s, 0, h}, run.first, run.first + run.count,
                    scratch.data());
    }
}

template <typename T>
void delta_rule_recurrent_backward(const DeltaRuleGrads<T>& grads, const T* d_out, const T* d_final_state,
                                   const DeltaRuleInputs<T>& in, const DeltaRuleShape& s) {
  check_delta_rule_shape(s);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (worth_threads(s))
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) recurrent_backward_head(grads, d_out, d_final_state, in, HeadRows{s, b, h});
}

template void delta_rule_recurrent_forward<float>(float*, float*, const DeltaRuleInputs<float>&,
                                                  const DeltaRuleShape&);
template void delta_rule_recurrent_forward<double>(double*, double*, const DeltaRuleInputs<double>&,
                                                   const DeltaRuleShape&);
template void delta_rule_recurrent_runs<float>(float*, std::span<const DeltaRuleRun<float>>,
                                               const DeltaRuleInputs<float>&, const DeltaRuleShape&);
template void delta_rule_recurrent_runs<double>(double*, std::span<const DeltaRuleRun<double>>,
                                                const DeltaRuleInputs<double>&, const DeltaRuleShape&);
template void delta_rule_recurrent_backward<float>(const DeltaRuleGrads<float>&, const float*, const float*,
                                                   const DeltaRuleInputs<float>&, const DeltaRuleShape&);
template void delta_rule_recurrent_backward<double>(const DeltaRuleGrads<double>&, const double*, const double*,
                                                    const DeltaRuleInputs<double>&, const DeltaRuleShape&);

}  // namespace gatedlm::kernels
