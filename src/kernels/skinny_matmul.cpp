// C[M,N] (+)= A[M,K] B[N,K]^T for a few rows of A (M <= 4): the products of
// decoding, where M is the batch and B a weight matrix stored [out, in]. Such a product
// is bound by reading B once from memory; oneDNN's general kernels reach about half of
// that bandwidth on these shapes (bench/RESULTS.md, issue 13), so B is streamed here row
// by row, each of its rows multiplied against every row of A while it sits in L1.
#include <omp.h>

#include "kernels/kernel_sets.h"

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
  // Static chunks of output columns: each thread streams one contiguous block of B.
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float dots[M];
    dot_rows<M>(dots, A, lda, B + n * ldb, K);
    for (int m = 0; m < M; ++m) C[m * ldc + n] = accumulate ? C[m * ldc + n] + dots[m] : dots[m];
  }
}

}  // namespace

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
