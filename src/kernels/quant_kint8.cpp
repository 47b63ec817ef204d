// The int8 path (int8_madd) of the quantised products for the K-quants and IQ4_XS
// (kquant_blocks.h: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS), compiled once per kernel set;
// the avx2 and avx512 sets have it, the generic set not.
//
// Each row of A is first quantised to int8 super-blocks of 256 exactly as ggml quantises
// activations for these weights (quantize_row_q8_K_ref, its block_q8_K): max = the value
// of largest magnitude (the first such), iscale = -127 / max, q = min(127, round-to-
// nearest-even(iscale * a)), d = 1 / iscale in fp32, and the sums of each 16 q's. Then per
// weight super-block and row of A the integer dot of the 256 pairs, each sub-block's part
// times its integer scale (exact in int32), scaled by d_w * d_a in fp32, and for Q4_K /
// Q5_K the sub-block minimums' part, dmin_w * d_a * sum(min_j * sum of a over sub-block j),
// taken off: llama.cpp's arithmetic (ggml_vec_dot_q4_K_q8_K and its siblings), so our
// logits differ from its only in the order of fp32 additions.
//
// The fp16 scales are converted by F16C's vcvtph2ps (every CPU with AVX2 has it).
//
// The dot of unsigned weights (Q2_K q, Q3_K's q + 4, Q4_K and Q5_K q, Q6_K's q + 32) and
// signed activations is vpmaddubsw (pairs summed to int16: at most 2 * 63 * 127, no
// saturation), then vpmaddwd by the sub-block's scale to int32. IQ4_XS weights are signed
// (kIq4Values): vpmaddubsw of |w| by a with w's sign (at most 2 * 127 * 127). Tiled Q4_K,
// Q5_K, Q6_K and IQ4_XS can take vpdpbusd instead (quant_kint8_vnni.inc, KQuantTileDot): the
// same integers. (IQ4_XS is tiled only where vpdpbusd reads it, Q6_K only where AVX512-VNNI
// does: quant_decode.cpp says why.)
#include "kernels/kernel_sets.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/half_float.h"
#include "kernels/kernel_set.h"
#include "kernels/kquant_blocks.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/quant_kernels.h"
#if GATEDLM_KSET_AVX2
#include "kernels/int8_lanes.h"
#include "kernels/tile_lanes.h"
#endif

namespace gatedlm::kernels::GATEDLM_KSET {

bool kquant_int8_format(ElementType format) {
  return GATEDLM_KSET_AVX2 && (format == ElementType::q2_k || format == ElementType::q3_k ||
                               format == ElementType::q4_k || format == ElementType::q5_k ||
                               format == ElementType::q6_k || format == ElementType::iq4_xs);
}

#if GATEDLM_KSET_AVX2
namespace {

constexpr int kSuper = static_cast<int>(kSuperBlockValues);
constexpr int kGroupRows = static_cast<int>(kQuantDecodeRows);

// The rows of A as ggml's Q8_K super-blocks: q [m, k] (int8), bsums (per row and super-block
// kSumsPerSuper int16: ggml's 16 sums of 16 q's, then the 8 sums of 32 that the Q4_K / Q5_K
// minimums and IQ4_XS's bias multiply, made once per product instead of once per weight row or
// tile), and the scales d in groups of 8 rows, super-block by super-block:
// scales[((r / 8) * supers + i) * 8 + r % 8] (a group's 8 scales of a super-block are one
// vector; the slots of rows past m hold 0).
constexpr int kSumsPerSuper = 16 + 8;
struct Q8KRows {
  const int8_t* q;
  const int16_t* bsums;
  const float* scales;
  int64_t k;
  int64_t supers() const { return k / kSuper; }
  const int8_t* values(int64_t r, int64_t i) const { return q + r * k + i * kSuper; }
  // The 16 sums of 16; the 8 sums of 32 follow them (sums32).
  const int16_t* sums16(int64_t r, int64_t i) const { return bsums + (r * supers() + i) * kSumsPerSuper; }
  const float* group_scales(int64_t r0, int64_t i) const { return scales + ((r0 / 8) * supers() + i) * 8; }
};

// One super-block of 256 activations as quantize_row_q8_K_ref does it.
void quantize_super_block(int8_t* q, int16_t* bsums, float* scale, const float* x) {
  const __m256 magnitude_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 amax8 = _mm256_setzero_ps();
  for (int j = 0; j < kSuper; j += 8) amax8 = _mm256_max_ps(amax8, _mm256_and_ps(_mm256_loadu_ps(x + j), magnitude_mask));
  const float amax = max8(amax8);
  if (amax == 0.0f) {
    std::fill_n(q, kSuper, int8_t{0});
    std::fill_n(bsums, kSuper / 16, int16_t{0});
    *scale = 0.0f;
    return;
  }
  // The signed value of the first element of largest magnitude (ggml keeps the first; its sign
  // flips every q and d together, so only the int8 bytes depend on it, not q * d), 8
  // magnitudes compared at a time.
  float max = amax;
  const __m256 largest = _mm256_set1_ps(amax);
  for (int j = 0; j < kSuper; j += 8) {
    const __m256 magnitudes = _mm256_and_ps(_mm256_loadu_ps(x + j), magnitude_mask);
    const int equal = _mm256_movemask_ps(_mm256_cmp_ps(magnitudes, largest, _CMP_EQ_OQ));
    if (equal != 0) {
      max = x[j + __builtin_ctz(static_cast<unsigned>(equal))];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m256 vscale = _mm256_set1_ps(iscale);
  for (int j = 0; j < kSuper; j += 32) {
    __m256i n[4];
    for (int t = 0; t < 4; ++t)
      n[t] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * t), vscale),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // The signed saturation of the packs is ggml's min(127, v) (v >= -127: |iscale * x| <= 127
    // up to a rounding); the permute puts the 4-byte groups back in order.
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
    const __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j), ordered);
    // The two sums of 16: bytes to int16 pairs (vpmaddubsw by 1), then pairs of pairs.
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), ordered);
    const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));  // 8 sums of 4
    __m256i sums = _mm256_hadd_epi32(quads, quads);
    sums = _mm256_hadd_epi32(sums, sums);  // lane 0 of each 128-bit half: its 16 elements' sum
    bsums[j / 16] = static_cast<int16_t>(_mm256_extract_epi32(sums, 0));
    bsums[j / 16 + 1] = static_cast<int16_t>(_mm256_extract_epi32(sums, 4));
  }
  *scale = 1.0f / iscale;
}

Q8KRows quantize_rows(const float* A, int64_t lda, int64_t m, int64_t k, bool split) {
  // Per calling thread, reused: a decode step makes hundreds of these products.
  thread_local std::vector<int8_t> q;
  thread_local std::vector<int16_t> bsums;
  thread_local std::vector<float> scales;
  const int64_t supers = k / kSuper, padded = (m + kGroupRows - 1) / kGroupRows * kGroupRows;
  q.resize(static_cast<size_t>(m * k));
  bsums.resize(static_cast<size_t>(m * supers * kSumsPerSuper));
  scales.assign(static_cast<size_t>(padded * supers), 0.0f);
  int8_t* qs = q.data();  // plain pointers: other threads' vectors of these names are their own
  int16_t* sums = bsums.data();
  float* ds = scales.data();
  const auto round_row = [&](int64_t r) {
    for (int64_t i = 0; i < supers; ++i) {
      int16_t* sums16 = sums + (r * supers + i) * kSumsPerSuper;
      quantize_super_block(qs + r * k + i * kSuper, sums16,
                           ds + ((r / kGroupRows) * supers + i) * kGroupRows + r % kGroupRows, A + r * lda + i * kSuper);
      // Neighbouring sums of 16 added: at most 32 * 127 in magnitude, an int16.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(sums16 + 16),
                       _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sums16)),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(sums16 + 8))));
    }
  };
  if (split) {
#pragma omp parallel for schedule(static) if (m * k >= (int64_t{1} << 16))
    for (int64_t r = 0; r < m; ++r) round_row(r);
  } else {
    for (int64_t r = 0; r < m; ++r) round_row(r);
  }
  return Q8KRows{q.data(), bsums.data(), scales.data(), k};
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// vpmaddubsw then vpmaddwd by a scale per 16-bit pair: sum over pairs of scale * (w * a).
inline __m256i scaled_dot(__m256i w_unsigned, __m256i a, __m256i scale16) {
  return _mm256_madd_epi16(scale16, _mm256_maddubs_epi16(w_unsigned, a));
}

