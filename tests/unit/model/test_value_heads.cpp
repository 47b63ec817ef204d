// The value-head orders of a linear layer (model/hybrid_config.h's ValueHeadOrder,
// model/value_heads.h): a model whose tensors were moved into the tiled order by
// reorder_value_heads is the same function as the grouped one, forward and backward; the same
// tensors read in the other order are a different model (the layer honours the key); and the
// move is a permutation that comes back exactly. The tiled layer on its own is checked
// against finite differences (test_gated_deltanet.cpp, test_model_gradients.cpp) and against
// the PyTorch reference (tests/reference/hybrid_reference.py's tiled case).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "model/value_heads.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::model {
namespace {

// Two key heads of r = 3 value heads each: grouped serves 0 1 2 | 3 4 5, tiled 0 2 4 | 1 3 5.
ModelConfig hybrid(ValueHeadOrder order) {
  nlohmann::json j{{"vocab_size", 13}, {"d_model", 16}, {"n_layers", 2}, {"n_heads", 2}, {"n_kv_heads", 1},
                   {"head_dim", 8}, {"ffn_hidden", 24}, {"max_seq_len", 16}, {"init_std", 0.4},
                   {"layer_types", {"linear_attention", "full_attention"}},
                   {"linear_attention", {{"n_k_heads", 2}, {"n_v_heads", 6}, {"k_head_dim", 4}, {"v_head_dim", 3}}}};
  ModelConfig c = config_from_json(j, "test");
  c.linear_attention.value_head_order = order;
  return c;
}

struct Outputs {
  std::vector<float> logits, grads;
  float loss;
};

Outputs run(const ModelConfig& c, const std::vector<float>& params) {
  Model<float> m(c);
  m.load_params(params);
  const int64_t B = 2, T = 9;
  std::vector<int32_t> tokens(B * T), targets(B * T);
  Rng rng(5);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng.below(c.vocab_size));
  for (int64_t i = 0; i < B * T; ++i) targets[i] = i % T == T - 1 ? -1 : tokens[i + 1];
  m.zero_grads();
  const float loss = m.forward(tokens.data(), targets.data(), B, T);
  m.backward();
  return {{m.logits(), m.logits() + B * T * c.vocab_size}, {m.grads().begin(), m.grads().end()}, loss};
}

TEST(ValueHeads, TheTiledModelIsTheGroupedOneWithItsHeadsMoved) {
  ModelConfig grouped = hybrid(ValueHeadOrder::grouped);
  const ParamLayout layout(grouped);
  std::vector<float> w;
  init_params(w, layout, grouped, 3);
  Rng rng(8);  // decays and the gated norm away from their initial values, so every head differs
  for (const ParamSpec& s : layout.specs())
    if (s.kind == ParamKind::decay || s.kind == ParamKind::linear_norm)
      for (int64_t i = 0; i < s.numel; ++i) w[s.offset + i] += 0.3f * static_cast<float>(rng.normal());
  const Outputs want = run(grouped, w);

  ModelConfig tiled = grouped;
  std::vector<float> moved = w;
  reorder_value_heads(tiled, moved, ValueHeadOrder::tiled);
  EXPECT_EQ(tiled.linear_attention.value_head_order, ValueHeadOrder::tiled);
  EXPECT_NE(moved, w);
  const Outputs got = run(tiled, moved);
  EXPECT_LT(testing::rel_error(got.logits, want.logits), 1e-5);
  EXPECT_NEAR(got.loss, want.loss, 1e-5f);
  // The gradients are the grouped model's, moved as the weights were.
  ModelConfig back_config = tiled;
  std::vector<float> grads_back = got.grads;
  reorder_value_heads(back_config, grads_back, ValueHeadOrder::grouped);
  EXPECT_LT(testing::rel_error(grads_back, want.grads), 1e-5);

  // The same tensors read in the other order are another model: the key is honoured.
  const Outputs misread = run(tiled, w);
  EXPECT_GT(testing::rel_error(misread.logits, want.logits), 1e-3);

  // Back to grouped: the very weights, bit for bit.
  reorder_value_heads(tiled, moved, ValueHeadOrder::grouped);
  EXPECT_EQ(moved, w);
  EXPECT_EQ(tiled.linear_attention.value_head_order, ValueHeadOrder::grouped);
}

// Where the heads are: in_proj_qkv's v rows after q and k, out_proj's columns in every row.
TEST(ValueHeads, EveryTensorOfAValueHeadMovesWithIt) {
  ModelConfig c = hybrid(ValueHeadOrder::grouped);
  const ParamLayout layout(c);
  std::vector<float> w(static_cast<size_t>(layout.total()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  std::vector<float> moved = w;
  reorder_value_heads(c, moved, ValueHeadOrder::tiled);
  const LinearAttentionConfig& la = c.linear_attention;
  // Tiled head t = m * n_k + j is grouped head j * r + m: t 1 (j 1, m 0) is grouped head 3.
  const int64_t d = c.d_model, dv = la.v_head_dim, kd = la.key_dim();
  const ParamSpec& qkv = layout.at("model.layers.0.linear_attn.in_proj_qkv.weight");
  EXPECT_EQ(moved[qkv.offset + 2 * kd * d + 1 * dv * d], w[qkv.offset + 2 * kd * d + 3 * dv * d]);
  EXPECT_EQ(moved[qkv.offset + 5], w[qkv.offset + 5]) << "q and k stay";
  const ParamSpec& out = layout.at("model.layers.0.linear_attn.out_proj.weight");
  const int64_t row = 7 * la.value_dim();
  EXPECT_EQ(moved[out.offset + row + 1 * dv + 2], w[out.offset + row + 3 * dv + 2]);
  const ParamSpec& a = layout.at("model.layers.0.linear_attn.A_log");
  EXPECT_EQ(moved[a.offset + 4], w[a.offset + 2]);  // t 4 = (j 0, m 2): grouped head 2
  const ParamSpec& norm = layout.at("model.layers.0.linear_attn.norm.weight");
  EXPECT_TRUE(std::equal(w.begin() + norm.offset, w.begin() + norm.offset + norm.numel, moved.begin() + norm.offset));
  const ParamSpec& attn = layout.at("model.layers.1.self_attn.o_proj.weight");
  EXPECT_TRUE(std::equal(w.begin() + attn.offset, w.begin() + attn.offset + attn.numel, moved.begin() + attn.offset));
}

TEST(ValueHeads, TheOrderIsAConfigKey) {
  nlohmann::json j = config_to_json(hybrid(ValueHeadOrder::tiled));
  EXPECT_EQ(j["linear_attention"]["value_head_order"], "tiled");
  EXPECT_EQ(config_from_json(j, "test").linear_attention.value_head_order, ValueHeadOrder::tiled);
  j["linear_attention"].erase("value_head_order");
  EXPECT_EQ(config_from_json(j, "test").linear_attention.value_head_order, ValueHeadOrder::grouped);
  // The default is left out, so grouped configs read where the key is unknown (older gatedlm).
  EXPECT_FALSE(config_to_json(hybrid(ValueHeadOrder::grouped))["linear_attention"].contains("value_head_order"));
  j["linear_attention"]["value_head_order"] = "interleaved";
  const std::string error = testing::error_of([&] { (void)config_from_json(j, "test"); });
  EXPECT_TRUE(testing::contains(error, "value_head_order")) << error;
  EXPECT_TRUE(testing::contains(error, "interleaved")) << error;
}

}  // namespace
}  // namespace gatedlm::model
