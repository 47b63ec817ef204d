// Every kernel against a naive reference; gradients against fp64 finite differences.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <numeric>

#include "core/rng.h"
#include "kernels/activations.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::numeric_grad;
using testing::random_vector;
using testing::rel_error;

// A weighted sum with fixed random weights turns any tensor into a scalar loss.
double weighted_sum(const std::vector<double>& y, const std::vector<double>& w) {
  return std::inner_product(y.begin(), y.end(), w.begin(), 0.0);
}

TEST(MatmulTest, OneDnnMatchesReferenceForEveryLayout) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true}) {
        const int64_t M = 37, N = 29, K = 41, pad = 3;
        MatmulShape s{.M = M, .N = N, .K = K, .trans_a = ta, .trans_b = tb,
                      .lda = (ta ? M : K) + pad, .ldb = (tb ? K : N) + pad, .ldc = N + pad, .accumulate = acc};
        auto A = random_vector<float>((ta ? K : M) * s.lda, 1);
        auto B = random_vector<float>((tb ? N : K) * s.ldb, 2);
        auto C = random_vector<float>(M * s.ldc, 3);
        auto R = C;
        matmul(C.data(), A.data(), B.data(), s);
        matmul_reference(R.data(), A.data(), B.data(), s);
        EXPECT_LT(rel_error(C, R), 1e-6) << "trans_a=" << ta << " trans_b=" << tb << " acc=" << acc;
        // The padding columns of C must be untouched.
        auto C0 = random_vector<float>(M * s.ldc, 3);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = N; j < s.ldc; ++j) EXPECT_EQ(C[i * s.ldc + j], C0[i * s.ldc + j]);
      }
}

TEST(MatmulTest, ReferenceIsTheTripleLoop) {
  std::vector<double> A{1, 2, 3, 4, 5, 6}, B{1, 0, -1, 2, 0.5, 1}, C(4);
  matmul_reference(C.data(), A.data(), B.data(), MatmulShape{.M = 2, .N = 2, .K = 3});
  EXPECT_DOUBLE_EQ(C[0], 1 * 1 + 2 * -1 + 3 * 0.5);
  EXPECT_DOUBLE_EQ(C[3], 4 * 0 + 5 * 2 + 6 * 1);
}

TEST(RmsNormTest, ForwardMatchesFormulaAndBackwardMatchesFiniteDifferences) {
  const int64_t rows = 5, dim = 12;
  auto x = random_vector(rows * dim, 4), w = random_vector(dim, 5), probe = random_vector(rows * dim, 6);
  std::vector<double> y(rows * dim), rstd(rows);
  rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), rows, dim, 1e-6);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < dim; ++i) ms += x[r * dim + i] * x[r * dim + i] / dim;
    for (int64_t i = 0; i < dim; ++i)
      EXPECT_NEAR(y[r * dim + i], x[r * dim + i] / std::sqrt(ms + 1e-6) * w[i], 1e-12);
  }
  auto loss = [&] {
    rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), rows, dim, 1e-6);
    return weighted_sum(y, probe);
  };
  auto gx_num = numeric_grad(x, loss), gw_num = numeric_grad(w, loss);
  loss();
  std::vector<double> gx(rows * dim, 0.0), gw(dim, 0.0);
  rmsnorm_backward(gx.data(), gw.data(), probe.data(), x.data(), w.data(), rstd.data(), rows, dim);
  EXPECT_LT(rel_error(gx, gx_num), 1e-8);
  EXPECT_LT(rel_error(gw, gw_num), 1e-8);
}

