#pragma once
// Branch-free math that compilers vectorise inside loops (libm's expf is a call per
// element). exp_approx: relative error below 2e-7 on [-87, 88]; exp(-inf) is not handled
// (callers mask those entries themselves).
//
// A per-set header: included by kernel sources after kernel_set_begin.h (which brings its
// standard headers), so each kernel set gets its own copy in its own namespace.
#ifndef GATEDLM_KSET
#error "fast_math.h belongs to a kernel set: include kernel_set_begin.h first"
#endif

namespace gatedlm::kernels::GATEDLM_KSET {

inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2].
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = std::fma(n, -1.428606765330187e-06f, std::fma(n, -0.693145751953125f, x));  // exact first
  // Taylor series to r^7/7!: truncation below 2e-8 relative on the interval.
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

#if GATEDLM_KSET_AVX512
// exp_approx on 16 lanes: the same range reduction and polynomial, so the same error
// bound (results may differ from the scalar version in the last bit). GCC does not vectorise the scalar one inside every loop (the
// float -> int conversion of the exponent defeats it in some nests), so the hot loops
// call this one directly when the build targets AVX-512.
inline __m512 exp_approx16(__m512 x) {
  // The masked forms with an explicit pass-through: GCC 12 warns (wrongly) that the plain
  // ones read an uninitialised register.
  const __mmask16 all = 0xffff;
  x = _mm512_mask_max_ps(x, all, x, _mm512_set1_ps(-87.0f));
  x = _mm512_mask_min_ps(x, all, x, _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_mask_roundscale_ps(x, all,
                                             _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                             _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693145751953125f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i biased = _mm512_add_epi32(_mm512_mask_cvttps_epi32(_mm512_setzero_si512(), all, n), _mm512_set1_epi32(127));
  const __m512i bits = _mm512_mask_slli_epi32(biased, all, biased, 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

// The first min(n, 16) lanes (n >= 0): the mask of a loop's last, partial vector.
inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }

// The sum of 16 lanes by halving, in registers (sum16 goes through memory: too slow for a
// sum per output, as in skinny_matmul.cpp, attention_decode_fast.cpp and quant_decode.cpp).
inline float halving_sum16(__m512 v) {
  // Within 512 bits throughout, masked forms with a pass-through (GCC 12 warns, wrongly,
  // of an uninitialised value in the plain shuffles and in the 256- and 128-bit
  // extracts): swap and add halves, quarters, pairs, neighbours.
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, 0xFFFF, v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, 0xFFFF, v, v, 0xB1));
  v = _mm512_add_ps(v, _mm512_shuffle_ps(v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_shuffle_ps(v, v, 0xB1));
  return _mm512_cvtss_f32(v);
}

// Horizontal sum and max of 16 lanes (GCC 12's _mm512_reduce_* trip the same warning).
inline float sum16(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float s = 0.0f;
  for (float x : t) s += x;
  return s;
}
inline float max16(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float m = t[0];
  for (float x : t) m = std::max(m, x);
  return m;
}
#endif

#if GATEDLM_KSET_AVX2
// exp_approx on 8 lanes, for the AVX2 set: the same reduction and polynomial as above.
inline __m256 exp_approx8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693145751953125f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// Horizontal sum of 8 lanes.
inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#endif

}  // namespace gatedlm::kernels::GATEDLM_KSET
