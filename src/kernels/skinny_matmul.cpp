// C[M,N] (+)= A[M,K] B[N,K]^T for a few rows of A (M <= 4): the products of
// decoding, where M is the batch and B a weight matrix stored [out, in]. Such a product
// is bound by reading B once from memory; oneDNN's general kernels reach about half of
// that bandwidth on these shapes (bench/RESULTS.md, issue 13), so B is streamed here row
// by row, each of its rows multiplied against every row of A while it sits in L1.
// For 5-8 rows on AVX2 (panel_matmul_pays), B comes as a copy in panels of 8 of its rows
// (matmul.h, PackedWeights): 8 weights one load, each row of A an accumulator of 8 outputs.
#include <omp.h>

#include "kernels/kernel_sets.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/float_control.h"
#include "kernels/matmul.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/fast_math.h"

namespace gatedlm::kernels::GATEDLM_KSET {

namespace {

// dots[m] = <a_m, b> for the M rows a_m of A (row stride lda) and one row b of B, each of
// length K. (Tiles of several rows of B, so that a vector of A meets more than one of B,
// measured slower on Zen 4 for M <= 4: the product stays bound by streaming B. At 8 rows,
// this kernel for 8 rows in one pass over B, with and without pairs of rows of B, decoded
// 222-233 tokens/s on the 100M model against oneDNN's 266: bench/RESULTS.md, issue 13.)
template <int M>
inline __attribute__((always_inline)) void dot_rows(float* dots, const float* A, int64_t lda, const float* b,
                                                    int64_t K) {
#if GATEDLM_KSET_AVX512
  // U independent sums per row, so that one or two rows still keep several FMAs in flight.
  constexpr int U = M == 1 ? 4 : (M == 2 ? 2 : 1);
  __m512 acc[M][U];
  for (int m = 0; m < M; ++m)
    for (int u = 0; u < U; ++u) acc[m][u] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 * U <= K; k += 16 * U)
    for (int u = 0; u < U; ++u) {
      const __m512 w = _mm512_loadu_ps(b + k + 16 * u);
      for (int m = 0; m < M; ++m) acc[m][u] = _mm512_fmadd_ps(_mm512_loadu_ps(A + m * lda + k + 16 * u), w, acc[m][u]);
    }
  for (; k < K; k += 16) {
    const __mmask16 lanes = tail_mask(K - k);
    const __m512 w = _mm512_maskz_loadu_ps(lanes, b + k);
    for (int m = 0; m < M; ++m)
      acc[m][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, A + m * lda + k), w, acc[m][0]);
  }
  for (int m = 0; m < M; ++m) {
    for (int u = 1; u < U; ++u) acc[m][0] = _mm512_add_ps(acc[m][0], acc[m][u]);
    dots[m] = halving_sum16(acc[m][0]);
  }
#elif GATEDLM_KSET_AVX2
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 w = _mm256_loadu_ps(b + k);
    for (int m = 0; m < M; ++m) acc[m] = _mm256_fmadd_ps(_mm256_loadu_ps(A + m * lda + k), w, acc[m]);
  }
  for (int m = 0; m < M; ++m) {
    float sum = sum8(acc[m]);
    for (int64_t t = k; t < K; ++t) sum += A[m * lda + t] * b[t];
    dots[m] = sum;
  }
#else
  // Eight partial sums per row: independent chains the compiler can keep in registers.
  for (int m = 0; m < M; ++m) {
    const float* a = A + m * lda;
    float part[8] = {};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8)
      for (int j = 0; j < 8; ++j) part[j] += a[k + j] * b[k + j];
    float sum = 0.0f;
    for (float v : part) sum += v;
    for (; k < K; ++k) sum += a[k] * b[k];
    dots[m] = sum;
  }
#endif
}

template <int M>
void skinny_rows(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t N,
                 int64_t K, bool accumulate) {
  // Static chunks of output columns: each thread streams one contiguous block of B, in the
  // caller's floating-point mode (float_control.h), as run_tiled's tiles.
  const FloatControl mode = float_control();
#pragma omp parallel
  {
    const FloatControlScope callers_mode(mode);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      float dots[M];
      dot_rows<M>(dots, A, lda, B + n * ldb, K);
      for (int m = 0; m < M; ++m) C[m * ldc + n] = accumulate ? C[m * ldc + n] + dots[m] : dots[m];
    }
  }
}

