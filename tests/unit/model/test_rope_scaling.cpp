// RoPE scaling (linear / NTK-aware / YaRN): closed forms, the YaRN correction range of
// docs/metrics.md, position interpolation as fractional positions, the YaRN magnitude, the
// rope_scaling config key and its use by the model.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "config_checks.h"
#include "core/error.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "model/rope_scaling.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::model {
namespace {

using gatedlm::testing::random_vector;

RopeScaling scaling(RopeScalingType type, double factor, int64_t original = 0) {
  RopeScaling s;
  s.type = type;
  s.factor = factor;
  s.original_max_seq_len = original;
  return s;
}

TEST(RopeScalingTest, YarnRangeMatchesTheDocumentedCheck) {
  // docs/metrics.md: D=128, b=1e4, L_orig=4096, s=4 gives low=20, high=46.
  const YarnRange r = yarn_range(128, 1e4, 4096);
  EXPECT_EQ(r.low, 20.0);
  EXPECT_EQ(r.high, 46.0);
  // The clamps: a short original length pushes d(32) below 0, a huge one d(1) past D-1.
  EXPECT_EQ(yarn_range(16, 1e4, 64).low, 0.0);
  EXPECT_EQ(yarn_range(16, 10.0, 1 << 30).high, 15.0);
}

TEST(RopeScalingTest, NoneIsPlainRope) {
  const ScaledRope r = scaled_rope(32, 5e3, RopeScaling{}, 64);
  EXPECT_EQ(r.inv_freq, kernels::rope_inv_freq(32, 5e3));
  EXPECT_EQ(r.magnitude, 1.0);
}

TEST(RopeScalingTest, LinearAndNtkMatchTheirClosedForms) {
  const int64_t D = 64;
  const double b = 1e4, s = 8.0;
  const ScaledRope lin = scaled_rope(D, b, scaling(RopeScalingType::linear, s), 256);
  const ScaledRope ntk = scaled_rope(D, b, scaling(RopeScalingType::ntk, s), 256);
  const double b_ntk = b * std::pow(s, static_cast<double>(D) / (D - 2));
  ASSERT_EQ(lin.inv_freq.size(), 32u);
  ASSERT_EQ(ntk.inv_freq.size(), 32u);
  for (int64_t i = 0; i < D / 2; ++i) {
    const double plain = std::pow(b, -2.0 * i / D);
    EXPECT_NEAR(lin.inv_freq[i], plain / s, 1e-15 * plain);
    EXPECT_NEAR(ntk.inv_freq[i], std::pow(b_ntk, -2.0 * i / D), 1e-13 * plain);
  }
  EXPECT_EQ(lin.magnitude, 1.0);
  EXPECT_EQ(ntk.magnitude, 1.0);
  // NTK-aware keeps the highest frequency and interpolates the lowest by exactly s.
  EXPECT_EQ(ntk.inv_freq[0], 1.0);
  EXPECT_NEAR(ntk.inv_freq[D / 2 - 1], std::pow(b, -(D - 2.0) / D) / s, 1e-12 * ntk.inv_freq[D / 2 - 1]);
}

TEST(RopeScalingTest, YarnBlendsExtrapolationAndInterpolationAndScalesMagnitude) {
  const int64_t D = 128;
  const double b = 1e4, s = 4.0;
  const ScaledRope y = scaled_rope(D, b, scaling(RopeScalingType::yarn, s), 4096);
  ASSERT_EQ(y.inv_freq.size(), 64u);
  for (int64_t i = 0; i < D / 2; ++i) {
    const double plain = std::pow(b, -2.0 * i / D);
    const double ramp = std::clamp((i - 20.0) / (46.0 - 20.0), 0.0, 1.0);
    EXPECT_NEAR(y.inv_freq[i], plain / s * ramp + plain * (1.0 - ramp), 1e-14 * plain) << i;
    if (i <= 20) {
      EXPECT_NEAR(y.inv_freq[i], plain, 1e-15 * plain) << i;  // extrapolated
    }
    if (i >= 46) {
      EXPECT_NEAR(y.inv_freq[i], plain / s, 1e-15 * plain) << i;  // interpolated
    }
  }
  EXPECT_NEAR(y.magnitude, 0.1 * std::log(4.0) + 1.0, 1e-15);
  // Factor 1 changes nothing.
  const ScaledRope one = scaled_rope(D, b, scaling(RopeScalingType::yarn, 1.0), 4096);
  EXPECT_EQ(one.magnitude, 1.0);
  for (int64_t i = 0; i < D / 2; ++i) EXPECT_NEAR(one.inv_freq[i], std::pow(b, -2.0 * i / D), 1e-15);
}

// Rotates x (one head, rotate-half over rot dims) by the angles pos * inv_freq.
std::vector<double> rotate(const std::vector<double>& x, const std::vector<double>& inv_freq, double pos) {
  const size_t half = inv_freq.size();
  std::vector<double> y = x;
  for (size_t i = 0; i < half; ++i) {
    const double a = pos * inv_freq[i];
    y[i] = x[i] * std::cos(a) - x[i + half] * std::sin(a);
    y[i + half] = x[i + half] * std::cos(a) + x[i] * std::sin(a);
  }
  return y;
}

TEST(RopeScalingTest, LinearScalingAtPositionPIsPlainRopeAtPOverS) {
  const int64_t D = 16, positions = 40, head_dim = 20;
  const double b = 500.0, s = 3.0;
  const ScaledRope lin = scaled_rope(D, b, scaling(RopeScalingType::linear, s), positions);
  const kernels::RopeTable table = kernels::rope_table(lin.inv_freq, positions, lin.magnitude);
  const std::vector<double> plain = kernels::rope_inv_freq(D, b);
  const auto x = random_vector(head_dim, 21);
  for (int64_t p = 0; p < positions; ++p) {
    auto y = x;
    kernels::rope_apply(y.data(), table, 1, 1, 1, head_dim, p, false);
    // The same vector rotated by unscaled RoPE at the fractional position p/s.
    const auto want = rotate(std::vector<double>(x.begin(), x.begin() + D), plain, p / s);
    for (int64_t i = 0; i < D; ++i) EXPECT_NEAR(y[i], want[i], 1e-12) << "p " << p << " i " << i;
    for (int64_t i = D; i < head_dim; ++i) EXPECT_EQ(y[i], x[i]);
    // Angles directly: atan2 of the table entries equals (p/s) * plain inv_freq (mod 2 pi).
    for (int64_t i = 0; i < D / 2; ++i) {
      const double got = std::atan2(table.sin[p * D / 2 + i], table.cos[p * D / 2 + i]);
      const double want_angle = std::remainder(p / s * plain[i], 2 * M_PI);
      EXPECT_NEAR(std::remainder(got - want_angle, 2 * M_PI), 0.0, 1e-12);
    }
  }
  // Integer multiples: the scaled table at p = s*k is the plain table at k.
  const kernels::RopeTable plain_table = kernels::rope_table(plain, positions);
  for (int64_t k = 0; 3 * k < positions; ++k)
    for (int64_t i = 0; i < D / 2; ++i) {
      EXPECT_NEAR(table.cos[3 * k * D / 2 + i], plain_table.cos[k * D / 2 + i], 1e-13);
      EXPECT_NEAR(table.sin[3 * k * D / 2 + i], plain_table.sin[k * D / 2 + i], 1e-13);
    }
}

TEST(RopeScalingTest, YarnMagnitudeScalesQueryKeyProductsByMSquared) {
  const int64_t D = 32;
  const double s = 16.0, m = 0.1 * std::log(s) + 1.0;
  ModelConfig c;
  c.rope_dims = D;
  c.rope_base = 1e4;
  c.max_seq_len = 128;
  c.rope_scaling = scaling(RopeScalingType::yarn, s);  // original 0 = max_seq_len
  const kernels::RopeTable t = model_rope_table(c, 300);
  const ScaledRope y = scaled_rope(D, 1e4, c.rope_scaling, 128);
  for (int64_t p : {0, 7, 299})
    for (int64_t i = 0; i < D / 2; ++i)
      EXPECT_NEAR(t.cos[p * D / 2 + i] * t.cos[p * D / 2 + i] + t.sin[p * D / 2 + i] * t.sin[p * D / 2 + i],
                  m * m, 1e-12);
  auto q = random_vector(D, 31), k = random_vector(D, 32);
  auto rq = q, rk = k;
  kernels::rope_apply(rq.data(), t, 1, 1, 1, D, 250, false);
  kernels::rope_apply(rk.data(), t, 1, 1, 1, D, 190, false);
  // R(250)^T R(190) = R(-60): a unit-magnitude rotation by the yarn frequencies, times m^2.
  const auto rel = rotate(k, y.inv_freq, -60.0);
  EXPECT_NEAR(std::inner_product(rq.begin(), rq.end(), rk.begin(), 0.0),
              m * m * std::inner_product(q.begin(), q.end(), rel.begin(), 0.0), 1e-10);
}

nlohmann::json base_config() {
  return {{"vocab_size", 50}, {"d_model", 16}, {"n_layers", 1}, {"n_heads", 2},
          {"n_kv_heads", 1},  {"head_dim", 8}, {"ffn_hidden", 24}, {"max_seq_len", 32}};
}

TEST(RopeScalingConfigTest, DefaultsAndRoundTrip) {
  const ModelConfig plain = config_from_json(base_config());
  EXPECT_EQ(plain.rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(plain.rope_scaling.factor, 1.0);
  EXPECT_EQ(plain.rope_scaling.original_max_seq_len, 32);
  EXPECT_FALSE(config_to_json(plain).contains("rope_scaling"));  // unscaled configs stay identical

  nlohmann::json j = base_config();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}};
  const ModelConfig y = config_from_json(j);
  EXPECT_EQ(y.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(y.rope_scaling.factor, 4.0);
  EXPECT_EQ(y.rope_scaling.original_max_seq_len, 32);
  const nlohmann::json back = config_to_json(y);
  EXPECT_EQ(back.at("rope_scaling"),
            (nlohmann::json{{"type", "yarn"}, {"factor", 4.0}, {"original_max_seq_len", 32}}));
  EXPECT_EQ(config_to_json(config_from_json(back)), back);

  j["rope_scaling"] = {{"type", "ntk"}, {"factor", 2.5}, {"original_max_seq_len", 16}};
  EXPECT_EQ(config_from_json(j).rope_scaling.original_max_seq_len, 16);
  j["rope_scaling"] = {{"type", "none"}};
  EXPECT_FALSE(config_to_json(config_from_json(j)).contains("rope_scaling"));
}

TEST(RopeScalingConfigTest, RejectsBadValuesNamingTheKey) {
  auto expect_rejected = [](const nlohmann::json& patch, const std::string& needle) {
    testing::expect_config_rejected(base_config(), patch, needle);
  };
  expect_rejected({{"rope_scaling", {{"type", "dynamic"}}}}, "\"type\"");
  expect_rejected({{"rope_scaling", {{"type", "yarn"}, {"factr", 2}}}}, "\"factr\"");
  expect_rejected({{"rope_scaling", {{"type", "linear"}, {"factor", 0.5}}}}, "rope_scaling.factor");
  expect_rejected({{"rope_scaling", {{"type", "linear"}, {"factor", "2"}}}}, "\"factor\"");
  expect_rejected({{"rope_scaling", {{"type", "none"}, {"factor", 2}}}}, "rope_scaling.factor");
  expect_rejected({{"rope_scaling", {{"type", "yarn"}, {"factor", 2}, {"original_max_seq_len", 0}}}},
                  "\"original_max_seq_len\"");
  expect_rejected({{"rope_scaling", {{"type", "yarn"}, {"factor", 2}, {"original_max_seq_len", 1.5}}}},
                  "\"original_max_seq_len\"");
  expect_rejected({{"rope_dims", 2}, {"rope_scaling", {{"type", "ntk"}, {"factor", 2}}}}, "rope_scaling.type");
  expect_rejected({{"rope_dims", 0}, {"rope_scaling", {{"type", "yarn"}, {"factor", 2}}}}, "rope_scaling.type");
  expect_rejected({{"rope_scaling", "yarn"}}, "rope_scaling");
}

TEST(RopeScalingConfigTest, TheModelUsesTheScaledTable) {
  nlohmann::json j = base_config();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 3}, {"original_max_seq_len", 16}};
  const ModelConfig c = config_from_json(j);
  Model<float> m(c);
  std::vector<float> params;
  init_params(params, m.layout(), c, 5);
  m.load_params(params);
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 50);
  m.forward(tokens.data(), nullptr, 1, 40);  // longer than max_seq_len: the table grows
  const kernels::RopeTable want = model_rope_table(c, 40);
  ASSERT_GE(m.rope().positions, 40);
  for (size_t i = 0; i < want.cos.size(); ++i) {
    EXPECT_EQ(m.rope().cos[i], want.cos[i]);
    EXPECT_EQ(m.rope().sin[i], want.sin[i]);
  }
}

}  // namespace
}  // namespace gatedlm::model
