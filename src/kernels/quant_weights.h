#pragma once
// Quantised weights as the products take them (quant_matmul.h), and the ways a product
// can meet them: declared apart so that the per-set kernels (quant_matmul_sets.h) and the
// tile layout (quant_tiles.h) see them without seeing the products that use both.
#include <cstdint>

#include "kernels/element_types.h"

namespace gatedlm::kernels {

struct QuantWeights {
  ElementType format;
  const void* data;  // rows * element_row_bytes(format, cols) bytes
  int64_t rows;      // n, the outputs
  int64_t cols;      // k, the inputs
  // Rows [0, tiled_rows) are arranged in tiles of 16 rows for the kernels that read them
  // (quant_tiles.h, quant_path_reads_tiles; a multiple of 16, at most rows), the rest are rows
  // of blocks as above.
  // Every path reads both: the kernels that do not read tiles get a row-major copy.
  int64_t tiled_rows = 0;
};

// How a product meets the weights (the kernels of the active kernel set, kernel_set.h):
//   fp32_expand  each block expanded to fp32 in registers, the activations used as given
//                (every set, every format): the reference's result up to fp32 summation order.
//                BF16 in the avx2 and avx512 sets reads tiles (quant_tiles.h) where it has them.
//   int8_madd    Q8_0 / Q4_0: each row of A first quantised to int8 blocks of 32 with an
//   int8_vnni    fp16 scale (GGUF's Q8_0, as llama.cpp's CPU backend does), then int8 dot
//                products per block, scaled in fp32: AVX2's vpmaddubsw (avx2 and avx512
//                sets), or vpdpbusd where the CPU has AVX512-VNNI (avx512 set) / AVX-VNNI
//                (avx2 set). The activations' rounding adds a bounded error: |error| <=
//                sum over blocks of (max|a| (1/254 + 2^-11 + 2^-20) + 127 * 2^-25) * sum|w|
//                over the block, + fp32 sums (test_quant_matmul.cpp derives it).
//                For Q4_K, Q5_K, Q6_K and IQ4_XS, int8_madd (avx2 and avx512 sets) rounds
//                each row of A to ggml's Q8_K super-blocks (256 values, an fp32 scale
//                d = max / -127: |a - q d| <= amax (1/254 + 2^-20)), then vpmaddubsw per
//                sub-block times its integer scale (quant_kint8.cpp): llama.cpp's arithmetic.
//                int8_vnni takes Q4_K, Q5_K and IQ4_XS too, where the CPU has VNNI:
//                vpdpbusd on their tiles (quant_kint8_vnni.inc), the same integers (Q4_K
//                and Q5_K: the same bits as their vpmaddubsw tile kernel).
//   int8_vnni_emulated  Q4_K / Q5_K / IQ4_XS: int8_vnni's tile kernel with each vpdpbusd done by AVX2
//                instructions, exactly (avx2 and avx512 sets): how CPUs without VNNI test
//                that kernel's arithmetic. Slower than both; never automatic.
//   bf16_dot     BF16: the rows of A rounded to bf16, then AVX512-BF16's vdpbf16ps
//                (avx512 set, CPUs with AVX512-BF16); error <= 2^-9 * sum |a w| + fp32 sums.
//   fp32_tiles   tiles of W expanded to fp32 (quant_dequantize_rows), each multiplied by
//                matmul<float> (oneDNN): fp32_expand's numerics, for many rows where the
//                direct kernels have no faster instructions (every set, every format).
//   automatic    the fastest runnable path for the format and m, by measurement
//                (bench/RESULTS.md, "Quantised products: the kernels"): on Zen 4,
//                int8_vnni for Q8_0 / Q4_0 at every m (twice oneDNN's fp32 speed even at
//                512 rows), bf16_dot for BF16, int8_madd for the K-quants above; without
//                those instructions int8_madd, fp32_expand up to 8 rows and fp32_tiles above.
enum class QuantPath { automatic, fp32_expand, int8_madd, int8_vnni, bf16_dot, fp32_tiles, int8_vnni_emulated };

}  // namespace gatedlm::kernels
