#include "model/switch_heads.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/grow.h"
#include "kernels/activations.h"
#include "kernels/matmul.h"

namespace gatedlm::model {

using kernels::MatmulShape;

std::string switch_router_suffix(const ModelConfig& c) {
  return c.switch_heads.switches_k() ? "self_attn.kv_router.weight" : "self_attn.v_router.weight";
}

std::string switch_expert_suffix(char kind, int64_t expert) {
  return cat("self_attn.", kind, "_experts.", expert, ".weight");
}

std::vector<SwitchHeadsTensor> switch_heads_tensors(const ModelConfig& c) {
  const SwitchHeadsConfig& sw = c.switch_heads;
  std::vector<SwitchHeadsTensor> t;
  if (!sw.on()) return t;
  t.push_back({switch_router_suffix(c), {c.n_kv_heads * sw.n_experts, c.d_model}, true});
  for (char kind : {'k', 'v'}) {
    if (kind == 'k' && !sw.switches_k()) continue;
    for (int64_t e = 0; e < sw.n_experts; ++e) t.push_back({switch_expert_suffix(kind, e), {c.kv_dim(), c.d_model}, false});
  }
  return t;
}

SwitchHeadsCounts switch_heads_counts(const ModelConfig& c) {
  SwitchHeadsCounts n;
  if (!c.switch_heads.on()) return n;
  const int64_t kinds = c.switch_heads.switches_k() ? 2 : 1, expert = c.kv_dim() * c.d_model;
  n.router = c.n_layers * c.n_kv_heads * c.switch_heads.n_experts * c.d_model;
  n.experts = c.n_layers * kinds * c.switch_heads.n_experts * expert;
  n.experts_active = c.n_layers * kinds * c.switch_heads.top_k * expert;
  return n;
}

namespace {

// The dimensions every function below uses.
struct Dims {
  int64_t H, E, K, hd, kvd, d;
  explicit Dims(const ModelConfig& c)
      : H(c.n_kv_heads), E(c.switch_heads.n_experts), K(c.switch_heads.top_k), hd(c.head_dim), kvd(c.kv_dim()),
        d(c.d_model) {}
};

// Loops with less work than this run on the calling thread: a parallel region costs more
// than the work for small groups and decoding (one token), above all on shared cores.
constexpr int64_t kParallelWork = int64_t{1} << 15;

// oneDNN keeps one primitive per product shape (kernels/matmul.cpp) and a group's row
// count changes every step, so float products run on a few padded row counts: multiples
// of an eighth of the largest power of two below, at least 16 (at most 1/8 extra rows). A
// product's padded output rows spill into the next groups' rows, which are written after
// it (groups run in order), or into the slack rows at the end of the buffer. Double (the
// naive products of the finite-difference tests) has no primitives and is not padded.
template <typename T>
int64_t padded_rows(int64_t m) {
  if (!std::is_same_v<T, float>) return m;
  if (m <= 16) return 16;
  const int64_t step = std::max<int64_t>(16, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(m))) / 8);
  return (m + step - 1) / step * step;
}
int64_t rows_with_slack(int64_t rows) { return rows + rows / 8 + 16; }

// Selection order: larger pre-activation first, equal ones by lower index; NaN ranks
// below everything (so a diverged router still selects k distinct experts).
template <typename T>
bool ranks_before(T a, int64_t ia, T b, int64_t ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return nb;
  if (!na && a != b) return a > b;
  return ia < ib;
}

// state.expert and state.score from state.router_pre: for each (t, h) the k first experts
// in the order above, best first. Each round takes the best expert ranked after the
// previous round's, which needs no "already taken" flags.
template <typename T>
void select_experts(SwitchHeadsState<T>& st, const Dims& m) {
#pragma omp parallel for schedule(static) if (st.n * m.H * m.E * m.K > kParallelWork)
  for (int64_t t = 0; t < st.n; ++t)
    for (int64_t h = 0; h < m.H; ++h) {
      const T* pre = st.router_pre.data() + t * m.H * m.E + h * m.E;
      int32_t* chosen = st.expert.data() + (t * m.H + h) * m.K;
      T* score = st.score.data() + (t * m.H + h) * m.K;
      int64_t prev = -1;
      for (int64_t j = 0; j < m.K; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < m.E; ++e) {
          if (prev >= 0 && !ranks_before(pre[prev], prev, pre[e], e)) continue;  // not after prev
          if (best < 0 || ranks_before(pre[e], e, pre[best], best)) best = e;
        }
        chosen[j] = static_cast<int32_t>(best);
        score[j] = kernels::sigmoid(pre[best]);
        prev = best;
      }
    }
}

