#pragma once
// The small matrix products inside the float attention kernels (attention_fast.cpp):
//
//   C[m, n] = (acc ? C[m, n] * cs[n] : 0) + sum_{k} A[m * ars + k * aks] * B[k * ldb + n]
//
// for m < M, n < N, k in a range that may be trimmed per block of rows (causal tiles:
// see TileTrim). A is read one scalar at a time (broadcast), so any of its layouts works
// (row-major, transposed, a column of a strided array); B and C rows are contiguous in n.
// With AVX-512 the product runs in register-blocked micro-kernels of up to 6 rows x 64
// columns (24 zmm accumulators), with AVX2 of up to 6 rows x 16 columns (12 of the 16 ymm
// registers), C loaded and stored once per call; otherwise a portable loop nest does the
// same arithmetic.
//
// A per-set header, like fast_math.h (include both after kernel_set_begin.h).
#ifndef GATEDLM_KSET
#error "attention_gemm.h belongs to a kernel set: include kernel_set_begin.h first"
#endif
#include "kernels/fast_math.h"

namespace gatedlm::kernels::GATEDLM_KSET::attn {

// Per block of rows [m0, m0 + r): the n range is [n_lo, n_hi) with n_lo = m0 + n_lo_off
// rounded down and n_hi = m0 + r + n_hi_off rounded up to a multiple of 16 (columns
// outside it are left unwritten), and the k range is
// [m0 + k_lo_off, m0 + r + k_hi_off). kNone leaves that bound alone. Used on the diagonal
// tiles of causal attention, where these entries are known to be zero.
constexpr int64_t kNone = INT64_MIN / 4;
struct TileTrim {
  int64_t n_lo_off = kNone, n_hi_off = kNone, k_lo_off = kNone, k_hi_off = kNone;
};

#if GATEDLM_KSET_AVX512

template <int R, int NV>
inline void micro_kernel(int64_t k_lo, int64_t k_hi, const float* A, int64_t ars, int64_t aks, const float* B,
                         int64_t ldb, float* C, int64_t ldc, bool acc, const float* cs, __mmask16 last) {
  __m512 c[R][NV];
  if (acc) {
    __m512 scl[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      scl[v] = cs ? (v == NV - 1 ? _mm512_maskz_loadu_ps(last, cs + 16 * v) : _mm512_loadu_ps(cs + 16 * v))
                  : _mm512_set1_ps(1.0f);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const float* p = C + r * ldc + 16 * v;
        c[r][v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, p) : _mm512_loadu_ps(p);
        if (cs) c[r][v] = _mm512_mul_ps(c[r][v], scl[v]);
      }
  } else {
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_setzero_ps();
  }
  const float* a = A + k_lo * aks;
  const float* b = B + k_lo * ldb;
  for (int64_t k = k_lo; k < k_hi; ++k, a += aks, b += ldb) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_fmadd_ps(av, bv[v], c[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* p = C + r * ldc + 16 * v;
      if (v == NV - 1)
        _mm512_mask_storeu_ps(p, last, c[r][v]);
      else
        _mm512_storeu_ps(p, c[r][v]);
    }
}

using MicroKernel = void (*)(int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*,
                             int64_t, bool, const float*, __mmask16);

template <int R>
inline MicroKernel pick_nv(int nv) {
  switch (nv) {
    case 1: return &micro_kernel<R, 1>;
    case 2: return &micro_kernel<R, 2>;
    case 3: return &micro_kernel<R, 3>;
    default: return &micro_kernel<R, 4>;
  }
}

#elif GATEDLM_KSET_AVX2

// Lanes below n (1 <= n <= 8) set: the mask of a vector's first n floats.
inline __m256i tail_mask8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int R, int NV>
inline void micro_kernel(int64_t k_lo, int64_t k_hi, const float* A, int64_t ars, int64_t aks, const float* B,
                         int64_t ldb, float* C, int64_t ldc, bool acc, const float* cs, __m256i last) {
  __m256 c[R][NV];
  auto load = [&](const float* p, int v) { return v == NV - 1 ? _mm256_maskload_ps(p, last) : _mm256_loadu_ps(p); };
  if (acc) {
    __m256 scl[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) scl[v] = cs ? load(cs + 8 * v, v) : _mm256_set1_ps(1.0f);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) {
        c[r][v] = load(C + r * ldc + 8 * v, v);
        if (cs) c[r][v] = _mm256_mul_ps(c[r][v], scl[v]);
      }
  } else {
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) c[r][v] = _mm256_setzero_ps();
  }
  const float* a = A + k_lo * aks;
  const float* b = B + k_lo * ldb;
  for (int64_t k = k_lo; k < k_hi; ++k, a += aks, b += ldb) {
    __m256 bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = load(b + 8 * v, v);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * ars);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) c[r][v] = _mm256_fmadd_ps(av, bv[v], c[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* p = C + r * ldc + 8 * v;
      if (v == NV - 1)
        _mm256_maskstore_ps(p, last, c[r][v]);
      else
        _mm256_storeu_ps(p, c[r][v]);
    }
}

using MicroKernel = void (*)(int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*,
                             int64_t, bool, const float*, __m256i);

