// The int8 paths of the quantised products (quant_matmul.h: int8_madd, int8_vnni),
// compiled once per kernel set; the avx2 and avx512 sets have them, the generic set not.
//
// Each row of A is first quantised to int8 blocks of 32 exactly as ggml quantises
// activations for Q8_0 / Q4_0 weights on x86 (quantize_row_q8_0): d = max|a| / 127 kept
// as fp16, q = round-to-nearest-even(a * 127 / max|a|). Then per weight block and row of
// A one integer dot product of 32 int8 pairs (exact in int32), scaled by d_w * d_a and
// summed in fp32 over the blocks: llama.cpp's arithmetic, so our logits differ from its
// only in the order of fp32 additions.
//
// The dot product: Q8_0 blocks are 32 int8 weights; Q4_0 nibbles become int8 (q - 8).
//   vpmaddubsw (AVX2) multiplies unsigned by signed bytes: |w| times a with w's sign,
//     pairs summed to int16 (at most 2 * 128 * 127, no saturation), then vpmaddwd to int32.
//   vpdpbusd (AVX512-VNNI, AVX-VNNI) does all that in one instruction, unsigned by signed:
//     the activations are kept as a + 128 (unsigned) and 128 * sum(w) taken off, one
//     correction per weight block that every row of A shares.
#include "kernels/kernel_sets.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_set.h"
#include "kernels/quant_tiles.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/quant_kernels.h"
#if GATEDLM_KSET_AVX2
#include "kernels/int8_lanes.h"
#endif

