// The quantised products of quant_matmul.h: argument checks, the naive oracle, and the
// choice between the active kernel set's direct kernels (quant_decode.cpp,
// quant_int8.cpp) and, for many rows of A, tiles of W expanded to fp32 for matmul<float>.
#include "kernels/quant_matmul.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_set.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul_sets.h"
#include "kernels/quant_tiles.h"

namespace gatedlm::kernels {
namespace {

void check_product(int64_t m, const QuantWeights& W) {
  if (m < 0 || W.rows < 0 || W.cols < 0)
    fail("quantised product: negative size (m ", m, ", n ", W.rows, ", k ", W.cols, ")");
  // Whole blocks of the format, and of 32 values for every format (the BF16 kernels step by 32).
  const int64_t block = std::max(kQuantBlockValues, element_traits(W.format).block_values);
  if (W.cols % block != 0)
    fail("quantised product: the ", element_name(W.format), " weights have ", W.cols, " columns, not a multiple of ",
         block);
  if (!element_traits(W.format).products)
    fail("quantised product: the products do not multiply by ", element_name(W.format), " weights");
  if (W.data == nullptr && W.rows * W.cols > 0) fail("quantised product: the weights have no data");
  if (W.tiled_rows != 0 && (!quant_format_tiles(W.format) || W.tiled_rows < 0 || W.tiled_rows > W.rows ||
                            W.tiled_rows % kQuantTileRows != 0))
    fail("quantised product: ", W.tiled_rows, " tiled rows of ", W.rows, " ", element_name(W.format),
         " rows is not a whole number of tiles of ", kQuantTileRows);
}

// W's rows of blocks, row-major (the layout every path but the tile kernels reads): W
// itself when it has no tiles, else a copy in `storage`.
QuantWeights untiled(const QuantWeights& W, std::vector<uint8_t>& storage) {
  if (W.tiled_rows == 0) return W;
  storage.resize(static_cast<size_t>(W.rows * element_row_bytes(W.format, W.cols)));
  quant_copy_rows(storage.data(), W, 0, W.rows);
  return QuantWeights{W.format, storage.data(), W.rows, W.cols};
}

void check_strides(int64_t ldc, int64_t lda, const QuantWeights& W) {
  if (lda < W.cols || ldc < W.rows)
    fail("quantised product: row strides lda ", lda, " / ldc ", ldc, " below k ", W.cols, " / n ", W.rows);
}

// Weight rows expanded per tile for matmul<float>: about 4 MiB of fp32, whole granules of
// 32 rows, a number that depends on k alone.
int64_t expand_tile_rows(int64_t k) {
  return std::max<int64_t>(32, (int64_t{1} << 20) / std::max<int64_t>(k, 1) / 32 * 32);
}

// C (+)= A W^T through tiles of W expanded to fp32 (prefill): each tile's columns of C are
// one matmul<float>, whose tiles do not depend on the thread count (product_tiles.h).
void expanded_tiles_product(float* C, int64_t ldc, const float* A, int64_t lda, int64_t m, const QuantWeights& W,
                            bool accumulate) {
  const int64_t tile_rows = std::min(W.rows, expand_tile_rows(W.cols));
  thread_local std::vector<float> tile;
  tile.resize(static_cast<size_t>(tile_rows * W.cols));
  for (int64_t o = 0; o < W.rows; o += tile_rows) {
    const int64_t rows = std::min(tile_rows, W.rows - o);
    quant_dequantize_rows(tile.data(), W, o, rows);  // the public one: it reads tiles
    MatmulShape s{m, rows, W.cols};
    s.trans_b = true;
    s.lda = lda;
    s.ldb = W.cols;
    s.ldc = ldc;
    s.accumulate = accumulate;
    matmul<float>(C + o, A, tile.data(), s);
  }
}

}  // namespace

const char* quant_path_name(QuantPath path) {
  switch (path) {
    case QuantPath::automatic: return "automatic";
    case QuantPath::fp32_expand: return "fp32_expand";
    case QuantPath::int8_madd: return "int8_madd";
    case QuantPath::int8_vnni: return "int8_vnni";
    case QuantPath::bf16_dot: return "bf16_dot";
    case QuantPath::fp32_tiles: return "fp32_tiles";
    case QuantPath::int8_vnni_emulated: return "int8_vnni_emulated";
  }
  return "?";
}

void quant_matmul_reference(float* C, const float* A, int64_t m, const QuantWeights& W) {
  check_product(m, W);
  std::vector<uint8_t> row(static_cast<size_t>(element_row_bytes(W.format, W.cols)));
  std::vector<float> w(static_cast<size_t>(W.cols));
  for (int64_t o = 0; o < W.rows; ++o) {
    quant_copy_rows(row.data(), W, o, 1);
    element_to_f32(W.format, w.data(), row.data(), W.cols);
    for (int64_t r = 0; r < m; ++r) {
      double sum = 0.0;
      for (int64_t j = 0; j < W.cols; ++j) sum += static_cast<double>(A[r * W.cols + j]) * w[j];
      C[r * W.rows + o] = static_cast<float>(sum);
    }
  }
}

void quant_matmul_path(QuantPath path, float* C, int64_t ldc, const float* A, int64_t lda, int64_t m,
                       const QuantWeights& W, bool accumulate) {
  check_product(m, W);
  check_strides(ldc, lda, W);
  if (!quant_path_runnable(path, W.format))
    fail("quantised product: the ", quant_path_name(path), " path cannot multiply ", element_name(W.format),
         " weights in kernel set ", kernel_set_name(active_kernel_set()), " on this CPU");
  if (m == 0 || W.rows == 0) return;
  if (path == QuantPath::automatic) path = quant_best_path(W.format, m);
  // fp32 tiles expand W a slice at a time, tiled or not (prefill of many rows on Q4_K tiles).
  if (path == QuantPath::fp32_tiles) return expanded_tiles_product(C, ldc, A, lda, m, W, accumulate);
  if (W.tiled_rows > 0 && !quant_path_reads_tiles(path, W.format)) {
    // A path that reads rows of blocks (another kernel set than the one the weights were
    // arranged for, or a path asked for by name): on a row-major copy.
    thread_local std::vector<uint8_t> rows;
    return quant_matmul_path(path, C, ldc, A, lda, m, untiled(W, rows), accumulate);
  }
  quant_matmul_path_of_set(path, C, ldc, A, lda, m, W, accumulate);
}

bool quant_tiles_pay(ElementType format) {
  return quant_format_tiles(format) && quant_path_reads_tiles(quant_best_path(format, 1), format) &&
         quant_path_reads_tiles(quant_best_path(format, kQuantDecodeRows), format);
}

void quant_matmul(float* C, int64_t ldc, const float* A, int64_t lda, int64_t m, const QuantWeights& W,
                  bool accumulate) {
  quant_matmul_path(QuantPath::automatic, C, ldc, A, lda, m, W, accumulate);
}

void quant_matmul(float* C, const float* A, int64_t m, const QuantWeights& W) {
  quant_matmul(C, W.rows, A, W.cols, m, W, false);
}

void quant_dequantize_rows(float* out, const QuantWeights& W, int64_t row0, int64_t rows) {
  check_product(0, W);
  if (row0 < 0 || rows < 0 || row0 + rows > W.rows)
    fail("quant_dequantize_rows: rows [", row0, ", ", row0 + rows, ") outside the ", W.rows, " rows");
  if (W.tiled_rows > 0) {
    std::vector<uint8_t> blocks(static_cast<size_t>(rows * element_row_bytes(W.format, W.cols)));
    quant_copy_rows(blocks.data(), W, row0, rows);
    return quant_dequantize_rows_of_set(out, QuantWeights{W.format, blocks.data(), rows, W.cols}, 0, rows);
  }
  quant_dequantize_rows_of_set(out, W, row0, rows);
}

}  // namespace gatedlm::kernels
