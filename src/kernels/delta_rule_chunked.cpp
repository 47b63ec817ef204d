// The gated delta rule in chunks (delta_rule.h): the WY / UT-transform form of Yang et al.,
// with the products batched over a group of heads of one sequence through batched_matmul
// (oneDNN); the groups of every sequence on threads of their own (heads_per_group). Float and
// double run with subnormals flushed to zero (float_control.h): fast decays fill the chunk's
// factors with them, and each operation on one took a microcode assist on Intel cores.
#include <algorithm>
#include <cmath>
#include <omp.h>
#include <vector>

#include "core/error.h"
#include "kernels/delta_rule.h"
#include "kernels/float_control.h"
#include "kernels/matmul.h"

namespace gatedlm::kernels {
namespace {

// Per-head work buffers of one chunk, each head's at a fixed stride (the batch stride of the
// products). C = the chunk size; a chunk of c <= C tokens uses the first c rows.
template <typename T>
struct ChunkWorkspace {
  int64_t C, dk, dv, heads;
  std::vector<T> key_gram;    // [heads][C, C]: K K^T
  std::vector<T> system;      // [heads][C, C]: M, strictly lower
  std::vector<T> query_key;   // [heads][C, C]: Q K^T, then (Q K^T) o D
  std::vector<T> inverse;     // [heads][C, C]: (I + M)^-1
  std::vector<T> scaled;      // [heads][C, dk]: -beta e^G K, then e^G Q, then e^(G_c - G) K
  std::vector<T> correction;  // [heads][C, dk]: -(I + M)^-1 diag(beta e^G) K
  std::vector<T> values;      // [heads][C, dv]: diag(beta) V
  std::vector<T> writes;      // [heads][C, dv]: U
  std::vector<T> state;       // [heads][dk, dv]
  std::vector<T> log_decay;   // [heads][C]: G, the cumulative log decay from the chunk start
  std::vector<T> discarded_out;  // [C, row_heads, dv]: the output of chunks run for their state only

