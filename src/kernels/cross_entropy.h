#pragma once
// Softmax cross-entropy over the vocabulary, and its gradient.
#include <cstdint>

namespace gatedlm::kernels {

// logits [rows, vocab]; targets[rows] (a negative target is ignored: no loss, no grad).
// losses[rows] receives -log p(target) (0 for ignored rows). Returns the summed loss.
// If dlogits is non-null it receives (softmax - onehot) * grad_scale (overwritten;
// may alias logits).
template <typename T>
double cross_entropy(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t rows,
                     int64_t vocab, T grad_scale);

// The gradient alone, one pass over the logits, from the losses that cross_entropy
// computed on the same logits: the row's log-sum-exp is losses[r] + logits[r, target].
// dlogits [rows, vocab] = (softmax - onehot) * grad_scale (overwritten; may alias logits).
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* losses, const int32_t* targets, int64_t rows,
                            int64_t vocab, T grad_scale);

}  // namespace gatedlm::kernels
