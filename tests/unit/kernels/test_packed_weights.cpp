// kernels::PackedWeights: products C = A B^T that read a packed copy of B (oneDNN's
// blocked layout, or the panels of the avx2 set's decode batches) against the naive
// reference, and when copies are made, reused and not used at all (outside the scope,
// outside the region, few or many rows, bf16, transposes).
#include <gtest/gtest.h>
#include <omp.h>

#include "core/error.h"
#include "kernels/matmul.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;
using testing::rel_error;

// A weight region holding two matrices [N, K] with row stride ldb, the second after the first.
struct Region {
  int64_t N, K, ldb;
  std::vector<float> values;
  Region(int64_t n, int64_t k, int64_t ld) : N(n), K(k), ldb(ld), values(random_vector<float>(2 * n * ld, 9)) {}
  const float* matrix(int64_t i) const { return values.data() + i * N * ldb; }
};

// C (+)= A[M, K] B^T through matmul, and the reference's answer, for C with row stride ldc.
double product_error(const float* B, int64_t M, const Region& r, int64_t ldc, bool accumulate) {
  const MatmulShape s{.M = M, .N = r.N, .K = r.K, .trans_b = true, .ldb = r.ldb, .ldc = ldc, .accumulate = accumulate};
  const std::vector<float> A = random_vector<float>(M * r.K, 3);
  std::vector<float> C = random_vector<float>(M * ldc, 4);
  std::vector<float> want = C;
  matmul(C.data(), A.data(), B, s);
  matmul_reference(want.data(), A.data(), B, s);
  return rel_error(C, want);
}

TEST(PackedWeights, ProductsMatchTheReferenceAndPackEachMatrixOnce) {
  for (const int64_t ldb : {int64_t{40}, int64_t{47}})  // packed rows, and a strided matrix
    for (const bool accumulate : {false, true}) {
      const Region r(70, 40, ldb);
      PackedWeights packed(r.values);
      PackedWeightsScope scope(&packed);
      for (const int64_t M : {kSkinnyRows + 1, int64_t{8}, int64_t{13}, kPackedRows}) {
        EXPECT_LT(product_error(r.matrix(0), M, r, r.N, accumulate), 1e-5) << "M " << M << " ldb " << ldb;
        EXPECT_LT(product_error(r.matrix(1), M, r, r.N + 3, accumulate), 1e-5) << "M " << M << " ldb " << ldb;
      }
      // Two matrices, each packed once (oneDNN may pick a second layout for another M:
      // then a second copy, never one per call).
      EXPECT_GE(packed.matrices(), 2);
      EXPECT_LE(packed.matrices(), 8);
      EXPECT_GE(packed.bytes(), 2 * r.N * r.K * static_cast<int64_t>(sizeof(float)));
      const int64_t made = packed.matrices();
      EXPECT_LT(product_error(r.matrix(0), 8, r, r.N, accumulate), 1e-5);
      EXPECT_EQ(packed.matrices(), made);
      packed.clear();
      EXPECT_EQ(packed.matrices(), 0);
      EXPECT_EQ(packed.bytes(), 0);
    }
}

TEST(PackedWeights, OnlyDecodeShapedProductsOfTheRegionInsideTheScopeUseCopies) {
  const Region r(70, 40, 40);
  PackedWeights packed(std::span(r.values).first(static_cast<size_t>(r.N * r.ldb)));  // matrix 0 only
  {
    PackedWeightsScope scope(&packed);
    EXPECT_LT(product_error(r.matrix(1), 8, r, r.N, false), 1e-5);  // outside the region
    EXPECT_LT(product_error(r.matrix(0), kSkinnyRows, r, r.N, false), 1e-5);  // the skinny kernel's rows
    EXPECT_LT(product_error(r.matrix(0), kPackedRows + 1, r, r.N, false), 1e-5);  // a prompt's rows
    {
      MatmulPrecisionScope bf16(true);
      const MatmulShape s{.M = 8, .N = r.N, .K = r.K, .trans_b = true};
      const std::vector<float> A = random_vector<float>(8 * r.K, 3);
      std::vector<float> C(8 * r.N);
      matmul(C.data(), A.data(), r.matrix(0), s);
    }
    {
      PackedWeightsScope none(nullptr);  // scopes nest
      EXPECT_LT(product_error(r.matrix(0), 8, r, r.N, false), 1e-5);
    }
    EXPECT_EQ(packed.matrices(), 0);
  }
  EXPECT_LT(product_error(r.matrix(0), 8, r, r.N, false), 1e-5);  // the scope has ended
  EXPECT_EQ(packed.matrices(), 0);
  PackedWeightsScope scope(&packed);
  EXPECT_LT(product_error(r.matrix(0), 8, r, r.N, false), 1e-5);
  EXPECT_EQ(packed.matrices(), 1);
}

