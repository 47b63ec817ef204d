// The kernel sets (kernels/kernel_set.h): the choice follows the CPU and GATEDLM_KERNELS,
// and every set this CPU can run gives the reference results. The whole kernel suite
// also runs once per set (ctest entries kernels_generic, kernels_avx2, kernels_avx512).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/delta_rule_step.h"
#include "kernels/half_float.h"
#include "kernels/kernel_set.h"
#include "kernels/kernel_sets.h"
#include "kernels/matmul.h"
#include "test_util.h"

namespace gatedlm::kernels {

// Defined once per set in tests/kernel_set/fast_math_probe.cpp.
namespace generic {
double exp_approx_worst_error();
double exp_approx16_worst_error();
}  // namespace generic
#if GATEDLM_X86_KERNEL_SETS
namespace avx2 {
double exp_approx_worst_error();
double exp_approx16_worst_error();
}  // namespace avx2
namespace avx512 {
double exp_approx_worst_error();
double exp_approx16_worst_error();
}  // namespace avx512
#endif

namespace {

using testing::random_vector;
using testing::rel_error;

// With GATEDLM_KERNELS naming a set this CPU cannot run, every test of the run is skipped
// with the reason (ctest reports the entry as skipped).
class KernelSetEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* want = std::getenv("GATEDLM_KERNELS");
    if (!want || !*want) return;
    for (KernelSet s : {KernelSet::generic, KernelSet::avx2, KernelSet::avx512})
      if (want == std::string(kernel_set_name(s)) && !kernel_set_runnable(s))
        GTEST_SKIP() << "GATEDLM_KERNELS=" << want << ": this CPU cannot run that kernel set";
  }
};
[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new KernelSetEnvironment);

// One set's float attention forward, called directly.
void attention_with(KernelSet set, float* out, float* lse, const float* q, const float* k, const float* v,
                    const AttentionShape& s, const float* g, float* gated) {
  switch (set) {
#if GATEDLM_X86_KERNEL_SETS
    case KernelSet::avx512: return avx512::attention_forward_f32(out, lse, q, k, v, s, g, gated);
    case KernelSet::avx2: return avx2::attention_forward_f32(out, lse, q, k, v, s, g, gated);
#endif
    default: return generic::attention_forward_f32(out, lse, q, k, v, s, g, gated);
  }
}

void skinny_with(KernelSet set, float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb,
                 int64_t M, int64_t N, int64_t K, bool accumulate) {
  switch (set) {
#if GATEDLM_X86_KERNEL_SETS
    case KernelSet::avx512: return avx512::skinny_matmul_f32(C, ldc, A, lda, B, ldb, M, N, K, accumulate);
    case KernelSet::avx2: return avx2::skinny_matmul_f32(C, ldc, A, lda, B, ldb, M, N, K, accumulate);
#endif
    default: return generic::skinny_matmul_f32(C, ldc, A, lda, B, ldb, M, N, K, accumulate);
  }
}

template <typename T>
void delta_step_with(KernelSet set, T* S, T* o, const T* q, const T* k, const T* v, T g, T beta, int64_t dk,
                     int64_t dv, T* u) {
  switch (set) {
#if GATEDLM_X86_KERNEL_SETS
    case KernelSet::avx512: return avx512::delta_rule_step<T>(S, o, q, k, v, g, beta, dk, dv, u);
    case KernelSet::avx2: return avx2::delta_rule_step<T>(S, o, q, k, v, g, beta, dk, dv, u);
#endif
    default: return generic::delta_rule_step<T>(S, o, q, k, v, g, beta, dk, dv, u);
  }
}

void to_f16_with(KernelSet set, uint16_t* out, const float* in, int64_t n) {
  switch (set) {
#if GATEDLM_X86_KERNEL_SETS
    case KernelSet::avx512: return avx512::to_f16(out, in, n);
    case KernelSet::avx2: return avx2::to_f16(out, in, n);
#endif
    default: return generic::to_f16(out, in, n);
  }
}