  // heads_: the heads this workspace runs (a group of the rows' row_heads)
  ChunkWorkspace(int64_t C_, int64_t dk_, int64_t dv_, int64_t heads_, int64_t row_heads)
      : C(C_), dk(dk_), dv(dv_), heads(heads_), key_gram(heads * C * C), system(heads * C * C), query_key(heads * C * C),
        inverse(heads * C * C), scaled(heads * C * dk), correction(heads * C * dk), values(heads * C * dv),
        writes(heads * C * dv), state(heads * dk * dv), log_decay(heads * C), discarded_out(C * row_heads * dv) {}
};

// Where one chunk's rows lie: token-major rows of row_heads heads, head h at h * d; the
// pointers are at the chunk's first token and the first head of the workspace's group.
template <typename T>
struct ChunkRows {
  const T *q, *k, *v, *g, *beta;
  T* out;
  int64_t c;          // tokens in this chunk
  int64_t row_heads;  // heads in a token row
};

// The products of one chunk over every head: C = A B with A and B either token rows
// (ld heads * d, item stride d) or workspace buffers (packed, item stride given).
struct Operand {
  int64_t ld, stride;
};

template <typename T>
void product(T* C, Operand c_op, const T* A, Operand a_op, const T* B, Operand b_op, MatmulShape shape,
             int64_t heads) {
  shape.lda = a_op.ld;
  shape.ldb = b_op.ld;
  shape.ldc = c_op.ld;
  batched_matmul(C, A, B, shape, BatchStrides{.batch = heads, .a = a_op.stride, .b = b_op.stride, .c = c_op.stride});
}

// Per head, by hand: G, M_tj = beta_t e^(G_t - G_j) (K K^T)_tj below the diagonal, its
// inverse (I + M)^-1 by forward substitution, and the scaled rows -beta e^G K and beta V.
template <typename T>
void prepare_system(ChunkWorkspace<T>& w, const ChunkRows<T>& rows, int64_t h) {
  const int64_t C = w.C, c = rows.c, H = rows.row_heads, dk = w.dk, dv = w.dv;
  T* G = w.log_decay.data() + h * C;
  const T* P = w.key_gram.data() + h * C * C;
  T* M = w.system.data() + h * C * C;
  T* inv = w.inverse.data() + h * C * C;
  T running = 0;
  for (int64_t t = 0; t < c; ++t) G[t] = running += rows.g[t * H + h];
  for (int64_t t = 0; t < c; ++t) {
    const T beta = rows.beta[t * H + h];
    for (int64_t j = 0; j < t; ++j) M[t * c + j] = beta * std::exp(G[t] - G[j]) * P[t * c + j];
    T* inv_row = inv + t * c;
    std::fill(inv_row, inv_row + c, T(0));
    inv_row[t] = 1;
    for (int64_t l = 0; l < t; ++l) {
      const T m = M[t * c + l];
      for (int64_t j = 0; j <= l; ++j) inv_row[j] -= m * inv[l * c + j];
    }
    const T* k = rows.k + t * H * dk + h * dk;
    const T* v = rows.v + t * H * dv + h * dv;
    T* ks = w.scaled.data() + h * C * dk + t * dk;
    T* vs = w.values.data() + h * C * dv + t * dv;
    const T key_scale = -beta * std::exp(G[t]);
    for (int64_t i = 0; i < dk; ++i) ks[i] = key_scale * k[i];
    for (int64_t j = 0; j < dv; ++j) vs[j] = beta * v[j];
  }
}

// Per head, by hand: e^G Q into scaled, and (Q K^T) o D in place (zero above the diagonal).
template <typename T>
void prepare_output(ChunkWorkspace<T>& w, const ChunkRows<T>& rows, int64_t h) {
  const int64_t C = w.C, c = rows.c, H = rows.row_heads, dk = w.dk;
  const T* G = w.log_decay.data() + h * C;
  T* A = w.query_key.data() + h * C * C;
  for (int64_t t = 0; t < c; ++t) {
    for (int64_t j = 0; j < c; ++j) A[t * c + j] = j <= t ? A[t * c + j] * std::exp(G[t] - G[j]) : T(0);
    const T* q = rows.q + t * H * dk + h * dk;
    T* qs = w.scaled.data() + h * C * dk + t * dk;
    const T scale = std::exp(G[t]);
    for (int64_t i = 0; i < dk; ++i) qs[i] = scale * q[i];
  }
}

// Per head, by hand: e^(G_c - G) K, the keys as the carried state sees them, into a
// [heads][C, dk] buffer.
template <typename T>
void decay_keys(const ChunkWorkspace<T>& w, T* into, const ChunkRows<T>& rows, int64_t h) {
  const int64_t C = w.C, c = rows.c, H = rows.row_heads, dk = w.dk;
  const T* G = w.log_decay.data() + h * C;
  for (int64_t t = 0; t < c; ++t) {
    const T* k = rows.k + t * H * dk + h * dk;
    T* kd = into + h * C * dk + t * dk;
    const T scale = std::exp(G[c - 1] - G[t]);
    for (int64_t i = 0; i < dk; ++i) kd[i] = scale * k[i];
  }
}

// Per head, by hand: e^(G_c - G) K into scaled and the state decayed by e^(G_c).
template <typename T>
void prepare_state_update(ChunkWorkspace<T>& w, const ChunkRows<T>& rows, int64_t h) {
  const int64_t C = w.C, c = rows.c, n = w.dk * w.dv;
  decay_keys(w, w.scaled.data(), rows, h);
  const T decay = std::exp(w.log_decay[h * C + c - 1]);
  T* S = w.state.data() + h * n;
  for (int64_t i = 0; i < n; ++i) S[i] *= decay;
}

// f(h) for each of the workspace's heads, on threads of their own where `threaded`, each in
// the caller's floating-point mode (subnormals flushed, float_control.h).
template <typename F>
void for_each_head(int64_t heads, bool threaded, const F& f) {
  const FloatControl mode = float_control();
#pragma omp parallel if (threaded)
  {
    const FloatControlScope callers_mode(mode);
#pragma omp for schedule(static)
    for (int64_t h = 0; h < heads; ++h) f(h);
  }
}

// How the products of one chunk see their operands: token rows (ld row_heads * d, item
// stride d) and the workspace's per-head buffers (packed, item stride the buffer's). H: the
// heads the workspace runs.
struct ChunkOperands {
  Operand keys, values, square, wide_k, wide_v, state;
  bool threaded;  // threads for the loops by hand only where they have work enough
  ChunkOperands(int64_t C, int64_t c, int64_t row_heads, int64_t H, int64_t dk, int64_t dv)
      : keys{row_heads * dk, dk}, values{row_heads * dv, dv}, square{c, C * C}, wide_k{dk, C * dk},
        wide_v{dv, C * dv}, state{dv, dk * dv}, threaded(H > 1 && H * c * (c * c / 6 + dk + dv) >= (1 << 16)) {}
};

// The start of one chunk, every head: K K^T, Q K^T, the system, W and the writes U.
template <typename T>
void solve_chunk(ChunkWorkspace<T>& w, const ChunkRows<T>& rows, const ChunkOperands& op) {
  const int64_t c = rows.c, H = w.heads, dk = w.dk, dv = w.dv;
  const auto [keys, values, square, wide_k, wide_v, state, threaded] = op;
  product(w.key_gram.data(), square, rows.k, keys, rows.k, keys, {.M = c, .N = c, .K = dk, .trans_b = true}, H);
  product(w.query_key.data(), square, rows.q, keys, rows.k, keys, {.M = c, .N = c, .K = dk, .trans_b = true}, H);
  for_each_head(H, threaded, [&](int64_t h) { prepare_system(w, rows, h); });
  // W = -(I + M)^-1 diag(beta e^G) K;  U = (I + M)^-1 diag(beta) V + W S0.
  product(w.correction.data(), wide_k, w.inverse.data(), square, w.scaled.data(), wide_k, {.M = c, .N = dk, .K = c},
          H);
  product(w.writes.data(), wide_v, w.inverse.data(), square, w.values.data(), wide_v, {.M = c, .N = dv, .K = c}, H);
  product(w.writes.data(), wide_v, w.correction.data(), wide_k, w.state.data(), state,
          {.M = c, .N = dv, .K = dk, .accumulate = true}, H);
}

// One chunk of one sequence, every head: U, then O, then the state carried on.
template <typename T>
void run_chunk(ChunkWorkspace<T>& w, const ChunkRows<T>& rows) {
  const int64_t c = rows.c, H = w.heads, dk = w.dk, dv = w.dv;
  const ChunkOperands op(w.C, c, rows.row_heads, H, dk, dv);
  const auto [keys, values, square, wide_k, wide_v, state, threaded] = op;
  solve_chunk(w, rows, op);
  // O = diag(e^G) Q S0 + ((Q K^T) o D) U.
  for_each_head(H, threaded, [&](int64_t h) { prepare_output(w, rows, h); });
  product(rows.out, values, w.scaled.data(), wide_k, w.state.data(), state, {.M = c, .N = dv, .K = dk}, H);
  product(rows.out, values, w.query_key.data(), square, w.writes.data(), wide_v,
          {.M = c, .N = dv, .K = c, .accumulate = true}, H);
  // S = e^(G_c) S0 + (diag(e^(G_c - G)) K)^T U.
  for_each_head(H, threaded, [&](int64_t h) { prepare_state_update(w, rows, h); });
  product(w.state.data(), state, w.scaled.data(), wide_k, w.writes.data(), wide_v,
          {.M = dk, .N = dv, .K = c, .trans_a = true, .accumulate = true}, H);
}

// The backward's per-head buffers of one chunk, beside the forward's (ChunkWorkspace).
template <typename T>
struct ChunkGradWorkspace {
  std::vector<T> d_writes;        // [heads][C, dv]: dU
  std::vector<T> d_rhs;           // [heads][C, dv]: dR = (I + M)^-T dU
  std::vector<T> key_state;       // [heads][C, dv]: K S0, then d(K S0) = -diag(beta e^G) dR
  std::vector<T> d_scores;        // [heads][C, C]: dO U^T, then d(Q K^T)
  std::vector<T> d_system;        // [heads][C, C]: dR U^T, then d(K K^T) symmetrised
  std::vector<T> decayed_keys;    // [heads][C, dk]: e^(G_c - G) K
  std::vector<T> d_decayed_keys;  // [heads][C, dk]: U dS^T
  std::vector<T> d_queries;       // [heads][C, dk]: dO S0^T
  std::vector<T> d_state;         // [heads][dk, dv]: the gradient of the state after the chunk
  std::vector<T> d_log_decay;     // [heads][C]: dG
  ChunkGradWorkspace(int64_t C, int64_t dk, int64_t dv, int64_t H)
      : d_writes(H * C * dv), d_rhs(H * C * dv), key_state(H * C * dv), d_scores(H * C * C), d_system(H * C * C),
        decayed_keys(H * C * dk), d_decayed_keys(H * C * dk), d_queries(H * C * dk), d_state(H * dk * dv),
        d_log_decay(H * C) {}
};

// The chunk's rows of the gradients (token rows like ChunkRows) and of d_out.
template <typename T>
struct ChunkGradRows {
  T *dq, *dk, *dv, *dg, *dbeta;
  const T* d_out;
};

// Per head, by hand, what goes through the decays: dG (zeroed first) from the carried state
// e^(G_c) S0 + (e^(G_c - G) K)^T U, from e^G Q S0 and from the mask D of the scores; dq and dk
// written from the first two; d_scores turned from dA into d(Q K^T) = dA o D.
template <typename T>
void decay_gradients(const ChunkWorkspace<T>& w, ChunkGradWorkspace<T>& bw, const ChunkRows<T>& rows,
                     const ChunkGradRows<T>& grows, int64_t h) {
  const int64_t C = w.C, c = rows.c, H = rows.row_heads, dk = w.dk, n = dk * w.dv;
  const T* G = w.log_decay.data() + h * C;
  T* dG = bw.d_log_decay.data() + h * C;
  const T* S0 = w.state.data() + h * n;
  const T* dS = bw.d_state.data() + h * n;
  T carried = 0;
  for (int64_t i = 0; i < n; ++i) carried += dS[i] * S0[i];
  std::fill(dG, dG + c, T(0));
  dG[c - 1] = std::exp(G[c - 1]) * carried;
  for (int64_t t = 0; t < c; ++t) {
    const T *k = rows.k + t * H * dk + h * dk, *q = rows.q + t * H * dk + h * dk;
    const T* d_kd = bw.d_decayed_keys.data() + h * C * dk + t * dk;
    const T* d_qs = bw.d_queries.data() + h * C * dk + t * dk;
    T *dk_row = grows.dk + t * H * dk + h * dk, *dq_row = grows.dq + t * H * dk + h * dk;
    const T key_decay = std::exp(G[c - 1] - G[t]), query_decay = std::exp(G[t]);
    T d_key_decay = 0, d_query_decay = 0;
    for (int64_t i = 0; i < dk; ++i) {
      d_key_decay += d_kd[i] * k[i];
      dk_row[i] = key_decay * d_kd[i];
      d_query_decay += d_qs[i] * q[i];
      dq_row[i] = query_decay * d_qs[i];
    }
    dG[c - 1] += key_decay * d_key_decay;
    dG[t] += query_decay * d_query_decay - key_decay * d_key_decay;
  }
  const T* A = w.query_key.data() + h * C * C;
  T* dA = bw.d_scores.data() + h * C * C;
  for (int64_t t = 0; t < c; ++t)
    for (int64_t j = 0; j < c; ++j) {
      if (j > t) {
        dA[t * c + j] = 0;
        continue;
      }
      const T through_mask = dA[t * c + j] * A[t * c + j];
      dG[t] += through_mask;
      dG[j] -= through_mask;
      dA[t * c + j] *= std::exp(G[t] - G[j]);
    }
}

// Per head, by hand, what goes through the system (I + M) U = R: dM = -dR U^T below the
// diagonal (d_system holds dR U^T on entry) with M_tj = beta_t e^(G_t - G_j) (K K^T)_tj, and
// R = diag(beta) V - diag(beta e^G) K S0. Adds to dG; writes dbeta and dv; leaves
// d_system = d(K K^T) + its transpose and key_state = d(K S0).
template <typename T>
void system_gradients(const ChunkWorkspace<T>& w, ChunkGradWorkspace<T>& bw, const ChunkRows<T>& rows,
                      const ChunkGradRows<T>& grows, int64_t h) {
  const int64_t C = w.C, c = rows.c, H = rows.row_heads, dv = w.dv;
  const T* G = w.log_decay.data() + h * C;
  T* dG = bw.d_log_decay.data() + h * C;
  const T *P = w.key_gram.data() + h * C * C, *M = w.system.data() + h * C * C;
  T* dP = bw.d_system.data() + h * C * C;
  for (int64_t t = 0; t < c; ++t) {
    const T beta = rows.beta[t * H + h], query_decay = std::exp(G[t]);
    T d_beta = 0;
    for (int64_t j = 0; j < t; ++j) {
      const T decay = std::exp(G[t] - G[j]), dm = -dP[t * c + j], through_decay = dm * M[t * c + j];
      dG[t] += through_decay;
      dG[j] -= through_decay;
      d_beta += dm * decay * P[t * c + j];
      dP[t * c + j] = dm * beta * decay;
    }
    std::fill(dP + t * c + t, dP + (t + 1) * c, T(0));
    const T *dr = bw.d_rhs.data() + h * C * dv + t * dv, *v = rows.v + t * H * dv + h * dv;
    T* ks = bw.key_state.data() + h * C * dv + t * dv;
    T* dv_row = grows.dv + t * H * dv + h * dv;
    T dr_v = 0, dr_ks = 0;
    for (int64_t j = 0; j < dv; ++j) {
      dr_v += dr[j] * v[j];
      dr_ks += dr[j] * ks[j];
      dv_row[j] = beta * dr[j];
      ks[j] = -beta * query_decay * dr[j];
    }
    grows.dbeta[t * H + h] = d_beta + dr_v - query_decay * dr_ks;
    dG[t] -= beta * query_decay * dr_ks;
  }
  for (int64_t t = 0; t < c; ++t)
    for (int64_t j = 0; j < t; ++j) dP[j * c + t] = dP[t * c + j];
}

// Per head: dg from dG (G_t sums g_1..g_t, so dg_s sums dG_t over t >= s), and the state's
// gradient decayed once for the carry (dS0 = e^(G_c) dS + the products that follow).
template <typename T>
void finish_chunk_gradients(const ChunkWorkspace<T>& w, ChunkGradWorkspace<T>& bw, const ChunkRows<T>& rows,
                            const ChunkGradRows<T>& grows, int64_t h) {
  const int64_t C = w.C, c = rows.c, n = w.dk * w.dv;
  const T* dG = bw.d_log_decay.data() + h * C;
  T suffix = 0;
  for (int64_t t = c - 1; t >= 0; --t) grows.dg[t * rows.row_heads + h] = suffix += dG[t];
  const T decay = std::exp(w.log_decay[h * C + c - 1]);
  T* dS = bw.d_state.data() + h * n;
  for (int64_t i = 0; i < n; ++i) dS[i] *= decay;
}

// One chunk backward, every head, with w.state = S0 and bw.d_state = dS (after the chunk),
// which leaves holding dS0. The forward's U, A and e^G Q are recomputed first.
template <typename T>
void backward_chunk(ChunkWorkspace<T>& w, ChunkGradWorkspace<T>& bw, const ChunkRows<T>& rows,
                    const ChunkGradRows<T>& gr) {
  const int64_t c = rows.c, H = w.heads, dk = w.dk, dv = w.dv;
  const ChunkOperands op(w.C, c, rows.row_heads, H, dk, dv);
  const auto [keys, values, square, wide_k, wide_v, state, threaded] = op;
  solve_chunk(w, rows, op);
  for_each_head(H, threaded, [&](int64_t h) {
    prepare_output(w, rows, h);
    decay_keys(w, bw.decayed_keys.data(), rows, h);
  });
  // dU = A^T dO + (e^(G_c - G) K) dS; then U dS^T, dO S0^T, dO U^T, dR = (I + M)^-T dU, dR U^T, K S0.
  product(bw.d_writes.data(), wide_v, w.query_key.data(), square, gr.d_out, values,
          {.M = c, .N = dv, .K = c, .trans_a = true}, H);
  product(bw.d_writes.data(), wide_v, bw.decayed_keys.data(), wide_k, bw.d_state.data(), state,
          {.M = c, .N = dv, .K = dk, .accumulate = true}, H);
  product(bw.d_decayed_keys.data(), wide_k, w.writes.data(), wide_v, bw.d_state.data(), state,
          {.M = c, .N = dk, .K = dv, .trans_b = true}, H);
  product(bw.d_queries.data(), wide_k, gr.d_out, values, w.state.data(), state,
          {.M = c, .N = dk, .K = dv, .trans_b = true}, H);
  product(bw.d_scores.data(), square, gr.d_out, values, w.writes.data(), wide_v,
          {.M = c, .N = c, .K = dv, .trans_b = true}, H);
  product(bw.d_rhs.data(), wide_v, w.inverse.data(), square, bw.d_writes.data(), wide_v,
          {.M = c, .N = dv, .K = c, .trans_a = true}, H);
  product(bw.d_system.data(), square, bw.d_rhs.data(), wide_v, w.writes.data(), wide_v,
          {.M = c, .N = c, .K = dv, .trans_b = true}, H);
  product(bw.key_state.data(), wide_v, rows.k, keys, w.state.data(), state, {.M = c, .N = dv, .K = dk}, H);
  for_each_head(H, threaded, [&](int64_t h) {
    decay_gradients(w, bw, rows, gr, h);
    system_gradients(w, bw, rows, gr, h);
    finish_chunk_gradients(w, bw, rows, gr, h);
  });
  // dq += d(Q K^T) K; dk += d(Q K^T)^T Q + (d(K K^T) + its transpose) K + d(K S0) S0^T.
  product(gr.dq, keys, bw.d_scores.data(), square, rows.k, keys, {.M = c, .N = dk, .K = c, .accumulate = true}, H);
  product(gr.dk, keys, bw.d_scores.data(), square, rows.q, keys,
          {.M = c, .N = dk, .K = c, .trans_a = true, .accumulate = true}, H);
  product(gr.dk, keys, bw.d_system.data(), square, rows.k, keys, {.M = c, .N = dk, .K = c, .accumulate = true}, H);
  product(gr.dk, keys, bw.key_state.data(), wide_v, w.state.data(), state,
          {.M = c, .N = dk, .K = dv, .trans_b = true, .accumulate = true}, H);
  // dS0 = e^(G_c) dS (decayed above) + (e^G Q)^T dO + K^T d(K S0).
  product(bw.d_state.data(), state, w.scaled.data(), wide_k, gr.d_out, values,
          {.M = dk, .N = dv, .K = c, .trans_a = true, .accumulate = true}, H);
  product(bw.d_state.data(), state, rows.k, keys, bw.key_state.data(), wide_v,
          {.M = dk, .N = dv, .K = c, .trans_a = true, .accumulate = true}, H);
}

// One task of a call: sequence b's heads [h0, h0 + heads).
struct HeadGroup {
  int64_t b, h0, heads;
};

// The rows of chunk [t0, t0 + c) of the group's sequence and heads; out: the chunk's first
// output row ([c, heads, d_v]), all heads.
template <typename T>
ChunkRows<T> chunk_rows(const DeltaRuleInputs<T>& in, T* out, const DeltaRuleShape& s, const HeadGroup& grp,
                        int64_t t0, int64_t c) {
  const int64_t row = grp.b * s.seq + t0, H = s.heads, first = row * H + grp.h0;
  return {in.q + first * s.key_dim, in.k + first * s.key_dim, in.v + first * s.value_dim,
          in.g + first,             in.beta + first,          out + grp.h0 * s.value_dim,
          c,                        H};
}

template <typename T>
ChunkGradRows<T> chunk_grad_rows(const DeltaRuleGrads<T>& gr, const T* d_out, const DeltaRuleShape& s,
                                 const HeadGroup& grp, int64_t t0) {
  const int64_t first = (grp.b * s.seq + t0) * s.heads + grp.h0;
  return {gr.dq + first * s.key_dim, gr.dk + first * s.key_dim, gr.dv + first * s.value_dim,
          gr.dg + first,             gr.dbeta + first,          d_out + first * s.value_dim};
}

// The group's states of [batch, heads, d_k, d_v] states (null: zeros) into state [group heads, d_k, d_v].
template <typename T>
void load_group_state(std::vector<T>& state, const T* states, const DeltaRuleShape& s, const HeadGroup& grp) {
  const int64_t n = grp.heads * s.key_dim * s.value_dim;
  if (states)
    std::copy_n(states + (grp.b * s.heads + grp.h0) * s.key_dim * s.value_dim, n, state.begin());
  else
    std::fill_n(state.begin(), n, T(0));
}

int64_t checked_chunk(int64_t chunk_size, const DeltaRuleShape& s) {
  if (chunk_size < 1) fail("delta rule: chunk size must be at least 1, got ", chunk_size);
  check_delta_rule_shape(s);
  return std::min(chunk_size, std::max<int64_t>(s.seq, 1));
}

// The tasks of a call: each sequence's heads in groups of equal size, as many groups as make
// about kTasks tasks in all (a divisor of the heads). The tasks run on threads of their own,
// each its chunks' products and per-head loops on one thread: few large tasks instead of many
// small products that each share out and join the threads. The groups depend on the shape
// only and every product tile and per-head loop is computed by one thread, whichever, so the
// bits do not depend on the thread count.
int64_t heads_per_group(const DeltaRuleShape& s) {
  constexpr int64_t kTasks = 4;
  int64_t groups = std::clamp<int64_t>((kTasks + s.batch - 1) / std::max<int64_t>(s.batch, 1), 1, s.heads);
  while (s.heads % groups != 0) --groups;
  return s.heads / groups;
}
HeadGroup head_group(const DeltaRuleShape& s, int64_t task, int64_t per_group) {
  const int64_t groups = s.heads / per_group;
  return {task / groups, task % groups * per_group, per_group};
}
bool tasks_in_parallel(int64_t tasks) { return tasks > 1 && omp_get_max_threads() > 1; }

// Where a group's state at each chunk start is kept: chunk i's at at + i * stride.
template <typename T>
struct ChunkStarts {
  T* at;
  int64_t stride;
};

// One group's chunks forward from its initial state: out's rows (null: not written) and its
// final state (null: not written); starts (at null: not kept) gets the state at each chunk's start.
template <typename T>
void group_forward(ChunkWorkspace<T>& w, T* out, T* final_state, ChunkStarts<T> starts, const DeltaRuleInputs<T>& in,
                   const DeltaRuleShape& s, const HeadGroup& grp) {
  const int64_t n = grp.heads * s.key_dim * s.value_dim;
  load_group_state(w.state, in.initial_state, s, grp);
  for (int64_t t0 = 0, i = 0; t0 < s.seq; t0 += w.C, ++i) {
    if (starts.at) std::copy_n(w.state.begin(), n, starts.at + i * starts.stride);
    T* rows_out = out ? out + (grp.b * s.seq + t0) * s.heads * s.value_dim : w.discarded_out.data();
    run_chunk(w, chunk_rows(in, rows_out, s, grp, t0, std::min(w.C, s.seq - t0)));
  }
  if (final_state)
    std::copy_n(w.state.begin(), n, final_state + (grp.b * s.heads + grp.h0) * s.key_dim * s.value_dim);
}

}  // namespace

int64_t delta_rule_chunk_states_size(const DeltaRuleShape& s, int64_t chunk_size) {
  const int64_t C = checked_chunk(chunk_size, s), chunks = (s.seq + C - 1) / C;
  return s.batch * chunks * s.heads * s.key_dim * s.value_dim;
}

template <typename T>
void delta_rule_chunked_forward(T* out, T* final_state, const DeltaRuleInputs<T>& in, const DeltaRuleShape& s,
                                int64_t chunk_size, T* chunk_states) {
  const int64_t C = checked_chunk(chunk_size, s), chunks = (s.seq + C - 1) / C, per_head = s.key_dim * s.value_dim;
  const int64_t per_group = heads_per_group(s), tasks = s.batch * (s.heads / per_group);
#pragma omp parallel if (tasks_in_parallel(tasks))
  {
    const SubnormalsFlushed flushed;  // on this thread (float_control.h)
    ChunkWorkspace<T> w(C, s.key_dim, s.value_dim, per_group, s.heads);  // this thread's
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const HeadGroup grp = head_group(s, task, per_group);
      // chunk_states [batch, chunks, heads, d_k, d_v]
      const ChunkStarts<T> starts{chunk_states ? chunk_states + (grp.b * chunks * s.heads + grp.h0) * per_head : nullptr,
                                  s.heads * per_head};
      group_forward(w, out, final_state, starts, in, s, grp);
    }
  }
}