#if GATEDLM_KSET_AVX2 && !GATEDLM_KSET_AVX512
// C[m, n0..n0+7] (+)= A[m, :] times the panel's 8 rows of B, for M rows of A given k by k
// (a_by_k[k * 8 + m]): each step of k loads the panel's 8 weights once and multiplies them by
// every row's a[m, k] (a broadcast from one line), one accumulator a row. M = 5-8 keeps 5-8
// FMA chains in flight (2 pipes x 4 cycles of latency want 8). `columns`: how many of the
// panel's 8 are real (the last panel's may be fewer).
template <int M>
void panel_rows(float* C, int64_t ldc, const float* a_by_k, const float* panel, int64_t K, int64_t columns,
                bool accumulate) {
  __m256 acc[M];
  for (__m256& v : acc) v = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    if (k % 2 == 0) __builtin_prefetch(panel + (k + 64) * kPanelColumns, 0, 0);
    const __m256 w = _mm256_loadu_ps(panel + k * kPanelColumns);
    const float* a = a_by_k + k * kPanelRows;
    for (int m = 0; m < M; ++m) acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(a[m]), w, acc[m]);
  }
  // Into C, the last panel's columns under a mask. (GCC 12 at -O3 keeps acc in memory, and
  // stores it at every step of k, when the broadcast is _mm256_broadcast_ss(a + m).)
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(columns)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int m = 0; m < M; ++m) {
    float* c = C + m * ldc;
    const __m256 sum = accumulate ? _mm256_add_ps(_mm256_maskload_ps(c, lanes), acc[m]) : acc[m];
    _mm256_maskstore_ps(c, lanes, sum);
  }
}

template <int M>
void panel_product(float* C, int64_t ldc, const float* A, int64_t lda, const float* panels, int64_t N, int64_t K,
                   bool accumulate) {
  // A k by k, kPanelRows floats a step (rows past M unused), by the calling thread.
  thread_local std::vector<float> by_k;
  by_k.resize(static_cast<size_t>(K * kPanelRows));
  float* a_by_k = by_k.data();  // a plain pointer: in the region a thread_local name is each thread's own
  for (int m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) a_by_k[k * kPanelRows + m] = A[m * lda + k];
  const int64_t count = (N + kPanelColumns - 1) / kPanelColumns;
  // Static shares of whole panels: each thread streams one contiguous block of the copy, in the
  // caller's floating-point mode.
  const FloatControl mode = float_control();
#pragma omp parallel
  {
    const FloatControlScope callers_mode(mode);
#pragma omp for schedule(static)
    for (int64_t p = 0; p < count; ++p)
      panel_rows<M>(C + p * kPanelColumns, ldc, a_by_k, panels + p * K * kPanelColumns, K,
                    std::min<int64_t>(kPanelColumns, N - p * kPanelColumns), accumulate);
  }
}
#endif

}  // namespace

bool panel_matmul_pays() { return GATEDLM_KSET_AVX2 && !GATEDLM_KSET_AVX512; }

void panel_matmul_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* panels, int64_t M, int64_t N,
                      int64_t K, bool accumulate) {
#if GATEDLM_KSET_AVX2 && !GATEDLM_KSET_AVX512
  switch (M) {
    case 5: return panel_product<5>(C, ldc, A, lda, panels, N, K, accumulate);
    case 6: return panel_product<6>(C, ldc, A, lda, panels, N, K, accumulate);
    case 7: return panel_product<7>(C, ldc, A, lda, panels, N, K, accumulate);
    case 8: return panel_product<8>(C, ldc, A, lda, panels, N, K, accumulate);
  }
#endif
  fail("panel_matmul_f32: ", M, " rows; the panel kernel is the avx2 set's, for 5-8 rows (panel_matmul_pays)");
}

void skinny_matmul_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                       int64_t N, int64_t K, bool accumulate) {
  switch (M) {
    case 1: return skinny_rows<1>(C, ldc, A, lda, B, ldb, N, K, accumulate);
    case 2: return skinny_rows<2>(C, ldc, A, lda, B, ldb, N, K, accumulate);
    case 3: return skinny_rows<3>(C, ldc, A, lda, B, ldb, N, K, accumulate);
    case 4: return skinny_rows<4>(C, ldc, A, lda, B, ldb, N, K, accumulate);
    default:  // more rows: four at a time
      for (int64_t m = 0; m < M; m += 4)
        skinny_matmul_f32(C + m * ldc, ldc, A + m * lda, lda, B, ldb, std::min<int64_t>(4, M - m), N, K, accumulate);
  }
}

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
