// Subnormals flushed on a thread for a scope, and carried into the threads of a batched
// product (kernels/float_control.h).
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "kernels/float_control.h"
#include "kernels/matmul.h"

namespace gatedlm::kernels {
namespace {

constexpr float kSubnormal = 1e-40f;  // below FLT_MIN (1.2e-38), above the smallest subnormal (1.4e-45)

// A product through the FPU's current mode (volatile: not folded by the compiler).
float times_one(float x) {
  volatile float value = x, one = 1.0f;
  return value * one;
}

TEST(FloatControlTest, SubnormalsAreFlushedInsideTheScopeOnly) {
  if (kFlushSubnormalBits == 0) GTEST_SKIP() << "no flush-to-zero control on this architecture";
  const FloatControl before = float_control();
  ASSERT_EQ(times_one(kSubnormal), kSubnormal);
  {
    const SubnormalsFlushed flushed;
    EXPECT_EQ(times_one(kSubnormal), 0.0f);
    EXPECT_EQ(times_one(2e-38f), 2e-38f);  // normal values are untouched
    {
      const SubnormalsFlushed again;  // nested: the inner end keeps the outer mode
    }
    EXPECT_EQ(times_one(kSubnormal), 0.0f);
  }
  EXPECT_EQ(times_one(kSubnormal), kSubnormal);
  EXPECT_EQ(float_control(), before);  // the mode, not the sticky status flags
}

// C = A B over 64 items of subnormal A (whose sums of 4 terms stay subnormal): with the caller
// flushing, every item is 0, including those that OpenMP's workers computed; without, none is.
TEST(FloatControlTest, BatchedProductTilesRunInTheCallersMode) {
  if (kFlushSubnormalBits == 0) GTEST_SKIP() << "no flush-to-zero control on this architecture";
  const int64_t items = 64, M = 8, N = 8, K = 4;
  const std::vector<float> A(items * M * K, kSubnormal), B(items * K * N, 1.0f);
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  auto product = [&] {
    std::vector<float> C(items * M * N, -1.0f);
    batched_matmul(C.data(), A.data(), B.data(), MatmulShape{.M = M, .N = N, .K = K},
                   BatchStrides{.batch = items, .a = M * K, .b = K * N, .c = M * N});
    return C;
  };
  std::vector<float> flushed_result;
  {
    const SubnormalsFlushed flushed;
    flushed_result = product();
  }
  const std::vector<float> kept = product();
  omp_set_num_threads(before);
  for (int64_t i = 0; i < items * M * N; ++i) {
    ASSERT_EQ(flushed_result[i], 0.0f) << "element " << i << " of item " << i / (M * N);
    ASSERT_EQ(kept[i], K * kSubnormal) << "element " << i;
  }
}

// The few-row products (skinny_matmul_f32, 1-4 rows against a weight matrix [N, K]) share the
// output columns among the threads: those too follow the caller's mode (kernels_generic,
// kernels_avx2 and kernels_avx512 run this under each set).
TEST(FloatControlTest, FewRowProductsRunInTheCallersMode) {
  if (kFlushSubnormalBits == 0) GTEST_SKIP() << "no flush-to-zero control on this architecture";
  const int64_t M = 2, N = 512, K = 4;
  const std::vector<float> A(M * K, kSubnormal), B(N * K, 1.0f);
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  auto product = [&] {
    std::vector<float> C(M * N, -1.0f);
    matmul(C.data(), A.data(), B.data(), MatmulShape{.M = M, .N = N, .K = K, .trans_b = true});
    return C;
  };
  std::vector<float> flushed_result;
  {
    const SubnormalsFlushed flushed;
    flushed_result = product();
  }
  const std::vector<float> kept = product();
  omp_set_num_threads(before);
  for (int64_t i = 0; i < M * N; ++i) {
    ASSERT_EQ(flushed_result[i], 0.0f) << "row " << i / N << " column " << i % N;
    ASSERT_EQ(kept[i], K * kSubnormal) << "row " << i / N << " column " << i % N;
  }
}

}  // namespace
}  // namespace gatedlm::kernels
