// Sliding windows in the fused attention kernels (AttentionShape::window: query t sees keys
// t - W < j <= t): the blocked float forward against a naive fp64 masked softmax, for windows
// that end inside a 64-key block, on its edge and beyond the sequence, with GQA, the gate
// epilogue and several query blocks; the float backward against the double reference, whose
// gradients are checked by central differences; attention_probs zero outside the window.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_set.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;
using testing::rel_error;

AttentionShape window_shape(int64_t seq, int64_t window) { return {2, seq, 4, 2, 16, 0.25, window}; }

template <typename T>
struct WindowInputs {
  std::vector<T> q, k, v, gate;
  WindowInputs(const AttentionShape& s, uint64_t seed) {
    const int64_t nq = s.batch * s.seq * s.n_q * s.head_dim, nkv = s.batch * s.seq * s.n_kv * s.head_dim;
    q = random_vector<T>(nq, seed, 1.5);
    k = random_vector<T>(nkv, seed + 1, 1.5);
    v = random_vector<T>(nkv, seed + 2);
    gate = random_vector<T>(nq, seed + 3);
  }
};

// out [b, t, h, D] from the definition: softmax over t - W < j <= t.
std::vector<double> naive_window_attention(const WindowInputs<float>& in, const AttentionShape& s) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv;
  std::vector<double> out(in.q.size(), 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq; ++t)
      for (int64_t h = 0; h < s.n_q; ++h) {
        const int64_t first = s.window > 0 ? std::max<int64_t>(0, t - s.window + 1) : 0;
        std::vector<double> p;
        double m = -INFINITY, sum = 0;
        for (int64_t j = first; j <= t; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot += double(in.q[((b * s.seq + t) * s.n_q + h) * D + e]) * in.k[((b * s.seq + j) * s.n_kv + h / group) * D + e];
          p.push_back(dot * s.scale);
          m = std::max(m, p.back());
        }
        for (double& x : p) sum += (x = std::exp(x - m));
        for (int64_t j = first; j <= t; ++j)
          for (int64_t e = 0; e < D; ++e)
            out[((b * s.seq + t) * s.n_q + h) * D + e] +=
                p[j - first] / sum * in.v[((b * s.seq + j) * s.n_kv + h / group) * D + e];
      }
  return out;
}

TEST(AttentionWindowTest, ForwardMatchesNaiveMaskedSoftmaxInEveryKernelSet) {
  const KernelSet keep = active_kernel_set();
  for (KernelSet set : runnable_kernel_sets()) {
    use_kernel_set(set);
    for (int64_t window : {1, 5, 63, 64, 65, 100, 300}) {
      const AttentionShape s = window_shape(150, window);
      const WindowInputs<float> in(s, 7 + window);
      std::vector<float> out(in.q.size()), lse(s.batch * s.n_q * s.seq), gated(in.q.size());
      attention_forward<float>(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), s, in.gate.data(),
                               gated.data());
      EXPECT_LT(rel_error(out, naive_window_attention(in, s)), 2e-6) << kernel_set_name(set) << ", W " << window;
      for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(gated[i], out[i] * in.gate[i]);
    }
  }
  use_kernel_set(keep);
}

// Gradients of L = sum(w * out) for the double reference kernels, q, k and v.
std::vector<std::vector<double>> reference_grads(WindowInputs<double>& in, const std::vector<double>& w,
                                                 const AttentionShape& s) {
  std::vector<double> out(in.q.size()), lse(s.batch * s.n_q * s.seq);
  attention_forward<double>(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), s);
  std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
  attention_backward<double>(dq.data(), dk.data(), dv.data(), w.data(), in.q.data(), in.k.data(), in.v.data(),
                             out.data(), lse.data(), s);
  return {dq, dk, dv};
}

TEST(AttentionWindowTest, ReferenceBackwardMatchesFiniteDifferences) {
  const AttentionShape s{1, 9, 2, 1, 4, 0.5, 3};
  WindowInputs<double> in(s, 3);
  const std::vector<double> w = random_vector<double>(in.q.size(), 5);
  const std::vector<std::vector<double>> analytic = reference_grads(in, w, s);
  auto loss = [&] {
    std::vector<double> out(in.q.size()), lse(s.batch * s.n_q * s.seq);
    attention_forward<double>(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), s);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += w[i] * out[i];
    return l;
  };
  std::vector<double>* inputs[] = {&in.q, &in.k, &in.v};
  for (int x = 0; x < 3; ++x)
    EXPECT_LT(rel_error(analytic[x], testing::numeric_grad(*inputs[x], loss, 1e-5)), 1e-8) << "input " << x;
}

TEST(AttentionWindowTest, FloatBackwardMatchesDoubleInEveryKernelSet) {
  const KernelSet keep = active_kernel_set();
  for (KernelSet set : runnable_kernel_sets()) {
    use_kernel_set(set);
    for (int64_t window : {1, 7, 64, 90}) {
      const AttentionShape s = window_shape(140, window);
      WindowInputs<double> ind(s, 11 + window);
      const WindowInputs<float> inf(s, 11 + window);
      const std::vector<double> wd = random_vector<double>(ind.q.size(), 13);
      const std::vector<float> wf = random_vector<float>(inf.q.size(), 13);
      const std::vector<std::vector<double>> want = reference_grads(ind, wd, s);
      std::vector<float> out(inf.q.size()), lse(s.batch * s.n_q * s.seq);
      attention_forward<float>(out.data(), lse.data(), inf.q.data(), inf.k.data(), inf.v.data(), s);
      std::vector<float> dq(inf.q.size()), dk(inf.k.size()), dv(inf.v.size());
      attention_backward<float>(dq.data(), dk.data(), dv.data(), wf.data(), inf.q.data(), inf.k.data(), inf.v.data(),
                                out.data(), lse.data(), s);
      if (window == 1) {  // each query sees itself alone: p = 1, so dS = dp - D = 0 and dq = dk = 0
        for (size_t i = 0; i < dq.size(); ++i) ASSERT_LT(std::abs(dq[i]), 1e-5f) << kernel_set_name(set);
        for (size_t i = 0; i < dk.size(); ++i) ASSERT_LT(std::abs(dk[i]), 1e-5f) << kernel_set_name(set);
      } else {
        EXPECT_LT(rel_error(dq, want[0]), 2e-5) << kernel_set_name(set) << ", W " << window;
        EXPECT_LT(rel_error(dk, want[1]), 2e-5) << kernel_set_name(set) << ", W " << window;
      }
      EXPECT_LT(rel_error(dv, want[2]), 2e-5) << kernel_set_name(set) << ", W " << window;
    }
  }
  use_kernel_set(keep);
}

TEST(AttentionWindowTest, ProbabilitiesAreZeroOutsideTheWindow) {
  const AttentionShape s{1, 12, 2, 2, 4, 0.5, 4};
  const WindowInputs<double> in(s, 17);
  std::vector<double> probs(s.n_q * s.seq * s.seq);
  attention_probs<double>(probs.data(), in.q.data(), in.k.data(), s, 0);
  for (int64_t h = 0; h < s.n_q; ++h)
    for (int64_t t = 0; t < s.seq; ++t) {
      double row = 0;
      for (int64_t j = 0; j < s.seq; ++j) {
        const double p = probs[(h * s.seq + t) * s.seq + j];
        row += p;
        if (j > t || j <= t - s.window) EXPECT_EQ(p, 0.0) << "t " << t << " j " << j;
        else EXPECT_GT(p, 0.0);
      }
      EXPECT_NEAR(row, 1.0, 1e-12);
    }
}

}  // namespace
}  // namespace gatedlm::kernels
