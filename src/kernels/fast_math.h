#pragma once
// Branch-free math that compilers vectorise inside loops (libm's expf is a call per
// element). exp_approx: relative error below 2e-7 on [-87, 88]; exp(-inf) is not handled
// (callers mask those entries themselves).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace gatedlm::kernels {

inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2].
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = std::fma(n, -1.428606765330187e-06f, std::fma(n, -0.693145751953125f, x));  // exact first
  // Taylor series to r^7/7!: truncation below 2e-8 relative on the interval.
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

}  // namespace gatedlm::kernels
