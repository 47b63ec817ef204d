// The quantised products of quant_matmul.h in one kernel set: the fp32_expand path (every
// set), the bf16_dot path (avx512 set, CPUs with AVX512-BF16), the choice among the paths
// and the per-set dequantisation of whole rows. The int8 paths are in quant_int8.cpp.
#include "kernels/kernel_sets.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "core/aligned_allocator.h"
#include "core/error.h"
#include "kernels/half_float.h"
#include "kernels/kquant_blocks.h"
#include "kernels/matmul.h"
#include "kernels/quant_tiles.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/fast_math.h"
#include "kernels/quant_kernels.h"

namespace gatedlm::kernels::GATEDLM_KSET {
namespace {

constexpr int kBlock = static_cast<int>(kQuantBlockValues);
constexpr int kLanes = 8;  // partial sums per row of A: one AVX2 register, two SSE ones

// Each format seen as blocks of kValues weights: expand() writes a block's values as fp32,
// exactly the values dequantize_row gives (q * d rounded once in fp32).
struct Q8Format {
  using Block = BlockQ8_0;
  static constexpr int kValues = kBlock;
  static void expand(const Block& block, float* w) {
    const float d = f16_to_f32(block.d);
    for (int j = 0; j < kBlock; ++j) w[j] = static_cast<float>(block.qs[j]) * d;
  }
};
struct Q4Format {
  using Block = BlockQ4_0;
  static constexpr int kValues = kBlock;
  static void expand(const Block& block, float* w) {
    const float d = f16_to_f32(block.d);
    // Nibbles to int8 first (byte operations), then the Q8_0 conversion: written as one
    // loop over nibbles to floats, GCC 12 leaves it scalar or nearly.
    int8_t q[kBlock];
#pragma omp simd
    for (int j = 0; j < kBlock / 2; ++j) {
      q[j] = static_cast<int8_t>((block.qs[j] & 0x0F) - 8);
      q[j + kBlock / 2] = static_cast<int8_t>((block.qs[j] >> 4) - 8);
    }
    for (int j = 0; j < kBlock; ++j) w[j] = static_cast<float>(q[j]) * d;
  }
};
struct Bf16Format {
  struct Block {
    uint16_t values[kBlock];
  };
  static constexpr int kValues = kBlock;
  static void expand(const Block& block, float* w) {
    for (int j = 0; j < kBlock; ++j) w[j] = bf16_to_f32(block.values[j]);
  }
};

// The other block formats (kquant_blocks.h: Q4_1 ... IQ4_XS) through their scalar
// dequantisers, a block at a time: no int8 kernels for them yet (issue 36).
template <class B, int V, void (*Dequantize)(float*, const B*, int64_t)>
struct DequantizerFormat {
  using Block = B;
  static constexpr int kValues = V;
  static void expand(const Block& block, float* w) { Dequantize(w, &block, V); }
};
using Q4_1Format = DequantizerFormat<BlockQ4_1, kBlock, dequantize_row_q4_1>;
using Q5_0Format = DequantizerFormat<BlockQ5_0, kBlock, dequantize_row_q5_0>;
using Q5_1Format = DequantizerFormat<BlockQ5_1, kBlock, dequantize_row_q5_1>;
using Iq4NlFormat = DequantizerFormat<BlockIq4Nl, kBlock, dequantize_row_iq4_nl>;
constexpr int kSuper = static_cast<int>(kSuperBlockValues);
using Q2_KFormat = DequantizerFormat<BlockQ2_K, kSuper, dequantize_row_q2_k>;
using Q3_KFormat = DequantizerFormat<BlockQ3_K, kSuper, dequantize_row_q3_k>;

// The K-quants of the usual mixes (Q4_K_M: Q4_K and Q6_K) expanded 8 values a step with
// AVX2 (the scalar dequantisers bound decode at a fraction of the memory bandwidth; GCC does
// not vectorise these loops by itself); the generic set keeps the scalar ones for Q4_K / Q5_K.
// The same formulas as
// kquant_dequantize.cpp: Q4_K / Q5_K d * sc * q - dmin * m per sub-block of 32, Q6_K
// (d * sc) * (q - 32) per sub-block of 16, the same values bit for bit (the AVX2 path keeps
// the compiler from fusing Q4_K's multiply and subtract, which would round once less).
#if GATEDLM_KSET_AVX2
// 8 unsigned bytes (the low 8 of `bytes`) as fp32, times ds, minus ms.
inline void scaled_bytes8(float* out, __m128i bytes, __m256 ds, __m256 ms) {
  const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  __m256 product = _mm256_mul_ps(ds, q);
  asm("" : "+x"(product));  // rounded on its own, as dequantize_row does: no fused multiply-subtract
  _mm256_storeu_ps(out, _mm256_sub_ps(product, ms));
}
#endif

template <class Block, bool kFifthBit>
struct K4Format {
  // Sub-block s: the 32 nibbles of q (low ones for even s), plus the fifth bit s of qh.
#if GATEDLM_KSET_AVX2
  static void expand_sub_block(const Block& block, int s, float ds, float ms, float* out) {
    const uint8_t* q = block.qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    const __m256 vds = _mm256_set1_ps(ds), vms = _mm256_set1_ps(ms);
    for (int half = 0; half < 2; ++half) {
      __m128i v = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * half)), shift),
                                low_mask);
      if constexpr (kFifthBit) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qh + 16 * half));
        v = _mm_or_si128(v, _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, s), _mm_set1_epi8(1)), 4));
      }
      scaled_bytes8(out + 16 * half, v, vds, vms);
      scaled_bytes8(out + 16 * half + 8, _mm_srli_si128(v, 8), vds, vms);
    }
  }
