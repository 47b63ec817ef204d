// The layer kinds' registry (model/layer_kinds.h): every built-in kind has its row and mixer,
// the parameter layout asks the kind for its tensors, and a kind registered from outside
// model/ (tests/support/toy_layer_kind.h) trains through the unchanged block loop: its
// gradients match finite differences and the probes ask it what it captures.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/init.h"
#include "model/layer_kinds.h"
#include "model/model.h"
#include "test_util.h"
#include "toy_layer_kind.h"
#include "seeded_model.h"

namespace gatedlm::model {
namespace {

ModelConfig three_layers(std::vector<LayerKind> kinds) {
  nlohmann::json j{{"vocab_size", 11}, {"d_model", 8},  {"n_layers", 3},  {"n_heads", 2},
                   {"n_kv_heads", 1},  {"head_dim", 4}, {"ffn_hidden", 12}, {"max_seq_len", 8},
                   {"init_std", 0.5},  {"rope_base", 100.0}, {"gate", {{"position", "sdpa"}}}};
  ModelConfig c = config_from_json(j, "three layers");
  c.layer_types = std::move(kinds);
  c.linear_attention = {/*n_k_heads=*/1, /*n_v_heads=*/2, /*k_head_dim=*/4, /*v_head_dim=*/4, /*conv_kernel=*/3};
  c.validate();
  return c;
}

template <typename T>
Model<T> initialised(const ModelConfig& c, uint64_t seed) {
  return gatedlm::testing::seeded_model<T>(c, seed);
}

// The names of one layer's tensors, in layout order, without the "model.layers.{i}." prefix.
std::vector<std::string> layer_tensors(const ParamLayout& layout, int64_t layer) {
  const std::string prefix = layer_param(layer, "");
  std::vector<std::string> names;
  for (const ParamSpec& s : layout.specs())
    if (s.name.rfind(prefix, 0) == 0) names.push_back(s.name.substr(prefix.size()));
  return names;
}

TEST(LayerKinds, EveryBuiltInKindHasARowAndAMixer) {
  for (LayerKind kind : {LayerKind::full_attention, LayerKind::linear_attention}) {
    const LayerKindSpec& spec = layer_kind_spec(kind);
    EXPECT_EQ(spec.kind, kind);
    EXPECT_STREQ(spec.name, to_string(kind));
    ASSERT_NE(spec.add_params, nullptr);
    ASSERT_NE(spec.mixer_float, nullptr);
    ASSERT_NE(spec.mixer_double, nullptr);
  }
  const LayerKindSpec& attention = layer_kind_spec(LayerKind::full_attention);
  EXPECT_EQ(attention.decode_state, DecodeStateKind::kv_cache);
  EXPECT_TRUE(attention.captures.attention_probs && attention.captures.sdpa_output);
  const LayerKindSpec& deltanet = layer_kind_spec(LayerKind::linear_attention);
  EXPECT_EQ(deltanet.decode_state, DecodeStateKind::recurrent);
  EXPECT_TRUE(deltanet.captures.recurrent_state && !deltanet.captures.attention_probs);
  EXPECT_THROW(layer_kind_spec(static_cast<LayerKind>(101)), Error);
}

TEST(LayerKinds, ACountOfLayersByDecodeStateAndCapture) {
  const ModelConfig c = three_layers({LayerKind::linear_attention, LayerKind::full_attention, LayerKind::linear_attention});
  EXPECT_EQ(count_layers(c, DecodeStateKind::kv_cache), 1);
  EXPECT_EQ(count_layers(c, DecodeStateKind::recurrent), 2);
  EXPECT_EQ(count_layers(c, &LayerCaptures::attention_probs), 1);
  EXPECT_EQ(count_layers(c, &LayerCaptures::recurrent_state), 2);
  ModelConfig dense = c;
  dense.layer_types.clear();  // no list: every layer softmax attention
  EXPECT_EQ(count_layers(dense, DecodeStateKind::kv_cache), 3);
}

TEST(LayerKinds, TheLayoutPutsEachKindsTensorsBetweenTheBlockNorms) {
  testing::register_silu_kind();
  const ParamLayout layout(
      three_layers({LayerKind::linear_attention, testing::kSiluKind, LayerKind::full_attention}));
  const std::vector<std::string> deltanet = layer_tensors(layout, 0), silu = layer_tensors(layout, 1),
                                  attention = layer_tensors(layout, 2);
  ASSERT_GE(deltanet.size(), 3u);
  EXPECT_EQ(deltanet.front(), "input_layernorm.weight");
  EXPECT_EQ(deltanet[1], "linear_attn.in_proj_qkv.weight");
  EXPECT_NE(std::find(deltanet.begin(), deltanet.end(), "linear_attn.out_proj.weight"), deltanet.end());
  const std::vector<std::string> plain_block{"input_layernorm.weight", "post_attention_layernorm.weight",
                                             "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};
  EXPECT_EQ(silu, plain_block);  // the toy kind adds no tensors of its own
  EXPECT_EQ(attention[1], "self_attn.q_proj.weight");
  EXPECT_NE(std::find(attention.begin(), attention.end(), "self_attn.gate.weight"), attention.end());
}

TEST(LayerKinds, AKindRegisteredOutsideTheModelTrainsThroughTheBlockLoop) {
  testing::register_silu_kind();
  const ModelConfig c = three_layers({LayerKind::full_attention, testing::kSiluKind, LayerKind::full_attention});
  Model<double> m = initialised<double>(c, 3);
  const int64_t B = 2, T = 5;
  Rng rng(4);
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.below(c.vocab_size));
  for (int64_t i = 0; i < B * T; ++i) targets[i] = (i % T == T - 1) ? -1 : tokens[i + 1];
  m.zero_grads();
  m.forward(tokens.data(), targets.data(), B, T);
  m.backward();
  const std::vector<double> analytic(m.grads().begin(), m.grads().end());
  std::vector<double> x(m.params().begin(), m.params().end());
  const std::vector<double> numeric = testing::numeric_grad(x, [&] {
    m.load_params(x);
    return m.forward(tokens.data(), targets.data(), B, T);
  });
  // Layer 0's weights see the loss only through the SiLU layer's backward.
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.up_proj.weight",
                           "model.layers.1.input_layernorm.weight", "model.embed_tokens.weight"}) {
    const ParamSpec& s = m.layout().at(name);
    const std::vector<double> a(analytic.begin() + s.offset, analytic.begin() + s.offset + s.numel),
        n(numeric.begin() + s.offset, numeric.begin() + s.offset + s.numel);
    double norm = 0;
    for (double v : n) norm += v * v;
    EXPECT_GT(norm, 1e-20) << name << " has a zero gradient: the check would be vacuous";
    EXPECT_LT(testing::rel_error(a, n), 1e-6) << name;
  }
}