// The byte pair of int16 lane `lane` (0-7) of a 128-bit half, as a vpshufb index.
constexpr int16_t int16_lane_bytes(int lane) { return static_cast<int16_t>((2 * lane + 1) << 8 | 2 * lane); }
// Lane `low` (0-7) of the int16 vector v in every lane of the low 128-bit half, lane `high` in
// the high half (v's two halves alike).
inline __m256i spread_int16(__m256i v, int low, int high) {
  return _mm256_shuffle_epi8(v, _mm256_setr_m128i(_mm_set1_epi16(int16_lane_bytes(low)), _mm_set1_epi16(int16_lane_bytes(high))));
}
inline __m256i broadcast_int16(__m256i v, int lane) { return spread_int16(v, lane, lane); }

// A Q4_K / Q5_K super-block's 8 six-bit scales then 8 six-bit minimums as int16, unpacked a
// 32-bit word at a time (k4_scale_and_min says where the bits are): the scales 0-3 and
// minimums 0-3 are the low 6 bits of words 0 and 1; scales 4-7 the low nibbles of word 2 with
// the top 2 bits of word 0's bytes above them; minimums 4-7 word 2's high nibbles with word 1's
// top bits. The scales are the low 128-bit half, the minimums the high one.
inline __m256i k4_scales_and_mins(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  constexpr uint32_t kSix = 0x3F3F3F3F, kNibble = 0x0F0F0F0F, kTwo = 0x03030303;
  const uint32_t scales_low = w[0] & kSix, mins_low = w[1] & kSix;
  const uint32_t scales_high = (w[2] & kNibble) | (((w[0] >> 6) & kTwo) << 4);
  const uint32_t mins_high = ((w[2] >> 4) & kNibble) | (((w[1] >> 6) & kTwo) << 4);
  const __m128i bytes = _mm_setr_epi32(static_cast<int>(scales_low), static_cast<int>(scales_high),
                                       static_cast<int>(mins_low), static_cast<int>(mins_high));
  return _mm256_cvtepu8_epi16(bytes);
}

// Each format's super-block dot for R rows (rows[r] its Q8K values, sums[r] their bsums):
// dots[r] += int32 lanes summing to sum_j scale_j * sum(q * a) over sub-block j; and for
// formats with minimums (kMinimums) offsets[r] = sum_j min_j * (sum of a over sub-block j).
// The row's value is d_a * (d * dots - dmin * offsets), d and dmin the block's.
template <class Block, bool kFifthBit>
struct K4Dot {
  static constexpr bool kMinimums = true;
  static constexpr bool kRowTotals = false;
  static float d(const Block& x) { return _cvtsh_ss(x.d); }
  static float dmin(const Block& x) { return _cvtsh_ss(x.dmin); }
  template <int R>
  static void dots(const Block& x, const int8_t* const* rows, const int16_t* const* sums, __m256i* dots,
                   int32_t* offsets) {
    const __m256i scales_and_mins = k4_scales_and_mins(x.scales);
    const __m128i mins16 = _mm256_extracti128_si256(scales_and_mins, 1);
    for (int r = 0; r < R; ++r) {  // sub-block j of 32 (Q8KRows: after the 16 sums of 16)
      const __m128i sum32 = load16(sums[r] + 16);
      const __m128i products = _mm_madd_epi16(mins16, sum32);
      __m128i s = _mm_add_epi32(products, _mm_shuffle_epi32(products, 0x4E));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
      offsets[r] = _mm_cvtsi128_si32(s);
    }
    const __m256i scales16 = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(scales_and_mins));
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    [[maybe_unused]] __m256i fifth;
    if constexpr (kFifthBit) fifth = load32(x.qh);
#pragma GCC unroll 4
    for (int pair = 0; pair < 4; ++pair) {  // sub-blocks 2 pair (low nibbles), 2 pair + 1 (high)
      const __m256i bits = load32(x.qs + 32 * pair);
      __m256i low = _mm256_and_si256(bits, nibble), high = _mm256_and_si256(_mm256_srli_epi16(bits, 4), nibble);
      if constexpr (kFifthBit) {  // bit s of qh[l]: the fifth bit of element l of sub-block s
        const __m256i one = _mm256_set1_epi8(1);
        low = _mm256_or_si256(low, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(fifth, 2 * pair), one), 4));
        high = _mm256_or_si256(high,
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(fifth, 2 * pair + 1), one), 4));
      }
      const __m256i scale_low = broadcast_int16(scales16, 2 * pair), scale_high = broadcast_int16(scales16, 2 * pair + 1);
      for (int r = 0; r < R; ++r) {
        const int8_t* a = rows[r] + 64 * pair;
        dots[r] = _mm256_add_epi32(dots[r], _mm256_add_epi32(scaled_dot(low, load32(a), scale_low),
                                                             scaled_dot(high, load32(a + 32), scale_high)));
        keep_running(dots[r]);
      }
    }
  }
};
using Q4KDot = K4Dot<BlockQ4_K, false>;
using Q5KDot = K4Dot<BlockQ5_K, true>;

#if GATEDLM_KSET_AVX512
// vpermw indices that spread a Q6_K block's 16 scales over a pair of its quarters (Q6KDot):
// [2 half + p] puts scale 8 half + 4 p + lane / 8 in int16 lane `lane` (each 16 elements
// take one scale).
struct alignas(64) Q6KScaleSpread {
  int16_t index[32];
};
constexpr Q6KScaleSpread q6k_scale_spread(int half, int pair) {
  Q6KScaleSpread m{};
  for (int lane = 0; lane < 32; ++lane) m.index[lane] = static_cast<int16_t>(8 * half + 4 * pair + lane / 8);
  return m;
}
constexpr Q6KScaleSpread kQ6KScaleSpread[4] = {q6k_scale_spread(0, 0), q6k_scale_spread(0, 1),
                                               q6k_scale_spread(1, 0), q6k_scale_spread(1, 1)};
#endif

#if GATEDLM_KSET_AVX512
// acc + each int32 lane's two int16 products of a and b: vpmaddwd and vpaddd, or with
// kFused AVX512-VNNI's vpdpwssd, one instruction where the 512-bit vector ports are two (an
// Intel Xeon's ports 0 and 5). The same integers: no pair here reaches vpmaddwd's one
// wrap (-32768 * -32768 twice). Inline assembly: the avx512 set is compiled without VNNI,
// and the caller runs the fused form only on CPUs that have it (path int8_vnni).
template <bool kFused>
inline __m512i add_pair_products(__m512i acc, __m512i a, __m512i b) {
  if constexpr (kFused) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
  }
}
#endif