void from_f16_with(KernelSet set, float* out, const uint16_t* in, int64_t n) {
  switch (set) {
#if GATEDLM_X86_KERNEL_SETS
    case KernelSet::avx512: return avx512::from_f16(out, in, n);
    case KernelSet::avx2: return avx2::from_f16(out, in, n);
#endif
    default: return generic::from_f16(out, in, n);
  }
}

double exp_error_of(KernelSet set, bool lanes16) {
  switch (set) {
#if GATEDLM_X86_KERNEL_SETS
    case KernelSet::avx512: return lanes16 ? avx512::exp_approx16_worst_error() : avx512::exp_approx_worst_error();
    case KernelSet::avx2: return lanes16 ? avx2::exp_approx16_worst_error() : avx2::exp_approx_worst_error();
#endif
    default: return lanes16 ? generic::exp_approx16_worst_error() : generic::exp_approx_worst_error();
  }
}

TEST(KernelSetsTest, TheChoiceFollowsTheCpuOrTheEnvironment) {
  const std::vector<KernelSet> runnable = runnable_kernel_sets();
  ASSERT_FALSE(runnable.empty());
  EXPECT_EQ(runnable.front(), KernelSet::generic);  // the baseline always runs
  const char* want = std::getenv("GATEDLM_KERNELS");
  if (want && *want)
    EXPECT_EQ(std::string(kernel_set_name(active_kernel_set())), want);
  else
    EXPECT_EQ(active_kernel_set(), runnable.back());  // the widest runnable set
  EXPECT_NE(kernel_set_summary().find(kernel_set_name(active_kernel_set())), std::string::npos);
}

TEST(KernelSetsTest, ExpApproxIsAccurateInEverySet) {
  for (KernelSet set : runnable_kernel_sets()) {
    EXPECT_LT(exp_error_of(set, false), 2e-7) << kernel_set_name(set);
    const double lanes16 = exp_error_of(set, true);
    if (set == KernelSet::avx512) {
      EXPECT_GE(lanes16, 0.0) << "the avx512 set has the 16-lane form";
    }
    if (lanes16 >= 0) {
      EXPECT_LT(lanes16, 2e-7) << kernel_set_name(set);
    }
  }
}

// The fused attention, the largest hand-written kernel, in every runnable set against the
// double-precision reference, with the G1 gate's epilogue, on a shape with partial tiles.
TEST(KernelSetsTest, EveryRunnableSetMatchesTheReferenceAttention) {
  const AttentionShape s{.batch = 2, .seq = 83, .n_q = 4, .n_kv = 2, .head_dim = 24, .scale = 0.2};
  const int64_t n = s.batch * s.seq * s.n_q * s.head_dim, nkv = s.batch * s.seq * s.n_kv * s.head_dim;
  auto q = random_vector<float>(n, 1), k = random_vector<float>(nkv, 2), v = random_vector<float>(nkv, 3);
  std::vector<float> gate(n);
  for (int64_t i = 0; i < n; ++i) gate[i] = 0.5f + 0.4f * std::sin(static_cast<float>(i));
  std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end());
  std::vector<double> ref(n), ref_lse(s.batch * s.n_q * s.seq);
  attention_forward_reference(ref.data(), ref_lse.data(), qd.data(), kd.data(), vd.data(), s);
  std::vector<double> ref_gated(n);
  for (int64_t i = 0; i < n; ++i) ref_gated[i] = ref[i] * gate[i];
  for (KernelSet set : runnable_kernel_sets()) {
    std::vector<float> out(n), lse(ref_lse.size()), gated(n);
    attention_with(set, out.data(), lse.data(), q.data(), k.data(), v.data(), s, gate.data(), gated.data());
    EXPECT_LT(rel_error(out, ref), 1e-5) << kernel_set_name(set);
    EXPECT_LT(rel_error(lse, ref_lse), 1e-5) << kernel_set_name(set);
    EXPECT_LT(rel_error(gated, ref_gated), 1e-5) << kernel_set_name(set);
  }
}