// Long float rows (a d_model of 8192, and one short of a whole vector) with a massive
// activation among them: rstd within a float's rounding of the exact value, which a single
// running float sum of the squares misses by up to 4e-6 at this length (its rounding grows
// with the row). (The same bits at any thread count: test_thread_count_determinism.cpp.)
TEST(RmsNormTest, LongFloatRowsAreNormalisedToFloatPrecision) {
  for (int64_t dim : {8192, 8191}) {
    const int64_t rows = 4;
    std::vector<float> x = random_vector<float>(rows * dim, 11), w = random_vector<float>(dim, 12);
    for (int64_t r = 0; r < rows; ++r) x[r * dim + (r * 997) % dim] *= 100.0f;
    std::vector<float> y(rows * dim), rstd(rows);
    rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), rows, dim, 1e-6);
    for (int64_t r = 0; r < rows; ++r) {
      long double squares = 0;
      for (int64_t i = 0; i < dim; ++i) squares += static_cast<long double>(x[r * dim + i]) * x[r * dim + i];
      const double exact = static_cast<double>(1.0L / std::sqrt(squares / dim + 1e-6L));
      EXPECT_LT(std::fabs(rstd[r] - exact) / exact, 1.2e-7) << "dim " << dim << ", row " << r;
      for (int64_t i = 0; i < dim; i += 97) EXPECT_FLOAT_EQ(y[r * dim + i], x[r * dim + i] * rstd[r] * w[i]);
    }
  }
}

TEST(RopeTest, RotatesPairsByPositionAngleAndInverts) {
  const int64_t seq = 7, heads = 2, head_dim = 10, rot = 6;
  auto table = rope_table(rope_inv_freq(rot, 500.0), seq);
  auto x = random_vector(seq * heads * head_dim, 7);
  auto y = x;
  rope_apply(y.data(), table, 1, seq, heads, head_dim, 0, false);
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const double* a = x.data() + (t * heads + h) * head_dim;
      const double* b = y.data() + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < rot / 2; ++i) {
        double angle = t * std::pow(500.0, -2.0 * i / rot);
        EXPECT_NEAR(b[i], a[i] * std::cos(angle) - a[i + rot / 2] * std::sin(angle), 1e-12);
        EXPECT_NEAR(b[i + rot / 2], a[i + rot / 2] * std::cos(angle) + a[i] * std::sin(angle), 1e-12);
      }
      for (int64_t i = rot; i < head_dim; ++i) EXPECT_EQ(b[i], a[i]);  // unrotated tail
    }
  rope_apply(y.data(), table, 1, seq, heads, head_dim, 0, true);
  EXPECT_LT(rel_error(y, x), 1e-14);
}

TEST(RopeTest, DotProductDependsOnlyOnRelativePosition) {
  const int64_t head_dim = 8;
  auto table = rope_table(rope_inv_freq(head_dim, 10000.0), 64);
  auto q = random_vector(head_dim, 8), k = random_vector(head_dim, 9);
  auto score = [&](int64_t pq, int64_t pk) {
    auto a = q, b = k;
    rope_apply(a.data(), table, 1, 1, 1, head_dim, pq, false);
    rope_apply(b.data(), table, 1, 1, 1, head_dim, pk, false);
    return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
  };
  EXPECT_NEAR(score(10, 3), score(40, 33), 1e-10);
  EXPECT_GT(std::abs(score(10, 3) - score(10, 4)), 1e-6);
}

// Naive attention: materialise the scores, softmax, weighted sum.
std::vector<double> naive_attention(const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v, const AttentionShape& s) {
  const int64_t D = s.head_dim;
  std::vector<double> out(s.batch * s.seq * s.n_q * D, 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.n_q; ++h) {
      const int64_t g = h / (s.n_q / s.n_kv);
      for (int64_t t = 0; t < s.seq; ++t) {
        std::vector<double> p(t + 1);
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < D; ++i)
            dot += q[((b * s.seq + t) * s.n_q + h) * D + i] * k[((b * s.seq + j) * s.n_kv + g) * D + i];
          p[j] = dot * s.scale;
          m = std::max(m, p[j]);
        }
        for (auto& x : p) sum += (x = std::exp(x - m));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < D; ++i)
            out[((b * s.seq + t) * s.n_q + h) * D + i] += p[j] / sum * v[((b * s.seq + j) * s.n_kv + g) * D + i];
      }
    }
  return out;
}