#endif
  static void expand(const Block& block, float* w) {
#if GATEDLM_KSET_AVX2
    const float d = f16_to_f32(block.d), dmin = f16_to_f32(block.dmin);
    for (int s = 0; s < 8; ++s) {
      int scale = 0, min = 0;
      k4_scale_and_min(block.scales, s, scale, min);
      expand_sub_block(block, s, d * static_cast<float>(scale), dmin * static_cast<float>(min), w + kBlock * s);
    }
#else  // the scalar dequantiser, built without fused multiply-adds (a generic ARM build would fuse them)
    if constexpr (kFifthBit) dequantize_row_q5_k(w, &block, kSuper);
    else dequantize_row_q4_k(w, &block, kSuper);
#endif
  }
};
struct Q4_KFormat : K4Format<BlockQ4_K, false> {
  using Block = BlockQ4_K;
  static constexpr int kValues = kSuper;
};
struct Q5_KFormat : K4Format<BlockQ5_K, true> {
  using Block = BlockQ5_K;
  static constexpr int kValues = kSuper;
};
struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr int kValues = kSuper;
  // Sub-block (of 16) 8h + 2t + half: low nibbles (t < 2) or high ones of ql, bits 2t of qh.
  static void expand_sub_block(const Block& block, int h, int t, int half, float ds, float* out) {
    const uint8_t* ql = block.ql + 64 * h + 32 * (t % 2) + 16 * half;
    const uint8_t* qh = block.qh + 32 * h + 16 * half;
    const int shift = t < 2 ? 0 : 4;
#if GATEDLM_KSET_AVX2
    const __m128i low = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql)), shift),
                                      _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh)), 2 * t),
                                       _mm_set1_epi8(3));
    const __m128i q = _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
    const __m256 vds = _mm256_set1_ps(ds);
    _mm256_storeu_ps(out, _mm256_mul_ps(vds, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(vds, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))));
#else
    for (int l = 0; l < 16; ++l)
      out[l] = ds * static_cast<float>((((ql[l] >> shift) & 0xF) | (((qh[l] >> (2 * t)) & 3) << 4)) - 32);
#endif
  }
  static void expand(const Block& block, float* w) {
    const float d = f16_to_f32(block.d);
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 4; ++t)
        for (int half = 0; half < 2; ++half)
          expand_sub_block(block, h, t, half, d * static_cast<float>(block.scales[8 * h + 2 * t + half]),
                           w + 128 * h + 32 * t + 16 * half);
  }
};
using Iq4XsFormat = DequantizerFormat<BlockIq4Xs, kSuper, dequantize_row_iq4_xs>;

