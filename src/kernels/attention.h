#pragma once
// Fused causal attention with grouped-query heads. Training never materialises the
// T x T probability matrix: the forward keeps an online softmax per query row and saves
// only the row's log-sum-exp; the backward recomputes probabilities from it.
//
// Layouts (row-major): q, out [batch, seq, n_q, head_dim]; k, v [batch, seq, n_kv, head_dim];
// lse [batch, n_q, seq]. Query head h reads kv head h / (n_q / n_kv).
#include <cstdint>

namespace gatedlm::kernels {

struct AttentionShape {
  int64_t batch, seq, n_q, n_kv, head_dim;
  double scale;  // usually 1/sqrt(head_dim)
  // Sliding window W (Hugging Face's convention): query t sees keys t - W < j <= t. 0: every
  // key j <= t (plain causal attention).
  int64_t window = 0;
  // Softpick (arXiv 2504.20966; config attention_normalizer) instead of softmax: a query's
  // weights are relu(e^a - 1) / sum |e^a - 1| over the keys it sees, a = scale q.k; a row may
  // sum to less than 1. lse then holds L = log sum |e^a - 1| (+infinity for a row whose sum is
  // 0: it has no weights). The blocked float kernels keep it online as they keep softmax.
  bool softpick = false;
  // The first key query t sees.
  int64_t first_key(int64_t t) const { return window > 0 && t >= window ? t - window + 1 : 0; }
};

// float: the blocked kernels of attention_fast.cpp; double: the reference below (with the
// gate epilogue applied around it), for fp64 gradient checks.
//
// Gate epilogue (the G1 gate, Y' = Y * score, with score the sigmoid gate score computed by
// the caller): when gate_score [batch, seq, n_q, head_dim] is given, the forward also writes
// gated_out = out * gate_score [batch, seq, n_q, head_dim]; out (the un-gated Y) is still
// written, since the backward needs it. gated_out may not alias out.
template <typename T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& s,
                       const T* gate_score = nullptr, T* gated_out = nullptr);

// Where the gated backward writes the gate's gradient: token rows ld elements apart (0:
// packed, n_q * head_dim), and with through_sigmoid the gradient with respect to the
// sigmoid's input, dout * out * score * (1 - score), for score = sigmoid(pre): the G1
// gate's whole elementwise backward, written straight into the model's fused gradient.
struct GateGradLayout {
  int64_t ld = 0;
  bool through_sigmoid = false;
};

// dq, dk, dv are accumulated (+=).
// With gate_score [batch, seq, n_q, head_dim] given, dout is the gradient with respect to
// the GATED output Y' = out * gate_score: the kernel uses dO = dout * gate_score wherever it
// reads dO (including D_i = rowsum(dO * O)), and writes (overwrites, not accumulates)
// dgate_score = dout * out [batch, seq, n_q, head_dim], the gradient with respect to the
// gate score.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                        const T* out, const T* lse, const AttentionShape& s, const T* gate_score = nullptr,
                        T* dgate_score = nullptr, GateGradLayout dgate_layout = {});

template <>
void attention_forward<float>(float*, float*, const float*, const float*, const float*, const AttentionShape&,
                              const float*, float*);
template <>
void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                               const float*, const float*, const AttentionShape&, const float*, float*,
                               GateGradLayout);
template <>
void attention_forward<double>(double*, double*, const double*, const double*, const double*, const AttentionShape&,
                               const double*, double*);
template <>
void attention_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                const double*, const double*, const double*, const AttentionShape&, const double*,
                                double*, GateGradLayout);

// The simple kernels with the gate epilogue of attention_forward / attention_backward around
// them: the fp64 path, and the float oracle of the tests.
template <typename T>
void attention_forward_simple(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& s,
                              const T* gate_score, T* gated_out);
template <typename T>
void attention_backward_simple(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                               const T* lse, const AttentionShape& s, const T* gate_score, T* dgate_score,
                               GateGradLayout dgate_layout);

// The simple kernels, one query row at a time: the oracle for tests and the fp64 path.
template <typename T>
void attention_forward_reference(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& s);
template <typename T>
void attention_backward_reference(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                                  const T* out, const T* lse, const AttentionShape& s);

// Materialises probabilities for one batch row: probs [n_q, seq, seq] (zero above the
// diagonal). With sinks [n_q] (learned sink logits, attention_sinks.h) each row's softmax
// also counts its head's sink, so a row sums to 1 minus what its sink takes. For analysis
// and tests only; training never calls it.
template <typename T>
void attention_probs(T* probs, const T* q, const T* k, const AttentionShape& s, int64_t b,
                     const T* sinks = nullptr);

}  // namespace gatedlm::kernels