namespace gatedlm::kernels::GATEDLM_KSET {

#if GATEDLM_KSET_AVX2
namespace {

constexpr int64_t kBlock = kQuantBlockValues;
// Weight rows per tile of the weight-tile kernels (quant_int8_kernels.inc: one per 512-bit
// lane), those of quant_tiles.h's layout.
constexpr int kTileRows = static_cast<int>(kQuantTileRows);

// One block of 32 activations to int8 (ggml's quantize_row_q8_0 on x86): q[32] and the
// fp32 value of the fp16 scale (q may be null: not stored). biased: q + 128 stored (the
// unsigned operand of vpdpbusd).
// signed_q and correction (unless null): the 32 signed values, and -(their sum) << shift,
// what the weights' offset (1 << shift, RowsWanted::offset_shift) adds to a vpdpbusd dot.
inline void quantize_block(int8_t* q, float* scale, const float* x, bool biased, int8_t* signed_q,
                           int32_t* correction, int shift) {
  __m256 v[4];
  const __m256 magnitude_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[i], magnitude_mask));
  }
  const float max_abs = max8(amax);
  *scale = _cvtsh_ss(_cvtss_sh(max_abs / 127.0f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256 inverse = _mm256_set1_ps(max_abs != 0.0f ? 127.0f / max_abs : 0.0f);
  __m256i n[4];
  for (int i = 0; i < 4; ++i)
    n[i] = _mm256_cvtps_epi32(
        _mm256_round_ps(_mm256_mul_ps(v[i], inverse), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  // Packing works within 128-bit lanes: the permute puts the 4-byte groups back in order.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
  __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  if (signed_q) _mm256_storeu_si256(reinterpret_cast<__m256i*>(signed_q), ordered);
  if (biased) ordered = _mm256_xor_si256(ordered, _mm256_set1_epi8(static_cast<char>(0x80)));
  if (q) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
  if (correction) {  // |values| <= 127: the packs above did not saturate them
    const __m256i sum8 = _mm256_add_epi32(_mm256_add_epi32(n[0], n[1]), _mm256_add_epi32(n[2], n[3]));
    *correction = -add8_epi32(sum8) * (1 << shift);  // |sum| <= 32 * 127: no overflow
  }
}

// The rows of A as int8 blocks: q [m, k] and the scales in groups of 8 rows, block by
// block: scales[((r / 8) * blocks + b) * 8 + r % 8] (a group's 8 scales of a block are one
// vector; the slots of rows past m hold 0). For the VNNI kernel of 4-8 rows also the
// groups "one row per lane" (see vnni_group_rows): lanes holds, per group and block, 8
// vectors of 32 bytes, vector s lane j = the signed activations 4s..4s+3 of row j of the
// group; corrections per group and block, lane j = -(sum of row j's 32 activations) times
// the weights' offset (128 for Q8_0, 8 for Q4_0: 1 << RowsWanted::offset_shift).
//
//
// For the Q4_0 kernel of 1-3 rows (AVX-512 VNNI, q4_rows_times_weight_row), the rows of the
// last group when it has fewer than 4 (from row quad_row0) also as "nibble quads": per row
// and quad of blocks 4g..4g+3, 128 signed activations in the order of the blocks' nibbles,
// [a_4g[0:16] | a_4g+1[0:16] | a_4g+2[0:16] | a_4g+3[0:16]] (the low nibbles) then the same
// of [16:32] (the high ones) (quad_values); per 32-bit lane -8 * the sum of the 8
// activations its two dot products meet (quad_corrections: Q4_0 stores w + 8); and the
// scale of its block (quad_scales). Blocks past the row's end are zeros.
struct Int8Rows {
  const int8_t* q;
  const float* scales;
  int64_t k;
  const int8_t* lanes;
  const int32_t* corrections;
  const int8_t* quad_values = nullptr;
  const int32_t* quad_corrections = nullptr;
  const float* quad_scales = nullptr;
  int64_t quad_row0 = 0;
  const int8_t* signed_q = nullptr;  // q unbiased, [m, k], for the weight-tile kernel (AVX-512 VNNI, m >= 4)
  int64_t group_block(int64_t r0, int64_t b) const { return (r0 / 8) * (k / kBlock) + b; }
  const float* group_scales(int64_t r0, int64_t b) const { return scales + group_block(r0, b) * 8; }
  int64_t quads() const { return (k / kBlock + 3) / 4; }
  int64_t quad_index(int64_t r, int64_t g) const { return (r - quad_row0) * quads() + g; }
};

// Fills Int8Rows::lanes from q (signed, or biased by 128 when `biased`).
void arrange_one_row_per_lane(int8_t* lanes, const int8_t* q, int64_t m, int64_t k, bool biased) {
  const int64_t blocks = k / kBlock;
  const int unbias = biased ? 0x80 : 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t group_block = (r / 8) * blocks + b, lane = r % 8;
      for (int64_t j = 0; j < kBlock; ++j)
        lanes[(group_block * 8 + j / 4) * 32 + lane * 4 + j % 4] = static_cast<int8_t>(q[r * k + b * kBlock + j] ^ unbias);
    }
}

#if GATEDLM_KSET_AVX512
// GCC 12's AVX-512 headers pass _mm512_undefined_*() as the unused source of masked
// builtins, which -Wuninitialized reports inside the intrinsics (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Fills the nibble-quad arrays of Int8Rows (see there) for rows [row0, m) of q: 16-byte
// copies, the lanes' sums by vpmaddubsw (1 x a) and vpmaddwd.
void arrange_nibble_quads(int8_t* values, int32_t* corrections, float* scales, const Int8Rows& rows, int64_t row0,
                          int64_t m, bool biased) {
  const int64_t blocks = rows.k / kBlock, quads = rows.quads();
  const __m128i unbias = _mm_set1_epi8(static_cast<char>(biased ? 0x80 : 0));
  const __m512i lane_block = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (int64_t r = row0; r < m; ++r)
    for (int64_t g = 0; g < quads; ++g) {
      const int64_t at = (r - row0) * quads + g;
      const int8_t* row = rows.q + r * rows.k;
      alignas(64) int8_t arranged[128];
      alignas(16) float block_scales[4];
      for (int j = 0; j < 4; ++j) {
        const int64_t b = 4 * g + j;
        for (int half = 0; half < 2; ++half) {
          const __m128i part = b < blocks ? _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                                              row + b * kBlock + 16 * half)),
                                                          unbias)
                                          : _mm_setzero_si128();
          _mm_store_si128(reinterpret_cast<__m128i*>(arranged + 64 * half + 16 * j), part);
        }
        block_scales[j] = b < blocks ? rows.group_scales(r, b)[r % 8] : 0.0f;
      }
      const __m512i ones = _mm512_set1_epi8(1);
      __m512i lane_sums = _mm512_setzero_si512();
      for (int half = 0; half < 2; ++half) {
        const __m512i part = _mm512_load_si512(arranged + 64 * half);
        _mm512_storeu_si512(values + at * 128 + 64 * half, part);
        lane_sums = _mm512_add_epi32(lane_sums, _mm512_madd_epi16(_mm512_maddubs_epi16(ones, part), _mm512_set1_epi16(1)));
      }
      _mm512_storeu_si512(corrections + at * 16, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(lane_sums, 3)));
      _mm512_storeu_ps(scales + at * 16,
                       _mm512_permutexvar_ps(lane_block, _mm512_zextps128_ps512(_mm_load_ps(block_scales))));
    }
}
#pragma GCC diagnostic pop
#endif