TEST(AttentionTest, FusedForwardMatchesNaiveAndBackwardMatchesFiniteDifferences) {
  const AttentionShape s{2, 9, 4, 2, 6, 1.0 / std::sqrt(6.0)};
  const int64_t nq = s.batch * s.seq * s.n_q * s.head_dim, nkv = s.batch * s.seq * s.n_kv * s.head_dim;
  auto q = random_vector(nq, 10, 1.5), k = random_vector(nkv, 11, 1.5), v = random_vector(nkv, 12);
  auto probe = random_vector(nq, 13);
  std::vector<double> out(nq), lse(s.batch * s.n_q * s.seq);
  attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
  EXPECT_LT(rel_error(out, naive_attention(q, k, v, s)), 1e-13);
  // Causality: the first query row sees only the first value row.
  for (int64_t i = 0; i < s.head_dim; ++i) EXPECT_NEAR(out[i], v[i], 1e-14);

  auto loss = [&] {
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
    return weighted_sum(out, probe);
  };
  auto gq_num = numeric_grad(q, loss), gk_num = numeric_grad(k, loss), gv_num = numeric_grad(v, loss);
  loss();
  std::vector<double> gq(nq, 0.0), gk(nkv, 0.0), gv(nkv, 0.0);
  attention_backward(gq.data(), gk.data(), gv.data(), probe.data(), q.data(), k.data(), v.data(), out.data(),
                     lse.data(), s);
  EXPECT_LT(rel_error(gq, gq_num), 1e-8);
  EXPECT_LT(rel_error(gk, gk_num), 1e-8);
  EXPECT_LT(rel_error(gv, gv_num), 1e-8);
}

TEST(AttentionTest, FloatKernelMatchesDoubleAndProbsRowsSumToOne) {
  const AttentionShape s{1, 33, 4, 1, 16, 0.25};
  const int64_t nq = s.seq * s.n_q * s.head_dim, nkv = s.seq * s.n_kv * s.head_dim;
  auto q = random_vector(nq, 14), k = random_vector(nkv, 15), v = random_vector(nkv, 16);
  std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end()), out(nq),
      lse(s.n_q * s.seq);
  attention_forward(out.data(), lse.data(), qf.data(), kf.data(), vf.data(), s);
  EXPECT_LT(rel_error(out, naive_attention(q, k, v, s)), 1e-6);
  std::vector<double> probs(s.n_q * s.seq * s.seq);
  attention_probs(probs.data(), q.data(), k.data(), s, 0);
  for (int64_t r = 0; r < s.n_q * s.seq; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < s.seq; ++j) sum += probs[r * s.seq + j];
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_EQ(probs[r * s.seq + s.seq - 1] != 0.0, r % s.seq == s.seq - 1);  // causal mask
  }
}

TEST(AttentionTest, BlockedFloatKernelsMatchTheReferenceKernels) {
  // Sequence lengths that are not multiples of the block sizes, GQA, several batches.
  for (int64_t seq : {1, 31, 64, 100, 161}) {
    const AttentionShape s{2, seq, 6, 2, 16, 1.0 / 4.0};
    const int64_t nq = s.batch * seq * s.n_q * s.head_dim, nkv = s.batch * seq * s.n_kv * s.head_dim;
    auto q = random_vector<float>(nq, 30, 2.0), k = random_vector<float>(nkv, 31, 2.0);
    auto v = random_vector<float>(nkv, 32), dout = random_vector<float>(nq, 33);
    std::vector<float> out(nq), lse(s.batch * s.n_q * seq), out_ref(nq), lse_ref(s.batch * s.n_q * seq);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
    attention_forward_reference(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), s);
    EXPECT_LT(rel_error(out, out_ref), 2e-6) << "seq " << seq;
    EXPECT_LT(rel_error(lse, lse_ref), 2e-6) << "seq " << seq;
    std::vector<float> dq(nq, 0.5f), dk(nkv, 0.5f), dv(nkv, 0.5f), dq_ref = dq, dk_ref = dk, dv_ref = dv;
    attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                       lse.data(), s);
    attention_backward_reference(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(),
                                 v.data(), out_ref.data(), lse_ref.data(), s);
    EXPECT_LT(rel_error(dq, dq_ref), 1e-5) << "seq " << seq;  // both accumulate onto 0.5
    EXPECT_LT(rel_error(dk, dk_ref), 1e-5) << "seq " << seq;
    EXPECT_LT(rel_error(dv, dv_ref), 1e-5) << "seq " << seq;
  }
}

