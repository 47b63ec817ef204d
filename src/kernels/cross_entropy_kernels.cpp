#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include "kernels/kernel_sets.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/fast_math.h"

namespace gatedlm::kernels::GATEDLM_KSET {

namespace {

// The three passes over one row of the vocabulary. The vocabulary loop dominates the
// loss's cost, so float runs on AVX-512 (exp_approx16, masked tails) or AVX2 (exp_approx8,
// a scalar tail) in those kernel sets; double (the reference path) uses libm.
template <typename T>
struct RowOps {
  static T max(const T* z, int64_t v) { return *std::max_element(z, z + v); }
  static T sum_exp(const T* z, int64_t v, T shift) {
    T sum = 0;
    for (int64_t i = 0; i < v; ++i) sum += std::exp(z[i] - shift);
    return sum;
  }
  // d[i] = exp(z[i] - shift) * scale
  static void scaled_exp(T* d, const T* z, int64_t v, T shift, T scale) {
    for (int64_t i = 0; i < v; ++i) d[i] = std::exp(z[i] - shift) * scale;
  }
};

#if GATEDLM_KSET_AVX512
template <>
struct RowOps<float> {
  static float max(const float* z, int64_t v) {
    __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t i = 0; i < v; i += 16) m = _mm512_mask_max_ps(m, tail_mask(v - i), m, _mm512_maskz_loadu_ps(tail_mask(v - i), z + i));
    return max16(m);
  }
  static float sum_exp(const float* z, int64_t v, float shift) {
    const __m512 s = _mm512_set1_ps(shift);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < v; i += 16) {
      const __mmask16 k = tail_mask(v - i);
      acc = _mm512_mask_add_ps(acc, k, acc, exp_approx16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, z + i), s)));
    }
    return sum16(acc);
  }
  static void scaled_exp(float* d, const float* z, int64_t v, float shift, float scale) {
    const __m512 s = _mm512_set1_ps(shift), c = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < v; i += 16) {
      const __mmask16 k = tail_mask(v - i);
      _mm512_mask_storeu_ps(d + i, k, _mm512_mul_ps(exp_approx16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, z + i), s)), c));
    }
  }
};
#elif GATEDLM_KSET_AVX2
template <>
struct RowOps<float> {
  static float max(const float* z, int64_t v) { return *std::max_element(z, z + v); }
  static float sum_exp(const float* z, int64_t v, float shift) {
    const __m256 s = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= v; i += 8) acc = _mm256_add_ps(acc, exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(z + i), s)));
    float sum = sum8(acc);
    for (; i < v; ++i) sum += exp_approx(z[i] - shift);
    return sum;
  }
  static void scaled_exp(float* d, const float* z, int64_t v, float shift, float scale) {
    const __m256 s = _mm256_set1_ps(shift), c = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= v; i += 8)
      _mm256_storeu_ps(d + i, _mm256_mul_ps(exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(z + i), s)), c));
    for (; i < v; ++i) d[i] = exp_approx(z[i] - shift) * scale;
  }
};
#else
template <>
struct RowOps<float> {
  static float max(const float* z, int64_t v) { return *std::max_element(z, z + v); }
  static float sum_exp(const float* z, int64_t v, float shift) {
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < v; ++i) sum += exp_approx(z[i] - shift);
    return sum;
  }
  static void scaled_exp(float* d, const float* z, int64_t v, float shift, float scale) {
#pragma omp simd
    for (int64_t i = 0; i < v; ++i) d[i] = exp_approx(z[i] - shift) * scale;
  }
};
#endif

}  // namespace

template <typename T>
double cross_entropy(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t rows,
                     int64_t vocab, T grad_scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* z = logits + r * vocab;
    const int32_t target = targets[r];
    if (target < 0) {
      losses[r] = 0;
      if (dlogits) std::fill(dlogits + r * vocab, dlogits + (r + 1) * vocab, T(0));
      continue;
    }
    const T m = RowOps<T>::max(z, vocab);
    const T sum = RowOps<T>::sum_exp(z, vocab, m);
    const T log_sum = static_cast<T>(std::log(static_cast<double>(sum)));
    const T z_target = z[target];  // read before dlogits (which may alias z) is written
    losses[r] = log_sum - (z_target - m);
    if (dlogits) {
      T* d = dlogits + r * vocab;
      RowOps<T>::scaled_exp(d, z, vocab, m, grad_scale / sum);
      d[target] -= grad_scale;
    }
  }
  // Summed in row order so the result does not depend on the thread count or timing.
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) total += static_cast<double>(losses[r]);
  return total;
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* losses, const int32_t* targets, int64_t rows,
                            int64_t vocab, T grad_scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* z = logits + r * vocab;
    T* d = dlogits + r * vocab;
    const int32_t target = targets[r];
    if (target < 0) {
      std::fill(d, d + vocab, T(0));
      continue;
    }
    const T lse = losses[r] + z[target];
    RowOps<T>::scaled_exp(d, z, vocab, lse, grad_scale);
    d[target] -= grad_scale;
  }
}

template double cross_entropy<float>(float*, float*, const float*, const int32_t*, int64_t, int64_t, float);
template double cross_entropy<double>(double*, double*, const double*, const int32_t*, int64_t, int64_t,
                                      double);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t,
                                            float);
template void cross_entropy_backward<double>(double*, const double*, const double*, const int32_t*, int64_t,
                                             int64_t, double);

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