// Which arrangements of the rows a product's kernels read (see Int8Rows), and whether the
// calling thread may share the rounding with a team of its own (split).
struct RowsWanted {
  bool biased;            // q stored + 128 (vpdpbusd's unsigned operand)
  bool rows_of_q;         // q: the kernels that read rows of blocks
  bool one_row_per_lane;  // lanes and corrections: group_times_weight_row
  bool nibble_quads;      // the Q4_0 kernel of 1-3 rows
  bool weight_tiles;      // signed_q and corrections: the weight-tile kernels
  bool corrections;       // corrections alone: the vpmaddubsw kernel of tiled Q4_0 weights
  int offset_shift;       // the weights' offset 1 << offset_shift (Q8_0 7, Q4_0 3)
  bool split;
};

Int8Rows quantize_rows(const float* A, int64_t lda, int64_t m, int64_t k, const RowsWanted& want) {
  // Per calling thread, reused: a decode step makes hundreds of these products.
  thread_local std::vector<int8_t> q, lanes;
  thread_local std::vector<float> scales;
  thread_local std::vector<int32_t> sums;
  const int64_t blocks = k / kBlock, padded = (m + 7) / 8 * 8;
  const bool with_q = want.rows_of_q || want.one_row_per_lane || want.nibble_quads;  // the arrangements copy q
  if (with_q) q.resize(static_cast<size_t>(m * k));
  scales.assign(static_cast<size_t>(padded * blocks), 0.0f);
  const bool with_sums = want.one_row_per_lane || want.weight_tiles || want.corrections;
  if (with_sums) sums.assign(static_cast<size_t>(padded * blocks), 0);
  thread_local std::vector<int8_t> unbiased;  // Int8Rows::signed_q
  if (want.weight_tiles) unbiased.resize(static_cast<size_t>(m * k));
  int8_t* qs = with_q ? q.data() : nullptr;
  float* ds = scales.data();  // plain pointers: other threads' vectors of these names are their own
  int32_t* ns = with_sums ? sums.data() : nullptr;
  int8_t* signed_qs = want.weight_tiles ? unbiased.data() : nullptr;
  const auto round_row = [&](int64_t r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t slot = ((r / 8) * blocks + b) * 8 + r % 8, at = r * k + b * kBlock;
      quantize_block(qs ? qs + at : nullptr, ds + slot, A + r * lda + b * kBlock, want.biased,
                     signed_qs ? signed_qs + at : nullptr, ns ? ns + slot : nullptr, want.offset_shift);
    }
  };
  if (want.split) {
#pragma omp parallel for schedule(static) if (m * k >= (int64_t{1} << 16))
    for (int64_t r = 0; r < m; ++r) round_row(r);
  } else {
    for (int64_t r = 0; r < m; ++r) round_row(r);
  }
  if (want.one_row_per_lane) {
    lanes.assign(static_cast<size_t>(padded * k), 0);
    arrange_one_row_per_lane(lanes.data(), qs, m, k, want.biased);
  }
  Int8Rows rows{q.data(), scales.data(), k, lanes.data(), sums.data()};
  if (want.weight_tiles) rows.signed_q = unbiased.data();
  const int64_t last_group_rows = m % 8;
  if (want.nibble_quads && last_group_rows > 0 && last_group_rows < 4) {
    thread_local std::vector<int8_t> quad_values;
    thread_local std::vector<int32_t> quad_corrections;
    thread_local std::vector<float> quad_scales;
    const int64_t entries = last_group_rows * rows.quads();
    quad_values.resize(static_cast<size_t>(entries * 128));
    quad_corrections.resize(static_cast<size_t>(entries * 16));
    quad_scales.resize(static_cast<size_t>(entries * 16));
    rows.quad_row0 = m - last_group_rows;
#if GATEDLM_KSET_AVX512
    arrange_nibble_quads(quad_values.data(), quad_corrections.data(), quad_scales.data(), rows, rows.quad_row0, m,
                         want.biased);
#endif
    rows.quad_values = quad_values.data();
    rows.quad_corrections = quad_corrections.data();
    rows.quad_scales = quad_scales.data();
  }
  return rows;
}

