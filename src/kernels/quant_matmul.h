#pragma once
// Products of fp32 activations with quantised weights (quant_blocks.h):
//   C[m, n] = A[m, k] W^T, W stored [n, k]: n rows of k weights in one format, each
//   element_row_bytes(format, k) bytes, back to back (a GGUF tensor of shape ne0 = k, ne1 = n).
// k must be a whole number of the format's blocks (32 values; 256 for the K-quants and
// IQ4_XS: checked). A and C are row-major.
#include <cstdint>

#include "kernels/element_types.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_weights.h"

namespace gatedlm::kernels {

// The oracle: each weight row dequantised to fp32, then dotted with A's rows in double.
void quant_matmul_reference(float* C, const float* A, int64_t m, const QuantWeights& W);

// The paths a product can take: QuantPath, in quant_weights.h.
const char* quant_path_name(QuantPath path);
// Whether the active kernel set has `path` for `format` on this CPU (automatic: always).
bool quant_path_runnable(QuantPath path, ElementType format);

// The product through the active kernel set, OpenMP over the weight rows: each weight
// block is read once for up to 8 rows of A (kQuantDecodeRows); more rows take the weights
// in tiles that stay in cache while every group of 8 rows passes over them. Any m: decode
// batches and prefill alike (the kernel set picks the path by m, see `automatic`). Every
// element of C is computed the same way whatever the thread count.
inline constexpr int64_t kQuantDecodeRows = 8;
void quant_matmul(float* C, const float* A, int64_t m, const QuantWeights& W);
// The same with row strides (lda >= k, ldc >= n) and C += A W^T when accumulate.
void quant_matmul(float* C, int64_t ldc, const float* A, int64_t lda, int64_t m, const QuantWeights& W,
                  bool accumulate);
// The same through one path (tests, benchmarks); fails naming the path, the format and the
// kernel set when the path is not runnable.
void quant_matmul_path(QuantPath path, float* C, int64_t ldc, const float* A, int64_t lda, int64_t m,
                       const QuantWeights& W, bool accumulate);

// Rows [row0, row0 + rows) of W expanded to fp32, `rows` rows of W.cols values (the
// values dequantize_row gives), vectorised per kernel set, OpenMP over the rows.
void quant_dequantize_rows(float* out, const QuantWeights& W, int64_t row0, int64_t rows);

// Whether the active kernel set's path for `format` at `m` rows reads tiled weights itself
// (quant_tiles.h): the AVX-512 VNNI kernels for Q8_0 / Q4_0.
bool quant_path_reads_tiles(QuantPath path, ElementType format);
// Whether arranging `format` weights in tiles pays with the active kernel set: its
// automatic path reads them (so a model's weights are tiled when it is attached).
bool quant_tiles_pay(ElementType format);

}  // namespace gatedlm::kernels
