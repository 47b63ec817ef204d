// The blocked float attention kernels (attention_fast.cpp) against the double reference
// kernels, on shapes that exercise the block edges (seq not a multiple of the 64-wide
// tiles, seq 1, head_dim not a multiple of 16, GQA), and the gate epilogue of both the
// float and the double kernels.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;
using testing::rel_error;

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

struct FastCase {
  int64_t batch, seq, n_q, n_kv, head_dim;
};

std::string name(const FastCase& c) {
  return "b" + std::to_string(c.batch) + " s" + std::to_string(c.seq) + " h" + std::to_string(c.n_q) + "/" +
         std::to_string(c.n_kv) + " d" + std::to_string(c.head_dim);
}

// Runs the float kernels and the double reference on the same float inputs (gated when
// `gated`), and compares every output. dq/dk/dv start from a nonzero value on both sides,
// so the accumulate (+=) contract is checked too.
void check_case(const FastCase& c, bool gated, uint64_t seed) {
  const AttentionShape s{c.batch, c.seq, c.n_q, c.n_kv, c.head_dim, 1.0 / std::sqrt(double(c.head_dim))};
  const int64_t nq = c.batch * c.seq * c.n_q * c.head_dim, nkv = c.batch * c.seq * c.n_kv * c.head_dim;
  const int64_t nl = c.batch * c.n_q * c.seq;
  auto q = random_vector<float>(nq, seed, 1.5), k = random_vector<float>(nkv, seed + 1, 1.5);
  auto v = random_vector<float>(nkv, seed + 2), dout = random_vector<float>(nq, seed + 3);
  std::vector<float> gate(nq);
  {
    auto z = random_vector<float>(nq, seed + 4, 2.0);
    for (int64_t i = 0; i < nq; ++i) gate[i] = 1.0f / (1.0f + std::exp(-z[i]));
  }
  const float* gs = gated ? gate.data() : nullptr;

  // Forward.
  std::vector<float> out(nq, -7.0f), lse(nl, -7.0f), gout(gated ? nq : 0, -7.0f);
  attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s, gs, gated ? gout.data() : nullptr);
  auto qd = to_double(q), kd = to_double(k), vd = to_double(v), doutd = to_double(dout), gd = to_double(gate);
  std::vector<double> out_ref(nq), lse_ref(nl), gout_ref(gated ? nq : 0);
  attention_forward(out_ref.data(), lse_ref.data(), qd.data(), kd.data(), vd.data(), s,
                    gated ? gd.data() : nullptr, gated ? gout_ref.data() : nullptr);
  EXPECT_LT(rel_error(out, out_ref), 1e-5) << name(c);
  EXPECT_LT(rel_error(lse, lse_ref), 1e-5) << name(c);
  if (gated) {
    EXPECT_LT(rel_error(gout, gout_ref), 1e-5) << name(c);
    // The gated output is exactly the elementwise product of the outputs.
    for (int64_t i = 0; i < nq; i += 97) ASSERT_EQ(gout[i], out[i] * gate[i]) << name(c) << " at " << i;
  }

  // Backward, from the float forward's own out/lse on both sides.
  auto outd = to_double(out), lsed = to_double(lse);
  std::vector<float> dq = random_vector<float>(nq, seed + 5), dk = random_vector<float>(nkv, seed + 6),
                     dv = random_vector<float>(nkv, seed + 7), dg(gated ? nq : 0, -7.0f);
  std::vector<double> dq_ref = to_double(dq), dk_ref = to_double(dk), dv_ref = to_double(dv), dg_ref(gated ? nq : 0);
  attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                     lse.data(), s, gs, gated ? dg.data() : nullptr);
  attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), doutd.data(), qd.data(), kd.data(), vd.data(),
                     outd.data(), lsed.data(), s, gated ? gd.data() : nullptr, gated ? dg_ref.data() : nullptr);
  EXPECT_LT(rel_error(dq, dq_ref), 1e-5) << name(c);
  EXPECT_LT(rel_error(dk, dk_ref), 1e-5) << name(c);
  EXPECT_LT(rel_error(dv, dv_ref), 1e-5) << name(c);
  if (gated) {
    EXPECT_LT(rel_error(dg, dg_ref), 1e-6) << name(c);
  }
}

