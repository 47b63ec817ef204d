// The int8 path (int8_madd) of the quantised products for the K-quants and IQ4_XS
// (kquant_blocks.h: Q4_K, Q5_K, Q6_K, IQ4_XS), compiled once per kernel set; the avx2
// and avx512 sets have it, the generic set not.
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
// The dot of unsigned weights (Q4_K and Q5_K q, Q6_K's q + 32) and signed activations is
// vpmaddubsw (pairs summed to int16: at most 2 * 63 * 127, no saturation), then vpmaddwd by
// the sub-block's scale to int32. IQ4_XS weights are signed (kIq4Values): vpmaddubsw of |w|
// by a with w's sign (at most 2 * 127 * 127).
#include "kernels/kernel_sets.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/half_float.h"
#include "kernels/kquant_blocks.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/quant_kernels.h"
#if GATEDLM_KSET_AVX2
#include "kernels/int8_lanes.h"
#endif

namespace gatedlm::kernels::GATEDLM_KSET {

bool kquant_int8_format(ElementType format) {
  return GATEDLM_KSET_AVX2 && (format == ElementType::q4_k || format == ElementType::q5_k ||
                               format == ElementType::q6_k || format == ElementType::iq4_xs);
}

#if GATEDLM_KSET_AVX2
namespace {

constexpr int kSuper = static_cast<int>(kSuperBlockValues);
constexpr int kGroupRows = static_cast<int>(kQuantDecodeRows);

// The rows of A as ggml's Q8_K super-blocks: q [m, k] (int8), bsums [m, k / 16] (the sums of
// each 16 q's), and the scales d in groups of 8 rows, super-block by super-block:
// scales[((r / 8) * supers + i) * 8 + r % 8] (a group's 8 scales of a super-block are one
// vector; the slots of rows past m hold 0).
struct Q8KRows {
  const int8_t* q;
  const int16_t* bsums;
  const float* scales;
  int64_t k;
  int64_t supers() const { return k / kSuper; }
  const int8_t* values(int64_t r, int64_t i) const { return q + r * k + i * kSuper; }
  const int16_t* sums16(int64_t r, int64_t i) const { return bsums + (r * supers() + i) * 16; }
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
  // The signed value of the first element of largest magnitude (ggml keeps the first).
  float max = amax;
  for (int j = 0; j < kSuper; ++j)
    if (std::fabs(x[j]) == amax) {
      max = x[j];
      break;
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
  bsums.resize(static_cast<size_t>(m * supers * 16));
  scales.assign(static_cast<size_t>(padded * supers), 0.0f);
  int8_t* qs = q.data();  // plain pointers: other threads' vectors of these names are their own
  int16_t* sums = bsums.data();
  float* ds = scales.data();
  const auto round_row = [&](int64_t r) {
    for (int64_t i = 0; i < supers; ++i)
      quantize_super_block(qs + r * k + i * kSuper, sums + (r * supers + i) * 16,
                           ds + ((r / kGroupRows) * supers + i) * kGroupRows + r % kGroupRows,
                           A + r * lda + i * kSuper);
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
  static float d(const Block& x) { return _cvtsh_ss(x.d); }
  static float dmin(const Block& x) { return _cvtsh_ss(x.dmin); }
  template <int R>
  static void dots(const Block& x, const int8_t* const* rows, const int16_t* const* sums, __m256i* dots,
                   int32_t* offsets) {
    const __m256i scales_and_mins = k4_scales_and_mins(x.scales);
    const __m128i mins16 = _mm256_extracti128_si256(scales_and_mins, 1);
    for (int r = 0; r < R; ++r) {  // sub-block j of 32 = bsums 2j and 2j + 1
      const __m128i sum32 = _mm_hadd_epi16(load16(sums[r]), load16(sums[r] + 8));
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
      }
    }
  }
};
using Q4KDot = K4Dot<BlockQ4_K, false>;
using Q5KDot = K4Dot<BlockQ5_K, true>;

// Q6_K: q = low nibble | 2 high bits << 4 in [0, 63], value d * scale * (q - 32), scales per
// 16. The dot takes q as it is and the offset's 32 * sum_j scale_j * (sum of a over the 16)
// off in int32 (exact): no minimums left.
struct Q6KDot {
  static constexpr bool kMinimums = false;
  static float d(const BlockQ6_K& x) { return _cvtsh_ss(x.d); }
  static float dmin(const BlockQ6_K&) { return 0.0f; }
  template <int R>
  static void dots(const BlockQ6_K& x, const int8_t* const* rows, const int16_t* const* sums, __m256i* dots, int32_t*) {
    const __m256i scales16 = _mm256_cvtepi8_epi16(load16(x.scales));
    for (int r = 0; r < R; ++r) {
      const int32_t offset = 32 * add8_epi32(_mm256_madd_epi16(scales16, load32(sums[r])));
      dots[r] = _mm256_sub_epi32(dots[r], _mm256_setr_epi32(offset, 0, 0, 0, 0, 0, 0, 0));
    }
    const __m256i nibble = _mm256_set1_epi8(0x0F), two_bits = _mm256_set1_epi8(3);
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {  // elements 128 half ..: ql 64 bytes, qh 32, scales 8
      const uint8_t* ql = x.ql + 64 * half;
      const __m256i high_bits = load32(x.qh + 32 * half), ql0 = load32(ql), ql1 = load32(ql + 32);
      // Quarter t: elements 32t..32t+31 of the half, scales 2t (first 16) and 2t + 1.
      const __m256i quarters[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, nibble), _mm256_slli_epi16(_mm256_and_si256(high_bits, two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(ql1, nibble),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 2), two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 4), two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 6), two_bits), 4))};
      // The half's 8 scales as int16 in both 128-bit halves.
      const __m256i half_scales = _mm256_broadcastsi128_si256(half ? _mm256_extracti128_si256(scales16, 1)
                                                                    : _mm256_castsi256_si128(scales16));
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const __m256i scale16 = spread_int16(half_scales, 2 * t, 2 * t + 1);
        for (int r = 0; r < R; ++r)
          dots[r] = _mm256_add_epi32(dots[r], scaled_dot(quarters[t], load32(rows[r] + 128 * half + 32 * t), scale16));
      }
    }
  }
};

