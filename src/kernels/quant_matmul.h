#pragma once
// Products of fp32 activations with quantised weights (quant_blocks.h):
//   C[m, n] = A[m, k] W^T, W stored [n, k]: n rows of k weights in one format, each
//   element_row_bytes(format, k) bytes, back to back (a GGUF tensor of shape ne0 = k, ne1 = n).
// k must be a multiple of 32 (checked, for every format). A and C are row-major.
#include <cstdint>

#include "kernels/element_types.h"
#include "kernels/quant_blocks.h"

namespace gatedlm::kernels {

struct QuantWeights {
  ElementType format;
  const void* data;  // rows * element_row_bytes(format, cols) bytes
  int64_t rows;      // n, the outputs
  int64_t cols;      // k, the inputs
  // Rows [0, tiled_rows) are arranged in tiles of 16 rows for the AVX-512 VNNI kernels
  // (quant_tiles.h; a multiple of 16, at most rows), the rest are rows of blocks as above.
  // Every path reads both: the kernels that do not read tiles get a row-major copy.
  int64_t tiled_rows = 0;
};

// The oracle: each weight row dequantised to fp32, then dotted with A's rows in double.
void quant_matmul_reference(float* C, const float* A, int64_t m, const QuantWeights& W);

// How a product meets the weights (the kernels of the active kernel set, kernel_set.h):
//   fp32_expand  each block expanded to fp32 in registers, the activations used as given
//                (every set, every format): the reference's result up to fp32 summation order.
//   int8_madd    Q8_0 / Q4_0: each row of A first quantised to int8 blocks of 32 with an
//   int8_vnni    fp16 scale (GGUF's Q8_0, as llama.cpp's CPU backend does), then int8 dot
//                products per block, scaled in fp32: AVX2's vpmaddubsw (avx2 and avx512
//                sets), or vpdpbusd where the CPU has AVX512-VNNI (avx512 set) / AVX-VNNI
//                (avx2 set). The activations' rounding adds a bounded error: |error| <=
//                sum over blocks of (max|a| (1/254 + 2^-11 + 2^-20) + 127 * 2^-25) * sum|w|
//                over the block, + fp32 sums (test_quant_matmul.cpp derives it).
//   bf16_dot     BF16: the rows of A rounded to bf16, then AVX512-BF16's vdpbf16ps
//                (avx512 set, CPUs with AVX512-BF16); error <= 2^-9 * sum |a w| + fp32 sums.
//   fp32_tiles   tiles of W expanded to fp32 (quant_dequantize_rows), each multiplied by
//                matmul<float> (oneDNN): fp32_expand's numerics, for many rows where the
//                direct kernels have no faster instructions (every set, every format).
//   automatic    the fastest runnable path for the format and m, by measurement
//                (bench/RESULTS.md, "Quantised products: the kernels"): on Zen 4,
//                int8_vnni for Q8_0 / Q4_0 at every m (twice oneDNN's fp32 speed even at
//                512 rows), bf16_dot for BF16; without those instructions int8_madd,
//                fp32_expand up to 4 rows and fp32_tiles above.
enum class QuantPath { automatic, fp32_expand, int8_madd, int8_vnni, bf16_dot, fp32_tiles };
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
