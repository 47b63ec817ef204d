#pragma once
// Softmax cross-entropy over the vocabulary, fused with its gradient.
#include <cstdint>

namespace gatedlm::kernels {

// logits [rows, vocab]; targets[rows] (a negative target is ignored: no loss, no grad).
// losses[rows] receives -log p(target) (0 for ignored rows). Returns the summed loss.
// If dlogits is non-null it receives (softmax - onehot) * grad_scale (overwritten;
// may alias logits).
template <typename T>
double cross_entropy(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t rows,
                     int64_t vocab, T grad_scale);

}  // namespace gatedlm::kernels
