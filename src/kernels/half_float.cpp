#include "kernels/half_float.h"

#include <bit>
#include <cmath>

namespace gatedlm::kernels {

uint16_t f32_to_bf16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((u >> 16) | 0x0040);  // quiet NaN
  const uint32_t rounding = 0x7FFF + ((u >> 16) & 1);                       // ties to even
  return static_cast<uint16_t>((u + rounding) >> 16);
}

uint16_t f32_to_f16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7E00;
  if (magnitude >= 65520.0f) return sign | 0x7C00;  // rounds past the largest half (65504)
  if (magnitude < 6.103515625e-05f) {               // below 2^-14: a half subnormal m * 2^-24
    // The scaling is exact and nearbyint rounds ties to even; m = 1024 encodes 2^-14.
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(magnitude, 24)));
  }
  const uint32_t bits = u & 0x7FFFFFFF;
  uint32_t half = (((bits >> 23) - 127 + 15) << 10) | ((bits & 0x7FFFFF) >> 13);
  const uint32_t rest = bits & 0x1FFF;  // the 13 mantissa bits dropped
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // a carry moves into the exponent
  return sign | static_cast<uint16_t>(half);
}

}  // namespace gatedlm::kernels
