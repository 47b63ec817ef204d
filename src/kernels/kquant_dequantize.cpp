// The dequantisers of kquant_blocks.h: the same fp32 values as ggml's dequantize_row_*,
// bit for bit. Each value is computed with ggml's operations in ggml's order (a scale times
// an integer, then the minimum subtracted, each product rounded once: this file is built
// with -ffp-contract=off, so that no compiler fuses them). Scalar: they run once per tensor
// at import, or per tile where a product expands blocks.
#include <cstring>

#include "kernels/half_float.h"
#include "kernels/kquant_blocks.h"

namespace gatedlm::kernels {
namespace {

constexpr int64_t kBlock = 32;

}  // namespace

void dequantize_row_q4_1(float* out, const BlockQ4_1* in, int64_t k) {
  for (int64_t b = 0; b < k / kBlock; ++b, out += kBlock) {
    const float d = f16_to_f32(in[b].d), m = f16_to_f32(in[b].m);
    for (int j = 0; j < 16; ++j) {
      out[j] = static_cast<float>(in[b].qs[j] & 0xF) * d + m;
      out[j + 16] = static_cast<float>(in[b].qs[j] >> 4) * d + m;
    }
  }
}

// Q5_0 / Q5_1: bit j of the 32 high bits is element j's fifth bit.
namespace {
int fifth_bit(const uint8_t* qh, int j) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> j) & 1) << 4;
}
}  // namespace

void dequantize_row_q5_0(float* out, const BlockQ5_0* in, int64_t k) {
  for (int64_t b = 0; b < k / kBlock; ++b, out += kBlock) {
    const float d = f16_to_f32(in[b].d);
    for (int j = 0; j < 16; ++j) {
      out[j] = static_cast<float>(((in[b].qs[j] & 0xF) | fifth_bit(in[b].qh, j)) - 16) * d;
      out[j + 16] = static_cast<float>(((in[b].qs[j] >> 4) | fifth_bit(in[b].qh, j + 16)) - 16) * d;
    }
  }
}

void dequantize_row_q5_1(float* out, const BlockQ5_1* in, int64_t k) {
  for (int64_t b = 0; b < k / kBlock; ++b, out += kBlock) {
    const float d = f16_to_f32(in[b].d), m = f16_to_f32(in[b].m);
    for (int j = 0; j < 16; ++j) {
      out[j] = static_cast<float>((in[b].qs[j] & 0xF) | fifth_bit(in[b].qh, j)) * d + m;
      out[j + 16] = static_cast<float>((in[b].qs[j] >> 4) | fifth_bit(in[b].qh, j + 16)) * d + m;
    }
  }
}

void dequantize_row_iq4_nl(float* out, const BlockIq4Nl* in, int64_t k) {
  for (int64_t b = 0; b < k / kBlock; ++b, out += kBlock) {
    const float d = f16_to_f32(in[b].d);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(kIq4Values[in[b].qs[j] & 0xF]);
      out[j + 16] = d * static_cast<float>(kIq4Values[in[b].qs[j] >> 4]);
    }
  }
}

// Q2_K: the 256 values in two halves of 128; in each, byte l of the half's 32 bytes holds
// at bits 2s..2s+1 element 32s + l. Sub-block (of 16) i's scale byte is scales[i].
void dequantize_row_q2_k(float* out, const BlockQ2_K* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b) {
    const float d = f16_to_f32(in[b].d), dmin = f16_to_f32(in[b].dmin);
    for (int i = 0; i < 16; ++i, out += 16) {
      const int half = i / 8, shift = 2 * ((i % 8) / 2), first = 16 * (i % 2);
      const float scale = d * static_cast<float>(in[b].scales[i] & 0xF);
      const float min = dmin * static_cast<float>(in[b].scales[i] >> 4);
      for (int l = 0; l < 16; ++l) {
        const int q = (in[b].qs[32 * half + first + l] >> shift) & 3;
        out[l] = scale * static_cast<float>(q) - min;
      }
    }
  }
}