const FastCase kCases[] = {
    {1, 1, 1, 1, 64},     // a single token
    {2, 1, 4, 2, 16},     // a single token, GQA
    {2, 7, 3, 1, 5},      // tiny, head_dim < 16, 3 heads per kv head
    {1, 64, 2, 2, 64},    // exactly one block
    {2, 65, 4, 2, 64},    // one block and one row
    {1, 100, 2, 1, 24},   // head_dim not a multiple of 16
    {2, 129, 4, 4, 33},   // odd head_dim, blocks + 1
    {1, 200, 8, 2, 64},   // GQA 4:1
    {1, 300, 2, 2, 80},   // head_dim > 64: two column chunks, one partial
    {1, 513, 2, 1, 64},   // longer than 8 blocks
    {1, 600, 1, 1, 128},  // long, wide heads
};

TEST(AttentionFastTest, MatchesTheReferenceKernels) {
  uint64_t seed = 100;
  for (const FastCase& c : kCases) check_case(c, false, seed += 10);
}

TEST(AttentionFastTest, GateEpilogueMatchesTheReferenceAndAnExplicitMultiply) {
  uint64_t seed = 500;
  for (const FastCase& c : kCases) check_case(c, true, seed += 10);
}

// Few (batch, kv head) pairs: the backward splits each pair's key blocks into ranges and
// adds the ranges' dQ copies in order; checked at explicit thread counts.
TEST(AttentionFastTest, KeyBlockSplitBackwardMatchesTheReference) {
  const int keep = omp_get_max_threads();
  uint64_t seed = 900;
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    for (const FastCase& c :
         {FastCase{1, 300, 4, 1, 64}, FastCase{3, 130, 2, 1, 32}, FastCase{1, 129, 6, 3, 16}, FastCase{1, 5, 2, 1, 8}}) {
      check_case(c, false, seed += 10);
      check_case(c, true, seed += 10);
    }
  }
  omp_set_num_threads(keep);
}

// The gated backward is the ungated backward with dout * gate_score as the incoming
// gradient, plus dgate_score = dout * out; checked on the float kernels directly.
TEST(AttentionFastTest, GatedBackwardEqualsUngatedBackwardOfTheGatedGradient) {
  const AttentionShape s{2, 150, 4, 2, 64, 0.125};
  const int64_t nq = s.batch * s.seq * s.n_q * s.head_dim, nkv = s.batch * s.seq * s.n_kv * s.head_dim;
  auto q = random_vector<float>(nq, 1), k = random_vector<float>(nkv, 2), v = random_vector<float>(nkv, 3);
  auto dout = random_vector<float>(nq, 4), gate = random_vector<float>(nq, 5);
  std::vector<float> out(nq), lse(s.batch * s.n_q * s.seq), gout(nq);
  attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s, gate.data(), gout.data());
  std::vector<float> dq(nq, 0.25f), dk(nkv, 0.25f), dv(nkv, 0.25f), dg(nq, 3.0f);
  attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                     lse.data(), s, gate.data(), dg.data());
  std::vector<float> dy(nq), dq2(nq, 0.25f), dk2(nkv, 0.25f), dv2(nkv, 0.25f);
  for (int64_t i = 0; i < nq; ++i) dy[i] = dout[i] * gate[i];
  attention_backward(dq2.data(), dk2.data(), dv2.data(), dy.data(), q.data(), k.data(), v.data(), out.data(),
                     lse.data(), s);
  EXPECT_LT(rel_error(dq, dq2), 1e-6);
  EXPECT_LT(rel_error(dk, dk2), 1e-6);
  EXPECT_LT(rel_error(dv, dv2), 1e-6);
  for (int64_t i = 0; i < nq; ++i) ASSERT_EQ(dg[i], dout[i] * out[i]) << i;  // overwritten, not accumulated
}

