// The kernels that sum over many rows (matrix products over K, RMSNorm's and the bias's
// weight gradients, attention's dQ) give the same bits at 1, 2 and 3 threads, in every
// kernel set this CPU can run: their sums run over partitions fixed by the sizes alone
// (kernels/product_tiles.h, kernels/fixed_chunks.h), so a run's numbers do not depend on
// how many threads it had (README, "Shared cores").
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/bias.h"
#include "kernels/kernel_set.h"
#include "kernels/matmul.h"
#include "kernels/product_tiles.h"
#include "kernels/rmsnorm.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;

// Runs `compute` (which returns its outputs, concatenated) at 1, 2 and 3 threads in every
// runnable kernel set, and expects the bytes at 2 and 3 threads to equal those at 1.
void expect_same_bits_at_any_thread_count(const std::string& what, const std::function<std::vector<float>()>& compute) {
  const int keep_threads = omp_get_max_threads();
  const KernelSet keep_set = active_kernel_set();
  for (KernelSet set : runnable_kernel_sets()) {
    use_kernel_set(set);
    std::vector<float> one_thread;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      const std::vector<float> got = compute();
      if (omp_get_max_threads() != threads) {  // the thread governor moved it: the count is not fixed here
        omp_set_num_threads(keep_threads);
        use_kernel_set(keep_set);
        GTEST_SKIP() << "the thread count was changed by the thread governor: run with OMP_NUM_THREADS set";
      }
      if (threads == 1) {
        one_thread = got;
        continue;
      }
      ASSERT_EQ(got.size(), one_thread.size());
      int64_t differ = 0, first = -1;
      for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &one_thread[i], sizeof(float)) != 0) {
          if (first < 0) first = static_cast<int64_t>(i);
          ++differ;
        }
      EXPECT_EQ(differ, 0) << what << ", kernel set " << kernel_set_name(set) << ", " << threads << " threads: "
                           << differ << " of " << got.size() << " values differ from 1 thread's, the first at "
                           << first;
    }
  }
  omp_set_num_threads(keep_threads);
  use_kernel_set(keep_set);
}

struct ProductCase {
  int64_t M, N, K;
  bool trans_a, trans_b;
};

// Weight-gradient shapes (dW = dY^T X: few output rows, K = the tokens), where oneDNN
// splits the K sum among its threads (brgemm on AVX-512, its jit sgemm on AVX2), and
// forward and input-gradient shapes.
constexpr ProductCase kProducts[] = {
    {16, 64, 16384, true, false}, {1, 256, 2048, true, false}, {8, 256, 8192, true, false},
    {64, 8, 4096, false, false},  {8, 16, 4096, false, true},  {300, 100, 2000, true, false},
    {1000, 96, 64, false, true},  {130, 70, 3000, false, false},
};

TEST(ThreadCountDeterminismTest, MatrixProductsGiveTheSameBits) {
  for (const ProductCase& c : kProducts)
    for (bool accumulate : {false, true}) {
      const auto A = random_vector<float>(c.M * c.K, 11 + c.M), B = random_vector<float>(c.K * c.N, 12 + c.N);
      const auto C0 = random_vector<float>(c.M * c.N, 13);
      const MatmulShape s{.M = c.M, .N = c.N, .K = c.K, .trans_a = c.trans_a, .trans_b = c.trans_b,
                          .accumulate = accumulate};
      expect_same_bits_at_any_thread_count(
          "matmul " + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
              (c.trans_a ? " A^T" : "") + (c.trans_b ? " B^T" : "") + (accumulate ? " +=" : ""),
          [&] {
            std::vector<float> C = C0;
            matmul(C.data(), A.data(), B.data(), s);
            return C;
          });
    }
}

// The mixture-of-experts weight gradient: one dW per expert, as one batched product.
TEST(ThreadCountDeterminismTest, BatchedWeightGradientGivesTheSameBits) {
  const int64_t experts = 2, M = 16, N = 64, K = 16384;
  const auto A = random_vector<float>(experts * K * M, 21), B = random_vector<float>(experts * K * N, 22);
  expect_same_bits_at_any_thread_count("batched dW", [&] {
    std::vector<float> C(experts * M * N, 0.5f);
    batched_matmul(C.data(), A.data(), B.data(), MatmulShape{.M = M, .N = N, .K = K, .trans_a = true, .accumulate = true},
                   BatchStrides{experts, K * M, K * N, M * N});
    return C;
  });
}

TEST(ThreadCountDeterminismTest, RmsnormForwardAndWeightGradientGiveTheSameBits) {
  for (const int64_t rows : {int64_t{7}, int64_t{1000}, int64_t{40000}}) {
    const int64_t dim = 48;
    const auto x = random_vector<float>(rows * dim, 31), w = random_vector<float>(dim, 32);
    const auto dy = random_vector<float>(rows * dim, 33);
    std::vector<float> y(rows * dim), rstd(rows);
    expect_same_bits_at_any_thread_count("rmsnorm forward, " + std::to_string(rows) + " rows", [&] {
      std::vector<float> out(rows * dim + rows);  // y then rstd
      rmsnorm_forward(out.data(), out.data() + rows * dim, x.data(), w.data(), rows, dim, 1e-6);
      return out;
    });
    rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), rows, dim, 1e-6);
    expect_same_bits_at_any_thread_count("rmsnorm backward, " + std::to_string(rows) + " rows", [&] {
      std::vector<float> out((rows + 1) * dim, 0.25f);  // dx then dw, both accumulated into
      rmsnorm_backward(out.data(), out.data() + rows * dim, dy.data(), x.data(), w.data(), rstd.data(), rows, dim);
      return out;
    });
  }
}