// f.template operator()<Format>() for the format of `type`; refuses a type without one.
template <class F>
void with_format(ElementType type, F&& f) {
  switch (type) {
    case ElementType::bf16: return f.template operator()<Bf16Format>();
    case ElementType::q8_0: return f.template operator()<Q8Format>();
    case ElementType::q4_0: return f.template operator()<Q4Format>();
    case ElementType::q4_1: return f.template operator()<Q4_1Format>();
    case ElementType::q5_0: return f.template operator()<Q5_0Format>();
    case ElementType::q5_1: return f.template operator()<Q5_1Format>();
    case ElementType::iq4_nl: return f.template operator()<Iq4NlFormat>();
    case ElementType::q2_k: return f.template operator()<Q2_KFormat>();
    case ElementType::q3_k: return f.template operator()<Q3_KFormat>();
    case ElementType::q4_k: return f.template operator()<Q4_KFormat>();
    case ElementType::q5_k: return f.template operator()<Q5_KFormat>();
    case ElementType::q6_k: return f.template operator()<Q6_KFormat>();
    case ElementType::iq4_xs: return f.template operator()<Iq4XsFormat>();
    default: fail("the products have no fp32 expansion of ", element_name(type), " weights");
  }
}

// out[r0 + r, o] = A[r0 + r, :] . w for R rows of A (row stride lda) against one weight
// row (k / kValues blocks): each block expanded once, then used by every row.
template <typename Format, int R>
void expanded_rows(const QuantOutput& out, const float* A, int64_t lda, int64_t r0, int64_t o, int64_t k,
                   const typename Format::Block* blocks) {
  constexpr int V = Format::kValues;
  float acc[R][kLanes] = {};
  const int64_t count = k / V;
  for (int64_t b = 0; b < count; ++b) {
    alignas(64) float w[V];
    Format::expand(blocks[b], w);
    for (int r = 0; r < R; ++r) {
      const float* a = A + (r0 + r) * lda + b * V;
      for (int g = 0; g < V; g += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[r][l] += w[g + l] * a[g + l];
    }
  }
  for (int r = 0; r < R; ++r) {
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += acc[r][l];
    out.store(r0 + r, o, sum);
  }
}

#if GATEDLM_KSET_AVX2
// BF16 rows with AVX2 (both x86 sets; the one path for BF16 on CPUs without AVX512-BF16,
// where the generic loop above runs at a third of the memory bound): 8 weights widened
// to fp32 by a zero-extension and a shift, each used by every row. U independent sums
// per row (4 for 1-2 rows, 2 above), so that few rows do not wait on FMA latency.
template <int R>
void bf16_expanded_rows(const QuantOutput& out, const float* A, int64_t lda, int64_t r0, int64_t o, int64_t k,
                        const uint16_t* w) {
  constexpr int U = R <= 2 ? 4 : 2;
  __m256 acc[U][R];
  for (int u = 0; u < U; ++u)
    for (int r = 0; r < R; ++r) acc[u][r] = _mm256_setzero_ps();
  for (int64_t j = 0; j < k; j += 8 * U)  // k is a multiple of 32
    for (int u = 0; u < U; ++u) {
      const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + j + 8 * u)));
      const __m256 weights = _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
      for (int r = 0; r < R; ++r)
        acc[u][r] = _mm256_fmadd_ps(_mm256_loadu_ps(A + (r0 + r) * lda + j + 8 * u), weights, acc[u][r]);
    }
  for (int r = 0; r < R; ++r) {
    for (int u = 1; u < U; ++u) acc[0][r] = _mm256_add_ps(acc[0][r], acc[u][r]);
    out.store(r0 + r, o, sum8(acc[0][r]));
  }
}

