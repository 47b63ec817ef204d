// bf16 mixed precision on every path this machine can run: the native oneDNN products
// (AVX512-BF16 or AMX) and the emulation used without them, each against the fp32
// reference on bf16-rounded inputs; the capability probe against the CPU's flags.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/rng.h"
#include "kernels/bf16_support.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "test_util.h"

namespace gatedlm::kernels {

// Test names and messages say the path in words.
void PrintTo(Bf16Path path, std::ostream* os) { *os << bf16_path_name(path); }

namespace {

using testing::random_vector;
using testing::rel_error;

// The bf16 scope on each path this machine can run: Native (oneDNN on AVX512-BF16/AMX) is
// skipped, with the reason, where that hardware or oneDNN support is missing; Emulated
// (bf16-rounded operands in the fp32 product) runs everywhere. Both must multiply exactly
// the bf16-rounded inputs, accumulating in fp32.
class Bf16PathTest : public ::testing::TestWithParam<Bf16Path> {
 protected:
  void SetUp() override {
    if (GetParam() == Bf16Path::native && !bf16_support().native)
      GTEST_SKIP() << "no native bf16 products here: " << bf16_support().reason
                   << " (the emulated path is tested instead)";
    force_bf16_emulation(GetParam() == Bf16Path::emulated);
    ASSERT_EQ(bf16_path(), GetParam());
  }
  void TearDown() override { force_bf16_emulation(false); }
};

// v with every value rounded to bf16 through to_bf16 (the bit-level rule is tested below).
std::vector<float> bf16_rounded(std::vector<float> v) {
  std::vector<uint16_t> b(v.size());
  to_bf16(b.data(), v.data(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::bit_cast<float>(static_cast<uint32_t>(b[i]) << 16);
  return v;
}

TEST_P(Bf16PathTest, MultipliesBf16RoundedInputsInFp32) {
  const int64_t M = 19, N = 23, K = 130;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      MatmulShape s{.M = M, .N = N, .K = K, .trans_a = ta, .trans_b = tb};
      auto A = random_vector<float>(M * K, 40), B = random_vector<float>(K * N, 41);
      std::vector<float> C(M * N), R(M * N), exact(M * N);
      {
        MatmulPrecisionScope bf16(true);
        EXPECT_TRUE(MatmulPrecisionScope::bf16_active());
        matmul(C.data(), A.data(), B.data(), s);
      }
      EXPECT_FALSE(MatmulPrecisionScope::bf16_active());
      auto Ar = bf16_rounded(A), Br = bf16_rounded(B);
      matmul_reference(R.data(), Ar.data(), Br.data(), s);
      matmul_reference(exact.data(), A.data(), B.data(), s);
      EXPECT_LT(rel_error(C, R), 1e-6) << "trans_a=" << ta << " trans_b=" << tb;  // fp32-accurate on rounded inputs
      EXPECT_GT(rel_error(C, exact), 1e-5);  // and it really did round them
      EXPECT_LT(rel_error(C, exact), 1e-2);
      // Outside the scope the same product is plain fp32 again.
      matmul(C.data(), A.data(), B.data(), s);
      EXPECT_LT(rel_error(C, exact), 1e-6);
    }
}

// The whole model under bf16 products has its own tolerance: logits and gradients within
// 2 % (relative L2) of fp32 on a small gated model; bf16 keeps 8 bits of mantissa
// (relative rounding 2^-9). Run on each path, as above.
TEST_P(Bf16PathTest, ModelStaysWithinTheDocumentedTolerance) {
  const nlohmann::json j{{"vocab_size", 11}, {"d_model", 32},    {"n_layers", 2},       {"n_heads", 2},
                         {"n_kv_heads", 1},  {"head_dim", 4},    {"ffn_hidden", 64},    {"max_seq_len", 8},
                         {"init_std", 0.3},  {"rope_base", 100.0}, {"gate", {{"position", "sdpa"}}}};
  const model::ModelConfig c = model::config_from_json(j, "tiny");
  model::Model<float> fp32(c), bf16(c);
  std::vector<float> w;
  model::init_params(w, fp32.layout(), c, 3);
  fp32.load_params(w);
  bf16.load_params(w);
  bf16.set_bf16_matmuls(true);
  std::vector<int32_t> tokens{1, 5, 2, 9, 4, 4, 0, 10}, targets{5, 2, 9, 4, 4, 0, 10, 3};
  for (auto* m : {&fp32, &bf16}) {
    m->zero_grads();
    m->forward(tokens.data(), targets.data(), 1, 8);
    m->backward();
  }
  std::vector<float> l32(fp32.logits(), fp32.logits() + 8 * 11), l16(bf16.logits(), bf16.logits() + 8 * 11);
  const double logit_err = rel_error(l16, l32);
  EXPECT_LT(logit_err, 2e-2);
  EXPECT_GT(logit_err, 1e-6);  // the bf16 path was taken
  std::vector<float> g32(fp32.grads().begin(), fp32.grads().end()), g16(bf16.grads().begin(), bf16.grads().end());
  EXPECT_LT(rel_error(g16, g32), 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Bf16, Bf16PathTest, ::testing::Values(Bf16Path::native, Bf16Path::emulated),
                         [](const auto& info) { return info.param == Bf16Path::native ? "Native" : "Emulated"; });

// Where both paths run, they give the same products up to the order of the fp32 sums
// (a product of two bf16 values is exact in fp32).
TEST(Bf16PathsTest, NativeAndEmulatedAgree) {
  if (!bf16_support().native) GTEST_SKIP() << "only the emulated path runs here: " << bf16_support().reason;
  const int64_t M = 64, N = 96, K = 512;
  auto A = random_vector<float>(M * K, 50), B = random_vector<float>(N * K, 51);
  std::vector<float> native(M * N), emulated(M * N);
  const MatmulShape s{.M = M, .N = N, .K = K, .trans_b = true, .accumulate = false};
  MatmulPrecisionScope bf16(true);
  matmul(native.data(), A.data(), B.data(), s);
  force_bf16_emulation(true);
  matmul(emulated.data(), A.data(), B.data(), s);
  force_bf16_emulation(false);
  EXPECT_LT(rel_error(emulated, native), 1e-6);
}

// round_to_bf16 (the emulated path's operand rounding) gives the values whose bits
// to_bf16 gives, NaN included.
TEST(Bf16PathsTest, RoundToBf16MatchesToBf16) {
  auto in = random_vector<float>(1000, 52, 1e3);
  in.push_back(std::bit_cast<float>(0x3f808000u));  // a tie
  in.push_back(std::numeric_limits<float>::infinity());
  in.push_back(std::numeric_limits<float>::quiet_NaN());
  in.push_back(-0.0f);
  std::vector<float> rounded(in.size());
  round_to_bf16(rounded.data(), in.data(), static_cast<int64_t>(in.size()));
  const std::vector<float> expect = bf16_rounded(in);
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(expect[i])) {
      EXPECT_TRUE(std::isnan(rounded[i]));
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(rounded[i]), std::bit_cast<uint32_t>(expect[i])) << i << " " << in[i];
    }
  }
}

// The probe agrees with the CPU's own answer (CPUID: AVX512-BF16 is leaf 7.1 EAX bit 5,
// AMX-BF16 leaf 7.0 EDX bit 22) and with a cap that oneDNN honours (ONEDNN_MAX_CPU_ISA, as
// the ctest entry bf16_with_onednn_capped_at_avx2 sets).
TEST(Bf16PathsTest, SupportFollowsTheCpuFlagsAndTheOneDnnCap) {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  bool cpu_has_bf16 = false;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) cpu_has_bf16 |= (a >> 5) & 1u;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) cpu_has_bf16 |= (d >> 22) & 1u;
#else
  GTEST_SKIP() << "the bf16 products are x86 only";
  const bool cpu_has_bf16 = false;
