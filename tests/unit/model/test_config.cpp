// Model config parsing: defaults, round trip, and rejections that name the key.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "config_checks.h"
#include "core/error.h"
#include "model/config.h"
#include "test_files.h"

namespace gatedlm::model {
namespace {

using testing::expect_config_rejected;

nlohmann::json base() {
  return {{"vocab_size", 100}, {"d_model", 16}, {"n_layers", 2},   {"n_heads", 4},
          {"n_kv_heads", 2},   {"head_dim", 8}, {"ffn_hidden", 32}, {"max_seq_len", 64}};
}

TEST(ConfigTest, DefaultsAreTheDocumentedOnes) {
  const ModelConfig c = config_from_json(base());
  EXPECT_EQ(c.rope_base, 10000.0);
  EXPECT_EQ(c.rope_dims, 8);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.init_std, 0.02);
  EXPECT_EQ(c.gate.position, GatePosition::none);
  EXPECT_EQ(c.gate.granularity, GateGranularity::elementwise);
  EXPECT_FALSE(c.gate.head_shared);
  EXPECT_EQ(c.gate.combine, GateCombine::multiply);
  EXPECT_EQ(c.gate.activation, kernels::Activation::sigmoid);
  EXPECT_EQ(c.gate.input, GateInput::hidden);
  EXPECT_EQ(c.gate.input_dims, 0);
  EXPECT_EQ(c.gate.init, GateInit::normal);
  EXPECT_EQ(c.sdpa_transform, SdpaTransform::none);
  EXPECT_FALSE(c.sandwich_norm);
  EXPECT_EQ(c.residual_clip, 0.0);
}

TEST(ConfigTest, InputIndependentGateDefaultsToZeroInit) {
  nlohmann::json j = base();
  j["gate"] = {{"position", "sdpa"}, {"input", "constant"}};
  EXPECT_EQ(config_from_json(j).gate.init, GateInit::zero);
  j["gate"]["init"] = "normal";
  EXPECT_EQ(config_from_json(j).gate.init, GateInit::normal);
}

TEST(ConfigTest, RoundTripsThroughJson) {
  nlohmann::json j = base();
  j["gate"] = {{"position", "value"}, {"granularity", "headwise"}, {"activation", "ns_sigmoid"}};
  j["sandwich_norm"] = true;
  j["residual_clip"] = 50.0;
  const ModelConfig a = config_from_json(j);
  const ModelConfig b = config_from_json(config_to_json(a));
  EXPECT_EQ(config_to_json(a), config_to_json(b));
  EXPECT_EQ(b.gate.granularity, GateGranularity::headwise);
  EXPECT_EQ(b.residual_clip, 50.0);
}

TEST(ConfigTest, RejectsBadInputNamingTheKey) {
  expect_config_rejected(base(), {{"colour", "red"}}, "\"colour\"");
  expect_config_rejected(base(), {{"gate", {{"positon", "sdpa"}}}}, "\"positon\"");
  expect_config_rejected(base(), {{"vocab_size", nullptr}}, "\"vocab_size\"");  // merge_patch null deletes: missing key
  expect_config_rejected(base(), {{"n_heads", 3}}, "\"n_heads\"");
  expect_config_rejected(base(), {{"head_dim", 7}}, "\"head_dim\"");
  expect_config_rejected(base(), {{"rope_dims", 10}}, "\"rope_dims\"");
  expect_config_rejected(base(), {{"rope_dims", 3}}, "\"rope_dims\"");
  expect_config_rejected(base(), {{"d_model", "16"}}, "\"d_model\"");
  expect_config_rejected(base(), {{"qk_norm", 1}}, "\"qk_norm\"");
  expect_config_rejected(base(), {{"gate", {{"position", "middle"}}}}, "middle");
  expect_config_rejected(base(), {{"gate", {{"position", "key"}, {"granularity", "headwise"}}}}, "gate.granularity");
  expect_config_rejected(base(), {{"gate", {{"position", "query"}, {"granularity", "headwise"}}}}, "gate.granularity");
  expect_config_rejected(base(), {{"gate", {{"position", "dense"}, {"head_shared", true}}}}, "gate.head_shared");
  expect_config_rejected(base(), {{"gate", {{"position", "sdpa"}, {"head_shared", true}, {"granularity", "headwise"}}}},
                  "gate.head_shared");
  expect_config_rejected(base(), {{"gate", {{"position", "sdpa"}, {"input_dims", 17}}}}, "gate.input_dims");
  expect_config_rejected(base(), {{"gate", {{"position", "sdpa"}, {"input", "constant"}, {"input_dims", 4}}}},
                  "gate.input_dims");
  expect_config_rejected(base(), {{"sdpa_transform", "layernorm"}}, "sdpa_transform");
  expect_config_rejected(base(), {{"residual_clip", -1.0}}, "\"residual_clip\"");
  expect_config_rejected(base(), {{"norm_eps", 0.0}}, "\"norm_eps\"");
}
// Hardening, third round, row 2: with full_attention_interval the list of layer kinds was
// built before n_layers was checked, and 3e9 layers grew the process to 8 GB before it was
// killed. The count is now refused before the list exists (bounded memory: the peak
// resident size grows by less than 64 MiB), with the same message whichever key gives the
// kinds, and validate() holds the same bound for configs made in code.
TEST(ConfigTest, AHugeLayerCountIsRefusedBeforeItsLayerListIsBuilt) {
  const nlohmann::json linear{{"n_k_heads", 2}, {"n_v_heads", 2}, {"k_head_dim", 8}, {"v_head_dim", 8}};
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  for (const nlohmann::json& kinds : {nlohmann::json{{"full_attention_interval", 4}},
                                      nlohmann::json{{"full_attention_interval", 1}},
                                      nlohmann::json{{"layer_types", nlohmann::json::array()}}}) {
    nlohmann::json patch{{"n_layers", 3'000'000'000LL}, {"linear_attention", linear}};
    patch.update(kinds);
    expect_config_rejected(base(), patch, "n_layers must be in 1..1048576, got 3000000000");
  }
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KiB of peak resident size";
}

}  // namespace
}  // namespace gatedlm::model