// BF16 weights in quant_tiles.h's tiles: out[r0 + r, o0 + i] for R rows of A and the 16
// weight rows of a tile, one per 32-bit lane. A 256-bit load holds 8 rows' values 2s and
// 2s + 1 of a block; the low bf16 of each lane shifted up and the high one masked are those
// values in fp32, each multiplied by every row's activation (broadcast) into the row's
// accumulator of 8 outputs: the weights are read once for all R rows and nothing is summed
// across lanes (bf16_expanded_rows reads each weight row once per group of rows and sums 8
// lanes per output: at 8 rows it ran at 2x batch 1, bench/RESULTS.md). Up to 4 rows both
// halves of the tile go together (2R accumulators, 2 FMA chains at one row), from 5 rows a
// half at a time (R accumulators; the second half re-reads the tile from L1 or L2). Each
// block's bytes are asked for 4 KiB ahead into L1 (prefetch_rows_ahead), not the next tile
// (TilePrefetch): on Zen 3, 2 threads, alternated pairs, batch 8 1.04-1.25x faster at 100M
// (4 of 4) and 1.08-1.33x at 1B (2 of 2), batch 1 level (bench/RESULTS.md, "BF16's tiles on
// AVX2 ask ahead").
template <int R>
void bf16_tile_rows(const QuantOutput& out, const float* A, int64_t lda, int64_t r0, int64_t o0, int64_t k,
                    const uint8_t* tile) {
  constexpr int kHalves = R <= 4 ? 2 : 1;  // halves of the tile per pass
  constexpr int64_t kBlockBytes = kQuantTileRows * 2 * kBlock;
  const __m256i high_bf16 = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int64_t blocks = k / kBlock;
  constexpr int U = R <= 2 ? 2 : 1;  // sums per row and half: the odd values' apart at 1-2 rows (4-8 FMA chains)
  for (int h0 = 0; h0 < 2; h0 += kHalves) {
    __m256 acc[kHalves][R], odd_acc[kHalves][R];
    for (int h = 0; h < kHalves; ++h)
      for (int r = 0; r < R; ++r) acc[h][r] = odd_acc[h][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = tile + b * kBlockBytes;
      if (h0 == 0) prefetch_rows_ahead(block, kBlockBytes);
      const float* a = A + r0 * lda + b * kBlock;
      for (int s = 0; s < kBlock / 2; ++s)
        for (int h = 0; h < kHalves; ++h) {
          const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * s + 32 * (h0 + h)));
          const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
          const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(pairs, high_bf16));
          for (int r = 0; r < R; ++r) {
            acc[h][r] = _mm256_fmadd_ps(_mm256_set1_ps(a[r * lda + 2 * s]), even, acc[h][r]);
            __m256& odd_sum = U == 2 ? odd_acc[h][r] : acc[h][r];
            odd_sum = _mm256_fmadd_ps(_mm256_set1_ps(a[r * lda + 2 * s + 1]), odd, odd_sum);
          }
        }
    }
    alignas(32) float lanes[kHalves][R][8];
    for (int h = 0; h < kHalves; ++h)
      for (int r = 0; r < R; ++r) _mm256_store_ps(lanes[h][r], U == 2 ? _mm256_add_ps(acc[h][r], odd_acc[h][r]) : acc[h][r]);
    for (int h = 0; h < kHalves; ++h)
      for (int r = 0; r < R; ++r)
        for (int i = 0; i < 8; ++i) out.store(r0 + r, o0 + 8 * (h0 + h) + i, lanes[h][r][i]);
  }
}

// BF16 weights with tiles: whole tiles through bf16_tile_rows, the rows past the last
// whole tile through bf16_expanded_rows.
void bf16_tiled_product(const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W) {
  const int64_t row_bytes = element_row_bytes(W.format, W.cols);
  const auto* data = static_cast<const uint8_t*>(W.data);
  for_each_tile_group(W, m, row_bytes, false, [&](int64_t r0, int64_t rows, int64_t o0, int64_t end) {
    with_row_count(rows, [&]<int R>() {
      if (o0 < W.tiled_rows) return bf16_tile_rows<R>(out, A, lda, r0, o0, W.cols, data + o0 * row_bytes);
      for (int64_t o = o0; o < end; ++o)
        bf16_expanded_rows<R>(out, A, lda, r0, o, W.cols, reinterpret_cast<const uint16_t*>(data + o * row_bytes));
    });
  });
}
#endif

