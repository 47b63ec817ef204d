#include "kernels/bias.h"

#include <omp.h>

#include <cstddef>
#include <vector>

namespace gatedlm::kernels {

template <typename T>
void bias_forward(T* y, const T* b, int64_t n, int64_t width, int64_t ld) {
  if (ld == 0) ld = width;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    T* row = y + r * ld;
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) row[j] += b[j];
  }
}

// Each thread sums a contiguous slice of rows into its own double row; the partial sums
// are then added in thread order, so the result does not depend on scheduling.
template <typename T>
void bias_backward(T* db, const T* dy, int64_t n, int64_t width, int64_t ld) {
  if (ld == 0) ld = width;
  const int threads = omp_get_max_threads();
  std::vector<double> partial(static_cast<std::size_t>(threads) * static_cast<std::size_t>(width), 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    double* acc = partial.data() + static_cast<std::size_t>(t) * static_cast<std::size_t>(width);
    for (int64_t r = begin; r < end; ++r) {
      const T* row = dy + r * ld;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    double sum = 0.0;
    for (int t = 0; t < threads; ++t) sum += partial[static_cast<std::size_t>(t) * static_cast<std::size_t>(width) + j];
    db[j] += static_cast<T>(sum);
  }
}

template void bias_forward<float>(float*, const float*, int64_t, int64_t, int64_t);
template void bias_forward<double>(double*, const double*, int64_t, int64_t, int64_t);
template void bias_backward<float>(float*, const float*, int64_t, int64_t, int64_t);
template void bias_backward<double>(double*, const double*, int64_t, int64_t, int64_t);

}  // namespace gatedlm::kernels
