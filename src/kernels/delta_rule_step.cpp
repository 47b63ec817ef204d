// delta_rule_step (delta_rule_step.h), compiled once per kernel set (kernel_set_begin.h): its
// loops over a state row vectorise to the set's widest vectors, with fused multiply-adds in the
// avx2 and avx512 sets.
#include "kernels/kernel_sets.h"

#include "kernels/kernel_set_begin.h"

namespace gatedlm::kernels::GATEDLM_KSET {

// Two passes over S, which a decode batch reads from memory (a layer's states are 64 KiB a
// head): the first reads it for S^T k of the decayed state without storing the decay, the
// second stores the decayed and updated state and sums o from it. Value by value the
// arithmetic of decaying S in place first: each element is rounded after the decay, then
// gains k_i u_j. (Before, both passes stored S, and the compiler, not knowing that S, u and o
// do not overlap, kept the loops on 128-bit vectors with run-time overlap checks: 2.2-2.4x
// slower, bench/RESULTS.md "The delta rule's decode step per kernel set".)
template <typename T>
void delta_rule_step(T* __restrict S, T* __restrict o, const T* __restrict q, const T* __restrict k,
                     const T* __restrict v, T g, T beta, int64_t dk, int64_t dv, T* __restrict u) {
  const T decay = std::exp(g);
  std::fill(u, u + dv, T(0));
  for (int64_t i = 0; i < dk; ++i) {
    const T* row = S + i * dv;
    const T ki = k[i];
#pragma omp simd
    for (int64_t j = 0; j < dv; ++j) {
      const T decayed = row[j] * decay;
      u[j] += decayed * ki;
    }
  }
  for (int64_t j = 0; j < dv; ++j) u[j] = beta * (v[j] - u[j]);
  if (o) std::fill(o, o + dv, T(0));
  for (int64_t i = 0; i < dk; ++i) {
    T* row = S + i * dv;
    const T ki = k[i];
    if (o) {
      const T qi = q[i];
#pragma omp simd
      for (int64_t j = 0; j < dv; ++j) {
        T s = row[j] * decay;
        s += ki * u[j];
        row[j] = s;
        o[j] += s * qi;
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < dv; ++j) {
        T s = row[j] * decay;
        s += ki * u[j];
        row[j] = s;
      }
    }
  }
}

template void delta_rule_step<float>(float*, float*, const float*, const float*, const float*, float, float, int64_t,
                                     int64_t, float*);
template void delta_rule_step<double>(double*, double*, const double*, const double*, const double*, double, double,
                                      int64_t, int64_t, double*);

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
