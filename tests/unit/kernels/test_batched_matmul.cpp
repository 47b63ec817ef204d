// kernels/matmul.h, batched_matmul: the oneDNN batched product against the naive reference, item
// by item, with the MoE block's layouts (strided weights, transposes, accumulation).
#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

TEST(BatchedMatmul, MatchesTheReferencePerItem) {
  struct Case {
    MatmulShape s;
    int64_t batch, stride_a, stride_b, stride_c;
  };
  const int64_t M = 24, f = 12, d = 16, E = 5, w = 3 * f * d;
  const Case cases[] = {
      {{.M = M, .N = 2 * f, .K = d, .trans_b = true}, E, M * d, w, M * 2 * f},             // x W_gu^T
      {{.M = M, .N = f, .K = d}, E, M * d, w, M * f},                                       // dout W_down
      {{.M = d, .N = f, .K = M, .trans_a = true, .accumulate = true}, E, M * d, M * f, w},  // dW_down +=
      {{.M = 2 * f, .N = d, .K = M, .trans_a = true, .accumulate = true}, E, M * 2 * f, M * d, w},
  };
  for (const Case& c : cases) {
    const int64_t a_size = c.stride_a * c.batch + 4096, b_size = c.stride_b * c.batch + 4096;
    const std::vector<float> A = testing::random_vector<float>(a_size, 1), B = testing::random_vector<float>(b_size, 2);
    std::vector<float> C = testing::random_vector<float>(c.stride_c * c.batch + 4096, 3), want = C;
    batched_matmul(C.data(), A.data(), B.data(), c.s, BatchStrides{c.batch, c.stride_a, c.stride_b, c.stride_c});
    for (int64_t b = 0; b < c.batch; ++b)
      matmul_reference(want.data() + b * c.stride_c, A.data() + b * c.stride_a, B.data() + b * c.stride_b, c.s);
    EXPECT_LT(testing::rel_error(C, want), 1e-5) << c.s.M << "x" << c.s.N << "x" << c.s.K;
  }
}

}  // namespace
}  // namespace gatedlm::kernels