template <typename T>
void delta_rule_chunked_backward(const DeltaRuleGrads<T>& grads, const T* d_out, const T* d_final_state,
                                 const DeltaRuleInputs<T>& in, const DeltaRuleShape& s, int64_t chunk_size,
                                 const T* chunk_states) {
  const int64_t C = checked_chunk(chunk_size, s), chunks = (s.seq + C - 1) / C, per_head = s.key_dim * s.value_dim;
  const int64_t per_group = heads_per_group(s), tasks = s.batch * (s.heads / per_group), n = per_group * per_head;
#pragma omp parallel if (tasks_in_parallel(tasks))
  {
    const SubnormalsFlushed flushed;  // on this thread (float_control.h)
    // this thread's buffers
    ChunkWorkspace<T> w(C, s.key_dim, s.value_dim, per_group, s.heads);
    ChunkGradWorkspace<T> bw(C, s.key_dim, s.value_dim, per_group);
    std::vector<T> recomputed(chunk_states ? 0 : chunks * n);  // this thread's group's, when not given
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const HeadGroup grp = head_group(s, task, per_group);
      // the state at each chunk start (kept by the forward, or by running it once more), then
      // the chunks backward from the last
      ChunkStarts<const T> starts{recomputed.data(), n};
      if (chunk_states)
        starts = {chunk_states + (grp.b * chunks * s.heads + grp.h0) * per_head, s.heads * per_head};
      else
        group_forward(w, static_cast<T*>(nullptr), static_cast<T*>(nullptr), ChunkStarts<T>{recomputed.data(), n}, in,
                      s, grp);
      load_group_state(bw.d_state, d_final_state, s, grp);
      for (int64_t i = chunks - 1; i >= 0; --i) {
        std::copy_n(starts.at + i * starts.stride, n, w.state.begin());
        const int64_t t0 = i * C;
        backward_chunk(w, bw, chunk_rows(in, w.discarded_out.data(), s, grp, t0, std::min(C, s.seq - t0)),
                       chunk_grad_rows(grads, d_out, s, grp, t0));
      }
      if (grads.d_initial_state)
        std::copy_n(bw.d_state.begin(), n, grads.d_initial_state + (grp.b * s.heads + grp.h0) * per_head);
    }
  }
}

template void delta_rule_chunked_forward<float>(float*, float*, const DeltaRuleInputs<float>&, const DeltaRuleShape&,
                                                int64_t, float*);
template void delta_rule_chunked_forward<double>(double*, double*, const DeltaRuleInputs<double>&,
                                                 const DeltaRuleShape&, int64_t, double*);
template void delta_rule_chunked_backward<float>(const DeltaRuleGrads<float>&, const float*, const float*,
                                                 const DeltaRuleInputs<float>&, const DeltaRuleShape&, int64_t,
                                                 const float*);
template void delta_rule_chunked_backward<double>(const DeltaRuleGrads<double>&, const double*, const double*,
                                                  const DeltaRuleInputs<double>&, const DeltaRuleShape&, int64_t,
                                                  const double*);

}  // namespace gatedlm::kernels