// Q6_K: q = low nibble | 2 high bits << 4 in [0, 63], value d * scale * (q - 32), scales per
// 16. The dot takes q as it is and the offset's 32 * sum_j scale_j * (sum of a over the 16)
// off in int32 (exact): no minimums left. kVnni (AVX-512 only): the 512-bit sums by
// add_pair_products' vpdpwssd, the same integers as without.
template <bool kVnni>
struct Q6KDot {
  static constexpr bool kMinimums = false;
  static constexpr bool kRowTotals = GATEDLM_KSET_AVX512;  // from 4 rows (quarter_pair_dots)
  static float d(const BlockQ6_K& x) { return _cvtsh_ss(x.d); }
  static float dmin(const BlockQ6_K&) { return 0.0f; }
  template <int R>
  static void dots(const BlockQ6_K& x, const int8_t* const* rows, const int16_t* const* sums, __m256i* dots, int32_t*) {
    const __m256i scales16 = _mm256_cvtepi8_epi16(load16(x.scales));
#if GATEDLM_KSET_AVX512
    quarter_pair_dots<R>(x, rows, sums, scales16, dots);
#else
    for (int r = 0; r < R; ++r)  // in the lanes, which the caller sums
      dots[r] = _mm256_sub_epi32(dots[r], _mm256_slli_epi32(_mm256_madd_epi16(scales16, load32(sums[r])), 5));
    quarter_dots<R>(x, rows, scales16, dots);
#endif
  }

#if !GATEDLM_KSET_AVX512
  // dots[r] += the lanes of sum_j scale_j * sum(q * a) over the 16 sub-blocks, a quarter of a
  // half (32 elements) per vpmaddubsw.
  template <int R>
  static void quarter_dots(const BlockQ6_K& x, const int8_t* const* rows, __m256i scales16, __m256i* dots) {
    const __m256i nibble = _mm256_set1_epi8(0x0F), two_bits = _mm256_set1_epi8(3);
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {  // elements 128 half ..: ql 64 bytes, qh 32, scales 8
      const uint8_t* ql = x.ql + 64 * half;
      // Quarter t: elements 32t..32t+31 of the half, scales 2t (first 16) and 2t + 1: the low
      // (t < 2) or high nibbles of ql's 32 bytes t % 2, with bits 2t, 2t + 1 of qh's 32 as
      // bits 4 and 5. Made where it is used: 8 rows' sums and 4 quarters would not fit AVX2's
      // 16 registers together.
      const auto quarter = [&](int t) {
        const __m256i low = _mm256_srli_epi16(load32(ql + 32 * (t % 2)), 4 * (t / 2));
        const __m256i high = _mm256_srli_epi16(load32(x.qh + 32 * half), 2 * t);
        return _mm256_or_si256(_mm256_and_si256(low, nibble), _mm256_slli_epi16(_mm256_and_si256(high, two_bits), 4));
      };
      // The half's 8 scales as int16 in both 128-bit halves.
      const __m256i half_scales = _mm256_broadcastsi128_si256(half ? _mm256_extracti128_si256(scales16, 1)
                                                                    : _mm256_castsi256_si128(scales16));
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const __m256i scale16 = spread_int16(half_scales, 2 * t, 2 * t + 1), q = quarter(t);
        for (int r = 0; r < R; ++r) {
          dots[r] = _mm256_add_epi32(dots[r], scaled_dot(q, load32(rows[r] + 128 * half + 32 * t), scale16));
          keep_running(dots[r]);
        }
      }
    }
  }
#else
  // The same sums on 512-bit vectors, a pair of quarters at a time (64 elements: pair p of a
  // half is quarters 2p and 2p + 1, whose low or high nibbles are ql's 64 bytes of the half and
  // whose activations are 64 consecutive bytes): half the instructions per row and super-block
  // of the 256-bit loop, which is what batch 8 spends its time on.
  // (GCC 12 warns that the 512-bit insert and extract may read an uninitialised vector: a false
  // positive of its intrinsics' headers, which pass an undefined vector as the unused operand.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  // Each row's sums start from dots[r] less the offset (-32 scale_j times the 16 activations'
  // sum, in the low 256 bits); the pairs' products are added by add_pair_products. Out: below
  // 4 rows dots[r] holds row r's sums in 8 lanes, from 4 rows dots[0] holds the rows' totals
  // (lane r row r's: kRowTotals), the other dots left as they came.
  template <int R>
  static void quarter_pair_dots(const BlockQ6_K& x, const int8_t* const* rows, const int16_t* const* activation_sums,
                                __m256i scales16, __m256i* dots) {
    const __m512i nibble = _mm512_set1_epi8(0x0F), six_bits = _mm512_set1_epi8(0x3F);
    // Shift counts per 16-bit lane that bring qh's bits of a pair's two quarters to bits 4-5
    // of each byte: pair 0 takes bits 0-1 (low 256 bits, left 4) and 2-3 (high, left 2),
    // pair 1 bits 4-5 (in place) and 6-7 (right 2). What a 16-bit shift carries over from
    // the neighbouring byte lands outside bits 4-5.
    const __m512i pair0_left = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
    const __m512i pair1_right = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    const __m512i scales = _mm512_zextsi256_si512(scales16);
    const __m512i offset_scales = _mm512_zextsi256_si512(_mm256_mullo_epi16(scales16, _mm256_set1_epi16(-32)));
    __m512i sums[R];
    for (int r = 0; r < R; ++r)
      sums[r] = add_pair_products<kVnni>(_mm512_zextsi256_si512(dots[r]), offset_scales,
                                         _mm512_zextsi256_si512(load32(activation_sums[r])));
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      const __m512i low_bits = _mm512_loadu_si512(x.ql + 64 * half);
      const __m256i qh = load32(x.qh + 32 * half);
      const __m512i high_bits = _mm512_inserti64x4(_mm512_zextsi256_si512(qh), qh, 1);  // both quarters' qh bytes
#pragma GCC unroll 2
      for (int pair = 0; pair < 2; ++pair) {
        // Quarter 2 pair takes qh's bits 4 pair (the low 256 bits), quarter 2 pair + 1 bits 4 pair
        // + 2, as bits 4-5 beside ql's nibble: (low & 0x0F) | (high & ~0x0F) by one vpternlogd
        // (0xE4), then the top two bits cleared.
        const __m512i high =
            pair == 0 ? _mm512_sllv_epi16(high_bits, pair0_left) : _mm512_srlv_epi16(high_bits, pair1_right);
        const __m512i low = pair == 0 ? low_bits : _mm512_srli_epi16(low_bits, 4);
        const __m512i q = _mm512_and_si512(_mm512_ternarylogic_epi32(low, high, nibble, 0xE4), six_bits);
        const __m512i scale16 = _mm512_permutexvar_epi16(
            _mm512_load_si512(kQ6KScaleSpread[2 * half + pair].index), scales);
        for (int r = 0; r < R; ++r) {
          const __m512i a = _mm512_loadu_si512(rows[r] + 128 * half + 64 * pair);
          sums[r] = add_pair_products<kVnni>(sums[r], scale16, _mm512_maddubs_epi16(q, a));
          keep_running(sums[r]);
        }
      }
    }
    if constexpr (R >= 4) {  // the rows' totals, lane r row r's, in dots[0] (kRowTotals)
      __m512i totals[8];
      for (int r = 0; r < 8; ++r) totals[r] = r < R ? sums[r] : _mm512_setzero_si512();
      dots[0] = lane_sums8(totals);
    } else {
      for (int r = 0; r < R; ++r)
        dots[r] = _mm256_add_epi32(_mm512_castsi512_si256(sums[r]), _mm512_extracti64x4_epi64(sums[r], 1));
    }
  }
#pragma GCC diagnostic pop
#endif
};