// Q3_K: the 2-bit low parts as Q2_K's; element e's high bit is bit e / 32 of hmask[e % 32],
// and a clear bit means q - 4.
void dequantize_row_q3_k(float* out, const BlockQ3_K* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b) {
    const float d = f16_to_f32(in[b].d);
    for (int i = 0; i < 16; ++i, out += 16) {
      const int half = i / 8, shift = 2 * ((i % 8) / 2), first = 16 * (i % 2);
      const float scale = d * static_cast<float>(q3_k_scale(in[b].scales, i));
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * i + l;
        const int low = (in[b].qs[32 * half + first + l] >> shift) & 3;
        const int high = (in[b].hmask[e % 32] >> (e / 32)) & 1;
        out[l] = scale * static_cast<float>(low - (high ? 0 : 4));
      }
    }
  }
}

// Q4_K / Q5_K: 4 groups of 64 values; group g's 32 bytes hold sub-block 2g in their low
// nibbles and 2g + 1 in their high ones. Q5_K's fifth bit of element 32s + l is bit s of
// qh[l] (qh null for Q4_K).
namespace {
void dequantize_k4_super_block(float* out, uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs,
                               const uint8_t* qh) {
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  for (int s = 0; s < 8; ++s, out += kBlock) {
    int scale = 0, min = 0;
    k4_scale_and_min(scales, s, scale, min);
    const float ds = d * static_cast<float>(scale), ms = dmin * static_cast<float>(min);
    const uint8_t* q = qs + 32 * (s / 2);
    for (int l = 0; l < kBlock; ++l) {
      const int low = s % 2 ? q[l] >> 4 : q[l] & 0xF;
      const int high = qh ? (qh[l] >> s) & 1 : 0;
      out[l] = ds * static_cast<float>(low + 16 * high) - ms;
    }
  }
}
}  // namespace

void dequantize_row_q4_k(float* out, const BlockQ4_K* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b, out += kSuperBlockValues)
    dequantize_k4_super_block(out, in[b].d, in[b].dmin, in[b].scales, in[b].qs, nullptr);
}

void dequantize_row_q5_k(float* out, const BlockQ5_K* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b, out += kSuperBlockValues)
    dequantize_k4_super_block(out, in[b].d, in[b].dmin, in[b].scales, in[b].qs, in[b].qh);
}

// Q6_K: two halves of 128 values; in half h, element 32t + l (t < 4) has its low nibble in
// ql[64h + l + 32 (t % 2)] (low nibble for t < 2, high for t >= 2) and its top 2 bits at
// bits 2t of qh[32h + l]; sub-block (of 16) i's scale is scales[i].
void dequantize_row_q6_k(float* out, const BlockQ6_K* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b) {
    const float d = f16_to_f32(in[b].d);
    for (int h = 0; h < 2; ++h, out += 128) {
      const uint8_t* ql = in[b].ql + 64 * h;
      const uint8_t* qh = in[b].qh + 32 * h;
      const int8_t* scales = in[b].scales + 8 * h;
      for (int t = 0; t < 4; ++t)
        for (int l = 0; l < 32; ++l) {
          const uint8_t byte = ql[l + 32 * (t % 2)];
          const int low = t < 2 ? byte & 0xF : byte >> 4;
          const int q = (low | (((qh[l] >> (2 * t)) & 3) << 4)) - 32;
          // ggml's d * sc * q: the scale's product first, rounded, then times q.
          out[32 * t + l] = d * static_cast<float>(scales[l / 16 + 2 * t]) * static_cast<float>(q);
        }
    }
  }
}

// IQ4_XS: sub-block s's scale is 4 bits from scales_l[s / 2] (low nibble for even s) and 2
// from bits 2s of scales_h, minus 32; its 16 bytes of indices run as IQ4_NL's.
void dequantize_row_iq4_xs(float* out, const BlockIq4Xs* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b) {
    const float d = f16_to_f32(in[b].d);
    for (int s = 0; s < 8; ++s, out += kBlock) {
      const int low = (in[b].scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
      const int high = (in[b].scales_h >> (2 * s)) & 3;
      const float ds = d * static_cast<float>((low | (high << 4)) - 32);
      const uint8_t* q = in[b].qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        out[j] = ds * static_cast<float>(kIq4Values[q[j] & 0xF]);
        out[j + 16] = ds * static_cast<float>(kIq4Values[q[j] >> 4]);
      }
    }
  }
}

}  // namespace gatedlm::kernels
