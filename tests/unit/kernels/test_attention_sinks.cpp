// Learned sink logits around the fused attention kernels (kernels/attention_sinks.h): the
// forward against a naive fp64 softmax whose denominator holds the sink column, the
// backward against central finite differences in double, the float kernels against the
// double ones, attention_probs with sinks, and sinks far larger and smaller than any score.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_sinks.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;
using testing::rel_error;

const AttentionShape kShape{2, 7, 4, 2, 8, 1.0 / std::sqrt(8.0)};

// The inputs of one case; gate scores in (0, 1) as a sigmoid makes them.
template <typename T>
struct SinkInputs {
  std::vector<T> q, k, v, gate, sinks;
  explicit SinkInputs(const AttentionShape& s, uint64_t seed, double sink_scale = 1.5) {
    const int64_t nq = s.batch * s.seq * s.n_q * s.head_dim, nkv = s.batch * s.seq * s.n_kv * s.head_dim;
    q = random_vector<T>(nq, seed, 1.2);
    k = random_vector<T>(nkv, seed + 1, 1.2);
    v = random_vector<T>(nkv, seed + 2);
    gate = random_vector<T>(nq, seed + 3);
    for (T& g : gate) g = T(1) / (T(1) + std::exp(-g));
    sinks = random_vector<T>(s.n_q, seed + 4, sink_scale);
  }
};

// Out [b, t, h, D] and lse [b, h, t] straight from the definition: p_j = exp(s_j) /
// (exp(sink) + sum_k exp(s_k)) over the causal keys, Y = sum_j p_j v_j.
template <typename T>
void naive_sink_attention(std::vector<double>& out, std::vector<double>& lse, const SinkInputs<T>& in,
                          const AttentionShape& s) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv;
  out.assign(s.batch * s.seq * s.n_q * D, 0.0);
  lse.assign(s.batch * s.n_q * s.seq, 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq; ++t)
      for (int64_t h = 0; h < s.n_q; ++h) {
        std::vector<double> score(t + 1);
        double m = in.sinks[h];
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot += double(in.q[((b * s.seq + t) * s.n_q + h) * D + e]) * in.k[((b * s.seq + j) * s.n_kv + h / group) * D + e];
          m = std::max(m, score[j] = dot * s.scale);
        }
        double sum = std::exp(in.sinks[h] - m);
        for (double& x : score) sum += (x = std::exp(x - m));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t e = 0; e < D; ++e)
            out[((b * s.seq + t) * s.n_q + h) * D + e] +=
                score[j] / sum * in.v[((b * s.seq + j) * s.n_kv + h / group) * D + e];
        lse[(b * s.n_q + h) * s.seq + t] = m + std::log(sum);
      }
}

// attention_forward then the sinks' pass: out, lse and (gated) Y' = out * gate.
template <typename T>
struct SinkForward {
  std::vector<T> out, lse, gated;
};
template <typename T>
SinkForward<T> sink_forward(const SinkInputs<T>& in, const AttentionShape& s, bool gated) {
  SinkForward<T> f;
  f.out.assign(in.q.size(), T(0));
  f.gated.assign(in.q.size(), T(0));
  f.lse.assign(s.batch * s.n_q * s.seq, T(0));
  attention_forward<T>(f.out.data(), f.lse.data(), in.q.data(), in.k.data(), in.v.data(), s,
                       gated ? in.gate.data() : nullptr, gated ? f.gated.data() : nullptr);
  attention_sinks_forward<T>(f.out.data(), gated ? f.gated.data() : nullptr, f.lse.data(), in.sinks.data(), s);
  return f;
}

TEST(AttentionSinksTest, ForwardMatchesNaiveSoftmaxWithASinkColumn) {
  SinkInputs<double> in(kShape, 11);
  std::vector<double> want_out, want_lse;
  naive_sink_attention(want_out, want_lse, in, kShape);
  for (bool gated : {false, true}) {
    const SinkForward<double> d = sink_forward(in, kShape, gated);
    EXPECT_LT(rel_error(d.out, want_out), 1e-13);
    EXPECT_LT(rel_error(d.lse, want_lse), 1e-13);
    SinkInputs<float> inf(kShape, 11);
    const SinkForward<float> f = sink_forward(inf, kShape, gated);
    EXPECT_LT(rel_error(f.out, want_out), 3e-6) << "float, gated " << gated;
    EXPECT_LT(rel_error(f.lse, want_lse), 3e-6) << "float, gated " << gated;
    if (!gated) continue;
    for (size_t i = 0; i < f.out.size(); ++i) ASSERT_FLOAT_EQ(f.gated[i], f.out[i] * inf.gate[i]);
  }
}

// A sink far above every score takes (almost) all the mass: the outputs vanish and lse is
// the sink; one far below changes nothing. Neither overflows.
TEST(AttentionSinksTest, ExtremeSinksStayFinite) {
  SinkInputs<float> in(kShape, 5);
  std::vector<float> plain(in.q.size()), plain_lse(kShape.batch * kShape.n_q * kShape.seq);
  attention_forward<float>(plain.data(), plain_lse.data(), in.q.data(), in.k.data(), in.v.data(), kShape);
  for (float sink : {300.0f, -300.0f}) {
    std::fill(in.sinks.begin(), in.sinks.end(), sink);
    const SinkForward<float> f = sink_forward(in, kShape, false);
    for (size_t i = 0; i < f.out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(f.out[i]));
      if (sink > 0) {
        ASSERT_LT(std::abs(f.out[i]), 1e-30f);
      } else {
        ASSERT_EQ(f.out[i], plain[i]);
      }
    }
    for (size_t i = 0; i < f.lse.size(); ++i) ASSERT_FLOAT_EQ(f.lse[i], sink > 0 ? sink : plain_lse[i]);
  }
}

