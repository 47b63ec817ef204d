// The quantisers of kquant_blocks.h: for the same fp32 input, the same bytes as llama.cpp's
// quantiser without an importance matrix (ggml-quants.c's *_ref functions; IQ4_NL / IQ4_XS
// through quantize_iq4_nl / quantize_iq4_xs, whose scale search they add). Byte identity
// needs ggml's arithmetic exactly: its rounding (nearest_int), the order of every sum and
// product, no fused multiply-adds (this file is built with -ffp-contract=off). The search
// for a scale and minimum per sub-block (scale_min_search) and for a symmetric scale
// (symmetric_scale_search, q3_search) are ggml's make_qkx2_quants, make_qx_quants and
// make_q3_quants. Scalar and simple: a checkpoint is quantised once.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/half_float.h"
#include "kernels/kquant_blocks.h"

namespace gatedlm::kernels {
namespace {

constexpr int64_t kBlock = 32;
constexpr float kAllZero = 1e-15f;  // ggml's GROUP_MAX_EPS: a group below it is all zero

// Round to nearest, ties to even, by the float trick ggml uses (|v| < 2^22).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// The value of largest magnitude, with its sign (the first on ties), and that magnitude.
void signed_max(const float* x, int n, float& max, float& magnitude) {
  max = magnitude = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > magnitude) {
      magnitude = std::fabs(x[i]);
      max = x[i];
    }
}

// The signed maximum of a group (signed_max), or 0 with the levels cleared when the group
// is all zero (below kAllZero).
float signed_max_or_clear(const float* x, int n, int8_t* L) {
  float max = 0, magnitude = 0;
  signed_max(x, n, max, magnitude);
  if (magnitude >= kAllZero) return max;
  std::fill(L, L + n, 0);
  return 0.0f;
}

// Unsigned levels L[i] in [0, nmax] with x ~ scale * L - min, min >= 0 returned in
// `min_out`, for weights w: the scale over (max - min) / nmax, then nstep + 1 trials of
// scales (nmax + rmin + rdelta * is) / (max - min), each fitting scale and min by weighted
// least squares and kept when its weighted error (absolute if use_mad, else squared) is
// smaller. Laux: n bytes of scratch.
float scale_min_search(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out, uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *min_out = -min;
    return 0.0f;
  }
  const auto error_of = [&](float scale, float offset, const uint8_t* levels) {
    float error = 0;
    for (int i = 0; i < n; ++i) {
      float diff = scale * static_cast<float>(levels[i]) + offset - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      error += w[i] * diff;
    }
    return error;
  };
  float iscale = static_cast<float>(nmax) / (max - min), scale = 1 / iscale;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
  float best_error = error_of(scale, min, L);
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float error = error_of(this_scale, this_min, Laux);
    if (error < best_error) {
      std::copy(Laux, Laux + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

// Signed levels in [-nmax, nmax - 1], stored plus nmax, with x ~ scale * level, weighted by
// x^2: the scale -nmax / max, then 18 trials (nmax + 0.1 is) around it, each fitted by
// least squares and kept when it explains more of x.
float symmetric_scale_search(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max_or_clear(x, n, L);
  if (max == 0) return 0.0f;
  const auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  const auto fit = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(level(iscale, i)), w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  float iscale = static_cast<float>(-nmax) / max, sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale, i));
  fit(iscale, sumlx, suml2);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    fit(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's levels in [-nmax, nmax - 1] (stored plus nmax): from the scale -nmax / max, up to
// 5 passes that move single levels when that explains more of x (weights x^2).
float q3_search(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max_or_clear(x, n, L);
  if (max == 0) return 0.0f;
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i], li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx <= 0) continue;
      float sl2 = suml2 - w * li * li;
      const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == L[i]) continue;
      slx += w * x[i] * static_cast<float>(new_l);
      sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Packs 2-bit levels of 256 values as Q2_K / Q3_K hold them (dequantize_row_q2_k).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int half = 0; half < 2; ++half)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* Lh = L + 128 * half;
      qs[32 * half + l] = static_cast<uint8_t>(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
    }
}

// Q4_K / Q5_K's 6-bit scales and mins of the 8 sub-blocks into their 12 bytes.
void pack_scales_and_mins(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

}  // namespace

