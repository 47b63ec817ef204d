#pragma once
// When a pass over a few values is worth OpenMP threads. Opening a parallel region (waking
// the team, the join barrier) costs microseconds; a decode step's norms, RoPE, residual adds,
// activations and gates each touch a few thousand values, which one thread does in less
// time, and a step has a dozen of them per layer. Below the threshold these passes run on
// the calling thread; every element is computed the same either way. 4096: one sequence's
// rows (768-2560 values at the 100M shapes) stay on the calling thread, a decode batch of
// 8 (6144 values at d = 768) is shared: Q4_0 at batch 8 measured 2.1-2.2k tokens/s against
// 1.6-2.0k with 32k, batch 1 unchanged within noise (dense, hybrid and MoE hybrid, 100M
// and 1B shapes, Zen 4).
#include <cstdint>

namespace gatedlm::kernels {

inline constexpr int64_t kElementwiseParallelFrom = int64_t{1} << 12;

// Whether an elementwise pass over `elements` values should open a parallel region.
inline bool elementwise_in_parallel(int64_t elements) { return elements >= kElementwiseParallelFrom; }

// The same for a loop over `rows` rows of `per_row` values, each row one iteration: a loop of
// one row is never shared (its region would leave the other threads waiting at the join: a
// batch-1 decode step of the 1B shape opened one per layer for SwiGLU, a batch-8 step of the
// Qwen3.5-shaped hybrid one per sequence and layer for the convolution).
inline bool rows_in_parallel(int64_t rows, int64_t per_row) {
  return rows > 1 && elementwise_in_parallel(rows * per_row);
}

}  // namespace gatedlm::kernels