#endif
  std::string cap;
  for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* v = std::getenv(var); v && cap.empty()) cap = v;
  const bool cap_allows = cap.empty() || cap == "ALL" || cap == "AVX512_CORE_BF16" || cap == "AVX512_CORE_AMX";
  const Bf16Support& s = bf16_support();
  EXPECT_EQ(s.native, cpu_has_bf16 && cap_allows) << "isa " << s.isa << ", cap '" << cap << "'";
  if (!s.native) {
    EXPECT_NE(s.reason.find("AVX512-BF16 or AMX"), std::string::npos) << s.reason;
    EXPECT_NE(bf16_emulation_warning("--precision bf16").find("--precision fp32"), std::string::npos);
  } else {
    EXPECT_EQ(bf16_emulation_warning("--precision bf16"), "");
  }
}

// to_bf16 (vectorised where the build has AVX512-BF16) against the rounding rule written
// out bit by bit, on normal values of every magnitude and on exact ties, body and tail.
TEST(MatmulTest, ToBf16RoundsToNearestEvenOnEveryPath) {
  Rng rng(77);
  std::vector<float> in;
  for (int i = 0; i < 4000; ++i)
    in.push_back(static_cast<float>(rng.normal() * std::pow(2.0, static_cast<int>(rng.below(200)) - 100)));
  for (uint32_t mantissa : {0x8000u, 0x18000u, 0x7fffu, 0x8001u})  // ties to even, just below/above
    in.push_back(std::bit_cast<float>(0x3f800000u | mantissa));
  in.push_back(3.0e38f);
  in.push_back(-0.0f);
  std::vector<uint16_t> out(in.size());
  to_bf16(out.data(), in.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(in[i]);
    const uint16_t expect = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    ASSERT_EQ(out[i], expect) << i << " " << in[i];
  }
}

}  // namespace
}  // namespace gatedlm::kernels
