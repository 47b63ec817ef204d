#pragma once
// The gradient of one optimizer step, summed over its micro-batches and over the ranks
// that computed them.
//
// Why float64: a step's micro-batches are dealt out across ranks, so with float sums the
// grouping of the additions (and the rounding) would depend on the number of ranks.
// Each micro-batch's float gradient is added into a float64 sum instead; a sum of a few
// floats of similar magnitude is exact in float64, so the total, rounded once to float,
// is the same for 1, 2 or N ranks (and for N ranks run twice: the cross-rank sum is in
// rank order, see Communicator::allreduce_sum). The cost: 8 bytes per parameter of
// memory and of allreduce traffic. One process with one micro-batch skips all of it.
#include <cstdint>
#include <span>
#include <vector>

#include "dist/communicator.h"

namespace gatedlm::dist {

class GradientSum {
 public:
  // n: gradient elements; micro_batches_here: micro-batches this rank adds per step.
  GradientSum(Communicator& comm, size_t n, int64_t micro_batches_here);
  // Adds one micro-batch's gradient (call micro_batches_here times per step).
  void add(std::span<const float> grad);
  // Sums over ranks and writes grad[i] = sum[i] / divisor (the mean over the step's
  // micro-batches when divisor is their global count); clears the sum for the next step.
  // grad may be the buffer last passed to add().
  void finish(std::span<float> grad, int64_t divisor);
  // Seconds the last finish() spent in the allreduce (0 on one process).
  double last_reduce_seconds() const { return reduce_s_; }
  // Bytes the allreduce sums per step (0 when nothing is reduced).
  size_t reduced_bytes() const { return passthrough_ || comm_.size() == 1 ? 0 : sum_.size() * sizeof(double); }

 private:
  Communicator& comm_;
  bool passthrough_;  // one process, one micro-batch: the model's gradient is the step's
  int64_t added_ = 0;
  std::vector<double> sum_;
  double reduce_s_ = 0;
};

}  // namespace gatedlm::dist