// ---- 32-value formats ---------------------------------------------------------------

void quantize_row_q4_1(BlockQ4_1* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* x = in + b * kBlock;
    const float min = *std::min_element(x, x + kBlock), max = *std::max_element(x, x + kBlock);
    const float d = (max - min) / 15, id = d != 0 ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    out[b].m = f32_to_f16(min);
    for (int j = 0; j < 16; ++j) {
      // ggml's truncating int8 conversion, as for Q4_0.
      const int low = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const int high = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
      out[b].qs[j] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

namespace {
// Stores 5-bit levels of a 32-value block as Q5_0 / Q5_1 hold them.
void pack_5bit(const int* L, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((L[j] & 0xF) | ((L[j + 16] & 0xF) << 4));
    high |= static_cast<uint32_t>((L[j] & 0x10) >> 4) << j;
    high |= static_cast<uint32_t>((L[j + 16] & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(qh, &high, 4);
}
}  // namespace

void quantize_row_q5_0(BlockQ5_0* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* x = in + b * kBlock;
    float max = 0, magnitude = 0;
    signed_max(x, kBlock, max, magnitude);
    const float d = max / -16, id = d != 0 ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    int L[kBlock];
    for (int j = 0; j < kBlock; ++j) L[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    pack_5bit(L, out[b].qs, out[b].qh);
  }
}

void quantize_row_q5_1(BlockQ5_1* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* x = in + b * kBlock;
    const float min = *std::min_element(x, x + kBlock), max = *std::max_element(x, x + kBlock);
    const float d = (max - min) / 31, id = d != 0 ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    out[b].m = f32_to_f16(min);
    int L[kBlock];
    for (int j = 0; j < kBlock; ++j) L[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
    pack_5bit(L, out[b].qs, out[b].qh);
  }
}

// ---- K-quants -----------------------------------------------------------------------

void quantize_row_q2_k(BlockQ2_K* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b, in += kSuperBlockValues) {
    uint8_t L[kSuperBlockValues], Laux[16];
    float weights[16], mins[16], scales[16], max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(in[16 * j + l]);
      scales[j] = scale_min_search(16, 3, in + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    BlockQ2_K& y = out[b];
    std::fill(y.scales, y.scales + 16, 0);
    y.d = y.dmin = f32_to_f16(0.0f);
    if (max_scale > 0) {
      const float iscale = 15.0f / max_scale;
      for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y.d = f32_to_f16(max_scale / 15.0f);
    }
    if (max_min > 0) {
      const float iscale = 15.0f / max_min;
      for (int j = 0; j < 16; ++j) y.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y.dmin = f32_to_f16(max_min / 15.0f);
    }
    // The levels again against the scales as stored.
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(y.d) * static_cast<float>(y.scales[j] & 0xF);
      if (d == 0) continue;
      const float dm = f16_to_f32(y.dmin) * static_cast<float>(y.scales[j] >> 4);
      for (int i = 0; i < 16; ++i) L[16 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((in[16 * j + i] + dm) / d), 0, 3));
    }
    pack_2bit(L, y.qs);
  }
}

namespace {
// Q3_K's 16 scales (each in [-32, 31], stored plus 32) into its 12 bytes.
void pack_q3_scale(uint8_t* scales, int j, int stored) {
  if (j < 8) scales[j] = static_cast<uint8_t>(stored & 0xF);
  else scales[j - 8] |= static_cast<uint8_t>((stored & 0xF) << 4);
  scales[j % 4 + 8] |= static_cast<uint8_t>((stored >> 4) << (2 * (j / 4)));
}
}  // namespace

void quantize_row_q3_k(BlockQ3_K* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b, in += kSuperBlockValues) {
    int8_t L[kSuperBlockValues];
    float scales[16], max_scale = 0, magnitude = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = q3_search(16, 4, in + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > magnitude) {
        magnitude = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockQ3_K& y = out[b];
    std::fill(y.scales, y.scales + 12, 0);
    y.d = f32_to_f16(0.0f);
    if (max_scale != 0) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        pack_q3_scale(y.scales, j, std::clamp<int>(l, -32, 31) + 32);
      }
      y.d = f32_to_f16(1 / iscale);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(y.d) * static_cast<float>(q3_k_scale(y.scales, j));
      if (d == 0) continue;
      for (int i = 0; i < 16; ++i) L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(in[16 * j + i] / d), -4, 3) + 4);
    }
    // High bits: element e's third bit into bit e / 32 of hmask[e % 32].
    std::fill(y.hmask, y.hmask + 32, 0);
    uint8_t low[kSuperBlockValues];
    for (int e = 0; e < kSuperBlockValues; ++e) {
      if (L[e] > 3) y.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
      low[e] = static_cast<uint8_t>(L[e] > 3 ? L[e] - 4 : L[e]);
    }
    pack_2bit(low, y.qs);
  }
}

