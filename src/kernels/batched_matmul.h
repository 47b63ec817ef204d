#pragma once
// A batch of equally shaped matrix products in one call, for the mixture-of-experts block
// (model/moe.h): item b multiplies the operands at A + b * stride_a and B + b * stride_b
// into C + b * stride_c, each as matmul() would (MatmulShape's transposes, row strides and
// accumulate). One oneDNN batched product replaces a loop of small ones, whose thread
// start-up and synchronisation dominate when each product is small.
#include <cstdint>

#include "kernels/matmul.h"

namespace gatedlm::kernels {

struct BatchStrides {
  int64_t batch;
  int64_t a, b, c;  // elements between consecutive items of A, B and C
};

// Implemented in matmul.cpp (its oneDNN primitive cache). float: one oneDNN product (a
// loop of matmul() under a bf16 MatmulPrecisionScope);
// double: a loop of the naive reference.
template <typename T>
void batched_matmul(T* C, const T* A, const T* B, MatmulShape shape, BatchStrides batch);

}  // namespace gatedlm::kernels
