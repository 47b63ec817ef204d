// Attention biases: the bias kernel against a naive loop, the config keys, the layout
// (names, shapes, adjacency with the fused product) and the counts of `gatedlm params`.
// Their gradients are in test_model_gradients.cpp; the PyTorch comparison in
// tests/reference (cases *_bias).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/bias.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "test_util.h"

namespace gatedlm {
namespace {

TEST(BiasKernelTest, ForwardAndBackwardMatchNaiveLoopsOnAColumnBlock) {
  const int64_t n = 37, width = 11, ld = 19;
  std::vector<double> y = testing::random_vector(n * ld, 1), b = testing::random_vector(width, 2);
  std::vector<double> expect = y;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < width; ++j) expect[r * ld + j] += b[j];
  kernels::bias_forward(y.data(), b.data(), n, width, ld);
  EXPECT_EQ(y, expect);  // columns past width untouched too

  std::vector<float> dy = testing::random_vector<float>(n * ld, 3);
  std::vector<float> db(width, 1.0f);
  kernels::bias_backward(db.data(), dy.data(), n, width, ld);
  for (int64_t j = 0; j < width; ++j) {
    double sum = 1.0;
    for (int64_t r = 0; r < n; ++r) sum += dy[r * ld + j];
    EXPECT_NEAR(db[j], sum, 1e-5) << j;
  }
}

model::ModelConfig config(const nlohmann::json& overrides) {
  nlohmann::json j{{"vocab_size", 50}, {"d_model", 16}, {"n_layers", 2}, {"n_heads", 4},
                   {"n_kv_heads", 2},  {"head_dim", 8}, {"ffn_hidden", 24}, {"max_seq_len", 16}};
  j.merge_patch(overrides);
  return model::config_from_json(j, "test");
}

TEST(AttentionBiasConfigTest, KeysRoundTripAndAreWrittenOnlyWhenOn) {
  const model::ModelConfig plain = config(nlohmann::json::object());
  EXPECT_FALSE(model::config_to_json(plain).contains("attn_qkv_bias"));
  EXPECT_FALSE(model::config_to_json(plain).contains("attn_o_bias"));
  const model::ModelConfig both = config({{"attn_qkv_bias", true}, {"attn_o_bias", true}});
  const model::ModelConfig again = model::config_from_json(model::config_to_json(both), "again");
  EXPECT_TRUE(again.attn_qkv_bias);
  EXPECT_TRUE(again.attn_o_bias);
  try {
    config({{"attn_qkv_bias", 1}});
    FAIL() << "an integer was accepted for a boolean";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attn_qkv_bias"), std::string::npos) << e.what();
  }
}

TEST(AttentionBiasConfigTest, GateBiasNeedsTheWholeInput) {
  try {
    config({{"attn_qkv_bias", true}, {"gate", {{"position", "sdpa"}, {"input_dims", 4}}}});
    FAIL() << "a partial-input gate with a bias was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attn_qkv_bias"), std::string::npos) << e.what();
  }
}

TEST(AttentionBiasLayoutTest, NamesShapesAdjacencyAndCounts) {
  const model::ModelConfig c =
      config({{"attn_qkv_bias", true}, {"attn_o_bias", true}, {"gate", {{"position", "sdpa"}, {"granularity", "headwise"}}}});
  const model::ParamLayout layout(c);
  EXPECT_EQ(layout.at("model.layers.1.self_attn.q_proj.bias").shape, std::vector<int64_t>{32});
  EXPECT_EQ(layout.at("model.layers.1.self_attn.k_proj.bias").shape, std::vector<int64_t>{16});
  EXPECT_EQ(layout.at("model.layers.1.self_attn.v_proj.bias").shape, std::vector<int64_t>{16});
  EXPECT_EQ(layout.at("model.layers.1.self_attn.gate.bias").shape, std::vector<int64_t>{4});
  EXPECT_EQ(layout.at("model.layers.1.self_attn.o_proj.bias").shape, std::vector<int64_t>{16});
  const int64_t q = layout.at("model.layers.0.self_attn.q_proj.bias").offset;
  EXPECT_EQ(layout.at("model.layers.0.self_attn.k_proj.bias").offset, q + 32);
  EXPECT_EQ(layout.at("model.layers.0.self_attn.v_proj.bias").offset, q + 48);
  EXPECT_EQ(layout.at("model.layers.0.self_attn.gate.bias").offset, q + 64);
  EXPECT_EQ(layout.count(model::ParamKind::bias), 2 * (32 + 16 + 16 + 4 + 16));
  EXPECT_FALSE(layout.at("model.layers.0.self_attn.o_proj.bias").decays());
  // Without the keys nothing changes.
  const model::ParamLayout plain(config({{"gate", {{"position", "sdpa"}}}}));
  EXPECT_EQ(plain.count(model::ParamKind::bias), 0);
  EXPECT_EQ(plain.find("model.layers.0.self_attn.gate.bias"), nullptr);
  // A constant gate has no bias (its parameter is the score itself).
  const model::ParamLayout constant(config({{"attn_qkv_bias", true}, {"gate", {{"position", "sdpa"}, {"input", "constant"}}}}));
  EXPECT_EQ(constant.find("model.layers.0.self_attn.gate.bias"), nullptr);
  EXPECT_EQ(constant.count(model::ParamKind::bias), 2 * (32 + 16 + 16));
}

}  // namespace
}  // namespace gatedlm