namespace {
// Q4_K / Q5_K's first half: per sub-block of 32 a scale and min (weights: the sub-block's
// RMS plus |x|), their 6-bit levels against the super-block's fp16 d and dmin, and the
// levels L in [0, nmax] against the scales as stored. Q4_K: nmax 15 and a search of 21
// scales from -1; Q5_K: 31 and 16 from -0.5.
void scales_mins_and_levels(const float* x, int nmax, float rmin, int nstep, uint16_t& d_out, uint16_t& dmin_out,
                            uint8_t* packed_scales, uint8_t* L) {
  uint8_t Laux[kBlock];
  float weights[kBlock], mins[8], scales[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < kBlock; ++l) sum_x2 += x[kBlock * j + l] * x[kBlock * j + l];
    const float av_x = std::sqrt(sum_x2 / kBlock);
    for (int l = 0; l < kBlock; ++l) weights[l] = av_x + std::fabs(x[kBlock * j + l]);
    scales[j] = scale_min_search(kBlock, nmax, x + kBlock * j, weights, L + kBlock * j, &mins[j], Laux, rmin, 0.1f,
                                 nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  std::fill(packed_scales, packed_scales + 12, 0);
  pack_scales_and_mins(ls, lm, packed_scales);
  d_out = f32_to_f16(max_scale / 63.0f);
  dmin_out = f32_to_f16(max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    int scale = 0, min = 0;
    k4_scale_and_min(packed_scales, j, scale, min);
    const float d = f16_to_f32(d_out) * static_cast<float>(scale);
    if (d == 0) continue;
    const float dm = f16_to_f32(dmin_out) * static_cast<float>(min);
    for (int i = 0; i < kBlock; ++i)
      L[kBlock * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[kBlock * j + i] + dm) / d), 0, nmax));
  }
}
}  // namespace

void quantize_row_q4_k(BlockQ4_K* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b, in += kSuperBlockValues) {
    uint8_t L[kSuperBlockValues];
    scales_mins_and_levels(in, 15, -1.0f, 20, out[b].d, out[b].dmin, out[b].scales, L);
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) out[b].qs[32 * g + l] = static_cast<uint8_t>(L[64 * g + l] | (L[64 * g + l + 32] << 4));
  }
}

void quantize_row_q5_k(BlockQ5_K* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b, in += kSuperBlockValues) {
    uint8_t L[kSuperBlockValues];
    scales_mins_and_levels(in, 31, -0.5f, 15, out[b].d, out[b].dmin, out[b].scales, L);
    std::fill(out[b].qh, out[b].qh + 32, 0);
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[64 * g + l], l2 = L[64 * g + l + 32];
        out[b].qh[l] |= static_cast<uint8_t>(((l1 >> 4) << (2 * g)) | ((l2 >> 4) << (2 * g + 1)));
        out[b].qs[32 * g + l] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
      }
  }
}