template <typename Format>
void expand_product(const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W) {
#if GATEDLM_KSET_AVX2
  if constexpr (std::is_same_v<Format, Bf16Format>)
    if (W.tiled_rows > 0) return bf16_tiled_product(out, A, lda, m, W);
#endif
  const auto* data = static_cast<const unsigned char*>(W.data);
  const int64_t row_bytes = element_row_bytes(W.format, W.cols);
  for_each_row_group(W.rows, m, row_bytes, W.cols, [&](int64_t o, int64_t r0, int64_t rows) {
    const auto* blocks = reinterpret_cast<const typename Format::Block*>(data + o * row_bytes);
    with_row_count(rows, [&]<int R>() {
#if GATEDLM_KSET_AVX2
      if constexpr (std::is_same_v<Format, Bf16Format>)
        return bf16_expanded_rows<R>(out, A, lda, r0, o, W.cols, blocks->values);
#endif
      expanded_rows<Format, R>(out, A, lda, r0, o, W.cols, blocks);
    });
  });
}

void fp32_expand_product(const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W) {
  with_format(W.format, [&]<class Format>() { expand_product<Format>(out, A, lda, m, W); });
}

#if GATEDLM_KSET_AVX512 && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avx512bf16")
// out[r0 + r, o] for R rows of A in bf16 (row stride k) against one BF16 weight row:
// vdpbf16ps multiplies 32 bf16 pairs and adds them to 16 fp32 lanes.
template <int R>
void bf16_rows(const QuantOutput& out, const uint16_t* A, int64_t r0, int64_t o, int64_t k, const uint16_t* w) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t j = 0; j < k; j += kBlock) {
    // With 4 or more rows the products between two loads of weights leave the hardware
    // prefetcher behind (measured: 2.2 cycles per vdpbf16ps streaming, 1.3 from cache):
    // fetch 1 KiB ahead (past the row's end: the next row's start, read next).
    if (R >= 4) _mm_prefetch(reinterpret_cast<const char*>(w + j + 512), _MM_HINT_T0);
    const __m512bh weights = (__m512bh)_mm512_loadu_si512(w + j);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_loadu_si512(A + (r0 + r) * k + j), weights);
  }
  for (int r = 0; r < R; ++r) out.store(r0 + r, o, halving_sum16(acc[r]));
}

// The same for two weight rows o, o + 1 (w and w + k) at once, for 4-8 rows: each load of A
// serves both, so a step of 2R vdpbf16ps takes R + 2 loads instead of 2R + 2 (with 8 rows the
// loads, not the products, bound bf16_rows). The next pair's 4k bytes, contiguous after
// this one's, are prefetched a share per step (two rows read side by side are two streams
// the hardware prefetcher follows worse than one). Each output's arithmetic is bf16_rows'.
template <int R>
void bf16_rows_pair(const QuantOutput& out, const uint16_t* A, int64_t r0, int64_t o, int64_t k, const uint16_t* w) {
  __m512 acc[2][R];
  for (int r = 0; r < R; ++r) acc[0][r] = acc[1][r] = _mm512_setzero_ps();
  const char* next_pair = reinterpret_cast<const char*>(w + 2 * k);
  for (int64_t j = 0; j < k; j += kBlock) {
    _mm_prefetch(next_pair + 4 * j, _MM_HINT_T0);  // 2 x 64 bytes of the next pair per step
    _mm_prefetch(next_pair + 4 * j + 64, _MM_HINT_T0);
    const __m512bh first = (__m512bh)_mm512_loadu_si512(w + j), second = (__m512bh)_mm512_loadu_si512(w + k + j);
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_loadu_si512(A + (r0 + r) * k + j);
      acc[0][r] = _mm512_dpbf16_ps(acc[0][r], a, first);
      acc[1][r] = _mm512_dpbf16_ps(acc[1][r], a, second);
    }
  }
  for (int r = 0; r < R; ++r) {
    out.store(r0 + r, o, halving_sum16(acc[0][r]));
    out.store(r0 + r, o + 1, halving_sum16(acc[1][r]));
  }
}