// Through the sigmoid and into a wider matrix (the model's fused gradient): the gate's
// columns get dout * out * g * (1 - g), the other columns stay as they were; float and
// double alike.
template <typename T>
void check_dgate_through_sigmoid_into_strided_rows() {
  const AttentionShape s{2, 70, 4, 2, 16, 0.25};
  const int64_t width = s.n_q * s.head_dim, tokens = s.batch * s.seq, ld = width + 24;
  const int64_t nq = tokens * width, nkv = tokens * s.n_kv * s.head_dim;
  auto q = random_vector<T>(nq, 51), k = random_vector<T>(nkv, 52), v = random_vector<T>(nkv, 53);
  auto dout = random_vector<T>(nq, 54), gate = random_vector<T>(nq, 55);
  for (T& g : gate) g = T(1) / (T(1) + std::exp(-g));  // scores in (0, 1)
  std::vector<T> out(nq), lse(s.batch * s.n_q * s.seq), gout(nq);
  attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s, gate.data(), gout.data());
  std::vector<T> dq(nq), dk(nkv), dv(nkv), wide(tokens * ld, T(-5));
  attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                     lse.data(), s, gate.data(), wide.data() + 24, GateGradLayout{ld, true});
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < 24; ++c) ASSERT_EQ(wide[t * ld + c], T(-5));
    for (int64_t e = 0; e < width; ++e) {
      const int64_t i = t * width + e;
      ASSERT_NEAR(wide[t * ld + 24 + e], dout[i] * out[i] * gate[i] * (1 - gate[i]), 1e-6) << t << " " << e;
    }
  }
}
TEST(AttentionFastTest, GateGradientThroughTheSigmoidIntoStridedRows) {
  check_dgate_through_sigmoid_into_strided_rows<float>();
  check_dgate_through_sigmoid_into_strided_rows<double>();
}

// Double kernels: the gate epilogue around the reference matches the plain reference plus
// explicit elementwise products.
TEST(AttentionFastTest, DoubleGateEpilogue) {
  const AttentionShape s{1, 20, 2, 1, 8, 0.3};
  const int64_t nq = s.seq * s.n_q * s.head_dim, nkv = s.seq * s.n_kv * s.head_dim;
  auto q = random_vector(nq, 41), k = random_vector(nkv, 42), v = random_vector(nkv, 43);
  auto dout = random_vector(nq, 44), gate = random_vector(nq, 45);
  std::vector<double> out(nq), lse(s.n_q * s.seq), gout(nq), out2(nq), lse2(s.n_q * s.seq);
  attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s, gate.data(), gout.data());
  attention_forward_reference(out2.data(), lse2.data(), q.data(), k.data(), v.data(), s);
  EXPECT_EQ(out, out2);
  for (int64_t i = 0; i < nq; ++i) EXPECT_EQ(gout[i], out[i] * gate[i]);
  std::vector<double> dq(nq, 1.0), dk(nkv, 1.0), dv(nkv, 1.0), dg(nq), dy(nq), dq2(nq, 1.0), dk2(nkv, 1.0),
      dv2(nkv, 1.0);
  attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                     lse.data(), s, gate.data(), dg.data());
  for (int64_t i = 0; i < nq; ++i) dy[i] = dout[i] * gate[i];
  attention_backward_reference(dq2.data(), dk2.data(), dv2.data(), dy.data(), q.data(), k.data(), v.data(),
                               out.data(), lse.data(), s);
  EXPECT_LT(rel_error(dq, dq2), 1e-14);
  EXPECT_LT(rel_error(dk, dk2), 1e-14);
  EXPECT_LT(rel_error(dv, dv2), 1e-14);
  for (int64_t i = 0; i < nq; ++i) EXPECT_EQ(dg[i], dout[i] * out[i]);
}

}  // namespace
}  // namespace gatedlm::kernels