// Q2_K and Q3_K's 2-bit parts (kquant_dequantize.cpp): in each half of 128 values, byte l
// of the half's 32 bytes holds element 32t + l at bits 2t; with kHighBit (Q3_K) element e's
// third bit is bit e / 32 of hmask[e % 32]. Sub-block j (of 16) takes scale j of scales16
// (16 int16): dots[r] += sum_j scale_j * sum(q * a) over sub-block j, q in [0, 3] or [0, 7].
template <bool kHighBit, int R>
void two_bit_dots(const uint8_t* qs, const uint8_t* hmask, __m256i scales16, const int8_t* const* rows, __m256i* dots) {
  const __m256i two_bits = _mm256_set1_epi8(3);
  [[maybe_unused]] __m256i high;
  if constexpr (kHighBit) high = load32(hmask);
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    const __m256i bits = load32(qs + 32 * half);
    const __m256i half_scales = _mm256_broadcastsi128_si256(half ? _mm256_extracti128_si256(scales16, 1)
                                                                  : _mm256_castsi256_si128(scales16));
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * t), two_bits);
      if constexpr (kHighBit) {
        const __m256i third = _mm256_and_si256(_mm256_srli_epi16(high, 4 * half + t), _mm256_set1_epi8(1));
        q = _mm256_or_si256(q, _mm256_slli_epi16(third, 2));
      }
      const __m256i scale16 = spread_int16(half_scales, 2 * t, 2 * t + 1);
      for (int r = 0; r < R; ++r) {
        dots[r] = _mm256_add_epi32(dots[r], scaled_dot(q, load32(rows[r] + 128 * half + 32 * t), scale16));
        keep_running(dots[r]);
      }
    }
  }
}

// Q2_K: value d * scale_j * q - dmin * min_j, q in [0, 3], the 4-bit scale and minimum of
// sub-block j (of 16) in the low and high nibbles of scales[j].
struct Q2KDot {
  static constexpr bool kMinimums = true;
  static constexpr bool kRowTotals = false;
  static float d(const BlockQ2_K& x) { return _cvtsh_ss(x.d); }
  static float dmin(const BlockQ2_K& x) { return _cvtsh_ss(x.dmin); }
  template <int R>
  static void dots(const BlockQ2_K& x, const int8_t* const* rows, const int16_t* const* sums, __m256i* dots,
                   int32_t* offsets) {
    const __m128i bytes = load16(x.scales), nibble = _mm_set1_epi8(0x0F);
    const __m256i scales16 = _mm256_cvtepu8_epi16(_mm_and_si128(bytes, nibble));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble));
    for (int r = 0; r < R; ++r) offsets[r] = add8_epi32(_mm256_madd_epi16(mins16, load32(sums[r])));
    two_bit_dots<false, R>(x.qs, nullptr, scales16, rows, dots);
  }
};

// Q3_K: value d * scale_j * (q - 4), q = the 2 low bits | the high bit << 2 in [0, 7], scale_j
// in [-32, 31] (q3_k_scale). As Q6_K's, the dot takes q as it is and the offset's 4 *
// sum_j scale_j * (sum of a over sub-block j) off in int32 (exact).
struct Q3KDot {
  static constexpr bool kMinimums = false;
  static constexpr bool kRowTotals = false;
  static float d(const BlockQ3_K& x) { return _cvtsh_ss(x.d); }
  static float dmin(const BlockQ3_K&) { return 0.0f; }
  // The 16 six-bit scales + 32 as bytes, four words at a time (q3_k_scale's bits): scales 0-3
  // and 4-7 the low nibbles of words 0 and 1, 8-11 and 12-15 their high nibbles, with the
  // top 2 bits from word 2's bit pairs 0, 1, 2 and 3 of each byte.
  static __m128i scales_plus_32(const uint8_t* packed) {
    uint32_t w[3];
    std::memcpy(w, packed, 12);
    const uint32_t nibbles = 0x0F0F0F0F, pairs = 0x03030303;
    return _mm_setr_epi32(static_cast<int>((w[0] & nibbles) | ((w[2] & pairs) << 4)),
                          static_cast<int>((w[1] & nibbles) | (((w[2] >> 2) & pairs) << 4)),
                          static_cast<int>(((w[0] >> 4) & nibbles) | (((w[2] >> 4) & pairs) << 4)),
                          static_cast<int>(((w[1] >> 4) & nibbles) | (((w[2] >> 6) & pairs) << 4)));
  }
  template <int R>
  static void dots(const BlockQ3_K& x, const int8_t* const* rows, const int16_t* const* sums, __m256i* dots, int32_t*) {
    const __m256i scales16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(scales_plus_32(x.scales)), _mm256_set1_epi16(32));
    for (int r = 0; r < R; ++r)  // in the lanes, which the caller sums
      dots[r] = _mm256_sub_epi32(dots[r], _mm256_slli_epi32(_mm256_madd_epi16(scales16, load32(sums[r])), 2));
    two_bit_dots<true, R>(x.qs, x.hmask, scales16, rows, dots);
  }
};

// IQ4_XS: 4-bit indices into kIq4Values (signed), value d * (ls - 32) * kIq4Values[index],
// ls the 6-bit scale of the sub-block of 32; byte j of a sub-block's 16 holds element j in
// its low nibble and element j + 16 in its high one. (Each ls is picked out by scalar code,
// on integer ports the loop leaves idle: all 8 unpacked by vector code per super-block and
// spread by vpshufb, with two sub-blocks' indices per load, was 11 % slower at 1 row on the
// AVX2 Zen 4 of bench/RESULTS.md's twenty-seventh session, 12.1 -> 13.5 ms per 1B step.)
struct Iq4XsDot {
  static constexpr bool kMinimums = false;
  static constexpr bool kRowTotals = false;
  static float d(const BlockIq4Xs& x) { return _cvtsh_ss(x.d); }
  static float dmin(const BlockIq4Xs&) { return 0.0f; }
  template <int R>
  static void dots(const BlockIq4Xs& x, const int8_t* const* rows, const int16_t* const*, __m256i* dots, int32_t*) {
    const __m256i table = _mm256_broadcastsi128_si256(load16(kIq4Values));
    const __m128i nibble = _mm_set1_epi8(0x0F);
    for (int s = 0; s < 8; ++s) {
      const __m128i bits = load16(x.qs + 16 * s);
      const __m256i indices = _mm256_setr_m128i(_mm_and_si128(bits, nibble), _mm_and_si128(_mm_srli_epi16(bits, 4), nibble));
      const __m256i w = _mm256_shuffle_epi8(table, indices);
      const __m256i magnitude = _mm256_sign_epi8(w, w);
      const int ls = ((x.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((x.scales_h >> (2 * s)) & 3) << 4);
      const __m256i scale16 = _mm256_set1_epi16(static_cast<int16_t>(ls - 32));
      for (int r = 0; r < R; ++r) {
        dots[r] = _mm256_add_epi32(dots[r], scaled_dot(magnitude, _mm256_sign_epi8(load32(rows[r] + 32 * s), w), scale16));
        keep_running(dots[r]);
      }
    }
  }
};

// out[r0 + r, o] for R rows of A (a group from r0, a multiple of 8) and weight row o (its
// super-blocks). Below 4 rows each row's fp32 sum stays in its own lanes; from 4 rows the
// rows' super-block dots are summed across lanes first into one vector (one lane per row; by
// the Dot itself where it has kRowTotals: Q6_K's 512-bit sums), then scaled by the group's 8
// activation scales at once.
template <class Dot, int R, class Block>
void rows_times_weight_row(const QuantOutput& out, const Q8KRows& A, int64_t r0, int64_t o, const Block* blocks) {
  const int64_t supers = A.supers();
  __m256 acc[R < 4 ? R : 1];
  for (__m256& v : acc) v = _mm256_setzero_ps();
  float minimums[R] = {};
  for (int64_t i = 0; i < supers; ++i) {
    prefetch_rows_ahead(blocks + i, sizeof(Block));
    const int8_t* rows[R];
    const int16_t* sums[R];
    for (int r = 0; r < R; ++r) {
      rows[r] = A.values(r0 + r, i);
      sums[r] = A.sums16(r0 + r, i);
    }
    __m256i dots[R < 4 ? R : 8];
    for (__m256i& v : dots) v = _mm256_setzero_si256();
    int32_t offsets[R];
    Dot::template dots<R>(blocks[i], rows, sums, dots, offsets);
    const float d = Dot::d(blocks[i]);
    const float* scales = A.group_scales(r0, i);
    if constexpr (R < 4) {
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * scales[r]), _mm256_cvtepi32_ps(dots[r]), acc[r]);
    } else {
      __m256i totals;  // lane r: row r's integer dot
      if constexpr (Dot::kRowTotals) totals = dots[0];
      else totals = lane_sums8(dots);
      acc[0] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), _mm256_loadu_ps(scales)), _mm256_cvtepi32_ps(totals),
                               acc[0]);
    }
    if constexpr (Dot::kMinimums) {
      const float dmin = Dot::dmin(blocks[i]);
      for (int r = 0; r < R; ++r) minimums[r] += dmin * scales[r] * static_cast<float>(offsets[r]);
    }
  }
  alignas(32) float lanes[8];
  if constexpr (R >= 4) _mm256_store_ps(lanes, acc[0]);
  for (int r = 0; r < R; ++r) {
    if constexpr (R < 4) lanes[r] = add8(acc[r]);
    out.store(r0 + r, o, lanes[r] - minimums[r]);
  }
}