template <int R>
inline MicroKernel pick_nv(int nv) {
  return nv == 1 ? &micro_kernel<R, 1> : &micro_kernel<R, 2>;
}

#endif

#if GATEDLM_KSET_AVX512 || GATEDLM_KSET_AVX2
inline MicroKernel pick_kernel(int r, int nv) {
  switch (r) {
    case 1: return pick_nv<1>(nv);
    case 2: return pick_nv<2>(nv);
    case 3: return pick_nv<3>(nv);
    case 4: return pick_nv<4>(nv);
    case 5: return pick_nv<5>(nv);
    default: return pick_nv<6>(nv);
  }
}

#endif

inline void tile_gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B,
                      int64_t ldb, float* C, int64_t ldc, bool acc, const float* cs = nullptr,
                      const TileTrim& trim = {}) {
  constexpr int64_t kRows = 6;
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    const int64_t r = std::min(kRows, M - m0);
    const int64_t k_lo = trim.k_lo_off == kNone ? 0 : std::clamp<int64_t>(m0 + trim.k_lo_off, 0, K);
    const int64_t k_hi = trim.k_hi_off == kNone ? K : std::clamp<int64_t>(m0 + r + trim.k_hi_off, k_lo, K);
    const int64_t n_lo =
        trim.n_lo_off == kNone ? 0 : std::clamp<int64_t>((m0 + trim.n_lo_off) / 16 * 16, 0, N);
    const int64_t n_hi =
        trim.n_hi_off == kNone ? N : std::clamp<int64_t>((m0 + r + trim.n_hi_off + 15) / 16 * 16, n_lo, N);
    const float* Am = A + m0 * ars;
    float* Cm = C + m0 * ldc;
#if GATEDLM_KSET_AVX512
    constexpr int64_t kCols = 64;
    for (int64_t n0 = n_lo; n0 < n_hi; n0 += kCols) {
      const int64_t width = std::min(kCols, n_hi - n0);
      const int nv = static_cast<int>((width + 15) / 16);
      pick_kernel(static_cast<int>(r), nv)(k_lo, k_hi, Am, ars, aks, B + n0, ldb, Cm + n0, ldc, acc,
                                           cs ? cs + n0 : nullptr, tail_mask(width - 16 * (nv - 1)));
    }
#elif GATEDLM_KSET_AVX2
    constexpr int64_t kCols = 16;
    for (int64_t n0 = n_lo; n0 < n_hi; n0 += kCols) {
      const int64_t width = std::min(kCols, n_hi - n0);
      const int nv = static_cast<int>((width + 7) / 8);
      pick_kernel(static_cast<int>(r), nv)(k_lo, k_hi, Am, ars, aks, B + n0, ldb, Cm + n0, ldc, acc,
                                           cs ? cs + n0 : nullptr, tail_mask8(width - 8 * (nv - 1)));
    }
#else
    for (int64_t i = 0; i < r; ++i) {
      float* c = Cm + i * ldc;
      if (!acc) {
        for (int64_t n = n_lo; n < n_hi; ++n) c[n] = 0.0f;
      } else if (cs) {
        for (int64_t n = n_lo; n < n_hi; ++n) c[n] *= cs[n];
      }
      const float* a = Am + i * ars;
      for (int64_t k = k_lo; k < k_hi; ++k) {
        const float w = a[k * aks];
        const float* b = B + k * ldb;
#pragma omp simd
        for (int64_t n = n_lo; n < n_hi; ++n) c[n] += w * b[n];
      }
    }
#endif
  }
}

// dst[c * ldd + r] = src[r * lds + c] * scale for r < rows, c < cols (other entries of dst
// untouched). With AVX-512: 16 x 16 blocks transposed in registers, edges masked.
inline void transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols,
                      float scale = 1.0f) {
#if GATEDLM_KSET_AVX512
  const __m512 sc = _mm512_set1_ps(scale);
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t nr = std::min<int64_t>(16, rows - r0);
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int64_t nc = std::min<int64_t>(16, cols - c0);
      const __mmask16 cm = tail_mask(nc), rm = tail_mask(nr);
      __m512 a[16], t[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        a[i] = i < nr ? _mm512_maskz_loadu_ps(cm, src + (r0 + i) * lds + c0) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]);
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {  // rows 4i .. 4i + 3: columns 4L + 0..3 of each 128-bit lane L
        a[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        a[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        a[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        a[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)  // rows 8h .. 8h + 7
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          t[8 * h + i] = _mm512_shuffle_f32x4(a[8 * h + i], a[8 * h + 4 + i], 0x88);
          t[8 * h + 4 + i] = _mm512_shuffle_f32x4(a[8 * h + i], a[8 * h + 4 + i], 0xDD);
        }
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {  // column i and column i + 8
        a[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        a[i + 8] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
      }
      // a[i] now holds column c0 + i of rows r0 .. r0 + 15.
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        if (i < nc) _mm512_mask_storeu_ps(dst + (c0 + i) * ldd + r0, rm, _mm512_mul_ps(a[i], sc));
    }
  }
#else
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c] * scale;
#endif
}

}  // namespace gatedlm::kernels::GATEDLM_KSET::attn
