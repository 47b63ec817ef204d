#pragma once
// Weight formats for inference, bit-compatible with GGUF (ggml's ggml-common.h and the
// reference quantisers of ggml-quants.c, which llama.cpp's quantize tool runs):
//   Q8_0: blocks of 32 values, 34 bytes: an fp16 scale d = max|x| / 127, then 32 int8
//         q = round(x / d) (ties away from zero); x ~ q * d.
//   Q4_0: blocks of 32 values, 18 bytes: an fp16 scale d = m / -8, where m is the value of
//         largest magnitude (the first one on ties) with its sign, then 16 bytes of 4-bit
//         q = min(15, trunc(x / d + 8.5)); byte j holds element j in its low nibble and
//         element j + 16 in its high nibble; x ~ (q - 8) * d.
//   BF16: 2 bytes a value, the top half of the fp32 rounded to nearest even.
// The 1 / d used for q is computed from the fp32 d, before d is rounded to fp16, as ggml
// does. A row of k values is k / 32 blocks back to back (k a multiple of 32 for Q8_0 and
// Q4_0), the layout of a GGUF tensor's rows; the structs below have exactly GGUF's bytes
// (little-endian, no padding).
#include <cstdint>

namespace gatedlm::kernels {

inline constexpr int64_t kQuantBlockValues = 32;

struct BlockQ8_0 {
  uint16_t d;                       // fp16 bits of the scale
  int8_t qs[kQuantBlockValues];     // the values over d
};
struct BlockQ4_0 {
  uint16_t d;                       // fp16 bits of the scale
  uint8_t qs[kQuantBlockValues / 2];  // element j low nibble, element j + 16 high nibble
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18, "GGUF's block sizes");

// These are the conversions of element_types.h's rows for BF16, Q8_0 and Q4_0:
// element_row_bytes, element_to_f32 and element_from_f32 reach them by type.
// One row of k values in and out of each format, k a multiple of 32 (checked) for the
// block formats.
void quantize_row_q8_0(BlockQ8_0* out, const float* in, int64_t k);
void dequantize_row_q8_0(float* out, const BlockQ8_0* in, int64_t k);
void quantize_row_q4_0(BlockQ4_0* out, const float* in, int64_t k);
void dequantize_row_q4_0(float* out, const BlockQ4_0* in, int64_t k);
void dequantize_row_bf16(float* out, const uint16_t* in, int64_t k);

}  // namespace gatedlm::kernels
