// Softpick attention (AttentionShape::softpick, DecodeShape::softpick): the kernels against the
// definition relu(e^a - 1) / sum |e^a - 1| computed naively in fp64, the backward against
// central differences, scores far beyond e^88, a row of zero scores (no weights), the
// probabilities (rows summing to less than 1) and decode over a cache, with a window too; the
// blocked float kernels of every kernel set against the fp64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/kernel_set.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;
using testing::rel_error;

template <typename T>
struct PickInputs {
  std::vector<T> q, k, v, gate;
  PickInputs(const AttentionShape& s, uint64_t seed, double q_scale = 2.0) {
    const int64_t nq = s.batch * s.seq * s.n_q * s.head_dim, nkv = s.batch * s.seq * s.n_kv * s.head_dim;
    q = random_vector<T>(nq, seed, q_scale);
    k = random_vector<T>(nkv, seed + 1, 1.5);
    v = random_vector<T>(nkv, seed + 2);
    gate = random_vector<T>(nq, seed + 3);
  }
};

// The scores a = scale q.k of query t, head h, over the keys it sees (first..t).
template <typename T>
std::vector<double> row_scores(const PickInputs<T>& in, const AttentionShape& s, int64_t b, int64_t h, int64_t t) {
  std::vector<double> a;
  const int64_t D = s.head_dim, g = h / (s.n_q / s.n_kv);
  for (int64_t j = s.first_key(t); j <= t; ++j) {
    double dot = 0;
    for (int64_t e = 0; e < D; ++e)
      dot += double(in.q[((b * s.seq + t) * s.n_q + h) * D + e]) * in.k[((b * s.seq + j) * s.n_kv + g) * D + e];
    a.push_back(dot * s.scale);
  }
  return a;
}

// out [b, t, h, D] straight from the definition (no stabilisation: the inputs keep e^a finite).
template <typename T>
std::vector<double> naive_softpick(const PickInputs<T>& in, const AttentionShape& s) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv;
  std::vector<double> out(in.q.size(), 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq; ++t)
      for (int64_t h = 0; h < s.n_q; ++h) {
        const std::vector<double> a = row_scores(in, s, b, h, t);
        double z = 0;
        for (double x : a) z += std::abs(std::expm1(x));
        if (z == 0) continue;  // every score 0: no weights, output 0
        const int64_t first = s.first_key(t);
        for (int64_t j = first; j <= t; ++j)
          for (int64_t e = 0; e < D; ++e)
            out[((b * s.seq + t) * s.n_q + h) * D + e] += std::max(std::expm1(a[j - first]), 0.0) / z *
                                                          in.v[((b * s.seq + j) * s.n_kv + h / group) * D + e];
      }
  return out;
}

const AttentionShape kPick{2, 9, 4, 2, 8, 0.35, 0, true};

TEST(AttentionSoftpickTest, ForwardMatchesTheDefinitionInFloatAndDouble) {
  for (int64_t window : {0, 4}) {
    AttentionShape s = kPick;
    s.window = window;
    const PickInputs<double> ind(s, 5);
    const PickInputs<float> inf(s, 5);
    const std::vector<double> want = naive_softpick(ind, s);
    std::vector<double> outd(ind.q.size()), lsed(s.batch * s.n_q * s.seq), gd(ind.q.size());
    attention_forward<double>(outd.data(), lsed.data(), ind.q.data(), ind.k.data(), ind.v.data(), s, ind.gate.data(),
                              gd.data());
    EXPECT_LT(rel_error(outd, want), 1e-12) << "window " << window;
    std::vector<float> outf(inf.q.size()), lsef(lsed.size()), gf(inf.q.size());
    attention_forward<float>(outf.data(), lsef.data(), inf.q.data(), inf.k.data(), inf.v.data(), s, inf.gate.data(),
                             gf.data());
    EXPECT_LT(rel_error(outf, want), 1e-5) << "window " << window;
    for (size_t i = 0; i < outf.size(); ++i) ASSERT_EQ(gf[i], outf[i] * inf.gate[i]);
  }
}

// Scores of several hundred: the stable form keeps the weights of the definition (which
// e^a itself cannot hold), a row with every score 0 has no weights, and nothing is NaN.
TEST(AttentionSoftpickTest, HugeScoresAndAllZeroRowsStayFinite) {
  const AttentionShape s{1, 6, 1, 1, 4, 1.0, 0, true};
  PickInputs<double> in(s, 9);
  for (double& x : in.q) x *= 200.0;
  std::fill(in.q.begin(), in.q.begin() + 4, 0.0);  // query 0: every score 0
  std::vector<double> out(in.q.size()), lse(s.seq);
  attention_forward<double>(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), s);
  EXPECT_TRUE(std::isinf(lse[0]) && lse[0] > 0);
  for (int e = 0; e < 4; ++e) EXPECT_EQ(out[e], 0.0);
  for (int64_t t = 1; t < s.seq; ++t) {
    const std::vector<double> a = row_scores(in, s, 0, 0, t);
    const double m = std::max(0.0, *std::max_element(a.begin(), a.end()));
    double z = 0, want[4] = {0, 0, 0, 0};
    for (double x : a) z += std::abs(std::exp(x - m) - std::exp(-m));
    for (int64_t j = 0; j <= t; ++j)
      for (int e = 0; e < 4; ++e) want[e] += std::max(std::exp(a[j] - m) - std::exp(-m), 0.0) / z * in.v[j * 4 + e];
    for (int e = 0; e < 4; ++e) {
      ASSERT_TRUE(std::isfinite(out[t * 4 + e]));
      EXPECT_NEAR(out[t * 4 + e], want[e], 1e-12);
    }
  }
  std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), w(in.q.size(), 1.0);
  attention_backward<double>(dq.data(), dk.data(), dv.data(), w.data(), in.q.data(), in.k.data(), in.v.data(),
                             out.data(), lse.data(), s);
  for (double g : dq) ASSERT_TRUE(std::isfinite(g));
  for (int e = 0; e < 4; ++e) EXPECT_EQ(dq[e], 0.0);  // the zero row passes no gradient
}