// pack_panels: value j of step k of panel p is B[8p + j, k]; rows past N are zeros.
TEST(PackedWeights, PanelsHoldEightRowsOfBColumnByColumn) {
  const int64_t N = 19, K = 5, ldb = 7;
  const std::vector<float> B = random_vector<float>(N * ldb, 11);
  std::vector<float> panels(static_cast<size_t>(panel_floats(N, K)), NAN);
  ASSERT_EQ(panels.size(), static_cast<size_t>(3 * 8 * K));
  pack_panels(panels.data(), B.data(), ldb, N, K);
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < 8; ++j) {
        const int64_t row = 8 * p + j;
        EXPECT_EQ(panels[(p * K + k) * 8 + j], row < N ? B[row * ldb + k] : 0.0f) << "panel " << p << " k " << k << " j " << j;
      }
}

// The panel kernel against the reference for every row count it takes, a last panel of 6
// real columns, row strides, accumulation, and the same bits at 1 and 3 threads; sets without
// it refuse by name.
TEST(PackedWeights, PanelProductsMatchTheReference) {
  const int64_t N = 70, K = 45, lda = 48, ldc = 73;
  const std::vector<float> B = random_vector<float>(N * K, 12);
  std::vector<float> panels(static_cast<size_t>(panel_floats(N, K)));
  pack_panels(panels.data(), B.data(), K, N, K);
  if (!panel_matmul_pays()) {
    std::vector<float> C(static_cast<size_t>(8 * ldc));
    const std::vector<float> A = random_vector<float>(8 * lda, 13);
    EXPECT_THROW(panel_matmul_f32(C.data(), ldc, A.data(), lda, panels.data(), 8, N, K, false), Error);
    GTEST_SKIP() << "no panel kernel in this kernel set";
  }
  const int threads = omp_get_max_threads();
  for (int64_t M = kSkinnyRows + 1; M <= kPanelRows; ++M)
    for (const bool accumulate : {false, true}) {
      const std::vector<float> A = random_vector<float>(M * lda, 13 + M);
      const std::vector<float> C0 = random_vector<float>(M * ldc, 14);
      std::vector<float> want = C0, one = C0, three = C0;
      const MatmulShape s{.M = M, .N = N, .K = K, .trans_b = true, .lda = lda, .ldb = K, .ldc = ldc, .accumulate = accumulate};
      matmul_reference(want.data(), A.data(), B.data(), s);
      omp_set_num_threads(1);
      panel_matmul_f32(one.data(), ldc, A.data(), lda, panels.data(), M, N, K, accumulate);
      omp_set_num_threads(3);
      panel_matmul_f32(three.data(), ldc, A.data(), lda, panels.data(), M, N, K, accumulate);
      omp_set_num_threads(threads);
      EXPECT_LT(rel_error(one, want), 1e-5) << "M " << M << " accumulate " << accumulate;
      EXPECT_EQ(one, three) << "M " << M;
      for (int64_t m = 0; m < M; ++m)  // the columns past N untouched
        for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(one[m * ldc + j], C0[m * ldc + j]) << "row " << m << " col " << j;
    }
}

}  // namespace
}  // namespace gatedlm::kernels
