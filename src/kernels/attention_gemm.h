#pragma once
// The small matrix products inside the float attention kernels (attention_fast.cpp):
//
//   C[m, n] = (acc ? C[m, n] * cs[n] : 0) + sum_{k} A[m * ars + k * aks] * B[k * ldb + n]
//
// for m < M, n < N, k in a range that may be trimmed per block of rows (causal tiles:
// see TileTrim). A is read one scalar at a time (broadcast), so any of its layouts works
// (row-major, transposed, a column of a strided array); B and C rows are contiguous in n.
// With AVX-512 the product runs in register-blocked micro-kernels of up to 6 rows x 64
// columns (24 zmm accumulators), C loaded and stored once per call; without it a portable
// loop nest does the same arithmetic.
#include <algorithm>
#include <cstdint>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace gatedlm::kernels::attn {

// Per block of rows [m0, m0 + r): the n range starts at n_lo = m0 + n_lo_off rounded down
// to a multiple of 16 (columns before it are left unwritten), and the k range is
// [m0 + k_lo_off, m0 + r + k_hi_off). kNone leaves that bound alone. Used on the diagonal
// tiles of causal attention, where these entries are known to be zero.
constexpr int64_t kNone = INT64_MIN / 4;
struct TileTrim {
  int64_t n_lo_off = kNone, k_lo_off = kNone, k_hi_off = kNone;
};

#if defined(__AVX512F__)

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }

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
  constexpr int64_t kRows = 6, kCols = 64;
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    const int64_t r = std::min(kRows, M - m0);
    const int64_t k_lo = trim.k_lo_off == kNone ? 0 : std::clamp<int64_t>(m0 + trim.k_lo_off, 0, K);
    const int64_t k_hi = trim.k_hi_off == kNone ? K : std::clamp<int64_t>(m0 + r + trim.k_hi_off, k_lo, K);
    const int64_t n_lo =
        trim.n_lo_off == kNone ? 0 : std::clamp<int64_t>((m0 + trim.n_lo_off) / 16 * 16, 0, N);
    const float* Am = A + m0 * ars;
    float* Cm = C + m0 * ldc;
#if defined(__AVX512F__)
    for (int64_t n0 = n_lo; n0 < N; n0 += kCols) {
      const int64_t width = std::min(kCols, N - n0);
      const int nv = static_cast<int>((width + 15) / 16);
      pick_kernel(static_cast<int>(r), nv)(k_lo, k_hi, Am, ars, aks, B + n0, ldb, Cm + n0, ldc, acc,
                                           cs ? cs + n0 : nullptr, tail_mask(width - 16 * (nv - 1)));
    }
#else
    for (int64_t i = 0; i < r; ++i) {
      float* c = Cm + i * ldc;
      if (!acc) {
        for (int64_t n = n_lo; n < N; ++n) c[n] = 0.0f;
      } else if (cs) {
        for (int64_t n = n_lo; n < N; ++n) c[n] *= cs[n];
      }
      const float* a = Am + i * ars;
      for (int64_t k = k_lo; k < k_hi; ++k) {
        const float w = a[k * aks];
        const float* b = B + k * ldb;
#pragma omp simd
        for (int64_t n = n_lo; n < N; ++n) c[n] += w * b[n];
      }
    }
#endif
  }
}

}  // namespace gatedlm::kernels::attn
