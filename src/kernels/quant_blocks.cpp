// The reference quantisers of quant_blocks.h, value for value ggml's quantize_row_q8_0_ref,
// quantize_row_q4_0_ref and their dequantisers: the weights are quantised once, when a
// checkpoint is converted, so these stay scalar and simple.
#include "kernels/quant_blocks.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/half_float.h"

namespace gatedlm::kernels {
namespace {

// Whole blocks of k values, refused with element_types.h's words (which reaches these
// functions through its table: this file does not include it back).
int64_t checked_blocks(const char* name, int64_t k) {
  if (k < 0 || k % kQuantBlockValues != 0)
    fail("a ", name, " row holds whole blocks of ", kQuantBlockValues, " values: row length ", k,
         " is not a multiple of ", kQuantBlockValues);
  return k / kQuantBlockValues;
}

// The value of largest magnitude with its sign; the first one on ties (ggml's strict <).
float signed_max_magnitude(const float* x) {
  float magnitude = 0.0f, value = 0.0f;
  for (int64_t j = 0; j < kQuantBlockValues; ++j) {
    if (magnitude < std::fabs(x[j])) {
      magnitude = std::fabs(x[j]);
      value = x[j];
    }
  }
  return value;
}

}  // namespace

void quantize_row_q8_0(BlockQ8_0* out, const float* in, int64_t k) {
  const int64_t blocks = checked_blocks("q8_0", k);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = in + b * kQuantBlockValues;
    const float d = std::fabs(signed_max_magnitude(x)) / 127.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int64_t j = 0; j < kQuantBlockValues; ++j) out[b].qs[j] = static_cast<int8_t>(std::round(x[j] * inverse));
  }
}

void dequantize_row_q8_0(float* out, const BlockQ8_0* in, int64_t k) {
  const int64_t blocks = checked_blocks("q8_0", k);
  for (int64_t b = 0; b < blocks; ++b) {
    const float d = f16_to_f32(in[b].d);
    for (int64_t j = 0; j < kQuantBlockValues; ++j) out[b * kQuantBlockValues + j] = in[b].qs[j] * d;
  }
}

void quantize_row_q4_0(BlockQ4_0* out, const float* in, int64_t k) {
  const int64_t blocks = checked_blocks("q4_0", k);
  constexpr int64_t half = kQuantBlockValues / 2;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = in + b * kQuantBlockValues;
    const float d = signed_max_magnitude(x) / -8.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int64_t j = 0; j < half; ++j) {
      // The truncating int8 conversion of ggml; x * inverse + 8.5 lies in [0.5, 16.5].
      const int low = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * inverse + 8.5f)));
      const int high = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + half] * inverse + 8.5f)));
      out[b].qs[j] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

void dequantize_row_q4_0(float* out, const BlockQ4_0* in, int64_t k) {
  const int64_t blocks = checked_blocks("q4_0", k);
  constexpr int64_t half = kQuantBlockValues / 2;
  for (int64_t b = 0; b < blocks; ++b) {
    const float d = f16_to_f32(in[b].d);
    float* y = out + b * kQuantBlockValues;
    for (int64_t j = 0; j < half; ++j) {
      y[j] = static_cast<float>((in[b].qs[j] & 0x0F) - 8) * d;
      y[j + half] = static_cast<float>((in[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_bf16(float* out, const uint16_t* in, int64_t k) {
  for (int64_t j = 0; j < k; ++j) out[j] = bf16_to_f32(in[j]);
}

}  // namespace gatedlm::kernels
