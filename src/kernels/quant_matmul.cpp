// The quantised decode product of quant_matmul.h and its naive oracle.
//
// Why dequantise in registers and accumulate in fp32, rather than quantise the activations
// to Q8 per block and take int8 dot products as llama.cpp does: decoding streams every
// weight once per token, so a batch of 1-8 rows is bound by memory, not arithmetic; the
// fp32 path reaches that bound with plain C++ that GCC vectorises for every target (no
// VNNI needed), and it multiplies the activations exactly, so its result differs from
// the dequantise-then-multiply reference only in the order of fp32 sums. The int8 path
// adds the activations' own Q8 rounding (llama.cpp's logits carry it: that is what the
// tolerance against llama.cpp must allow). Where int8 dots pay is compute-bound batches
// (prefill, batch 16+): AVX512-VNNI / AVX-VNNI versions of weight_row_times_rows go
// beside this one in a per-kernel-set source (see the note at decode_product).
#include "kernels/quant_matmul.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/half_float.h"

namespace gatedlm::kernels {
namespace {

constexpr int kBlock = static_cast<int>(kQuantBlockValues);
constexpr int kLanes = 8;  // partial sums per row of A: one AVX2 register, two SSE ones

// Each format seen as blocks of 32 weights: expand() writes a block's values as fp32,
// exactly the values dequantize_row gives (q * d rounded once in fp32).
struct Q8Format {
  using Block = BlockQ8_0;
  static void expand(const Block& block, float* w) {
    const float d = f16_to_f32(block.d);
    for (int j = 0; j < kBlock; ++j) w[j] = static_cast<float>(block.qs[j]) * d;
  }
};
struct Q4Format {
  using Block = BlockQ4_0;
  static void expand(const Block& block, float* w) {
    const float d = f16_to_f32(block.d);
    // Nibbles to int8 first (byte operations), then the Q8_0 conversion: written as one
    // loop over nibbles to floats, GCC 12 leaves it scalar or nearly (measured: Q4_0 at
    // a sixth of Q8_0's speed).
    int8_t q[kBlock];
#pragma omp simd
    for (int j = 0; j < kBlock / 2; ++j) {
      q[j] = static_cast<int8_t>((block.qs[j] & 0x0F) - 8);
      q[j + kBlock / 2] = static_cast<int8_t>((block.qs[j] >> 4) - 8);
    }
    for (int j = 0; j < kBlock; ++j) w[j] = static_cast<float>(q[j]) * d;
  }
};
struct Bf16Format {
  struct Block {
    uint16_t values[kBlock];
  };
  static void expand(const Block& block, float* w) {
    for (int j = 0; j < kBlock; ++j) w[j] = bf16_to_f32(block.values[j]);
  }
};

// C[r * ldc] = A[r, :] . w for Rows rows of A (row stride k) against one weight row
// (k / 32 blocks): each block expanded once, then used by every row.
template <typename Format, int Rows>
void weight_row_times_rows(float* C, int64_t ldc, const float* A, int64_t k, const typename Format::Block* blocks) {
  float acc[Rows][kLanes] = {};
  const int64_t count = k / kBlock;
  for (int64_t b = 0; b < count; ++b) {
    alignas(32) float w[kBlock];
    Format::expand(blocks[b], w);
    for (int r = 0; r < Rows; ++r) {
      const float* a = A + r * k + b * kBlock;
      for (int g = 0; g < kBlock; g += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[r][l] += w[g + l] * a[g + l];
    }
  }
  for (int r = 0; r < Rows; ++r) {
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += acc[r][l];
    C[r * ldc] = sum;
  }
}

// weight_row_times_rows<Format, 1..kQuantDecodeRows>, indexed by rows - 1.
template <typename Format, int... Index>
constexpr auto row_kernels(std::integer_sequence<int, Index...>) {
  return std::array{&weight_row_times_rows<Format, Index + 1>...};
}

// Where the AVX2 / AVX-512 (VNNI) versions go: this file compiles once, for the build's
// baseline. To compile it per kernel set, add src/kernels/quant_matmul.cpp to
// GATEDLM_KERNEL_SET_SOURCES (top CMakeLists.txt), wrap the code in kernel_set_begin.h /
// kernel_set_end.h and route quant_matmul through dispatch.cpp like skinny_matmul_f32.
template <typename Format>
void decode_product(float* C, const float* A, int64_t m, const QuantWeights& W) {
  static constexpr auto kernels =
      row_kernels<Format>(std::make_integer_sequence<int, static_cast<int>(kQuantDecodeRows)>());
  const auto* data = static_cast<const unsigned char*>(W.data);
  const int64_t row_bytes = quant_row_bytes(W.format, W.cols);
  const bool parallel = m * W.rows * W.cols >= (int64_t{1} << 16);  // below that, threads cost more
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t o = 0; o < W.rows; ++o) {
    const auto* blocks = reinterpret_cast<const typename Format::Block*>(data + o * row_bytes);
    for (int64_t r0 = 0; r0 < m; r0 += kQuantDecodeRows) {
      const int64_t rows = std::min(kQuantDecodeRows, m - r0);
      kernels[rows - 1](C + r0 * W.rows + o, W.rows, A + r0 * W.cols, W.cols, blocks);
    }
  }
}

void check_product(int64_t m, const QuantWeights& W) {
  if (m < 0 || W.rows < 0 || W.cols < 0)
    fail("quantised product: negative size (m ", m, ", n ", W.rows, ", k ", W.cols, ")");
  if (W.cols % kQuantBlockValues != 0)
    fail("quantised product: the ", quant_format_name(W.format), " weights have ", W.cols,
         " columns, not a multiple of ", kQuantBlockValues);
  if (W.data == nullptr && W.rows * W.cols > 0) fail("quantised product: the weights have no data");
}

}  // namespace

void quant_matmul_reference(float* C, const float* A, int64_t m, const QuantWeights& W) {
  check_product(m, W);
  const auto* data = static_cast<const unsigned char*>(W.data);
  const int64_t row_bytes = quant_row_bytes(W.format, W.cols);
  std::vector<float> w(static_cast<size_t>(W.cols));
  for (int64_t o = 0; o < W.rows; ++o) {
    dequantize_row(W.format, w.data(), data + o * row_bytes, W.cols);
    for (int64_t r = 0; r < m; ++r) {
      double sum = 0.0;
      for (int64_t j = 0; j < W.cols; ++j) sum += static_cast<double>(A[r * W.cols + j]) * w[j];
      C[r * W.rows + o] = static_cast<float>(sum);
    }
  }
}

void quant_matmul(float* C, const float* A, int64_t m, const QuantWeights& W) {
  check_product(m, W);
  switch (W.format) {
    case QuantFormat::bf16: return decode_product<Bf16Format>(C, A, m, W);
    case QuantFormat::q8_0: return decode_product<Q8Format>(C, A, m, W);
    case QuantFormat::q4_0: return decode_product<Q4Format>(C, A, m, W);
  }
  fail("unknown quantised weight format ", static_cast<int>(W.format));
}

}  // namespace gatedlm::kernels
