#pragma once
// The 16-bit float formats of Hugging Face checkpoints and GGUF, as bit patterns:
// bfloat16 (8 exponent bits, 7 mantissa bits: the top half of an fp32) and IEEE 754
// binary16 (5 exponent bits, 10 mantissa bits). Conversions to fp32 are exact; from fp32
// they round to nearest, ties to even, keep infinities and NaN (quiet), and keep
// subnormals (no flush to zero).
#include <cstdint>

namespace gatedlm::io {

float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

}  // namespace gatedlm::io
