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

#include "model/config.h"

namespace gatedlm::model {

struct GateShape {
  int64_t heads, head_width, gate_out, gate_in, d_model;
  const GateConfig* gate;
  static GateShape of(const ModelConfig& c);
  int64_t target_size() const { return heads * head_width; }  // elements of Y per token
};

// pre [n, gate_out]: the projection before the activation (saved for backward).
// score [n, target_size]: the effective score applied to each element of Y.
// y_out [n, target_size] = combine(y_in, score). x [n, d_model] is the gate input.
template <typename T>
void gate_forward(T* y_out, T* pre, T* score, const T* y_in, const T* x, const T* w, int64_t n,
                  const GateShape& g);

// Accumulates dy_in, dx (only the first gate_in columns) and dw. scratch [n, gate_out].
template <typename T>
void gate_backward(T* dy_in, T* dx, T* dw, T* scratch, const T* dy_out, const T* y_in, const T* pre,
                   const T* score, const T* x, const T* w, int64_t n, const GateShape& g);

}  // namespace gatedlm::model