// C (+)= A W^T from A in bf16 (a16, [m, k]); in_team: every thread of the caller's region
// calls it (for_each_row_group). Pairs of weight rows from 4 rows of A, else one weight row
// at a time.
void bf16_product(const QuantOutput& out, const uint16_t* a16, int64_t m, const QuantWeights& W, bool in_team) {
  const auto* data = static_cast<const uint16_t*>(W.data);
  if (m >= 4) {  // pairs of weight rows (the last alone when W.rows is odd)
    for_each_row_group((W.rows + 1) / 2, m, 4 * W.cols, 2 * W.cols, [&](int64_t pair, int64_t r0, int64_t rows) {
      const int64_t o = 2 * pair;
      with_row_count(rows, [&]<int R>() {
        if constexpr (R >= 4)
          if (o + 1 < W.rows) return bf16_rows_pair<R>(out, a16, r0, o, W.cols, data + o * W.cols);
        for (int64_t row = o; row < std::min(o + 2, W.rows); ++row) bf16_rows<R>(out, a16, r0, row, W.cols, data + row * W.cols);
      });
    }, in_team);
    return;
  }
  for_each_row_group(W.rows, m, W.cols * 2, W.cols, [&](int64_t o, int64_t r0, int64_t rows) {
    with_row_count(rows, [&]<int R>() { bf16_rows<R>(out, a16, r0, o, W.cols, data + o * W.cols); });
  }, in_team);
}

// A's rows rounded to bf16 into the thread's buffer, then the product (at decode on every
// thread of one region: with_decode_team).
void bf16_dot_product(const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W) {
  with_decode_team(m, W, [&](bool in_team) {
    thread_local CacheLineVector<uint16_t> rounded;  // A in bf16, [m, k]; rows start on cache lines (k % 32 == 0)
    rounded.resize(static_cast<size_t>(m * W.cols));
    for (int64_t r = 0; r < m; ++r) to_bf16(rounded.data() + r * W.cols, A + r * lda, W.cols);
    bf16_product(out, rounded.data(), m, W, in_team);
  });
}
#pragma GCC pop_options
#define GATEDLM_QUANT_BF16_DOT 1
#else
#define GATEDLM_QUANT_BF16_DOT 0
#endif

bool cpu_has_bf16_dot() {
#if GATEDLM_QUANT_BF16_DOT
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

}  // namespace

bool quant_path_runnable(QuantPath path, ElementType format) {
  const bool blocks = format == ElementType::q8_0 || format == ElementType::q4_0;
  switch (path) {
    case QuantPath::automatic:
    case QuantPath::fp32_expand:
    case QuantPath::fp32_tiles: return true;
    case QuantPath::int8_madd: return (blocks && GATEDLM_KSET_AVX2) || kquant_int8_format(format);
    case QuantPath::int8_vnni: return (blocks || kquant_vnni_format(format)) && int8_vnni_runnable();
    case QuantPath::int8_vnni_emulated: return kquant_vnni_format(format);
    case QuantPath::bf16_dot: return format == ElementType::bf16 && cpu_has_bf16_dot();
  }
  return false;
}