// The decode product C (+)= A B^T for 1 to 9, 16 and 17 rows of A (the kernel's register tiles, and
// the split past its widest), K with and without a partial vector at the end, row
// strides wider than the rows, overwrite and accumulate; in every runnable set against
// the double-precision reference. matmul<float> must take it for a few rows.
TEST(KernelSetsTest, EveryRunnableSetMatchesTheReferenceSkinnyProduct) {
  for (const int64_t K : {5, 16, 64, 77, 200})
    for (const int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17}) {  // 9 and up: in blocks of 8 rows
      const int64_t N = 37, lda = K + 3, ldb = K + 1, ldc = N + 2;
      auto A = random_vector<float>(M * lda, 10 + M), B = random_vector<float>(N * ldb, 20 + K);
      auto C0 = random_vector<float>(M * ldc, 30);
      const MatmulShape shape{.M = M, .N = N, .K = K, .trans_b = true, .lda = lda, .ldb = ldb, .ldc = ldc};
      std::vector<double> Ad(A.begin(), A.end()), Bd(B.begin(), B.end());
      for (const bool accumulate : {false, true}) {
        std::vector<double> ref(C0.begin(), C0.end());
        MatmulShape s = shape;
        s.accumulate = accumulate;
        matmul_reference(ref.data(), Ad.data(), Bd.data(), s);
        for (KernelSet set : runnable_kernel_sets()) {
          std::vector<float> C = C0;
          skinny_with(set, C.data(), ldc, A.data(), lda, B.data(), ldb, M, N, K, accumulate);
          EXPECT_LT(rel_error(C, ref), 1e-6) << kernel_set_name(set) << " M=" << M << " K=" << K << " acc=" << accumulate;
        }
        std::vector<float> C = C0;
        matmul(C.data(), A.data(), B.data(), s);  // the public path (skinny or oneDNN)
        EXPECT_LT(rel_error(C, ref), 1e-6) << "matmul M=" << M << " K=" << K << " acc=" << accumulate;
      }
    }
}

// The delta rule's decode step (delta_rule_step.h) in every runnable set against the same
// step in double, written out here from its definition: 12 tokens on one head's state, with
// the output and without, widths that leave remainders after 16 lanes (d_v 37) and not (64).
// 1e-5: float rounding over sums of d_k terms and 12 decayed steps (measured about 1e-7); a
// wrong decay, a missing k u^T or o summed from the state before the update gives 1e-2 or more.
TEST(KernelSetsTest, EveryRunnableSetMatchesTheDeltaRuleStepInDouble) {
  for (const auto& [dk, dv] : {std::pair<int64_t, int64_t>{16, 37}, {64, 64}}) {
    const int64_t tokens = 12;
    const double unit = 1 / std::sqrt(static_cast<double>(dk));  // keys of about unit length, as a layer has them
    const auto q = random_vector<double>(tokens * dk, 1, unit), k = random_vector<double>(tokens * dk, 2, unit);
    const auto v = random_vector<double>(tokens * dv, 3), S0 = random_vector<double>(dk * dv, 4);
    // The reference: S = e^g S; u = beta (v - S^T k); S += k u^T; o = S^T q, in double.
    std::vector<double> S = S0, out(tokens * dv);
    for (int64_t t = 0; t < tokens; ++t) {
      const double g = -0.05 * (t + 1), beta = 0.3 + 0.05 * t, *kt = &k[t * dk], *qt = &q[t * dk];
      for (double& x : S) x *= std::exp(g);
      for (int64_t j = 0; j < dv; ++j) {
        double sk = 0;
        for (int64_t i = 0; i < dk; ++i) sk += S[i * dv + j] * kt[i];
        const double u = beta * (v[t * dv + j] - sk);
        for (int64_t i = 0; i < dk; ++i) S[i * dv + j] += kt[i] * u;
      }
      for (int64_t j = 0; j < dv; ++j)
        for (int64_t i = 0; i < dk; ++i) out[t * dv + j] += S[i * dv + j] * qt[i];
    }
    const std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
    for (KernelSet set : runnable_kernel_sets())
      for (const bool with_output : {true, false}) {
        std::vector<float> Sf(S0.begin(), S0.end()), of(tokens * dv), u(dv);
        for (int64_t t = 0; t < tokens; ++t)
          delta_step_with<float>(set, Sf.data(), with_output ? &of[t * dv] : nullptr, &qf[t * dk], &kf[t * dk],
                                 &vf[t * dv], static_cast<float>(-0.05 * (t + 1)), static_cast<float>(0.3 + 0.05 * t),
                                 dk, dv, u.data());
        EXPECT_LT(rel_error(Sf, S), 1e-5) << kernel_set_name(set) << " d_k " << dk << " d_v " << dv;
        if (with_output) {
          EXPECT_LT(rel_error(of, out), 1e-5) << kernel_set_name(set) << " d_k " << dk << " d_v " << dv;
        }
      }
  }
}