// The lines of a tile's super-block further on in the thread's stream, requested into L1
// one or two at a time through the 32 steps of the tile dots (a step: one 64-byte group of
// the tile, K4Tiles::dots and k4_tile_dots; a quarter of a sub-block, iq4_tile_dots) instead
// of all at once before them. A burst of 34-44 requests fills the core's line-fill buffers,
// and the dots behind it wait until its first lines arrive; spread, the requests overlap the
// arithmetic (from 4 activation rows, on an Intel Xeon with AVX512-VNNI: the 1B shape's Q4_K
// products 1.2-1.4x faster, whole decode batches 1.1x; bench/RESULTS.md, "The tile dots'
// requests spread"). `at` null: nothing to request.
struct LineRequests {
  const uint8_t* at = nullptr;
  int64_t lines = 0;
  // Request k of the 32 a super-block makes (k = 0..31): line k, and line 32 + k where the
  // super-block has that many (Q4_K's 36 lines, Q5_K's 44, IQ4_XS's 34).
  void operator()(int k) const {
    if (at == nullptr) return;
    prefetch_lines<3>(at + 64 * k, 64);
    if (32 + k < lines) prefetch_lines<3>(at + 64 * (32 + k), 64);
  }
  static constexpr int64_t kMaxLines = 64;  // what the 32 requests cover
};

// Q4_K and Q5_K weights in quant_tiles.h's tiled layout: 16 weight rows a tile, one per
// 32-bit lane (rows 0-7 in the low 256-bit half of each 64-byte vector, 8-15 in the high
// one), so each broadcast of 4 activations serves 16 rows and each lane ends a super-block
// holding its row's whole dot: no sums across lanes.

// vpshufb indices that put bytes `first` and `second` (0-3) of each 32-bit lane, zero-
// extended, in its low and high int16 halves: a table of constants, so that no kernel
// builds them.
struct alignas(32) LaneBytes {
  uint8_t index[32];
};
constexpr LaneBytes lane_byte_pairs(int first, int second) {
  LaneBytes m{};
  for (int lane = 0; lane < 8; ++lane) {  // indices count from each 128-bit half's start
    m.index[4 * lane + 0] = static_cast<uint8_t>(4 * (lane % 4) + first);
    m.index[4 * lane + 1] = 0x80;
    m.index[4 * lane + 2] = static_cast<uint8_t>(4 * (lane % 4) + second);
    m.index[4 * lane + 3] = 0x80;
  }
  return m;
}
// [b]: byte b in both halves; [4 + t]: bytes 2t and 2t + 1.
constexpr LaneBytes kLaneBytes[6] = {lane_byte_pairs(0, 0), lane_byte_pairs(1, 1), lane_byte_pairs(2, 2),
                                     lane_byte_pairs(3, 3), lane_byte_pairs(0, 1), lane_byte_pairs(2, 3)};
inline __m256i pick_lane_bytes(__m256i v, int which) {
  return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kLaneBytes[which].index)));
}

// The bytes of 8 rows' groups of 4 in one 256-bit half of a tile's 64-byte vector.
inline __m256i tile_half(const uint8_t* vector, int h) { return load32(vector + 32 * h); }

// A row's sums of its activations over the 8 sub-blocks of 32 of a super-block (Q8KRows: they
// follow its 16 sums of 16), two to a word: times(pairs) is each lane's sum_j pair_j * sum j,
// pairs[t] holding the lane's int16 multipliers of sub-blocks 2t and 2t + 1 (a vpmaddwd each).
struct SubBlockSums {
  const int16_t* sums32;
  explicit SubBlockSums(const int16_t* sums16) : sums32(sums16 + 16) {}
  TileInts times(const TileInts* multipliers) const {
    TileInts total = TileInts::zero();
    for (int t = 0; t < 4; ++t) {
      int32_t pair;  // sums 2t and 2t + 1 as one word
      std::memcpy(&pair, sums32 + 2 * t, sizeof pair);
      total.add_pair_products(multipliers[t], pair);
    }
    return total;
  }
};

// A tile's 4 multiplier pairs (SubBlockSums::times's operand) from its halves' (low: rows 0-7).
inline void tile_pairs(const __m256i* low, const __m256i* high, TileInts* pairs) {
  for (int t = 0; t < 4; ++t) pairs[t] = TileInts::of(low[t], high[t]);
}

