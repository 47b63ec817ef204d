#include "dist/gradient_sum.h"

#include <chrono>

#include "core/error.h"

namespace gatedlm::dist {

GradientSum::GradientSum(Communicator& comm, size_t n, int64_t micro_batches_here)
    : comm_(comm), passthrough_(comm.size() == 1 && micro_batches_here == 1) {
  if (!passthrough_) sum_.assign(n, 0.0);
}

void GradientSum::add(std::span<const float> grad) {
  ++added_;
  if (passthrough_) return;
  if (grad.size() != sum_.size()) fail("GradientSum::add: ", grad.size(), " gradients, expected ", sum_.size());
  double* s = sum_.data();
  const float* g = grad.data();
  // The first micro-batch sets the sum (no separate clearing pass).
  if (added_ == 1) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < sum_.size(); ++i) s[i] = static_cast<double>(g[i]);
  } else {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < sum_.size(); ++i) s[i] += static_cast<double>(g[i]);
  }
}

void GradientSum::finish(std::span<float> grad, int64_t divisor) {
  if (added_ == 0 && !passthrough_) sum_.assign(sum_.size(), 0.0);  // a rank with no micro-batch this step
  added_ = 0;
  reduce_s_ = 0;
  if (passthrough_) {
    if (divisor != 1) fail("GradientSum: one micro-batch on one process, but divisor ", divisor);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  comm_.allreduce_sum(std::span<double>(sum_));
  reduce_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double* s = sum_.data();
  float* out = grad.data();
  const double inv = 1.0 / static_cast<double>(divisor);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < sum_.size(); ++i) out[i] = static_cast<float>(s[i] * inv);
}

}  // namespace gatedlm::dist
