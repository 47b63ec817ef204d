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
};

template <typename T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& s);

// dq, dk, dv are accumulated (+=).
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                        const T* out, const T* lse, const AttentionShape& s);

// Materialises probabilities for one batch row: probs [n_q, seq, seq] (zero above the
// diagonal). For analysis and tests only; training never calls it.
template <typename T>
void attention_probs(T* probs, const T* q, const T* k, const AttentionShape& s, int64_t b);

}  // namespace gatedlm::kernels