// Q4_K (tile super-block: d, dmin, 3 words of packed scales, 32 groups of nibbles) and
// Q5_K (the same with 8 groups of fifth bits before the nibbles). Group s of the nibbles
// belongs to pair p = s / 8 of sub-blocks: its low nibbles are elements 64p + 4 (s % 8) + 0..3
// (sub-block 2p), its high ones those 32 further on (2p + 1); Q5_K's fifth bits of both are
// bits 2p and 2p + 1 of its group s % 8 of qh. The vpmaddubsw pairs of a sub-block are
// summed in int16 over as many groups as cannot overflow (Q4_K all 8: at most
// 8 * 2 * 15 * 127 = 30480; Q5_K 4: 4 * 2 * 31 * 127 = 31496), then vpmaddwd'ed by each
// lane's sub-block scale into int32; the minimums' part sum_j min_j * (sum of a over
// sub-block j) is a vpmaddwd per two sub-blocks against the activations' bsums.
template <class BlockType, bool kFifthBit>
struct K4Tiles {
  using Block = BlockType;
  static constexpr bool kFifth = kFifthBit, kMinimums = true, kMadd = true, kSpreadRequests = true;
  static constexpr int64_t kHighBits = 256, kNibbles = kFifthBit ? kHighBits + 8 * 64 : 256;
  static constexpr int kGroupsInInt16 = kFifthBit ? 4 : 8;
  // One 256-bit half (8 rows) of a super-block: each lane's 8 six-bit scales as int16 pairs
  // (vpmaddwd's operand, one vector per sub-block) and its minimums two to a lane, unpacked
  // once for every activation row that passes; its d and dmin.
  struct Half {
    __m256i scale_pairs[8], min_pairs[4];
    __m256 d, dmin;
    Half(const uint8_t* super, int h) {
      // k4_scales_and_mins's bits, 4 to a 32-bit lane: scales 0-3, 4-7, minimums 0-3, 4-7.
      __m256i scales[2], mins[2];
      const __m256i six = _mm256_set1_epi8(0x3F), nibble = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
      const __m256i w0 = tile_half(super + 64, h), w1 = tile_half(super + 128, h), w2 = tile_half(super + 192, h);
      scales[0] = _mm256_and_si256(w0, six);
      mins[0] = _mm256_and_si256(w1, six);
      const auto top_two = [&](__m256i w) { return _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w, 6), two), 4); };
      scales[1] = _mm256_or_si256(_mm256_and_si256(w2, nibble), top_two(w0));
      mins[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), nibble), top_two(w1));
      d = _mm256_cvtph_ps(load16(super + 16 * h));
      dmin = _mm256_cvtph_ps(load16(super + 32 + 16 * h));
      for (int j = 0; j < 8; ++j) scale_pairs[j] = pick_lane_bytes(scales[j / 4], j % 4);  // scale j, twice
      for (int t = 0; t < 4; ++t) min_pairs[t] = pick_lane_bytes(mins[t / 2], 4 + t % 2);  // minimums 2t, 2t + 1
    }
  };
  // offsets[r] = each lane's sum_j min_j * (sum of row r's a over sub-block j).
  template <int R>
  static void offsets(const Half* halves, const int16_t* const* sums, TileInts* offsets) {
    TileInts min_pairs[4];
    tile_pairs(halves[0].min_pairs, halves[1].min_pairs, min_pairs);
    for (int r = 0; r < R; ++r) offsets[r] = SubBlockSums(sums[r]).times(min_pairs);
  }
  // dots[r] (half h) += each lane's sum_j scale_j * sum(q * a) over sub-block j, for R (1, 2 or 4)
  // rows, a half at a time (the int16 sums of both halves for 4 rows, 16 vectors, would not
  // fit AVX2's 16 registers beside the unpacking). Out of line: inlined, GCC interleaves it
  // with the caller's scales and sums and spills (measured 26 -> 34 ms per 1B step of Q4_K
  // at 8 rows, one thread).
  template <int R>
  __attribute__((noinline)) static void dots(const uint8_t* super, const Half* halves, const int8_t* const* rows, TileInts* dots,
                                             const LineRequests& request) {
    const __m256i nibble = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p)
      for (int h = 0; h < 2; ++h) {
        const __m256i scale_low = halves[h].scale_pairs[2 * p], scale_high = halves[h].scale_pairs[2 * p + 1];
        __m256i low_sums[R], high_sums[R];
        for (int r = 0; r < R; ++r) low_sums[r] = high_sums[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          if (h == 0) request(8 * p + g);
          const __m256i packed = tile_half(super + kNibbles + 64 * (8 * p + g), h);
          __m256i low = _mm256_and_si256(packed, nibble), high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
          if constexpr (kFifthBit) {
            const __m256i fifth = tile_half(super + kHighBits + 64 * g, h);
            low = _mm256_or_si256(low, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(fifth, 2 * p), one), 4));
            high = _mm256_or_si256(high, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(fifth, 2 * p + 1), one), 4));
          }
          for (int r = 0; r < R; ++r) {
            low_sums[r] = _mm256_add_epi16(low_sums[r], _mm256_maddubs_epi16(low, broadcast4(rows[r] + 64 * p + 4 * g)));
            high_sums[r] = _mm256_add_epi16(high_sums[r], _mm256_maddubs_epi16(high, broadcast4(rows[r] + 64 * p + 32 + 4 * g)));
            keep_running(low_sums[r]);
            keep_running(high_sums[r]);
          }
          if ((g + 1) % kGroupsInInt16 == 0)  // into int32 by the scales before the int16 sums could overflow
            for (int r = 0; r < R; ++r) {
              dots[r].add_half(h, _mm256_add_epi32(_mm256_madd_epi16(low_sums[r], scale_low),
                                                   _mm256_madd_epi16(high_sums[r], scale_high)));
              low_sums[r] = high_sums[r] = _mm256_setzero_si256();
            }
        }
      }
  }
};
using Q4KTiles = K4Tiles<BlockQ4_K, false>;
using Q5KTiles = K4Tiles<BlockQ5_K, true>;

// IQ4_XS (tile super-block: d, scales_h, scales_l, 32 groups of indices), read by the
// vpdpbusd dots alone (quant_kint8_vnni.inc, iq4_tile_dots): the indices looked up in
// kIq4Values + 128 (unsigned, vpdpbusd's operand), so each lane starts from the bias's
// -128 * sum_s scale_s * (sum of a over sub-block s of 32) and ends holding exactly the integer
// the rows kernel (Iq4XsDot, |w| against a with w's sign) sums across its lanes.
struct Iq4XsTiles {
  using Block = BlockIq4Xs;
  static constexpr bool kMinimums = false, kMadd = false, kSpreadRequests = true;
  static constexpr int64_t kIndices = 128;
  // One 256-bit half (8 rows) of a super-block: each lane's 8 scales (ls - 32) as int32, and as
  // int16 pairs (2t, 2t + 1) for the bias; its d.
  struct Half {
    __m256i scales32[8], scale_pairs[4];
    __m256 d;
    Half(const uint8_t* super, int h) {
      const __m256i high = _mm256_cvtepu16_epi32(load16(super + 32 + 16 * h));  // scales_h, a lane each
      const __m256i low = tile_half(super + 64, h);                             // scales_l
      for (int s = 0; s < 8; ++s) {
        const __m256i nibble = _mm256_and_si256(_mm256_srli_epi32(low, 4 * s), _mm256_set1_epi32(0xF));
        const __m256i top = _mm256_and_si256(_mm256_srli_epi32(high, 2 * s), _mm256_set1_epi32(3));
        scales32[s] = _mm256_sub_epi32(_mm256_or_si256(nibble, _mm256_slli_epi32(top, 4)), _mm256_set1_epi32(32));
      }
      for (int t = 0; t < 4; ++t)
        scale_pairs[t] = _mm256_or_si256(_mm256_and_si256(scales32[2 * t], _mm256_set1_epi32(0xFFFF)),
                                         _mm256_slli_epi32(scales32[2 * t + 1], 16));
      d = _mm256_cvtph_ps(load16(super + 16 * h));
    }
  };
  // offsets[r] = each lane's -128 * sum_s scale_s * (sum of row r's a over sub-block s of 32).
  template <int R>
  static void offsets(const Half* halves, const int16_t* const* sums, TileInts* offsets) {
    TileInts scale_pairs[4];
    tile_pairs(halves[0].scale_pairs, halves[1].scale_pairs, scale_pairs);
    for (int r = 0; r < R; ++r) offsets[r] = SubBlockSums(sums[r]).times(scale_pairs).times_minus(7);
  }
};

// Q6_K (tile super-block: 32 groups of ql, 16 of qh, 4 of scales, the rows' d; quant_tiles.h),
// read by the vpdpbusd dots alone (quant_kint8_vnni.inc, k6_tile_dots): q in [0, 63] as
// stored, each sub-block of 16 summed in int32 from the offset's -32 * (sum of its
// activations), then times the lane's scale: each lane ends holding exactly the integer the
// rows kernel (Q6KDot) sums across its lanes.
struct Q6KTiles {
  using Block = BlockQ6_K;
  static constexpr bool kMinimums = false, kMadd = false;
  // A super-block's lines requested all at once at every count of rows, not spread over the
  // first pass's dots from 4 rows as the others' (1B products at 8 rows, Zen 5: 6.9-7.7 ms
  // against 7.4-9.1, 4 alternated runs).
  static constexpr bool kSpreadRequests = false;
  static constexpr int64_t kHighBits = 16 * 128, kScales = 16 * 192, kScale = 16 * 208;
  // One 256-bit half (8 rows) of a super-block: each lane's 16 int8 scales as int32; its d.
  struct Half {
    __m256i scales32[16];
    __m256 d;
    Half(const uint8_t* super, int h) {
      for (int w = 0; w < 4; ++w) {  // group w: scales 4w..4w+3, a lane's bytes
        const __m256i group = tile_half(super + kScales + 64 * w, h);
        for (int b = 0; b < 4; ++b) scales32[4 * w + b] = _mm256_srai_epi32(_mm256_slli_epi32(group, 24 - 8 * b), 24);
      }
      d = _mm256_cvtph_ps(load16(super + kScale + 16 * h));
    }
  };
  // The offset is summed by the dots themselves (each sub-block's sums start from it).
  template <int R>
  static void offsets(const Half*, const int16_t* const*, TileInts* offsets) {
    for (int r = 0; r < R; ++r) offsets[r] = TileInts::zero();
  }
};

