#pragma once
// Learned sink logits (gpt-oss's "sinks"; config key attention_sinks): per query head h a
// logit sink[h] that joins the denominator of every query row's softmax and carries no
// value:
//
//   p_j = exp(s_j - m) / (exp(sink[h] - m) + sum_k exp(s_k - m)),   Y = sum_j p_j v_j.
//
// The fused kernels of attention.h run unchanged; these passes go around them. With lse the
// row's log-sum-exp over its keys, the sink multiplies the row's output by
// sigmoid(lse - sink) and moves the log-sum-exp to logaddexp(lse, sink). The backward of
// attention.h, given that output and that log-sum-exp, then computes the keys' gradients of
// the sink softmax as they are (the sink column's dp is 0, so D = rowsum(dO * O) still holds),
// and the sink's own gradient is  d sink[h] = -sum over rows of p_sink * D.
//
// Layouts as attention.h: out, gated_out, dout, gate_score [batch, seq, n_q, head_dim];
// lse [batch, n_q, seq]; sinks, dsinks [n_q].
#include "kernels/attention.h"

namespace gatedlm::kernels {

// After attention_forward: scales out (and gated_out, when given: the G1 epilogue's Y') by
// each row's sigmoid(lse - sink) and replaces lse by logaddexp(lse, sink).
template <typename T>
void attention_sinks_forward(T* out, T* gated_out, T* lse, const T* sinks, const AttentionShape& s);

// dsinks += -sum over (batch, query) rows of exp(sink - lse) * rowsum(dO * out), where
// dO = dout * gate_score with the G1 epilogue gate (dout then the gradient of Y'), else dout.
// out and lse are attention_sinks_forward's.
template <typename T>
void attention_sinks_backward(T* dsinks, const T* dout, const T* gate_score, const T* out, const T* lse,
                              const T* sinks, const AttentionShape& s);

// The probability a query row gives its sink: exp(sink - lse), lse from attention_sinks_forward.
template <typename T>
T sink_probability(T sink, T lse);

}  // namespace gatedlm::kernels
