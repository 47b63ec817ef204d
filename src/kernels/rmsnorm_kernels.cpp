#include "kernels/rmsnorm.h"

#include <cmath>
#include <vector>
#include "kernels/fixed_chunks.h"
#include "kernels/kernel_sets.h"
#include "kernels/parallel_work.h"

#include "kernels/kernel_set_begin.h"

namespace gatedlm::kernels::GATEDLM_KSET {

// The sum of a row's squares in 16 running double sums (element i's square, rounded in T as
// llama.cpp's rms_norm rounds it, into sum i % 16), then those added in a fixed tree: a
// vector's worth of independent adds a step, which the compiler vectorises without
// reordering anything, so the bits are fixed by this order on every kernel set and thread
// count. One running float sum, as before, waited on the previous add for every element (2048
// dependent adds a row at d_model 2048: a batch-8 decode step's norms took 1.4-3.7x their time
// now), and its rounding grew with the row (bench/RESULTS.md, "RMSNorm's sum of squares in 16
// lanes").
template <typename T>
double sum_of_squares(const T* x, int64_t n) {
  constexpr int kLanes = 16;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(x[i + l] * x[i + l]);
  for (int l = 0; i + l < n; ++l) lanes[l] += static_cast<double>(x[i + l] * x[i + l]);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int64_t rows, int64_t dim, double eps) {
#pragma omp parallel for schedule(static) if (rows_in_parallel(rows, dim))
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    T* yr = y + r * dim;
    T s = static_cast<T>(1.0 / std::sqrt(sum_of_squares(xr, dim) / dim + eps));
    rstd[r] = s;
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * s * w[i];
  }
}

// With n = x*s (s = rstd): dn = dy*w; dx = s*(dn - n*mean(dn*n)); dw = sum_rows dy*n.
// dw is summed per fixed chunk of rows, then over the chunks in order (fixed_chunks.h):
// the same bits whatever the thread count.
template <typename T>
void rmsnorm_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd,
                      int64_t rows, int64_t dim) {
  const RowChunks chunks = fixed_row_chunks(rows);
  std::vector<T> dw_partial(static_cast<size_t>(chunks.count * dim), T(0));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks.count; ++c) {
    T* dw_chunk = dw_partial.data() + c * dim;
    for (int64_t r = chunks.begin(c); r < chunks.end(c); ++r) {
      const T* xr = x + r * dim;
      const T* dyr = dy + r * dim;
      T* dxr = dx + r * dim;
      T s = rstd[r];
      T dot = 0;  // sum(dn * n)
      for (int64_t i = 0; i < dim; ++i) {
        T n = xr[i] * s;
        dot += dyr[i] * w[i] * n;
        dw_chunk[i] += dyr[i] * n;
      }
      T mean_dot = dot / static_cast<T>(dim);
      for (int64_t i = 0; i < dim; ++i) dxr[i] += s * (dyr[i] * w[i] - xr[i] * s * mean_dot);
    }
  }
  add_partials_in_order(dw, dw_partial.data(), chunks.count, dim);
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int64_t, int64_t, double);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int64_t, int64_t,
                                      double);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*,
                                      const float*, int64_t, int64_t);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*, const double*,
                                       const double*, int64_t, int64_t);

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