TEST(CrossEntropyTest, LossIsNegLogSoftmaxAndGradientMatches) {
  const int64_t rows = 4, vocab = 7;
  auto z = random_vector(rows * vocab, 17, 2.0);
  std::vector<int32_t> targets{3, 0, -1, 6};
  std::vector<double> losses(rows), dz(rows * vocab);
  double total = cross_entropy(losses.data(), dz.data(), z.data(), targets.data(), rows, vocab, 1.0);
  double expect = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] < 0) {
      EXPECT_EQ(losses[r], 0.0);
      continue;
    }
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(z[r * vocab + i]);
    double l = std::log(sum) - z[r * vocab + targets[r]];
    EXPECT_NEAR(losses[r], l, 1e-12);
    expect += l;
  }
  EXPECT_NEAR(total, expect, 1e-12);
  std::vector<double> scratch(rows), unused(rows * vocab);
  auto g_num = numeric_grad(z, [&] {
    return cross_entropy(scratch.data(), unused.data(), z.data(), targets.data(), rows, vocab, 1.0);
  });
  EXPECT_LT(rel_error(dz, g_num), 1e-8);
}

TEST(ActivationTest, GateActivationsAndSwiGluGradients) {
  for (Activation a : {Activation::sigmoid, Activation::silu, Activation::ns_sigmoid, Activation::identity}) {
    auto x = random_vector(20, 18, 3.0), probe = random_vector(20, 19);
    std::vector<double> y(20), gx(20, 0.0);
    auto loss = [&] {
      activation_forward(y.data(), x.data(), 20, a);
      return weighted_sum(y, probe);
    };
    auto g_num = numeric_grad(x, loss);
    activation_backward(gx.data(), probe.data(), x.data(), 20, a);
    EXPECT_LT(rel_error(gx, g_num), 1e-8) << static_cast<int>(a);
  }
  EXPECT_DOUBLE_EQ(activate(Activation::ns_sigmoid, 0.0), 0.75);
  EXPECT_DOUBLE_EQ(activate(Activation::silu, 0.0), 0.0);
  // SwiGLU on the fused gate|up layout: 3 rows of f = 5, gu [3, 10].
  const int64_t rows = 3, f = 5;
  auto gu = random_vector(rows * 2 * f, 20, 2.0), probe = random_vector(rows * f, 22);
  std::vector<double> out(rows * f), dgu(rows * 2 * f, -7.0);  // overwritten, not accumulated
  auto loss = [&] {
    swiglu_forward(out.data(), gu.data(), rows, f);
    return weighted_sum(out, probe);
  };
  auto dgu_num = numeric_grad(gu, loss);
  swiglu_backward(dgu.data(), probe.data(), gu.data(), rows, f);
  EXPECT_LT(rel_error(dgu, dgu_num), 1e-8);
  EXPECT_NEAR(out[1], gu[1] / (1 + std::exp(-gu[1])) * gu[f + 1], 1e-12);
}

// The float kernels (vectorised, with tails) against the double reference path.
TEST(ActivationTest, FloatSwiGluMatchesDouble) {
  const int64_t rows = 4, f = 37;  // a 16-lane body and a 5-element tail
  auto gu = random_vector(rows * 2 * f, 23, 4.0), dout = random_vector(rows * f, 24);
  std::vector<float> gu_f(gu.begin(), gu.end()), dout_f(dout.begin(), dout.end()), out_f(rows * f),
      dgu_f(rows * 2 * f);
  std::vector<double> out(rows * f), dgu(rows * 2 * f);
  swiglu_forward(out.data(), gu.data(), rows, f);
  swiglu_backward(dgu.data(), dout.data(), gu.data(), rows, f);
  swiglu_forward(out_f.data(), gu_f.data(), rows, f);
  swiglu_backward(dgu_f.data(), dout_f.data(), gu_f.data(), rows, f);
  EXPECT_LT(rel_error(out_f, out), 1e-6);
  EXPECT_LT(rel_error(dgu_f, dgu), 1e-6);
}