// Groups the selections per (head, expert), tokens ascending inside a group (a counting
// sort; sequential, so the order is deterministic).
template <typename T>
void group_selections(SwitchHeadsState<T>& st, const Dims& m) {
  const int64_t groups = m.H * m.E, selections = st.n * m.H * m.K;
  st.group_start.assign(static_cast<size_t>(groups + 1), 0);
  for (int64_t s = 0; s < selections; ++s) {
    const int64_t h = (s / m.K) % m.H;
    ++st.group_start[h * m.E + st.expert[s] + 1];
  }
  for (int64_t g = 0; g < groups; ++g) st.group_start[g + 1] += st.group_start[g];
  std::vector<int64_t> next(st.group_start.begin(), st.group_start.end() - 1);
  for (int64_t s = 0; s < selections; ++s) {
    const int64_t t = s / (m.H * m.K), h = (s / m.K) % m.H;
    const int64_t row = next[h * m.E + st.expert[s]]++;
    st.grouped_row[s] = row;
    st.group_token[row] = static_cast<int32_t>(t);
  }
}

// x_g [padded_rows(m), d] = the rows of x [n, d] of the group's tokens, then zero rows.
template <typename T>
void gather_rows(std::vector<T>& x_g, const T* x, const int32_t* tokens, int64_t m, int64_t d) {
  const int64_t padded = padded_rows<T>(m);
  grow(x_g, padded * d);
  T* out = x_g.data();
#pragma omp parallel for schedule(static) if (m * d > kParallelWork)
  for (int64_t i = 0; i < m; ++i) std::copy_n(x + static_cast<int64_t>(tokens[i]) * d, d, out + i * d);
  std::fill(out + m * d, out + padded * d, T(0));
}

// Rows h*hd .. (h+1)*hd of expert e's [kv_dim, d] projection: a contiguous [hd, d] block.
inline int64_t head_block_offset(int64_t e, int64_t h, const Dims& m) { return e * m.kvd * m.d + h * m.hd * m.d; }
template <typename W>
W* head_block(W* experts, int64_t e, int64_t h, const Dims& m) {
  return experts + head_block_offset(e, h, m);
}
template <typename T>
kernels::Weight<T> head_block(const kernels::Weight<T>& experts, int64_t e, int64_t h, const Dims& m) {
  return experts.at(head_block_offset(e, h, m));
}

// out [n, kv_dim]: row t, head h = sum_j score * expert output, j ascending (best first).
template <typename T>
void combine(T* out, const T* expert_out, const SwitchHeadsState<T>& st, const Dims& m) {
#pragma omp parallel for schedule(static) if (st.n * m.kvd * m.K > kParallelWork)
  for (int64_t t = 0; t < st.n; ++t)
    for (int64_t h = 0; h < m.H; ++h) {
      T* o = out + t * m.kvd + h * m.hd;
      std::fill_n(o, m.hd, T(0));
      for (int64_t j = 0; j < m.K; ++j) {
        const int64_t s = (t * m.H + h) * m.K + j;
        const T sc = st.score[s];
        const T* p = expert_out + st.grouped_row[s] * m.hd;
        for (int64_t i = 0; i < m.hd; ++i) o[i] += sc * p[i];
      }
    }
}

}  // namespace

template <typename T>
void switch_heads_forward(T* k0, T* v0, SwitchHeadsState<T>& st, SwitchHeadsScratch<T>& scratch, const T* x,
                          int64_t n, const SwitchHeadsWeights<T>& w, const ModelConfig& c) {
  const Dims m(c);
  const bool with_k = c.switch_heads.switches_k();
  const int64_t selections = n * m.H * m.K;
  st.n = n;
  grow(st.router_pre, n * m.H * m.E);
  grow(st.expert, selections);
  grow(st.score, selections);
  grow(st.grouped_row, selections);
  grow(st.group_token, selections);
  grow(st.v_out, rows_with_slack(selections) * m.hd);
  if (with_k) grow(st.k_out, rows_with_slack(selections) * m.hd);
  kernels::linear_forward(st.router_pre.data(), x, w.router, n, m.d, m.H * m.E);
  select_experts(st, m);
  group_selections(st, m);
  for (int64_t h = 0; h < m.H; ++h)
    for (int64_t e = 0; e < m.E; ++e) {
      const int64_t start = st.group_start[h * m.E + e], rows = st.group_start[h * m.E + e + 1] - start;
      if (rows == 0) continue;  // nobody chose this expert for this head: nothing to compute
      gather_rows(scratch.x, x, st.group_token.data() + start, rows, m.d);
      // [rows, d] x [hd, d]^T -> the group's rows of the expert outputs (padded rows spill).
      const MatmulShape shape{.M = padded_rows<T>(rows), .N = m.hd, .K = m.d, .trans_b = true};
      kernels::matmul(st.v_out.data() + start * m.hd, scratch.x.data(), head_block(w.v_experts, e, h, m), shape);
      if (with_k)
        kernels::matmul(st.k_out.data() + start * m.hd, scratch.x.data(), head_block(w.k_experts, e, h, m), shape);
    }
  combine(v0, st.v_out.data(), st, m);
  if (with_k) combine(k0, st.k_out.data(), st, m);
}

