#pragma once
// One activation row's 16 lanes against a tile of 16 weight rows (quant_tiles.h), a lane per
// weight row: its int32 sums of a super-block (TileInts: the dots, the minimums' offsets) and
// its fp32 sums (TileFloats). One 512-bit vector in the avx512 set, two 256-bit halves (rows
// 0-7, 8-15) in the avx2 set: the work around quant_kint8.cpp's tile dots at 8 activation rows
// (the offsets, the scaling into fp32, the stores) done on halves took 60 % as long as the
// vpdpbusd dots themselves (100M shape, Q4_K, Zen 5, perf: 37 % of the product's samples;
// 48 % as long on whole vectors). The avx512 set's madd dots (CPUs without VNNI) add their
// 256-bit halves into the vector, an insert each: a rare path, not timed.
// The same operations lane by lane at either width: the same bits. A per-set header, like
// int8_lanes.h: include it after kernel_set_begin.h, in sets with AVX2 only.
#ifndef GATEDLM_KSET
#error "tile_lanes.h belongs to a kernel set: include kernel_set_begin.h first"
#endif
#if !GATEDLM_KSET_AVX2
#error "tile_lanes.h needs AVX2: include it in the avx2 and avx512 sets only"
#endif

#include <cstdint>

namespace gatedlm::kernels::GATEDLM_KSET {

#if GATEDLM_KSET_AVX512
#pragma GCC diagnostic push  // GCC 12's 512-bit intrinsics read _mm512_undefined_*() and warn
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
struct TileInts {
  __m512i lanes;
  static TileInts zero() { return {_mm512_setzero_si512()}; }
  static TileInts of(__m256i low, __m256i high) { return {_mm512_inserti64x4(_mm512_zextsi256_si512(low), high, 1)}; }
  void add(TileInts v) { lanes = _mm512_add_epi32(lanes, v.lanes); }
  // Half h's lanes (rows 8h..8h+7) += v.
  void add_half(int h, __m256i v) {
    const __m256i none = _mm256_setzero_si256();
    add(h == 0 ? of(v, none) : of(none, v));
  }
  // Each lane's two int16 times pair's (low, high) int16, summed (vpmaddwd), added.
  void add_pair_products(TileInts pairs, int32_t pair) {
    lanes = _mm512_add_epi32(lanes, _mm512_madd_epi16(pairs.lanes, _mm512_set1_epi32(pair)));
  }
  TileInts times_minus(int shift) const { return {_mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(lanes, shift))}; }
};

struct TileFloats {
  __m512 lanes;
  static TileFloats zero() { return {_mm512_setzero_ps()}; }
  static TileFloats of(__m256 low, __m256 high) {
    return {_mm512_castsi512_ps(TileInts::of(_mm256_castps_si256(low), _mm256_castps_si256(high)).lanes)};
  }
  static TileFloats load(const float* p) { return {_mm512_loadu_ps(p)}; }
  void store(float* p) const { _mm512_storeu_ps(p, lanes); }
  TileFloats times(float s) const { return {_mm512_mul_ps(lanes, _mm512_set1_ps(s))}; }
  void add(TileFloats v) { lanes = _mm512_add_ps(lanes, v.lanes); }
  // lanes += v * scale, lanes -= v * scale (v converted to fp32; one rounding, fused).
  void add_product(TileInts v, TileFloats scale) { lanes = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v.lanes), scale.lanes, lanes); }
  void subtract_product(TileInts v, TileFloats scale) {
    lanes = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(v.lanes), scale.lanes, lanes);
  }
};
#pragma GCC diagnostic pop
#else
struct TileInts {
  __m256i half[2];
  static TileInts zero() { return {{_mm256_setzero_si256(), _mm256_setzero_si256()}}; }
  static TileInts of(__m256i low, __m256i high) { return {{low, high}}; }
  void add(TileInts v) {
    for (int h = 0; h < 2; ++h) add_half(h, v.half[h]);
  }
  void add_half(int h, __m256i v) { half[h] = _mm256_add_epi32(half[h], v); }
  void add_pair_products(TileInts pairs, int32_t pair) {
    for (int h = 0; h < 2; ++h) add_half(h, _mm256_madd_epi16(pairs.half[h], _mm256_set1_epi32(pair)));
  }
  TileInts times_minus(int shift) const {
    TileInts t;
    for (int h = 0; h < 2; ++h) t.half[h] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(half[h], shift));
    return t;
  }
};

struct TileFloats {
  __m256 half[2];
  static TileFloats zero() { return {{_mm256_setzero_ps(), _mm256_setzero_ps()}}; }
  static TileFloats of(__m256 low, __m256 high) { return {{low, high}}; }
  static TileFloats load(const float* p) { return {{_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}}; }
  void store(float* p) const {
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(p + 8 * h, half[h]);
  }
  TileFloats times(float s) const { return {{_mm256_mul_ps(half[0], _mm256_set1_ps(s)), _mm256_mul_ps(half[1], _mm256_set1_ps(s))}}; }
  void add(TileFloats v) {
    for (int h = 0; h < 2; ++h) half[h] = _mm256_add_ps(half[h], v.half[h]);
  }
  void add_product(TileInts v, TileFloats scale) {
    for (int h = 0; h < 2; ++h) half[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v.half[h]), scale.half[h], half[h]);
  }
  void subtract_product(TileInts v, TileFloats scale) {
    for (int h = 0; h < 2; ++h) half[h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(v.half[h]), scale.half[h], half[h]);
  }
};
#endif

}  // namespace gatedlm::kernels::GATEDLM_KSET
