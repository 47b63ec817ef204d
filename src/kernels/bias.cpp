#include "kernels/bias.h"

#include <cstddef>
#include <vector>

#include "kernels/fixed_chunks.h"
#include "kernels/parallel_work.h"

namespace gatedlm::kernels {

template <typename T>
void bias_forward(T* y, const T* b, int64_t n, int64_t width, int64_t ld) {
  if (ld == 0) ld = width;
#pragma omp parallel for schedule(static) if (rows_in_parallel(n, width))
  for (int64_t r = 0; r < n; ++r) {
    T* row = y + r * ld;
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) row[j] += b[j];
  }
}

// Each fixed chunk of rows (fixed_chunks.h) sums into its own double row; the chunks'
// rows are then added in chunk order, so the result does not depend on the thread count.
template <typename T>
void bias_backward(T* db, const T* dy, int64_t n, int64_t width, int64_t ld) {
  if (ld == 0) ld = width;
  const RowChunks chunks = fixed_row_chunks(n);
  std::vector<double> partial(static_cast<std::size_t>(chunks.count * width), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks.count; ++c) {
    double* acc = partial.data() + c * width;
    for (int64_t r = chunks.begin(c); r < chunks.end(c); ++r) {
      const T* row = dy + r * ld;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
    }
  }
  add_partials_in_order(db, partial.data(), chunks.count, width);
}

template void bias_forward<float>(float*, const float*, int64_t, int64_t, int64_t);
template void bias_forward<double>(double*, const double*, int64_t, int64_t, int64_t);
template void bias_backward<float>(float*, const float*, int64_t, int64_t, int64_t);
template void bias_backward<double>(double*, const double*, int64_t, int64_t, int64_t);

}  // namespace gatedlm::kernels