// The weight-tile kernels of the AVX-512 VNNI region, and the vpmaddubsw ones of Q8_0, Q4_0,
// Q4_K and Q5_K, read the tiled layout (quant_int8_kernels.inc, quant_kint8.cpp).
// (BF16 in tiles of 16 rows, one row per lane with vdpbf16ps's broadcast operand, measured
// 1.3x slower than bf16_rows_pair at 8 rows on Zen 4: not kept. Without AVX512-BF16 the
// fp32 expansion reads BF16 tiles: bf16_tile_rows.)
bool quant_path_reads_tiles(QuantPath path, ElementType format) {
  // vpdpbusd reads Q8_0 and Q4_0 tiles (AVX-512 VNNI) and those of Q4_K, Q5_K, Q6_K, IQ4_XS
  // (either VNNI, quant_kint8_vnni.inc, and its emulation); vpmaddubsw (AVX2) those of Q8_0
  // (stored q + 128 for vpdpbusd: tile_block_dots takes w back, |w| against a with w's sign;
  // with the avx2 set on Zen 5 1.3x its rows kernel, whose lanes each row must sum, at 1 and 8
  // rows; on Zen 3 before the pair layout 1.3x at 8 rows but 5 % slower at 1: bench/RESULTS.md,
  // "Q4_0 / Q8_0 tiles: scales beside their values"), Q4_0 (quant_int8_kernels.inc), Q4_K and
  // Q5_K (quant_kint8.cpp); not IQ4_XS's (as signed values against a with their signs, per lane
  // as its rows kernel does it per row: 33 % slower at 1 row, 9 % faster at 8, bench/RESULTS.md's
  // twenty-seventh session); nor Q6_K's (no faster than its rows kernel at batch 1 on AVX2, and
  // at 8 rows, with the int16 sums of two groups, 1.4x slower: bench/RESULTS.md, "Tried and not
  // kept: Q6_K in tiles on vpmaddubsw"). Q6_K's vpdpbusd tiles came back with each sub-block's
  // sums started from its offset (bench/RESULTS.md, "Q6_K in tiles again"), after a first form
  // lost to the rows kernel on a Xeon ("Eight rows a pass").
  const bool k4 = format == ElementType::q4_k || format == ElementType::q5_k;
  const bool k_vnni = kquant_vnni_format(format);
  switch (path) {
    case QuantPath::fp32_expand: return GATEDLM_KSET_AVX2 && format == ElementType::bf16;  // bf16_tile_rows
    case QuantPath::int8_madd:
      return GATEDLM_KSET_AVX2 && (format == ElementType::q4_0 || format == ElementType::q8_0 || k4);
    case QuantPath::int8_vnni:
      return int8_vnni_runnable() &&
             (k_vnni || (GATEDLM_KSET_AVX512 && (format == ElementType::q8_0 || format == ElementType::q4_0)));
    case QuantPath::int8_vnni_emulated: return k_vnni;
    default: return false;
  }
}

QuantPath quant_best_path(ElementType format, int64_t m) {
  // Measured on Zen 4, thread CPU time, 100M and 1B decode shapes (bench/RESULTS.md,
  // "Quantised products: the kernels"). Qualified: argument-dependent lookup would also
  // find the public functions of the same names.
  const auto runnable = [format](QuantPath path) { return GATEDLM_KSET::quant_path_runnable(path, format); };
  // The K-quants' rows kernels (Q8_K activations) beat fp32 tiles 4x at 1 row and 2x at 8,
  // break even at 64 rows and lose 15 % at 256 (Zen 3, 100M and 1B shapes; on the AVX2 Zen 4
  // of bench/RESULTS.md's twentieth session they win at every m up to 512). The formats kept
  // in tiles take the int8 kernels at every m: fp32 tiles would first copy the blocks out of
  // the tiles (Q4_K at 96 rows, 1B shape: 556 ms against 387 on rows, 310 for int8).
  const auto rows_past_their_range = [&](QuantPath path) {
    return kquant_int8_format(format) && m > 64 && !GATEDLM_KSET::quant_path_reads_tiles(path, format);
  };
  // The int8 kernels beat fp32 tiles through oneDNN at every m measured (8-512 rows:
  // vpdpbusd 2x, vpmaddubsw 1.1-1.4x). On an Intel Xeon with AVX512-VNNI (bench/RESULTS.md,
  // "Decode on an Intel Xeon with AVX-512 VNNI") the vpdpbusd tiles of Q4_K / Q5_K / Q8_0 / Q4_0
  // beat vpmaddubsw 1.3-2.2x at 8 rows and tie or win (to 1.35x) at 1, IQ4_XS's tiles its rows
  // 1.44x and 2.2x. Q6_K's vpdpbusd tiles (avx512 set) beat its rows kernel, vpdpwssd or
  // vpmaddubsw, 1.5x at 8 rows and tie at 1 (Zen 5; bench/RESULTS.md, "Q6_K in tiles again").
  // Q6_K's vpdpbusd tiles on 256-bit halves (the avx2 set on an AVX-VNNI CPU) lost to its
  // vpmaddubsw rows kernel at 1, 4 and 8 rows (1B products, Zen 5 with the avx2 set forced:
  // 5.9-6.8 ms against 4.2-5.5 at 1 row, 15.7-31 against 14-17 at 8; bench/RESULTS.md, "Q6_K
  // in tiles again"): only the avx512 set takes them.
  const bool vnni_pays = GATEDLM_KSET_AVX512 || format != ElementType::q6_k;
  if (vnni_pays && runnable(QuantPath::int8_vnni) && !rows_past_their_range(QuantPath::int8_vnni))
    return QuantPath::int8_vnni;
  if (rows_past_their_range(QuantPath::int8_madd)) return QuantPath::fp32_tiles;
  if (runnable(QuantPath::int8_madd)) return QuantPath::int8_madd;
  // BF16: vdpbf16ps (activations rounded to bf16, as llama.cpp does) at every m: as fast
  // as the fp32 expansion at 1 row of the 100M shape, 1.3x at the 1B shape, 1.5x at 8 rows.
  if (format == ElementType::bf16 && runnable(QuantPath::bf16_dot)) return QuantPath::bf16_dot;
  // Without those instructions, the rows expanded in registers up to a decode batch (8
  // rows; BF16 on AVX2 from its tiles, bf16_tile_rows), fp32 tiles through oneDNN above.
  // At 5-8 rows the tiles (expanded by the calling thread, then one oneDNN call per 1 MiB
  // tile) were 1.6-3.8x slower for BF16 at the 100M shape and 3.7x at 1B on Zen 3
  // (bench/RESULTS.md, "Decode at 1B: where a step goes").
  return m > kQuantDecodeRows ? QuantPath::fp32_tiles : QuantPath::fp32_expand;
}