template <typename T>
void switch_heads_backward(T* dx, const SwitchHeadsGrads<T>& g, SwitchHeadsScratch<T>& scratch, const T* dk0,
                           const T* dv0, const T* x, const SwitchHeadsState<T>& st,
                           const SwitchHeadsWeights<T>& w, const ModelConfig& c) {
  const Dims m(c);
  const bool with_k = c.switch_heads.switches_k();
  const int64_t n = st.n, selections = n * m.H * m.K;
  grow(scratch.dpre, n * m.H * m.E);
  // The padded products below read dP rows past a group's end: the next groups' (finite,
  // multiplied by zero input rows) or the slack rows, zeroed here.
  for (std::vector<T>* dp : {&scratch.dv, &scratch.dk}) {
    if (dp == &scratch.dk && !with_k) continue;
    grow(*dp, rows_with_slack(selections) * m.hd);
    std::fill(dp->begin() + selections * m.hd, dp->end(), T(0));
  }
  // Per selection: d expert output = score * d out; d score = d out . expert output; the
  // router pre-activation gets d score * sigmoid' (zero for experts not chosen).
#pragma omp parallel for schedule(static) if (selections * m.hd > kParallelWork)
  for (int64_t t = 0; t < n; ++t) {
    T* dpre = scratch.dpre.data() + t * m.H * m.E;
    std::fill_n(dpre, m.H * m.E, T(0));
    for (int64_t h = 0; h < m.H; ++h)
      for (int64_t j = 0; j < m.K; ++j) {
        const int64_t s = (t * m.H + h) * m.K + j, row = st.grouped_row[s];
        const T sc = st.score[s];
        T dscore = 0;
        auto one_kind = [&](const T* d_out, const T* out, T* d_expert) {
          const T* dy = d_out + t * m.kvd + h * m.hd;
          const T* y = out + row * m.hd;
          T* dp = d_expert + row * m.hd;
          for (int64_t i = 0; i < m.hd; ++i) {
            dscore += dy[i] * y[i];
            dp[i] = sc * dy[i];
          }
        };
        one_kind(dv0, st.v_out.data(), scratch.dv.data());
        if (with_k) one_kind(dk0, st.k_out.data(), scratch.dk.data());
        dpre[h * m.E + st.expert[s]] = dscore * sc * (T(1) - sc);
      }
  }
  kernels::linear_backward(dx, g.router, scratch.dpre.data(), x, w.router.values, n, m.d, m.H * m.E);
  // Per (head, expert) group: dW_e[head rows] += dP^T x_g; dx_g = dP W_e[head rows],
  // scattered back to the group's tokens (distinct within a group: no two rows collide).
  for (int64_t h = 0; h < m.H; ++h)
    for (int64_t e = 0; e < m.E; ++e) {
      const int64_t start = st.group_start[h * m.E + e], rows = st.group_start[h * m.E + e + 1] - start;
      if (rows == 0) continue;
      const int32_t* tokens = st.group_token.data() + start;
      const int64_t padded = padded_rows<T>(rows);
      gather_rows(scratch.x, x, tokens, rows, m.d);  // zero past `rows`: padded dP rows add nothing
      grow(scratch.dx, padded * m.d);
      auto one_kind = [&](T* d_experts, const T* experts, const T* d_out, bool accumulate_dx) {
        const T* dp = d_out + start * m.hd;
        kernels::matmul(head_block(d_experts, e, h, m), dp, scratch.x.data(),
                        MatmulShape{.M = m.hd, .N = m.d, .K = padded, .trans_a = true, .accumulate = true});
        kernels::matmul(scratch.dx.data(), dp, head_block(experts, e, h, m),
                        MatmulShape{.M = padded, .N = m.d, .K = m.hd, .accumulate = accumulate_dx});
      };
      one_kind(g.v_experts, w.v_experts.values, scratch.dv.data(), false);
      if (with_k) one_kind(g.k_experts, w.k_experts.values, scratch.dk.data(), true);
      const T* dxg = scratch.dx.data();
#pragma omp parallel for schedule(static) if (rows * m.d > kParallelWork)
      for (int64_t i = 0; i < rows; ++i) {
        T* row = dx + static_cast<int64_t>(tokens[i]) * m.d;
        const T* src = dxg + i * m.d;
        for (int64_t j = 0; j < m.d; ++j) row[j] += src[j];
      }
    }
}

#define GATEDLM_INSTANTIATE(T)                                                                                   \
  template void switch_heads_forward<T>(T*, T*, SwitchHeadsState<T>&, SwitchHeadsScratch<T>&, const T*, int64_t, \
                                        const SwitchHeadsWeights<T>&, const ModelConfig&);                      \
  template void switch_heads_backward<T>(T*, const SwitchHeadsGrads<T>&, SwitchHeadsScratch<T>&, const T*,      \
                                         const T*, const T*, const SwitchHeadsState<T>&,                        \
                                         const SwitchHeadsWeights<T>&, const ModelConfig&);
GATEDLM_INSTANTIATE(float)
GATEDLM_INSTANTIATE(double)
#undef GATEDLM_INSTANTIATE

}  // namespace gatedlm::model
