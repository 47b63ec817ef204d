#pragma once
// When a pass over a few values is worth OpenMP threads. Opening a parallel region (waking
// the team, the join barrier) costs microseconds; a decode step's norms, RoPE, residual adds,
// activations and gates each touch a few thousand values, which one thread does in less
// time, and a step has a dozen of them per layer. Below the threshold these passes run on
// the calling thread; every element is computed the same either way.
#include <cstdint>

namespace gatedlm::kernels {

inline constexpr int64_t kElementwiseParallelFrom = int64_t{1} << 15;

// Whether an elementwise pass over `elements` values should open a parallel region.
inline bool elementwise_in_parallel(int64_t elements) { return elements >= kElementwiseParallelFrom; }

}  // namespace gatedlm::kernels