// The F16 row conversions (half_float.h: to_f16, from_f16) of every runnable set against the
// one-value rules: every one of the 65536 half patterns widened, and narrowed back to itself;
// floats of every magnitude, the ties between two halves, the subnormal halves' edge and the
// overflow edge narrowed. Bit for bit, except that a NaN need only stay a NaN. 65536 and the
// float count are not multiples of 8, so the vector loops' tails run too (n - 3 below).
TEST(KernelSetsTest, EveryRunnableSetConvertsF16RowsAsTheOneValueRules) {
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> floats;
  Rng rng(5);
  for (int i = 0; i < 20000; ++i)
    floats.push_back(static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(64)) - 40)));
  for (uint32_t h = 0; h < 0x7c00; h += 37) {  // the midpoints between neighbouring halves (ties), +- 1 ulp
    const uint32_t mid = std::bit_cast<uint32_t>((f16_to_f32(static_cast<uint16_t>(h)) + f16_to_f32(static_cast<uint16_t>(h + 1))) / 2);
    for (uint32_t b : {mid - 1, mid, mid + 1}) floats.push_back(std::bit_cast<float>(b));
  }
  for (float x : {6.103515625e-05f, 6.1035e-05f, 5.96e-08f, 2.98e-08f, 2.99e-08f, 1e-40f, -1e-40f, 65504.0f, 65519.99f,
                  65520.0f, 1e30f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    floats.push_back(x);
  const int64_t nh = static_cast<int64_t>(halves.size()) - 3, nf = static_cast<int64_t>(floats.size());
  for (KernelSet set : runnable_kernel_sets()) {
    std::vector<float> wide(nh);
    from_f16_with(set, wide.data(), halves.data(), nh);
    std::vector<uint16_t> back(nh), narrow(nf);
    to_f16_with(set, back.data(), wide.data(), nh);
    to_f16_with(set, narrow.data(), floats.data(), nf);
    for (int64_t i = 0; i < nh; ++i) {
      const float want = f16_to_f32(halves[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(wide[i]) && (back[i] & 0x7fff) > 0x7c00) << kernel_set_name(set) << " half " << i;
        continue;
      }
      ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(want)) << kernel_set_name(set) << " half " << i;
      ASSERT_EQ(back[i], halves[i]) << kernel_set_name(set) << " half " << i;
    }
    for (int64_t i = 0; i < nf; ++i) {
      if (std::isnan(floats[i])) {
        EXPECT_GT(narrow[i] & 0x7fff, 0x7c00) << kernel_set_name(set);
        continue;
      }
      ASSERT_EQ(narrow[i], f32_to_f16(floats[i])) << kernel_set_name(set) << " float " << floats[i] << " (" << i << ")";
    }
  }
}

}  // namespace
}  // namespace gatedlm::kernels
