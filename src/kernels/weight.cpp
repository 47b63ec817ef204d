#include "kernels/weight.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/thread_governor.h"
#include "kernels/quant_tiles.h"

namespace gatedlm::kernels {

namespace {

// C = A W^T for W = rows [row0, row0 + s.N) of a stored matrix (s.K its width, A and C
// strided): kernels::quant_matmul picks its path by the rows (blocks read directly for
// decode, int8 dot products or fp32 tiles for prefill, per kernel set). A view of tiled
// rows must start at a tile and end at one or past the tiles; any other multiplies a
// row-major copy of its rows.
void multiply_stored_rows(float* C, const float* A, const StoredRows& stored, const MatmulShape& s) {
  const QuantWeights& matrix = stored.matrix;
  const int64_t row0 = stored.row0, end = row0 + s.N;
  const int64_t row_bytes = element_row_bytes(matrix.format, matrix.cols);
  QuantWeights W{matrix.format, static_cast<const uint8_t*>(matrix.data) + row0 * row_bytes, s.N, s.K};
  if (row0 < matrix.tiled_rows) {
    const bool whole_tiles = row0 % kQuantTileRows == 0 && (end % kQuantTileRows == 0 || end >= matrix.tiled_rows);
    if (!whole_tiles) {
      thread_local std::vector<uint8_t> rows;
      rows.resize(static_cast<size_t>(s.N * row_bytes));
      quant_copy_rows(rows.data(), matrix, row0, s.N);
      W.data = rows.data();
      return quant_matmul(C, s.ldc, A, s.lda, s.M, W, s.accumulate);
    }
    W.tiled_rows = std::min(end, matrix.tiled_rows) - row0;
  }
  quant_matmul(C, s.ldc, A, s.lda, s.M, W, s.accumulate);
}

}  // namespace

template <>
void matmul<double>(double* C, const double* A, const Weight<double>& B, MatmulShape s) {
  matmul(C, A, B.values, s);
}

template <>
void matmul<float>(float* C, const float* A, const Weight<float>& B, MatmulShape s) {
  if (!B.is_stored()) return matmul(C, A, B.values, s);
  adapt_openmp_threads();  // as matmul<float> does: products are where a step's threads are spent
  resolve_strides(s);
  if (s.M == 0 || s.N == 0) return;
  const QuantWeights& m = B.stored.matrix;
  const bool whole_rows = !s.trans_a && s.trans_b && s.K == m.cols && s.ldb == m.cols && B.stored.row0 >= 0 &&
                          B.stored.row0 + s.N <= m.rows;
  if (!whole_rows)
    fail("matmul: ", element_name(m.format), " weights are multiplied as whole rows, transposed: K must be their width ",
         m.cols, " and the rows [", B.stored.row0, ", ", B.stored.row0 + s.N, ") lie within their ", m.rows,
         "; got M=", s.M, " N=", s.N, " K=", s.K, s.trans_a ? ", A transposed" : "",
         s.trans_b ? "" : ", B not transposed", ", ldb=", s.ldb);
  multiply_stored_rows(C, A, B.stored, s);
}

template <typename T>
void batched_matmul(T* C, const T* A, const Weight<T>& B, MatmulShape s, BatchStrides b) {
  if (!B.is_stored()) return batched_matmul(C, A, B.values, s, b);
  for (int64_t i = 0; i < b.batch; ++i) matmul(C + i * b.c, A + i * b.a, B.at(i * b.b), s);
}

template <typename T>
void linear_forward(T* y, const T* x, const Weight<T>& W, int64_t n, int64_t in, int64_t out) {
  matmul(y, x, W, MatmulShape{.M = n, .N = out, .K = in, .trans_b = true});
}

template void batched_matmul<float>(float*, const float*, const Weight<float>&, MatmulShape, BatchStrides);
template void batched_matmul<double>(double*, const double*, const Weight<double>&, MatmulShape, BatchStrides);
template void linear_forward<float>(float*, const float*, const Weight<float>&, int64_t, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const Weight<double>&, int64_t, int64_t, int64_t);

}  // namespace gatedlm::kernels
