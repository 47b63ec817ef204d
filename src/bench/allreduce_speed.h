#pragma once
// The gradient allreduce's speed over the ranks of this job (gatedlm bench allreduce,
// run under mpirun): the float64 sum dist::GradientSum does every step, timed per size.
#include <cstdint>
#include <vector>

#include "dist/communicator.h"

namespace gatedlm::bench {

struct AllreduceTiming {
  int64_t bytes = 0;       // of the buffer summed (float64 elements x 8)
  double median_s = 0, min_s = 0;
  double algbw_gbs = 0;    // bytes / median time, GB/s
  double busbw_gbs = 0;    // algbw x 2 (N-1) / N: what each rank's link carried (ring-equivalent)
  bool correct = false;    // the sums were checked against their closed form, on every rank
};

// For each size, `reps` timed allreduces (each after a barrier) of a buffer whose exact
// sum is known; every rank runs it, all return the same timings (rank 0's clock).
std::vector<AllreduceTiming> measure_allreduce(dist::Communicator& comm, const std::vector<int64_t>& sizes_bytes,
                                               int reps);

}  // namespace gatedlm::bench