// IQ4_XS: 4-bit indices into kIq4Values (signed), value d * (ls - 32) * kIq4Values[index],
// ls the 6-bit scale of the sub-block of 32; byte j of a sub-block's 16 holds element j in
// its low nibble and element j + 16 in its high one.
struct Iq4XsDot {
  static constexpr bool kMinimums = false;
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
      for (int r = 0; r < R; ++r)
        dots[r] = _mm256_add_epi32(dots[r], scaled_dot(magnitude, _mm256_sign_epi8(load32(rows[r] + 32 * s), w), scale16));
    }
  }
};

// out[r0 + r, o] for R rows of A (a group from r0, a multiple of 8) and weight row o (its
// super-blocks). Below 4 rows each row's fp32 sum stays in its own lanes; from 4 rows the
// rows' super-block dots are summed across lanes first into one vector (one lane per row),
// then scaled by the group's 8 activation scales at once.
template <class Dot, int R, class Block>
void rows_times_weight_row(const QuantOutput& out, const Q8KRows& A, int64_t r0, int64_t o, const Block* blocks) {
  const int64_t supers = A.supers();
  __m256 acc[R < 4 ? R : 1];
  for (__m256& v : acc) v = _mm256_setzero_ps();
  float minimums[R] = {};
  for (int64_t i = 0; i < supers; ++i) {
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
      acc[0] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), _mm256_loadu_ps(scales)),
                               _mm256_cvtepi32_ps(lane_sums8(dots)), acc[0]);
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

void multiply(const QuantOutput& out, const Q8KRows& A, int64_t m, const QuantWeights& W, bool in_team) {
  switch (W.format) {
    case ElementType::q4_k: return product_of<Q4KDot, BlockQ4_K>(out, A, m, W, in_team);
    case ElementType::q5_k: return product_of<Q5KDot, BlockQ5_K>(out, A, m, W, in_team);
    case ElementType::q6_k: return product_of<Q6KDot, BlockQ6_K>(out, A, m, W, in_team);
    case ElementType::iq4_xs: return product_of<Iq4XsDot, BlockIq4Xs>(out, A, m, W, in_team);
    default: fail("the K-quant int8 products take Q4_K, Q5_K, Q6_K or IQ4_XS weights, not ", element_name(W.format));
  }
}

}  // namespace

void kquant_int8_product(const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W) {
  if (W.tiled_rows > 0) fail("K-quant int8 product: ", element_name(W.format), " weights have no tiled layout");
  with_decode_team(m, W, [&](bool in_team) {
    // In a team every thread rounds all the rows itself (quant_kernels.h says why).
    multiply(out, quantize_rows(A, lda, m, W.cols, !in_team), m, W, in_team);
  });
}

#else  // no AVX2: the generic set has no int8 path

void kquant_int8_product(const QuantOutput&, const float*, int64_t, int64_t, const QuantWeights&) {
  fail("the int8 quantised products need AVX2 (this is the generic kernel set)");
}

#endif

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
