#pragma once
// The GGUF block formats beyond Q8_0 / Q4_0 (quant_blocks.h) that llama.cpp's quantiser
// writes into the files people download: the older 32-value formats it falls back to when a
// row is not a whole number of 256-value super-blocks, the K-quants, and the non-linear
// 4-bit formats. Byte for byte ggml's block structs (ggml-common.h: little-endian, no
// padding); fp16 fields hold binary16 bits (half_float.h).
//
// 32 values a block (x ~ q * d + m; "element j, j + 16" = byte j holds element j in its low
// nibble and element j + 16 in its high one, as Q4_0):
//   Q4_1   d, m, 16 bytes of 4-bit q (element j, j + 16)
//   Q5_0   d, 32 high bits (bit j: element j's fifth bit), 16 bytes of low nibbles; q - 16
//   Q5_1   d, m, high bits and nibbles as Q5_0; q unsigned
//   IQ4_NL d, 16 bytes of 4-bit indices into kIq4Values (element j, j + 16)
// 256 values a super-block, in sub-blocks of 16 or 32 values with scales quantised
// against the super-block's fp16 d (and dmin, the scale of the sub-block minimums):
//   Q2_K   16 scale bytes (low nibble: scale, high: min), 64 bytes of 2-bit q, d, dmin;
//          x ~ d * scale * q - dmin * min, sub-blocks of 16
//   Q3_K   32 bytes of high bits, 64 bytes of 2-bit low bits, 12 bytes of 6-bit scales
//          (minus 32), d; x ~ d * scale * (q - 4), sub-blocks of 16
//   Q4_K   d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles; sub-blocks of 32
//   Q5_K   the same with 32 bytes of fifth bits
//   Q6_K   128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8 scales, d;
//          x ~ d * scale * (q - 32), sub-blocks of 16
//   IQ4_XS d, 6-bit sub-block scales (minus 32) in 2 + 4 bytes, 128 bytes of indices into
//          kIq4Values; sub-blocks of 32
// Where the bits of each sit is ggml's: kquant_dequantize.cpp reads them, and its comments
// say how.
#include <cstdint>

namespace gatedlm::kernels {

inline constexpr int64_t kSuperBlockValues = 256;  // ggml's QK_K

struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 &&
                  sizeof(BlockIq4Nl) == 18,
              "GGUF's 32-value block sizes");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIq4Xs) == 136,
              "GGUF's super-block sizes");

// The 16 values an IQ4_NL / IQ4_XS index stands for (ggml's kvalues_iq4nl), times the scale.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The 6-bit scale and minimum of sub-block j (of 8) in a Q4_K / Q5_K super-block's 12
// bytes: sub-blocks 0-3 keep theirs in the low 6 bits of bytes j and j + 4; sub-blocks 4-7
// in the nibbles of byte j + 4, with their top 2 bits in the spare top bits of bytes j - 4
// and j.
inline void k4_scale_and_min(const uint8_t* scales, int j, int& scale, int& min) {
  if (j < 4) {
    scale = scales[j] & 63;
    min = scales[j + 4] & 63;
  } else {
    scale = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Scale j (of 16) of a Q3_K super-block, in [-32, 31]: 6 bits stored plus 32, the low
// nibble in byte j (j < 8) or the high nibble of byte j - 8, the top 2 bits in byte
// 8 + j % 4 at bit 2 * (j / 4).
inline int q3_k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  return (low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

// One row of k values (a whole number of blocks: element_types.h checks before calling)
// to fp32, value for value ggml's dequantize_row_* (kquant_dequantize.cpp).
void dequantize_row_q4_1(float* out, const BlockQ4_1* in, int64_t k);
void dequantize_row_q5_0(float* out, const BlockQ5_0* in, int64_t k);
void dequantize_row_q5_1(float* out, const BlockQ5_1* in, int64_t k);
void dequantize_row_iq4_nl(float* out, const BlockIq4Nl* in, int64_t k);
void dequantize_row_q2_k(float* out, const BlockQ2_K* in, int64_t k);
void dequantize_row_q3_k(float* out, const BlockQ3_K* in, int64_t k);
void dequantize_row_q4_k(float* out, const BlockQ4_K* in, int64_t k);
void dequantize_row_q5_k(float* out, const BlockQ5_K* in, int64_t k);
void dequantize_row_q6_k(float* out, const BlockQ6_K* in, int64_t k);
void dequantize_row_iq4_xs(float* out, const BlockIq4Xs* in, int64_t k);

// One row of k fp32 values to blocks, byte for byte what llama.cpp's quantiser writes for
// them without an importance matrix (ggml_quantize_chunk: the *_ref quantisers, and for
// IQ4_NL / IQ4_XS the search of quantize_iq4_nl / quantize_iq4_xs) (kquant_quantize.cpp).
void quantize_row_q4_1(BlockQ4_1* out, const float* in, int64_t k);
void quantize_row_q5_0(BlockQ5_0* out, const float* in, int64_t k);
void quantize_row_q5_1(BlockQ5_1* out, const float* in, int64_t k);
void quantize_row_iq4_nl(BlockIq4Nl* out, const float* in, int64_t k);
void quantize_row_q2_k(BlockQ2_K* out, const float* in, int64_t k);
void quantize_row_q3_k(BlockQ3_K* out, const float* in, int64_t k);
void quantize_row_q4_k(BlockQ4_K* out, const float* in, int64_t k);
void quantize_row_q5_k(BlockQ5_K* out, const float* in, int64_t k);
void quantize_row_q6_k(BlockQ6_K* out, const float* in, int64_t k);
void quantize_row_iq4_xs(BlockIq4Xs* out, const float* in, int64_t k);

}  // namespace gatedlm::kernels