TEST(ThreadCountDeterminismTest, BiasGradientGivesTheSameBits) {
  for (const int64_t rows : {int64_t{5}, int64_t{1001}, int64_t{70000}}) {
    const int64_t width = 40, ld = 56;
    // Rows of +-2^52 that cancel in pairs, between rows of small values: a small value added
    // while the (double) sum is near 2^52 loses its fraction, so even a double sum's float
    // result depends on where the partial sums start.
    auto dy = random_vector<float>(rows * ld, 41);
    for (int64_t r = 0; r < rows; r += 2)
      for (int64_t j = 0; j < ld; ++j) dy[r * ld + j] = r % 4 == 0 ? 0x1p52f : -0x1p52f;
    expect_same_bits_at_any_thread_count("bias backward, " + std::to_string(rows) + " rows", [&] {
      std::vector<float> db(width, 0.5f);
      bias_backward(db.data(), dy.data(), rows, width, ld);
      return db;
    });
  }
}

// Many (batch, kv head) pairs (one task each) and few (key-block ranges per pair), gated
// and not.
TEST(ThreadCountDeterminismTest, AttentionBackwardGivesTheSameBits) {
  for (const AttentionShape& s : {AttentionShape{4, 130, 4, 2, 32, 0.17}, AttentionShape{1, 300, 4, 1, 64, 0.125},
                                  AttentionShape{3, 200, 2, 1, 16, 0.25}, AttentionShape{16, 70, 4, 4, 16, 0.25}})
    for (bool gated : {false, true}) {
      const int64_t nq = s.batch * s.seq * s.n_q * s.head_dim, nkv = s.batch * s.seq * s.n_kv * s.head_dim;
      const auto q = random_vector<float>(nq, 51), k = random_vector<float>(nkv, 52), v = random_vector<float>(nkv, 53);
      const auto dout = random_vector<float>(nq, 54), gate = random_vector<float>(nq, 55, 0.3);
      std::vector<float> out(nq), lse(s.batch * s.n_q * s.seq), gated_out(nq);
      attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s, gated ? gate.data() : nullptr,
                        gated ? gated_out.data() : nullptr);
      expect_same_bits_at_any_thread_count(
          "attention backward, batch " + std::to_string(s.batch) + " kv heads " + std::to_string(s.n_kv) +
              (gated ? ", gated" : ""),
          [&] {
            std::vector<float> grads(2 * nq + 2 * nkv, 0.125f);  // dq, dk, dv, dgate
            float* dq = grads.data();
            float* dk = dq + nq;
            float* dv = dk + nkv;
            float* dgate = dv + nkv;
            attention_backward(dq, dk, dv, dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), s,
                               gated ? gate.data() : nullptr, gated ? dgate : nullptr);
            return grads;
          });
    }
}

// A decode step of 8 queries with caches of different lengths (tasks of different sizes
// shared among the threads), GQA groups of 3, gated.
TEST(ThreadCountDeterminismTest, AttentionDecodeGivesTheSameBits) {
  const int64_t n_q = 12, n_kv = 4, D = 64, width = n_q * D;
  const std::vector<int64_t> rows = {16, 80, 33, 1, 64, 47, 20, 75};
  const auto q = random_vector<float>(8 * width, 61), gate = random_vector<float>(8 * width, 62);
  std::vector<std::vector<float>> keys, values;
  for (size_t i = 0; i < rows.size(); ++i) {
    keys.push_back(random_vector<float>(rows[i] * n_kv * D, 63 + 2 * i));
    values.push_back(random_vector<float>(rows[i] * n_kv * D, 64 + 2 * i));
  }
  expect_same_bits_at_any_thread_count("attention decode", [&] {
    std::vector<float> out(2 * 8 * width);  // outputs, then gated outputs
    std::vector<DecodeQuery<float>> queries;
    for (size_t i = 0; i < rows.size(); ++i)
      queries.push_back({q.data() + i * width, out.data() + i * width, gate.data() + i * width,
                         out.data() + (8 + i) * width, {{keys[i].data(), values[i].data(), rows[i]}}});
    attention_decode<float>(queries, {n_q, n_kv, D, 0.125});
    return out;
  });
}

// The tiles cover C exactly, each split side is a multiple of the granule, and there are
// about kProductMaxTiles of them at most (the grid grows one row or column at a time).
TEST(ThreadCountDeterminismTest, ProductTilesCoverTheProduct) {
  for (const ProductCase& c : kProducts)
    for (const int64_t items : {int64_t{1}, int64_t{3}, int64_t{100}}) {
      const ProductTiles t = plan_product_tiles(c.M, c.N, c.K, items);
      EXPECT_GE(t.tile_rows, 1);
      EXPECT_GE(t.tile_cols, 1);
      EXPECT_GE(t.row_tiles * t.tile_rows, c.M);
      EXPECT_LT((t.row_tiles - 1) * t.tile_rows, c.M);
      EXPECT_GE(t.col_tiles * t.tile_cols, c.N);
      EXPECT_LT((t.col_tiles - 1) * t.tile_cols, c.N);
      if (t.row_tiles > 1) {
        EXPECT_EQ(t.tile_rows % kProductTileGranule, 0);
      }
      if (t.col_tiles > 1) {
        EXPECT_EQ(t.tile_cols % kProductTileGranule, 0);
      }
      EXPECT_LE(t.tiles() * items, 2 * std::max(kProductMaxTiles, items));
    }
  const ProductTiles big = plan_product_tiles(4096, 4096, 4096);
  EXPECT_GT(big.tiles(), 1) << "a large product is split for the threads";
}

}  // namespace
}  // namespace gatedlm::kernels
