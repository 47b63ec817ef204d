#pragma once
// Products of fp32 activations with quantised weights (quant_blocks.h):
//   C[m, n] = A[m, k] W^T, W stored [n, k]: n rows of k weights in one format, each
//   quant_row_bytes(format, k) bytes, back to back (a GGUF tensor of shape ne0 = k, ne1 = n).
// k must be a multiple of 32 (checked, for every format). A and C are packed row-major.
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace gatedlm::kernels {

struct QuantWeights {
  QuantFormat format;
  const void* data;  // rows * quant_row_bytes(format, cols) bytes
  int64_t rows;      // n, the outputs
  int64_t cols;      // k, the inputs
};

// The oracle: each weight row dequantised to fp32, then dotted with A's rows in double.
void quant_matmul_reference(float* C, const float* A, int64_t m, const QuantWeights& W);

// The decode product: reads each weight block once for up to kQuantDecodeRows rows of A
// (more rows are taken in groups of that many while the block is in cache), dequantises
// it in registers and accumulates in fp32 (quant_matmul.cpp says why not int8 dots).
// OpenMP over the weight rows.
inline constexpr int64_t kQuantDecodeRows = 8;
void quant_matmul(float* C, const float* A, int64_t m, const QuantWeights& W);

}  // namespace gatedlm::kernels
