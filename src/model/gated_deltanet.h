#pragma once
// The Gated DeltaNet token mixer of hybrid models (Qwen3-Next, Qwen3.5; Yang, Kautz &
// Hatamizadeh, "Gated Delta Networks", ICLR 2025), the "linear_attention" layers of
// model/hybrid_config.h. For normed input rows h [n, d] (n = tokens):
//
//   proj  = h [in_proj_qkv; in_proj_z; in_proj_b; in_proj_a]^T         [n, conv_dim + value_dim + 2 n_v]
//   act   = SiLU(causal depthwise conv of proj's q|k|v columns over each sequence's tokens,
//                kernel K, no bias, zeros before the first token)            [n, conv_dim]
//   q, k  = act's q, k columns per key head, L2-normalised (x / sqrt(|x|^2 + 1e-6)); q also
//           times 1/sqrt(d_k); key head j serves r = n_v / n_k value heads: j r .. j r + r - 1
//           (grouped) or j, j + n_k, ... (tiled; model/hybrid_config.h)
//   v     = act's v columns per value head
//   beta  = sigmoid(b),  g = -exp(A_log) softplus(a + dt_bias)              [n, n_v]
//   o     = the gated delta rule (kernels/delta_rule.h) per sequence and value head
//   y     = RMSNorm(o per head) * norm.weight * SiLU(z)    (the "gated RMSNorm", plain weights)
//   out   = y out_proj^T                                                     [n, d]
//
// Training runs the chunked (WY / UT) delta rule over whole sequences from a zero state; the
// incremental path (infer/) runs runs of consecutive tokens of one sequence each, carrying
// the state between calls: the last K-1 convolution inputs and the delta rule's state S.
// Everything is written by hand and checked against fp64 finite differences
// (tests/unit/model/test_gated_deltanet.cpp) and the PyTorch reference (tests/reference/).
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/weight.h"
#include "model/deltanet_chunks.h"
#include "model/deltanet_times.h"
#include "model/hooks.h"
#include "model/hybrid_config.h"

namespace gatedlm::model {

// One linear layer's weights (param_layout.h's LinearAttentionViews) and their gradients.
template <typename T>
struct DeltaNetWeights {
  kernels::Weight<T> in_proj;
  const T *conv, *dt_bias, *A_log, *norm;
  kernels::Weight<T> out_proj;
};
template <typename T>
struct DeltaNetGrads {
  T *in_proj, *conv, *dt_bias, *A_log, *norm, *out_proj;
};

struct DeltaNetShape {
  LinearAttentionConfig la;
  int64_t d_model;
  double norm_eps;  // the gated RMSNorm's epsilon
};

// The tensors one forward keeps for backward and for the probes (n rows).
template <typename T>
struct DeltaNetActivations {
  std::vector<T> proj;              // [n, in_width] the fused input product
  std::vector<T> conv_pre;          // [n, conv_dim] the convolution before SiLU
  std::vector<T> q, k;              // [n, n_v, d_k] normalised, repeated to the value heads
  std::vector<T> v;                 // [n, n_v, d_v]
  std::vector<T> rnorm_q, rnorm_k;  // [n, n_k] 1 / sqrt(|x|^2 + 1e-6) of the raw q, k
  std::vector<T> g, beta;           // [n, n_v] log decay and write strength
  std::vector<T> o;                 // [n, n_v, d_v] the delta rule's output
  std::vector<T> rstd_o;            // [n * n_v]
  std::vector<T> normed;            // [n, value_dim] RMSNorm(o) * norm.weight
  std::vector<T> z_gate;            // [n, value_dim] SiLU(z)
  std::vector<T> y;                 // [n, value_dim] normed * z_gate, out_proj's input
  std::vector<T> chunk_states;      // [batch, chunks, n_v, d_k, d_v] the delta rule's state at each
                                    // chunk start (training-shaped forward), for the backward
  void resize(int64_t n, const LinearAttentionConfig& la);
};

// Backward's scratch, shared by the layers.
template <typename T>
struct DeltaNetScratch {
  std::vector<T> dproj, dy, dnormed, d_o, dq, dk, dv, dg, dbeta, dconv;
  void resize(int64_t n, const LinearAttentionConfig& la);
};

// One sequence's decode state: conv [K-1, conv_dim] the last K-1 inputs of the convolution,
// oldest first; delta [n_v, d_k, d_v] the delta rule's state.
template <typename T>
struct DeltaNetState {
  T* conv;
  T* delta;
};
inline int64_t conv_state_size(const LinearAttentionConfig& la) { return (la.conv_kernel - 1) * la.conv_dim(); }
inline int64_t delta_state_size(const LinearAttentionConfig& la) {
  return la.n_v_heads * la.k_head_dim * la.v_head_dim;
}

// Rows [first, first + count) of the incremental path: consecutive tokens of one sequence.
// fresh: the sequence starts here (zero state; the stored state is ignored and overwritten).
template <typename T>
struct DeltaNetRun {
  int64_t first, count;
  DeltaNetState<T> state;
  bool fresh;
};

// Training-shaped forward: h [batch, seq, d] -> out [batch * seq, d]; each sequence from a
// zero state. Fills a (sized by it). times (null: not timed) accumulates the parts' seconds.
template <typename T>
// hooks: the activation hooks of layer `layer` (hooks.h: hook_beta, hook_decay, hook_out_gate
// may change their tensors; hook_state reads the state after each sequence's last token).
void deltanet_forward(T* out, const T* h, int64_t batch, int64_t seq, const DeltaNetShape& s,
                      const DeltaNetWeights<T>& w, DeltaNetActivations<T>& a, DeltaNetTimes* times = nullptr,
                      const HookCaller<T>& hooks = {}, int64_t layer = -1);

// Incremental forward of n rows h [n, d] in runs (every row in exactly one run), each run
// continuing and updating its state. out [n, d].
template <typename T>
void deltanet_forward_runs(T* out, const T* h, int64_t n, std::span<const DeltaNetRun<T>> runs,
                           const DeltaNetShape& s, const DeltaNetWeights<T>& w, DeltaNetActivations<T>& a);

// Backward of the last deltanet_forward: dh [n, d] is written (not accumulated), the weight
// gradients are accumulated into g. times as deltanet_forward's.
template <typename T>
void deltanet_backward(T* dh, const DeltaNetGrads<T>& g, const T* dout, const T* h, int64_t batch, int64_t seq,
                       const DeltaNetShape& s, const DeltaNetWeights<T>& w, const DeltaNetActivations<T>& a,
                       DeltaNetScratch<T>& scratch, DeltaNetTimes* times = nullptr);

}  // namespace gatedlm::model