void quant_matmul_path(QuantPath path, float* C, int64_t ldc, const float* A, int64_t lda, int64_t m,
                       const QuantWeights& W, bool accumulate) {
  if (path == QuantPath::automatic) path = GATEDLM_KSET::quant_best_path(W.format, m);
  const QuantOutput out{C, ldc, accumulate};
  switch (path) {
    case QuantPath::automatic:
    case QuantPath::fp32_expand: return fp32_expand_product(out, A, lda, m, W);
    case QuantPath::fp32_tiles: break;  // quant_matmul.cpp's (it calls matmul<float>)
    case QuantPath::int8_madd:
      if (kquant_int8_format(W.format)) return kquant_int8_product(out, A, lda, m, W, KQuantTileDot::madd);
      return int8_product(false, out, A, lda, m, W);
    case QuantPath::int8_vnni:
      if (kquant_int8_format(W.format)) return kquant_int8_product(out, A, lda, m, W, KQuantTileDot::vnni);
      return int8_product(true, out, A, lda, m, W);
    case QuantPath::int8_vnni_emulated:
      return kquant_int8_product(out, A, lda, m, W, KQuantTileDot::vnni_emulated);
    case QuantPath::bf16_dot:
#if GATEDLM_QUANT_BF16_DOT
      return bf16_dot_product(out, A, lda, m, W);
#else
      break;
#endif
  }
  fail("quantised product: no ", quant_path_name(path), " kernel in this kernel set");
}

void quant_dequantize_rows(float* out, const QuantWeights& W, int64_t row0, int64_t rows) {
  with_format(W.format, [&]<class Format>() {
    const auto* data = static_cast<const unsigned char*>(W.data);
    const int64_t row_bytes = element_row_bytes(W.format, W.cols), count = W.cols / Format::kValues;
#pragma omp parallel for schedule(static) if (rows * W.cols >= (int64_t{1} << 16))
    for (int64_t i = 0; i < rows; ++i) {
      const auto* blocks = reinterpret_cast<const typename Format::Block*>(data + (row0 + i) * row_bytes);
      for (int64_t b = 0; b < count; ++b) Format::expand(blocks[b], out + i * W.cols + b * Format::kValues);
    }
  });
}

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
