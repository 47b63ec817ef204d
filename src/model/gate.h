#pragma once
// The attention gate of every variant in the paper (metrics.md, "Gating"):
//   Y' = Y * score  (combine multiply)   or   Y' = Y + score  (combine add)
// where Y [n, heads, head_width] is the tensor at the gate's position and the score comes
// from act(X[:, :gate_in] W^T) (input hidden) or act(w) (input constant):
//   elementwise: one score per element of Y;
//   headwise:    one score per head, broadcast over head_width;
//   head-shared: the elementwise projection, its activation averaged over heads, so every
//                head gets the same [head_width] score.
#include <cstdint>

#include "kernels/weight.h"
#include "model/config.h"

namespace gatedlm::model {

struct GateShape {
  int64_t heads, head_width, gate_out, gate_in, d_model;
  const GateConfig* gate;
  static GateShape of(const ModelConfig& c);
  int64_t target_size() const { return heads * head_width; }  // elements of Y per token
};

// The gate's pre-activations pre [n, gate_out] = x[:, :gate_in] W^T (input hidden; x is
// [n, d_model]) or w broadcast to every row (input constant). When gate_in == d_model the
// model computes this inside its fused q|k|v|gate product instead (model.cpp).
template <typename T>
void gate_project(T* pre, const T* x, const kernels::Weight<T>& w, int64_t n, const GateShape& g);
// The projection's backward: dw += dpre^T x[:, :gate_in] (or the column sums, input
// constant); dx[:, :gate_in] += dpre W (input hidden).
template <typename T>
void gate_project_backward(T* dx, T* dw, const T* dpre, const T* x, const T* w, int64_t n, const GateShape& g);

// Rows of pre (and of dpre) are ld elements apart: gate_out when packed, wider when they
// sit inside the model's fused q|k|v|gate matrix.
//
// score [n, target_size] = the effective score of each element of Y, from pre.
template <typename T>
void gate_scores(T* score, const T* pre, int64_t ld_pre, int64_t n, const GateShape& g);
// gate_scores, then y_out [n, target_size] = combine(y_in, score).
template <typename T>
void gate_forward(T* y_out, T* score, const T* y_in, const T* pre, int64_t ld_pre, int64_t n, const GateShape& g);

// True when act'(pre) follows from the score itself (sigmoid, NS-sigmoid and identity
// activations, not head-shared): backward then reads the score and needs no copy of pre
// (pre may be null below).
bool gate_grad_from_score(const GateShape& g);

// dpre [n, gate_out] (rows ld_dpre apart; overwritten) from dscore [n, target_size] =
// d loss / d score.
template <typename T>
void gate_scores_backward(T* dpre, int64_t ld_dpre, const T* dscore, const T* pre, int64_t ld_pre, const T* score,
                          int64_t n, const GateShape& g);
// The whole elementwise backward: dy_in += d loss / d y_in; dpre (overwritten) as above.
// scratch [n, target_size] holds dscore.
template <typename T>
void gate_backward(T* dy_in, T* dpre, int64_t ld_dpre, T* scratch, const T* dy_out, const T* y_in, const T* pre,
                   int64_t ld_pre, const T* score, int64_t n, const GateShape& g);

}  // namespace gatedlm::model