TEST(AttentionSoftpickTest, BackwardMatchesFiniteDifferences) {
  for (bool gated : {false, true}) {
    AttentionShape s = kPick;
    s.window = gated ? 3 : 0;
    PickInputs<double> in(s, 21);
    const std::vector<double> w = random_vector<double>(in.q.size(), 23);
    auto forward = [&](std::vector<double>& out, std::vector<double>& lse, std::vector<double>& y) {
      out.assign(in.q.size(), 0.0);
      y.assign(in.q.size(), 0.0);
      lse.assign(s.batch * s.n_q * s.seq, 0.0);
      attention_forward<double>(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), s,
                                gated ? in.gate.data() : nullptr, gated ? y.data() : nullptr);
      if (!gated) y = out;
    };
    auto loss = [&] {
      std::vector<double> out, lse, y;
      forward(out, lse, y);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += w[i] * y[i];
      return l;
    };
    std::vector<double> out, lse, y;
    forward(out, lse, y);
    std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dgate(in.q.size());
    attention_backward<double>(dq.data(), dk.data(), dv.data(), w.data(), in.q.data(), in.k.data(), in.v.data(),
                               out.data(), lse.data(), s, gated ? in.gate.data() : nullptr,
                               gated ? dgate.data() : nullptr);
    EXPECT_LT(rel_error(dq, testing::numeric_grad(in.q, loss)), 1e-7) << "gated " << gated;
    EXPECT_LT(rel_error(dk, testing::numeric_grad(in.k, loss)), 1e-7) << "gated " << gated;
    EXPECT_LT(rel_error(dv, testing::numeric_grad(in.v, loss)), 1e-7) << "gated " << gated;
    if (gated) {
      EXPECT_LT(rel_error(dgate, testing::numeric_grad(in.gate, loss)), 1e-7);
    }
  }
}

// The gradients of L = sum(w * y) (y the gated output when gated) from the fp64 reference
// kernels, checked by finite differences above: dq, dk, dv, and dgate when gated.
std::vector<std::vector<double>> reference_grads(const PickInputs<double>& in, const std::vector<double>& w,
                                                 const AttentionShape& s, bool gated) {
  std::vector<double> out(in.q.size()), lse(s.batch * s.n_q * s.seq), y(in.q.size());
  attention_forward<double>(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), s,
                            gated ? in.gate.data() : nullptr, gated ? y.data() : nullptr);
  std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dgate(in.q.size());
  attention_backward<double>(dq.data(), dk.data(), dv.data(), w.data(), in.q.data(), in.k.data(), in.v.data(),
                             out.data(), lse.data(), s, gated ? in.gate.data() : nullptr,
                             gated ? dgate.data() : nullptr);
  return {dq, dk, dv, dgate, lse};
}