// The same tile dots on vpdpbusd (quant_kint8_vnni.inc): emulated by AVX2 instructions, and
// where the compiler has GCC's target pragma, in a region with the VNNI extension.
#define GATEDLM_KQUANT_VNNI 0
namespace emulated_vnni {
#include "kernels/quant_kint8_vnni.inc"
}
#undef GATEDLM_KQUANT_VNNI
#if !defined(__clang__)
#define GATEDLM_KQUANT_VNNI 1
#include "kernels/vnni_region_begin.h"
namespace vnni {
#include "kernels/quant_kint8_vnni.inc"
}
#include "kernels/vnni_region_end.h"
#undef GATEDLM_KQUANT_VNNI
#endif

// The integer work of a tile's super-block for R rows, by the instruction the caller chose.
template <KQuantTileDot kTileDot, class Tiles, int R>
void tile_dots(const uint8_t* super, const typename Tiles::Half* halves, const int8_t* const* rows,
               const int16_t* const* sums, TileInts* dots, const LineRequests& request) {
  if constexpr (kTileDot == KQuantTileDot::vnni_emulated) {
    emulated_vnni::tile_dots<Tiles, R>(super, halves, rows, sums, dots, request);
  } else if constexpr (kTileDot == KQuantTileDot::vnni) {
#if !defined(__clang__)
    vnni::tile_dots<Tiles, R>(super, halves, rows, sums, dots, request);
#else
    fail("the VNNI K-quant kernels are compiled by GCC only");
#endif
  } else if constexpr (Tiles::kMadd) {
    Tiles::template dots<R>(super, halves, rows, dots, request);
  } else {
    fail("K-quant int8 product: no vpmaddubsw kernel reads ", sizeof(typename Tiles::Block), "-byte super-blocks in tiles");
  }
}

// The most activation rows one pass of the tile dots takes: 4 on vpmaddubsw (the int16 sums
// of more would not fit AVX2's 16 registers), TileLanes::kMaxRows on vpdpbusd: 8 with
// AVX-512's 32 registers, each 64-byte group unpacked once for 8 rows instead of twice (a 1B
// step of 4 layers at 8 rows, 2 threads, Xeon with AVX512-VNNI, best of 15 alternated: Q4_K
// 12.7 -> 11.6 ms, Q5_K 16.6 -> 14.4, IQ4_XS 15.5 -> 12.7).
template <KQuantTileDot kTileDot>
constexpr int tile_pass_rows() {
  if constexpr (kTileDot == KQuantTileDot::vnni_emulated) return emulated_vnni::TileLanes::kMaxRows;
#if !defined(__clang__)
  if constexpr (kTileDot == KQuantTileDot::vnni) return vnni::TileLanes::kMaxRows;
#endif
  return 4;
}

// The integer work of R (1, 2, 4 or 8) activation rows against one super-block of a tile, scaled
// into acc[r] (16 fp32 lanes, one per weight row): each lane's dots and minimums' offsets, then
// d * d_a and dmin * d_a in fp32, as the rows kernel scales them.
template <KQuantTileDot kTileDot, class Tiles, int R>
void super_block_rows(const Q8KRows& A, int64_t r0, int64_t i, const uint8_t* super, const typename Tiles::Half* halves,
                      float (*acc)[kQuantTileRows], const LineRequests& request) {
  const int8_t* rows[R];
  const int16_t* sums[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = A.values(r0 + r, i);
    sums[r] = A.sums16(r0 + r, i);
  }
  TileInts dots[R], offsets[R];
  Tiles::template offsets<R>(halves, sums, offsets);
  // With minimums (Q4_K, Q5_K) the offsets are scaled by dmin apart; else (IQ4_XS)
  // they are the integer the dots start from.
  for (int r = 0; r < R; ++r) dots[r] = Tiles::kMinimums ? TileInts::zero() : offsets[r];
  tile_dots<kTileDot, Tiles, R>(super, halves, rows, sums, dots, request);
  const TileFloats d = TileFloats::of(halves[0].d, halves[1].d);
  // The pass's rows lie in one group of kGroupRows (tiled_rows' groups start at multiples of
  // it), so one group's scales serve them all.
  const float* activation_scales = A.group_scales(r0, i) + r0 % kGroupRows;
  for (int r = 0; r < R; ++r) {
    const float activation_scale = activation_scales[r];
    TileFloats sum = TileFloats::load(acc[r]);
    sum.add_product(dots[r], d.times(activation_scale));
    if constexpr (Tiles::kMinimums)
      sum.subtract_product(offsets[r], TileFloats::of(halves[0].dmin, halves[1].dmin).times(activation_scale));
    sum.store(acc[r]);
  }
}

// Tiles of at least this many bytes a super-block column (16 rows) take tiled_rows' far
// request at batch 1: 4x the rows prefetch's distance.
constexpr int64_t kNextTileFromBytes = 4 * kRowsPrefetchBytes;

