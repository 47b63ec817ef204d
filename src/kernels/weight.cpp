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

namespace {

// How many of the `remaining` rows of a product from `part` on lie in one run of rows of one
// type: the rest of a stored matrix (read as whole rows, transposed: see weight.h), or the
// plain values before the store's next stored tensor. Throws naming the shape for any other
// view, and for rows past the model's weights.
int64_t rows_in_run(const Weight<float>& part, const MatmulShape& s, int64_t remaining) {
  if (!part.is_stored()) {
    const int64_t rows = part.store ? part.store->plain_values(part.values) / s.ldb : 0;
    if (rows <= 0) fail("matmul: ", s.N, " rows of ", s.K, " values run past the weights they start in");
    return std::min(remaining, rows);
  }
  const QuantWeights& m = part.stored.matrix;
  const int64_t row0 = part.stored.row0;
  const bool whole_rows = !s.trans_a && s.trans_b && s.K == m.cols && s.ldb == m.cols && row0 >= 0 && row0 < m.rows &&
                          (row0 + remaining <= m.rows || part.store);
  if (!whole_rows)
    fail("matmul: ", element_name(m.format), " weights are multiplied as whole rows, transposed: K must be their width ",
         m.cols, " and the rows [", row0, ", ", row0 + remaining, ") lie within their ", m.rows, "; got M=", s.M,
         " N=", s.N, " K=", s.K, s.trans_a ? ", A transposed" : "", s.trans_b ? "" : ", B not transposed",
         ", ldb=", s.ldb);
  return std::min(remaining, m.rows - row0);
}

}  // namespace

template <>
void matmul<float>(float* C, const float* A, const Weight<float>& B, MatmulShape s) {
  const bool rows_transposed = !s.trans_a && s.trans_b;  // the products whose rows may span tensors of other types
  if (!B.is_stored() && !(B.store && rows_transposed)) return matmul(C, A, B.values, s);
  adapt_openmp_threads();  // as matmul<float> does: products are where a step's threads are spent
  resolve_strides(s);
  if (s.M == 0 || s.N == 0) return;
  // The runs of rows of one type, all checked before anything is written: C's columns
  // [done, done + n) come from the run that starts at `part`.
  struct Run {
    Weight<float> part;
    int64_t done, n;
  };
  thread_local std::vector<Run> runs;
  runs.clear();
  for (int64_t done = 0; done < s.N; done += runs.back().n) {
    const Weight<float> part = done == 0 ? B : B.at(done * s.ldb);
    runs.push_back({part, done, rows_in_run(part, s, s.N - done)});
  }
  for (const Run& r : runs) {
    MatmulShape run = s;
    run.N = r.n;
    if (r.part.is_stored()) multiply_stored_rows(C + r.done, A, r.part.stored, run);
    else matmul(C + r.done, A, r.part.values, run);
  }
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
