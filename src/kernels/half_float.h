#pragma once
// The 16-bit float formats of Hugging Face checkpoints, GGUF and the quantised weight
// blocks (quant_blocks.h), as bit patterns: bfloat16 (8 exponent bits, 7 mantissa bits:
// the top half of an fp32) and IEEE 754 binary16 (5 exponent bits, 10 mantissa bits).
// Conversions to fp32 are exact; from fp32 they round to nearest, ties to even, keep
// infinities and NaN (quiet), and keep subnormals (no flush to zero). Scalar, one value
// at a time: for file formats and block scales, not for streaming whole tensors
// (to_bf16 of matmul.h and to_f16 / from_f16 below do that).
#include <bit>
#include <cstdint>

namespace gatedlm::kernels {

inline float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
uint16_t f32_to_bf16(float value);
// Inline: the quantised products call it once per block of 32 weights.
inline float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24 (exact in fp32)
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000 | (mantissa << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}
uint16_t f32_to_f16(float value);

// Rows of n values (float16_convert.cpp, vectorised with F16C in the avx2 and avx512 kernel
// sets): the bits of f32_to_f16 and f16_to_f32 value by value, except NaN, which stays a
// NaN of either sign but whose payload and quiet bit are not promised.
void to_f16(uint16_t* out, const float* in, int64_t n);
void from_f16(float* out, const uint16_t* in, int64_t n);

}  // namespace gatedlm::kernels