void quantize_row_q6_k(BlockQ6_K* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b, in += kSuperBlockValues) {
    BlockQ6_K& y = out[b];
    int8_t L[kSuperBlockValues];
    float scales[16], max_scale = 0, magnitude = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = symmetric_scale_search(16, 32, in + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > magnitude) {
        magnitude = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (magnitude < kAllZero) {
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    const float iscale = -128.0f / max_scale;
    y.d = f32_to_f16(1 / iscale);
    for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(y.d) * static_cast<float>(y.scales[j]);
      if (d == 0) continue;
      for (int i = 0; i < 16; ++i) L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(in[16 * j + i] / d), -32, 31) + 32);
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        y.ql[64 * h + l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
        y.ql[64 * h + l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
        y.qh[32 * h + l] =
            static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

// ---- IQ4_NL / IQ4_XS ----------------------------------------------------------------

namespace {

// The index of the kIq4Values entry nearest x (the lower one on ties), by bisection.
int nearest_iq4_index(float x) {
  if (x <= kIq4Values[0]) return 0;
  if (x >= kIq4Values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (x < kIq4Values[mid] ? hi : lo) = mid;
  }
  return x - kIq4Values[hi - 1] < kIq4Values[hi] - x ? hi - 1 : hi;
}

// The scale of one block of 32 for the IQ4 values, weights x^2: from -max / -127, then 15
// trials (itry - 127) / max, each fitted by least squares; L holds the first trial's
// indices (ggml keeps them: the caller requantises).
float iq4_block_scale(const float* x, uint8_t* L) {
  float max = 0, magnitude = 0;
  signed_max(x, kBlock, max, magnitude);
  if (magnitude < kAllZero) return 0.0f;
  const auto fit = [&](float id, float& sumqx, float& sumq2, uint8_t* levels) {
    sumqx = sumq2 = 0;
    for (int j = 0; j < kBlock; ++j) {
      const int l = nearest_iq4_index(id * x[j]);
      if (levels) levels[j] = static_cast<uint8_t>(l);
      const float q = kIq4Values[l], w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
  };
  float sumqx = 0, sumq2 = 0;
  fit(1 / (-max / kIq4Values[0]), sumqx, sumq2, L);
  float d = sumqx / sumq2, best = d * sumqx;
  constexpr int kTries = 7;
  for (int itry = -kTries; itry <= kTries; ++itry) {
    fit(static_cast<float>(itry + kIq4Values[0]) / max, sumqx, sumq2, nullptr);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 indices into a block's 16 bytes (element j, j + 16).
void pack_iq4(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

}  // namespace

void quantize_row_iq4_nl(BlockIq4Nl* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kBlock; ++b, in += kBlock) {
    uint8_t L[kBlock];
    const float d = iq4_block_scale(in, L);
    out[b].d = f32_to_f16(d);
    const float id = d != 0 ? 1 / d : 0.0f;
    for (int j = 0; j < kBlock; ++j) L[j] = static_cast<uint8_t>(nearest_iq4_index(id * in[j]));
    pack_iq4(L, out[b].qs);
  }
}

void quantize_row_iq4_xs(BlockIq4Xs* out, const float* in, int64_t k) {
  for (int64_t b = 0; b < k / kSuperBlockValues; ++b, in += kSuperBlockValues) {
    BlockIq4Xs& y = out[b];
    uint8_t L[kSuperBlockValues];
    float scales[8], max_scale = 0, magnitude = 0;
    for (int s = 0; s < 8; ++s) {
      scales[s] = iq4_block_scale(in + kBlock * s, L + kBlock * s);
      if (std::fabs(scales[s]) > magnitude) {
        magnitude = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    const float d = -max_scale / 32, id = d != 0 ? 1 / d : 0.0f;
    y.d = f32_to_f16(d);
    y.scales_h = 0;
    std::fill(y.scales_l, y.scales_l + 4, 0);
    for (int s = 0; s < 8; ++s) {
      const int l = std::clamp(nearest_int(id * scales[s]), -32, 31);
      const float dl = d * static_cast<float>(l), idl = dl != 0 ? 1 / dl : 0.0f;
      for (int j = 0; j < kBlock; ++j) L[kBlock * s + j] = static_cast<uint8_t>(nearest_iq4_index(idl * in[kBlock * s + j]));
      const int stored = l + 32;
      y.scales_l[s / 2] |= static_cast<uint8_t>((stored & 0xF) << (4 * (s % 2)));
      y.scales_h |= static_cast<uint16_t>((stored >> 4) << (2 * s));
      pack_iq4(L + kBlock * s, y.qs + 16 * s);
    }
  }
}

}  // namespace gatedlm::kernels