TEST(LayerKinds, TheProbesAskTheLayerWhatItCaptures) {
  testing::register_silu_kind();
  const ModelConfig c = three_layers({LayerKind::full_attention, testing::kSiluKind, LayerKind::linear_attention});
  Model<float> m = initialised<float>(c, 5);
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6};
  m.forward(tokens.data(), nullptr, 1, 6);
  std::vector<float> probs(c.n_heads * 6 * 6, -1.0f);
  EXPECT_TRUE(m.attention_probs(probs.data(), 0, 0));
  EXPECT_FLOAT_EQ(probs[0], 1.0f);  // the first query sees only the first key
  EXPECT_FALSE(m.attention_probs(probs.data(), 1, 0));
  EXPECT_FALSE(m.attention_probs(probs.data(), 2, 0));
  EXPECT_NE(m.probe(0).q_roped, nullptr);
  EXPECT_NE(m.probe(0).gate_score, nullptr);
  EXPECT_EQ(m.probe(1).q_roped, nullptr);
  EXPECT_EQ(m.probe(1).linear, nullptr);
  EXPECT_NE(m.probe(1).resid_out, nullptr);
  EXPECT_NE(m.probe(2).linear, nullptr);
  EXPECT_EQ(m.probe(2).gate_score, nullptr);
}

}  // namespace
}  // namespace gatedlm::model
