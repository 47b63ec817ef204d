#pragma once
// Bias of a linear layer, kept apart from the matrix product so that the product stays
// one oneDNN call: y[n, width] += b (each row), and its gradient db[width] += column
// sums of dy[n, width]. Rows are ld elements apart (ld >= width; 0 = width), so a bias
// can cover a block of columns of a wider, fused product.
#include <cstdint>

namespace gatedlm::kernels {

template <typename T>
void bias_forward(T* y, const T* b, int64_t n, int64_t width, int64_t ld = 0);

// db[width] += sum over rows of dy; summed in double for every T (n can be large).
template <typename T>
void bias_backward(T* db, const T* dy, int64_t n, int64_t width, int64_t ld = 0);

}  // namespace gatedlm::kernels