TEST(ActivationTest, FloatRowActivationsMatchDouble) {
  const int64_t n = 37;
  auto x = random_vector(n, 26, 4.0), dy = random_vector(n, 27);
  std::vector<float> x_f(x.begin(), x.end()), dy_f(dy.begin(), dy.end()), y_f(n), dx_f(n), y_all(n);
  std::vector<double> y(n), dx(n);
  for (Activation a : {Activation::sigmoid, Activation::silu, Activation::ns_sigmoid, Activation::identity}) {
    activate_row(y.data(), x.data(), n, a);
    activate_grad_row(dx.data(), dy.data(), x.data(), n, a);
    activate_row(y_f.data(), x_f.data(), n, a);
    activate_grad_row(dx_f.data(), dy_f.data(), x_f.data(), n, a);
    activation_forward(y_all.data(), x_f.data(), n, a);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y[i], activate(a, x[i]), 1e-15);
      EXPECT_NEAR(dx[i], dy[i] * activate_grad(a, x[i]), 1e-15);
    }
    EXPECT_LT(rel_error(y_f, y), 1e-6) << static_cast<int>(a);
    EXPECT_LT(rel_error(dx_f, dx), 1e-6) << static_cast<int>(a);
    EXPECT_EQ(y_all, y_f);
  }
}

TEST(CrossEntropyTest, FloatMatchesDoubleAndBackwardMatchesTheFusedGradient) {
  for (int64_t vocab : {7, 16, 1000}) {
    const int64_t rows = 5;
    auto z = random_vector(rows * vocab, 25 + vocab, 3.0);
    std::vector<int32_t> targets{0, static_cast<int32_t>(vocab - 1), -1, 3, static_cast<int32_t>(vocab / 2)};
    std::vector<float> z_f(z.begin(), z.end()), losses_f(rows), dz_f(rows * vocab), dz_back_f(rows * vocab);
    std::vector<double> losses(rows), dz(rows * vocab), dz_back(rows * vocab, 3.0);
    const double total = cross_entropy(losses.data(), dz.data(), z.data(), targets.data(), rows, vocab, 0.5);
    const double total_f =
        cross_entropy(losses_f.data(), dz_f.data(), z_f.data(), targets.data(), rows, vocab, 0.5f);
    EXPECT_NEAR(total_f, total, 1e-5 * std::abs(total)) << vocab;
    EXPECT_LT(rel_error(losses_f, losses), 1e-6) << vocab;
    EXPECT_LT(rel_error(dz_f, dz), 1e-6) << vocab;
    // The one-pass gradient from the saved losses equals the fused one.
    cross_entropy_backward(dz_back.data(), z.data(), losses.data(), targets.data(), rows, vocab, 0.5);
    cross_entropy_backward(dz_back_f.data(), z_f.data(), losses_f.data(), targets.data(), rows, vocab, 0.5f);
    EXPECT_LT(rel_error(dz_back, dz), 1e-12) << vocab;
    EXPECT_LT(rel_error(dz_back_f, dz), 2e-6) << vocab;
    for (int64_t i = 0; i < vocab; ++i) EXPECT_EQ(dz_back_f[2 * vocab + i], 0.0f);  // ignored row
  }
}

TEST(AdamWTest, MatchesTheClosedFormOfTheFirstSteps) {
  std::vector<double> p{1.0, -2.0}, m(2, 0.0), v(2, 0.0), g{0.5, -0.1};
  const double lr = 0.1, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.01;
  adamw_update(p.data(), m.data(), v.data(), g.data(), 2, AdamWParams{lr, b1, b2, eps, wd, 1});
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * sign(g) (up to eps).
  EXPECT_NEAR(p[0], 1.0 * (1 - lr * wd) - lr * 0.5 / (0.5 + eps), 1e-12);
  EXPECT_NEAR(p[1], -2.0 * (1 - lr * wd) + lr * 0.1 / (0.1 + eps), 1e-12);
  const double p0 = p[0];
  adamw_update(p.data(), m.data(), v.data(), g.data(), 2, AdamWParams{lr, b1, b2, eps, wd, 2});
  const double m2 = b1 * (1 - b1) * 0.5 + (1 - b1) * 0.5, v2 = b2 * (1 - b2) * 0.25 + (1 - b2) * 0.25;
  const double expect = p0 * (1 - lr * wd) - lr * (m2 / (1 - b1 * b1)) / (std::sqrt(v2 / (1 - b2 * b2)) + eps);
  EXPECT_NEAR(p[0], expect, 1e-12);
}

}  // namespace
}  // namespace gatedlm::kernels
