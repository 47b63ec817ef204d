#pragma once
// Horizontal work on AVX2 (and AVX-512) vectors that the int8 products share (quant_int8.cpp,
// quant_kint8.cpp), and the broadcast of their tile kernels. A per-set header, like
// fast_math.h: include it after kernel_set_begin.h, in sets with AVX2 only.
#ifndef GATEDLM_KSET
#error "int8_lanes.h belongs to a kernel set: include kernel_set_begin.h first"
#endif
#if !GATEDLM_KSET_AVX2
#error "int8_lanes.h needs AVX2: include it in the avx2 and avx512 sets only"
#endif

#include <cstring>

namespace gatedlm::kernels::GATEDLM_KSET {

inline float max8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
inline float add8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// Lane r = the sum of v[r]'s 8 lanes, for 8 vectors (a transpose by unpacking, one add per step).
inline __m256i lane_sums8(const __m256i* v) {
  __m256i pairs[4], quads[2];
  for (int i = 0; i < 4; ++i)  // [a0+a2, b0+b2, a1+a3, b1+b3] per 128-bit half, a = v[2i], b = v[2i+1]
    pairs[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i)  // [sum a, sum b, sum c, sum d] per half
    quads[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(pairs[2 * i], pairs[2 * i + 1]),
                                _mm256_unpackhi_epi64(pairs[2 * i], pairs[2 * i + 1]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(quads[0], quads[1], 0x20),
                          _mm256_permute2x128_si256(quads[0], quads[1], 0x31));
}

// The sum of the 8 int32 lanes.
inline int32_t add8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 4 int8 values (a[0..3]) in every 32-bit lane: the broadcast operand of the tile kernels,
// where one load of activations serves a weight row per lane.
inline __m256i broadcast4(const int8_t* a) {
  int32_t four;
  std::memcpy(&four, a, 4);
  return _mm256_set1_epi32(four);
}

// An accumulator updated in a loop kept as one running sum in one register. Integer adds
// are associative, so GCC's reassociation is free to regroup an unrolled loop's sums into
// wide trees: it then computes every product of the loop first and spills them all to the
// stack (perf: Q4_K's tile kernel at 8 rows held 64 products live, a third of its
// instructions stack traffic). The empty asm says the value changed here, so each update
// must be done before the next one starts. (Measured: that kernel 35 -> 26 ms per step.)
inline void keep_running(__m256i& sum) { __asm__("" : "+x"(sum)); }
#if GATEDLM_KSET_AVX512
inline void keep_running(__m512i& sum) { __asm__("" : "+v"(sum)); }

// Lane r = the sum of v[r]'s 16 lanes, for 8 512-bit vectors: lane_sums8's transpose within
// each 128-bit lane, then the four 128-bit lanes added: 25 instructions where folding each
// vector to 256 bits first and lane_sums8 take 37.
inline __m256i lane_sums8(const __m512i* v) {
  __m512i pairs[4], quads[2];
  for (int i = 0; i < 4; ++i)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3], a = v[2i], b = v[2i+1]
    pairs[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i)  // per 128-bit lane k: that lane's sums of v[4i..4i+3]
    quads[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(pairs[2 * i], pairs[2 * i + 1]),
                                _mm512_unpackhi_epi64(pairs[2 * i], pairs[2 * i + 1]));
  // 128-bit lanes [q0 k0 + k2, q0 k1 + k3, q1 k0 + k2, q1 k1 + k3], then lanes 0 + 1 and 2 + 3.
  const __m512i halves = _mm512_add_epi32(_mm512_shuffle_i32x4(quads[0], quads[1], 0x44),
                                          _mm512_shuffle_i32x4(quads[0], quads[1], 0xEE));
  const __m256i low = _mm512_castsi512_si256(halves), high = _mm512_extracti64x4_epi64(halves, 1);
  return _mm256_add_epi32(_mm256_permute2x128_si256(low, high, 0x20), _mm256_permute2x128_si256(low, high, 0x31));
}
#endif

}  // namespace gatedlm::kernels::GATEDLM_KSET