// out[r0 + r, o0 + i] for the group's rows (1 to 8) of A and the 16 weight rows of a tile,
// super-block by super-block, every row of the group against a super-block before the next
// (it is unpacked once and stays in L1 while the rows pass; a whole tile of a long row, 72
// KiB for ffn_down at 1B, would not), in passes of tile_pass_rows activation rows, then
// four, two, one. (Tiles: the format's layout and integer arithmetic, K4Tiles.)
template <KQuantTileDot kTileDot, class Tiles>
void tiled_rows(const QuantOutput& out, const Q8KRows& A, int64_t r0, int64_t rows, int64_t o0, const uint8_t* tile) {
  constexpr int64_t kSuperTile = kQuantTileRows * static_cast<int64_t>(sizeof(typename Tiles::Block));
  static_assert(kSuperTile <= 64 * LineRequests::kMaxLines, "a super-block of the tile has lines LineRequests would not request");
  const int64_t supers = A.supers();
  alignas(64) float acc[kQuantDecodeRows][kQuantTileRows];
  for (int64_t r = 0; r < rows; ++r) TileFloats::zero().store(acc[r]);
  const bool far_request = rows == 1 && supers * kSuperTile >= kNextTileFromBytes && far_tile_requests();
  for (int64_t i = 0; i < supers; ++i) {
    const uint8_t* super = tile + i * kSuperTile;
    // Each super-block's bytes requested 4 KiB ahead into L1, as the rows kernels do, not the
    // next tile into L2 (TilePrefetch): 1B shape, 2 threads, batch 1, 3-8 % faster with
    // vpmaddubsw on Zen 3 and 1.6-2.4x with vpdpbusd on Zen 5 (bench/RESULTS.md, "AVX2 on a
    // real Zen 3" and "The K-quant tiles' prefetch on Zen 5"). From 4 activation rows, where
    // the dots take longer than the reads, by the first pass of rows, spread over its dots
    // (LineRequests); with fewer, all at once, which leaves batch 1 as it was measured. (Q6_K's
    // tiles all at once at every count: kSpreadRequests.)
    const bool spread = rows >= 4 && Tiles::kSpreadRequests;
    if (!spread) prefetch_rows_ahead(super, kSuperTile);
    LineRequests request{spread ? super + kRowsPrefetchBytes : nullptr, kSuperTile / 64};
    // With one activation row and tiles far longer than the distance above, on CPUs where it
    // pays (far_tile_requests: Intel's), the next tile's super-block i too (a tile further on
    // in the thread's stream: tiles are contiguous), into L2: an Intel Xeon reads faster with
    // the far request beside the near one (1B, 2 threads, batch 1: Q4_K_M 1.1x, IQ4_XS 1.3x;
    // 2 KiB into L1 with 16 KiB into L2 was no better; level at batch 2, 0.9x at batch 8,
    // where the dots take longer than the reads; 0.9x on the 150M hybrid's 7 KiB tiles, less
    // than two near distances ahead; bench/RESULTS.md, "The K-quant tiles on an Intel Xeon"),
    // AMD Zen 5 slower (0.9x at 1B, "The far request on AMD Zen 5").
    if (far_request) prefetch_lines<1>(super + supers * kSuperTile, kSuperTile);
    const typename Tiles::Half halves[2] = {typename Tiles::Half(super, 0), typename Tiles::Half(super, 1)};
    for (int64_t r = 0; r < rows; request.at = nullptr) {  // the first pass makes the requests
      if constexpr (tile_pass_rows<kTileDot>() >= 8)
        if (rows - r >= 8) {
          super_block_rows<kTileDot, Tiles, 8>(A, r0 + r, i, super, halves, acc + r, request), r += 8;
          continue;
        }
      if (rows - r >= 4) super_block_rows<kTileDot, Tiles, 4>(A, r0 + r, i, super, halves, acc + r, request), r += 4;
      else if (rows - r >= 2) super_block_rows<kTileDot, Tiles, 2>(A, r0 + r, i, super, halves, acc + r, request), r += 2;
      else super_block_rows<kTileDot, Tiles, 1>(A, r0 + r, i, super, halves, acc + r, request), r += 1;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {  // C's 16 columns o0.. of the row, as QuantOutput::store
    float* c = out.C + (r0 + r) * out.ldc + o0;
    TileFloats sum = TileFloats::load(acc[r]);
    if (out.accumulate) sum.add(TileFloats::load(c));
    sum.store(c);
  }
}

// Weights with tiles: whole tiles through tiled_rows, the rows past the last whole tile
// through the rows kernel.
template <KQuantTileDot kTileDot, class Tiles, class Dot>
void tiled_product(const QuantOutput& out, const Q8KRows& A, int64_t m, const QuantWeights& W, bool in_team) {
  using Block = typename Tiles::Block;
  const int64_t row_bytes = element_row_bytes(W.format, W.cols);
  const auto* data = static_cast<const uint8_t*>(W.data);
  for_each_tile_group(W, m, row_bytes, in_team, [&](int64_t r0, int64_t rows, int64_t o0, int64_t end) {
    if (o0 < W.tiled_rows) return tiled_rows<kTileDot, Tiles>(out, A, r0, rows, o0, data + o0 * row_bytes);
    with_row_count(rows, [&]<int R>() {
      for (int64_t o = o0; o < end; ++o)
        rows_times_weight_row<Dot, R>(out, A, r0, o, reinterpret_cast<const Block*>(data + o * row_bytes));
    });
  });
}

template <class Dot, class Block>
void product_of(const QuantOutput& out, const Q8KRows& A, int64_t m, const QuantWeights& W, bool in_team) {
  const int64_t row_bytes = element_row_bytes(W.format, W.cols);
  const auto* data = static_cast<const unsigned char*>(W.data);
  for_each_row_group(W.rows, m, row_bytes, W.cols, [&](int64_t o, int64_t r0, int64_t rows) {
    with_row_count(rows, [&]<int R>() {
      rows_times_weight_row<Dot, R>(out, A, r0, o, reinterpret_cast<const Block*>(data + o * row_bytes));
    });
  }, in_team);
}

// Tiled Q4_K / Q5_K / IQ4_XS weights by the tile dot asked for; rows past the tiles
// and weights without tiles through the rows kernel.
template <class Tiles, class Dot>
void tiled_or_rows(KQuantTileDot tile_dot, const QuantOutput& out, const Q8KRows& A, int64_t m, const QuantWeights& W,
                   bool in_team) {
  if (W.tiled_rows == 0) return product_of<Dot, typename Tiles::Block>(out, A, m, W, in_team);
  switch (tile_dot) {
    case KQuantTileDot::madd: return tiled_product<KQuantTileDot::madd, Tiles, Dot>(out, A, m, W, in_team);
    case KQuantTileDot::vnni: return tiled_product<KQuantTileDot::vnni, Tiles, Dot>(out, A, m, W, in_team);
    case KQuantTileDot::vnni_emulated:
      return tiled_product<KQuantTileDot::vnni_emulated, Tiles, Dot>(out, A, m, W, in_team);
  }
}

void multiply(KQuantTileDot tile_dot, const QuantOutput& out, const Q8KRows& A, int64_t m, const QuantWeights& W,
              bool in_team) {
  switch (W.format) {
    case ElementType::q4_k: return tiled_or_rows<Q4KTiles, Q4KDot>(tile_dot, out, A, m, W, in_team);
    case ElementType::q5_k: return tiled_or_rows<Q5KTiles, Q5KDot>(tile_dot, out, A, m, W, in_team);
    case ElementType::q2_k: return product_of<Q2KDot, BlockQ2_K>(out, A, m, W, in_team);
    case ElementType::q3_k: return product_of<Q3KDot, BlockQ3_K>(out, A, m, W, in_team);
    case ElementType::q6_k:
#if GATEDLM_KSET_AVX512
      if (tile_dot == KQuantTileDot::vnni) return tiled_or_rows<Q6KTiles, Q6KDot<true>>(tile_dot, out, A, m, W, in_team);
#endif
      return tiled_or_rows<Q6KTiles, Q6KDot<false>>(tile_dot, out, A, m, W, in_team);
    case ElementType::iq4_xs: return tiled_or_rows<Iq4XsTiles, Iq4XsDot>(tile_dot, out, A, m, W, in_team);
    default:
      fail("the K-quant int8 products take Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS weights, not ",
           element_name(W.format));
  }
}

}  // namespace

bool kquant_vnni_format(ElementType format) {
  return GATEDLM_KSET_AVX2 && (format == ElementType::q4_k || format == ElementType::q5_k ||
                               format == ElementType::q6_k || format == ElementType::iq4_xs);
}

void kquant_int8_product(const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W,
                         KQuantTileDot tile_dot) {
  const bool k4 = W.format == ElementType::q4_k || W.format == ElementType::q5_k;
  if (W.tiled_rows > 0 && !k4 && !(kquant_vnni_format(W.format) && tile_dot != KQuantTileDot::madd))
    fail("K-quant int8 product: no kernel of ", tile_dot == KQuantTileDot::madd ? "vpmaddubsw" : "vpdpbusd", " reads ",
         element_name(W.format), " weights in tiles");
  const bool vnni = tile_dot == KQuantTileDot::vnni;
  if (tile_dot != KQuantTileDot::madd && !kquant_vnni_format(W.format))
    fail("K-quant int8 product: no ", vnni ? "VNNI" : "emulated vpdpbusd", " kernel for ", element_name(W.format),
         " weights");
  with_decode_team(m, W, [&](bool in_team) {
    // In a team every thread rounds all the rows itself (quant_kernels.h says why).
    multiply(tile_dot, out, quantize_rows(A, lda, m, W.cols, !in_team), m, W, in_team);
  });
}

#else  // no AVX2: the generic set has no int8 path

bool kquant_vnni_format(ElementType) { return false; }
void kquant_int8_product(const QuantOutput&, const float*, int64_t, int64_t, const QuantWeights&, KQuantTileDot) {
  fail("the int8 quantised products need AVX2 (this is the generic kernel set)");
}

#endif

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