// 32 weights of a block as int8.
inline __m256i weights_s8(const BlockQ8_0& block) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs));
}
inline __m256i weights_s8(const BlockQ4_0& block) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
  // Low nibbles are elements 0..15, high nibbles 16..31.
  const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                                           _mm256_set1_epi8(0x0F));
  return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
}

}  // namespace

// The kernels, once per dot instruction: vpmaddubsw in this set's own target, vpdpbusd in
// a region that adds the VNNI extension (run only where the CPU has it).
#define GATEDLM_QUANT_VNNI 0
namespace int8_madd {
#include "kernels/quant_int8_kernels.inc"
}
#undef GATEDLM_QUANT_VNNI
#if !defined(__clang__)
#define GATEDLM_QUANT_VNNI 1
#include "kernels/vnni_region_begin.h"
namespace int8_vnni {
#include "kernels/quant_int8_kernels.inc"
}
#include "kernels/vnni_region_end.h"
#undef GATEDLM_QUANT_VNNI
#endif

bool int8_vnni_runnable() {
#if defined(__clang__)
  return false;  // the VNNI region is GCC's pragma; clang builds take vpmaddubsw
#else
  if (!vnni_allowed()) return false;  // GATEDLM_VNNI=0
  __builtin_cpu_init();
#if GATEDLM_KSET_AVX512
  return __builtin_cpu_supports("avx512vnni");
#else
  return __builtin_cpu_supports("avxvnni");
#endif
#endif
}

// The product once the rows are rounded (every thread of the caller's team when in_team).
void multiply(bool vnni, const QuantOutput& out, const Int8Rows& rows, int64_t m, const QuantWeights& W, bool in_team) {
#if !defined(__clang__)
  if (vnni) return int8_vnni::product(out, rows, m, W, in_team);
#endif
  int8_madd::product(out, rows, m, W, in_team);
}

void int8_product(bool vnni, const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W) {
  RowsWanted want{};
  want.biased = vnni;
  want.offset_shift = W.format == ElementType::q8_0 ? 7 : 3;
  // The nibble-quad kernel exists in the AVX-512 set's VNNI region only.
  want.nibble_quads = GATEDLM_KSET_AVX512 && vnni && W.format == ElementType::q4_0;
  // So do the weight-tile kernels: 4-8 rows against kTileRows weight rows stored as rows
  // of blocks, any rows against weights in quant_tiles.h's layout.
  want.weight_tiles = GATEDLM_KSET_AVX512 && vnni && ((m >= 4 && W.rows >= kTileRows) || W.tiled_rows > 0);
  // Without VNNI, tiled weights take the vpmaddubsw tile kernels (tiled_madd), Q4_0's with
  // the corrections of its offset.
  const bool madd_tiles = !vnni && W.tiled_rows > 0;
  want.corrections = madd_tiles && W.format == ElementType::q4_0;
  if (W.tiled_rows > 0 && !want.weight_tiles && !madd_tiles)
    fail("int8 product: tiled weights reach a kernel that reads rows of blocks");
  // The one-row-per-lane arrangement serves group_times_weight_row, which with weight
  // tiles takes only the weight rows past the last whole tile.
  want.one_row_per_lane = vnni && m >= 4 && !(want.weight_tiles && W.rows % kTileRows == 0);
  // Rows of q serve every kernel but the weight-tile ones: not needed when those take every
  // (group of rows, tile) pair: whole tiles, and tiled or no group of 1-3 rows (groups of 8).
  const bool tiles_only = want.weight_tiles && W.rows % kTileRows == 0 && (W.tiled_rows == W.rows || m % 8 == 0 || m % 8 >= 4);
  want.rows_of_q = !tiles_only;
  want.nibble_quads &= !tiles_only;
  with_decode_team(m, W, [&](bool in_team) {
    RowsWanted mine = want;
    mine.split = !in_team;  // in a team every thread rounds all the rows
    multiply(vnni, out, quantize_rows(A, lda, m, W.cols, mine), m, W, in_team);
  });
}

#else  // no AVX2: the generic set has no int8 path

bool int8_vnni_runnable() { return false; }
void int8_product(bool, const QuantOutput&, const float*, int64_t, int64_t, const QuantWeights&) {
  fail("the int8 quantised products need AVX2 (this is the generic kernel set)");
}

#endif

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