// The blocked float kernels of every kernel set against the definition (forward) and the
// fp64 reference (lse and gradients): three 64-query blocks, windows inside a block, on its
// edge and across blocks, GQA, gated and not, and one query row whose scores are all 0 (no
// weights: lse +inf, output and gradient 0).
TEST(AttentionSoftpickTest, BlockedKernelsMatchTheReferenceInEveryKernelSet) {
  const KernelSet keep = active_kernel_set();
  for (KernelSet set : runnable_kernel_sets()) {
    use_kernel_set(set);
    for (int64_t window : {0, 5, 64, 100}) {
      const AttentionShape s{2, 150, 4, 2, 16, 0.35, window, true};
      const bool gated = window == 0 || window == 64;
      const int64_t zero_row = 70 * s.n_q * s.head_dim;  // batch 0, query 70, head 0
      PickInputs<float> inf(s, 51 + window);
      std::fill_n(inf.q.begin() + zero_row, s.head_dim, 0.0f);
      PickInputs<double> ind(s, 0);
      ind.q.assign(inf.q.begin(), inf.q.end());
      ind.k.assign(inf.k.begin(), inf.k.end());
      ind.v.assign(inf.v.begin(), inf.v.end());
      ind.gate.assign(inf.gate.begin(), inf.gate.end());
      const std::string where = std::string(kernel_set_name(set)) + ", W " + std::to_string(window);

      std::vector<float> out(inf.q.size()), lse(s.batch * s.n_q * s.seq), y(inf.q.size());
      attention_forward<float>(out.data(), lse.data(), inf.q.data(), inf.k.data(), inf.v.data(), s,
                               gated ? inf.gate.data() : nullptr, gated ? y.data() : nullptr);
      EXPECT_LT(rel_error(out, naive_softpick(inf, s)), 1e-5) << where;
      const std::vector<double> w = random_vector<double>(ind.q.size(), 53);
      const std::vector<std::vector<double>> want = reference_grads(ind, w, s, gated);
      EXPECT_TRUE(std::isinf(lse[70]) && lse[70] > 0) << where;
      for (size_t i = 0; i < lse.size(); ++i) {
        if (i == 70) continue;
        ASSERT_NEAR(lse[i], want[4][i], 1e-5 * (1 + std::abs(want[4][i]))) << where << ", row " << i;
      }

      const std::vector<float> wf(w.begin(), w.end());
      std::vector<float> dq(inf.q.size()), dk(inf.k.size()), dv(inf.v.size()), dgate(inf.q.size());
      attention_backward<float>(dq.data(), dk.data(), dv.data(), wf.data(), inf.q.data(), inf.k.data(), inf.v.data(),
                                out.data(), lse.data(), s, gated ? inf.gate.data() : nullptr,
                                gated ? dgate.data() : nullptr);
      EXPECT_LT(rel_error(dq, want[0]), 2e-5) << where;
      EXPECT_LT(rel_error(dk, want[1]), 2e-5) << where;
      EXPECT_LT(rel_error(dv, want[2]), 2e-5) << where;
      if (gated) {
        EXPECT_LT(rel_error(dgate, want[3]), 2e-5) << where;
      }
      for (int64_t e = 0; e < s.head_dim; ++e) {
        ASSERT_EQ(out[zero_row + e], 0.0f) << where;
        ASSERT_EQ(dq[zero_row + e], 0.0f) << where;
      }
    }
  }
  use_kernel_set(keep);
}

// Rows of probabilities sum to at most 1, and the output is their weighted sum of values.
TEST(AttentionSoftpickTest, ProbabilitiesAreTheWeightsTheOutputUses) {
  const PickInputs<double> in(kPick, 31);
  std::vector<double> out(in.q.size()), lse(kPick.batch * kPick.n_q * kPick.seq);
  attention_forward<double>(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), kPick);
  const int64_t S = kPick.seq, D = kPick.head_dim;
  std::vector<double> probs(kPick.n_q * S * S);
  attention_probs<double>(probs.data(), in.q.data(), in.k.data(), kPick, 1);
  bool some_row_below_one = false;
  for (int64_t h = 0; h < kPick.n_q; ++h)
    for (int64_t t = 0; t < S; ++t) {
      double row = 0;
      for (int64_t j = 0; j < S; ++j) row += probs[(h * S + t) * S + j];
      EXPECT_LE(row, 1.0 + 1e-12);
      some_row_below_one |= row < 0.99;
      for (int64_t e = 0; e < D; ++e) {
        double o = 0;
        for (int64_t j = 0; j <= t; ++j) o += probs[(h * S + t) * S + j] * in.v[((S + j) * kPick.n_kv + h / 2) * D + e];
        EXPECT_NEAR(out[((S + t) * kPick.n_q + h) * D + e], o, 1e-12);
      }
    }
  EXPECT_TRUE(some_row_below_one) << "the test would not tell softpick from softmax";
}

// Decode of each row's last query over its keys as a cache, in every kernel set and in double.
TEST(AttentionSoftpickTest, DecodeMatchesTheDefinition) {
  const AttentionShape s{1, 12, 4, 2, 16, 0.3, 0, true};
  const PickInputs<float> in(s, 41);
  const std::vector<double> want = naive_softpick(in, s);
  const int64_t width = s.n_q * s.head_dim;
  const KernelSet keep = active_kernel_set();
  for (KernelSet set : runnable_kernel_sets()) {
    use_kernel_set(set);
    for (int64_t t : {0, 5, 11}) {
      std::vector<float> out(width);
      std::vector<DecodeQuery<float>> queries{{in.q.data() + t * width, out.data(), nullptr, nullptr,
                                               {{in.k.data(), in.v.data(), t + 1}}}};
      attention_decode<float>(queries, {s.n_q, s.n_kv, s.head_dim, s.scale, true});
      const std::vector<double> row(want.begin() + t * width, want.begin() + (t + 1) * width);
      EXPECT_LT(rel_error(out, row), 1e-5) << kernel_set_name(set) << ", query " << t;
      std::vector<DecodeQuery<float>> portable = queries;
      attention_decode_portable<float>(portable, {s.n_q, s.n_kv, s.head_dim, s.scale, true});
      EXPECT_LT(rel_error(out, row), 1e-5) << "portable, query " << t;
    }
  }
  use_kernel_set(keep);
}

}  // namespace
}  // namespace gatedlm::kernels