// The loss L = sum(w * Y') (Y' = out * gate, or out without the gate) as a function of all
// the inputs, for the finite differences.
double weighted_loss(const SinkInputs<double>& in, const std::vector<double>& w, bool gated) {
  const SinkForward<double> f = sink_forward(in, kShape, gated);
  const std::vector<double>& y = gated ? f.gated : f.out;
  double loss = 0;
  for (size_t i = 0; i < y.size(); ++i) loss += w[i] * y[i];
  return loss;
}

// The analytic gradients of weighted_loss: dq, dk, dv, dsinks and (gated) d gate score.
template <typename T>
std::vector<std::vector<T>> sink_gradients(const SinkInputs<T>& in, const std::vector<T>& w, bool gated) {
  const SinkForward<T> f = sink_forward(in, kShape, gated);
  std::vector<T> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dsinks(in.sinks.size()), dgate(in.q.size());
  attention_backward<T>(dq.data(), dk.data(), dv.data(), w.data(), in.q.data(), in.k.data(), in.v.data(),
                        f.out.data(), f.lse.data(), kShape, gated ? in.gate.data() : nullptr,
                        gated ? dgate.data() : nullptr);
  attention_sinks_backward<T>(dsinks.data(), w.data(), gated ? in.gate.data() : nullptr, f.out.data(), f.lse.data(),
                              in.sinks.data(), kShape);
  return {dq, dk, dv, dsinks, dgate};
}

TEST(AttentionSinksTest, BackwardMatchesFiniteDifferences) {
  for (bool gated : {false, true}) {
    SinkInputs<double> in(kShape, 23);
    const std::vector<double> w = random_vector<double>(in.q.size(), 29);
    const std::vector<std::vector<double>> analytic = sink_gradients(in, w, gated);
    std::vector<double>* inputs[] = {&in.q, &in.k, &in.v, &in.sinks, &in.gate};
    const char* names[] = {"q", "k", "v", "sinks", "gate score"};
    for (int x = 0; x < (gated ? 5 : 4); ++x) {
      std::vector<double> numeric(inputs[x]->size());
      for (size_t i = 0; i < numeric.size(); ++i) {
        const double keep = (*inputs[x])[i], step = 1e-5;
        (*inputs[x])[i] = keep + step;
        const double up = weighted_loss(in, w, gated);
        (*inputs[x])[i] = keep - step;
        const double down = weighted_loss(in, w, gated);
        (*inputs[x])[i] = keep;
        numeric[i] = (up - down) / (2 * step);
      }
      EXPECT_LT(rel_error(analytic[x], numeric), 1e-8) << names[x] << ", gated " << gated;
    }
  }
}

// The blocked float kernels with the sinks' passes agree with the double reference path.
TEST(AttentionSinksTest, FloatGradientsMatchDouble) {
  SinkInputs<double> ind(kShape, 31);
  SinkInputs<float> inf(kShape, 31);
  const std::vector<double> wd = random_vector<double>(ind.q.size(), 37);
  const std::vector<float> wf = random_vector<float>(inf.q.size(), 37);
  const std::vector<std::vector<double>> want = sink_gradients(ind, wd, true);
  const std::vector<std::vector<float>> got = sink_gradients(inf, wf, true);
  for (size_t x = 0; x < want.size(); ++x) EXPECT_LT(rel_error(got[x], want[x]), 2e-5) << "gradient " << x;
}

TEST(AttentionSinksTest, ProbabilitiesCountTheSink) {
  SinkInputs<double> in(kShape, 41);
  const SinkForward<double> f = sink_forward(in, kShape, false);
  const int64_t S = kShape.seq;
  for (int64_t b = 0; b < kShape.batch; ++b) {
    std::vector<double> probs(kShape.n_q * S * S), plain(probs.size());
    attention_probs<double>(probs.data(), in.q.data(), in.k.data(), kShape, b, in.sinks.data());
    attention_probs<double>(plain.data(), in.q.data(), in.k.data(), kShape, b);
    for (int64_t h = 0; h < kShape.n_q; ++h)
      for (int64_t t = 0; t < S; ++t) {
        double row = 0, plain_row = 0;
        for (int64_t j = 0; j < S; ++j) row += probs[(h * S + t) * S + j], plain_row += plain[(h * S + t) * S + j];
        const double sink = sink_probability(in.sinks[h], f.lse[(b * kShape.n_q + h) * S + t]);
        EXPECT_GT(sink, 1e-3);
        EXPECT_NEAR(row, 1.0 - sink, 1e-12) << "head " << h << " row " << t;
        EXPECT_NEAR(plain_row, 1.0, 1e-12);
      }
  }
}

}  // namespace
}  // namespace gatedlm::kernels
