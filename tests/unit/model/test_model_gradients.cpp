// The whole model's gradients (every parameter, every gate variant) against central
// finite differences, all in double precision, on tiny configs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "test_util.h"

namespace gatedlm::model {
namespace {

struct Variant {
  const char* name;
  nlohmann::json overrides;
  // The finite-difference step: the hybrids' Gated DeltaNet layers have large third
  // derivatives at these weights, so their central difference needs a smaller step (the
  // truncation error falls as step^2; test_gated_deltanet.cpp shows it).
  double step = 1e-5;
};

ModelConfig tiny_config(const nlohmann::json& overrides) {
  nlohmann::json j{{"vocab_size", 11}, {"d_model", 8},  {"n_layers", 2},  {"n_heads", 2},
                   {"n_kv_heads", 1},  {"head_dim", 4}, {"ffn_hidden", 12}, {"max_seq_len", 8},
                   {"init_std", 0.5},  {"rope_base", 100.0}};
  j.merge_patch(overrides);
  return config_from_json(j, "tiny");
}

class ModelGradientTest : public ::testing::TestWithParam<Variant> {};

TEST_P(ModelGradientTest, AnalyticGradientsMatchFiniteDifferences) {
  const ModelConfig c = tiny_config(GetParam().overrides);
  Model<double> m(c);
  std::vector<double> w;
  init_params(w, m.layout(), c, 7);
  // Perturb norms and gates away from their initial ones/zeros so their gradients are
  // tested at a generic point.
  Rng rng(99);
  for (const ParamSpec& s : m.layout().specs())
    if (s.kind == ParamKind::norm || s.kind == ParamKind::gate || s.kind == ParamKind::bias ||
        s.kind == ParamKind::linear_norm || s.kind == ParamKind::decay || s.kind == ParamKind::sink)
      for (int64_t i = 0; i < s.numel; ++i) w[s.offset + i] += 0.3 * rng.normal();
  m.load_params(w);
  const int64_t B = 2, T = 5;
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (int64_t i = 0; i < B * T; ++i) tokens[i] = static_cast<int32_t>(rng.below(c.vocab_size));
  for (int64_t i = 0; i < B * T; ++i) targets[i] = (i % T == T - 1) ? -1 : tokens[i + 1];

  m.zero_grads();
  m.forward(tokens.data(), targets.data(), B, T);
  m.backward();
  std::vector<double> analytic(m.grads().begin(), m.grads().end());

  std::vector<double> x(m.params().begin(), m.params().end());
  auto numeric = testing::numeric_grad(x, [&] {
    m.load_params(x);
    return m.forward(tokens.data(), targets.data(), B, T);
  }, GetParam().step);
  for (const ParamSpec& s : m.layout().specs()) {
    std::vector<double> a(analytic.begin() + s.offset, analytic.begin() + s.offset + s.numel);
    std::vector<double> n(numeric.begin() + s.offset, numeric.begin() + s.offset + s.numel);
    double norm = 0;
    for (double v : n) norm += v * v;
    EXPECT_GT(norm, 1e-20) << s.name << " has a zero gradient: the check would be vacuous";
    EXPECT_LT(testing::rel_error(a, n), 1e-6) << GetParam().name << ": " << s.name;
  }
}

const Variant kVariants[] = {
    {"baseline_gqa", nlohmann::json::object()},
    {"mha_no_qknorm_tied_partial_rope",
     {{"n_kv_heads", 2}, {"qk_norm", false}, {"tie_embeddings", true}, {"rope_dims", 2}}},
    {"sdpa_elementwise", {{"gate", {{"position", "sdpa"}}}}},
    {"sdpa_headwise", {{"gate", {{"position", "sdpa"}, {"granularity", "headwise"}}}}},
    {"sdpa_head_shared", {{"gate", {{"position", "sdpa"}, {"head_shared", true}}}}},
    {"value_elementwise", {{"gate", {{"position", "value"}}}}},
    {"value_headwise", {{"gate", {{"position", "value"}, {"granularity", "headwise"}}}}},
    {"value_head_shared", {{"n_kv_heads", 2}, {"gate", {{"position", "value"}, {"head_shared", true}}}}},
    {"key_elementwise", {{"gate", {{"position", "key"}}}}},
    {"query_elementwise", {{"gate", {{"position", "query"}, {"activation", "silu"}}}}},
    {"dense_elementwise", {{"gate", {{"position", "dense"}}}}},
    {"sdpa_additive_silu", {{"gate", {{"position", "sdpa"}, {"combine", "add"}, {"activation", "silu"}}}}},
    {"sdpa_additive_identity",
     {{"gate", {{"position", "sdpa"}, {"combine", "add"}, {"activation", "identity"}}}}},
    {"sdpa_ns_sigmoid", {{"gate", {{"position", "sdpa"}, {"activation", "ns_sigmoid"}}}}},
    {"sdpa_input_independent", {{"gate", {{"position", "sdpa"}, {"input", "constant"}}}}},
    {"sdpa_input_dims", {{"gate", {{"position", "sdpa"}, {"input_dims", 3}}}}},
    {"sdpa_rmsnorm_transform", {{"sdpa_transform", "rmsnorm"}}},
    {"sdpa_silu_transform", {{"sdpa_transform", "silu"}}},
    {"sandwich_norm", {{"sandwich_norm", true}, {"gate", {{"position", "sdpa"}}}}},
    {"residual_clip", {{"residual_clip", 0.7}}},
    {"qkv_o_bias", {{"attn_qkv_bias", true}, {"attn_o_bias", true}}},
    {"qkv_o_bias_sdpa_headwise_gqa4",
     {{"attn_qkv_bias", true}, {"attn_o_bias", true}, {"n_heads", 4}, {"n_kv_heads", 1},
      {"gate", {{"position", "sdpa"}, {"granularity", "headwise"}}}}},
    {"o_bias_dense_gate", {{"attn_o_bias", true}, {"gate", {{"position", "dense"}}}}},
    {"qkv_bias_constant_gate", {{"attn_qkv_bias", true}, {"gate", {{"position", "sdpa"}, {"input", "constant"}}}}},
    // Learned sink logits (kernels/attention_sinks.h), alone and with gates in and after the kernel.
    {"attention_sinks", {{"attention_sinks", true}}},
    {"attention_sinks_sdpa_elementwise", {{"attention_sinks", true}, {"gate", {{"position", "sdpa"}}}}},
    {"attention_sinks_headwise_silu",
     {{"attention_sinks", true}, {"sdpa_transform", "silu"}, {"gate", {{"position", "sdpa"}, {"granularity", "headwise"}}}}},
    {"attention_sinks_value_gate_mha", {{"attention_sinks", true}, {"n_kv_heads", 2}, {"gate", {{"position", "value"}}}}},
    // Softpick instead of softmax, alone, with the G1 gate and in a sliding layer.
    {"softpick", {{"attention_normalizer", "softpick"}}},
    {"softpick_g1_sliding",
     {{"attention_normalizer", "softpick"}, {"gate", {{"position", "sdpa"}}},
      {"layer_types", {"sliding_attention", "full_attention"}}, {"sliding_window", 2}}},
    // Sliding-window layers (model/mixer_sliding.h): a window shorter than the sequence, with
    // the gate and with sinks.
    {"sliding_window_g1",
     {{"layer_types", {"sliding_attention", "full_attention"}}, {"sliding_window", 2}, {"gate", {{"position", "sdpa"}}}}},
    {"sliding_window_sinks_gqa",
     {{"layer_types", {"full_attention", "sliding_attention"}}, {"sliding_window", 3}, {"attention_sinks", true},
      {"n_heads", 4}}},
    // Hybrid models: a Gated DeltaNet layer (model/gated_deltanet.h) before a softmax layer.
    {"hybrid_gated_nv_2nk",
     {{"layer_types", {"linear_attention", "full_attention"}},
      {"linear_attention", {{"n_k_heads", 1}, {"n_v_heads", 2}, {"k_head_dim", 4}, {"v_head_dim", 3}, {"conv_kernel", 3}}},
      {"gate", {{"position", "sdpa"}}}},
     1e-6},
    // Tiled value heads (llama.cpp's qwen35 order, model/hybrid_config.h): key head j serves
    // value heads j and j + 2.
    {"hybrid_tiled_value_heads",
     {{"layer_types", {"linear_attention", "full_attention"}},
      {"linear_attention",
       {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 3}, {"v_head_dim", 2}, {"value_head_order", "tiled"}}}},
     1e-6},
    {"hybrid_attention_sinks",
     {{"layer_types", {"linear_attention", "full_attention"}}, {"attention_sinks", true},
      {"linear_attention", {{"n_k_heads", 1}, {"n_v_heads", 1}, {"k_head_dim", 4}, {"v_head_dim", 4}, {"conv_kernel", 2}}},
      {"gate", {{"position", "sdpa"}}}},
     1e-6},
    {"hybrid_zero_centered_partial_rope_sandwich",
     {{"full_attention_interval", 2},
      {"linear_attention", {{"n_k_heads", 2}, {"n_v_heads", 2}, {"k_head_dim", 3}, {"v_head_dim", 4}}},
      {"norm_zero_centered", true}, {"rope_dims", 2}, {"sandwich_norm", true}, {"residual_clip", 0.9}},
     1e-6},
};

INSTANTIATE_TEST_SUITE_P(AllGateVariants, ModelGradientTest, ::testing::ValuesIn(kVariants),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ModelTest, FloatAndDoubleForwardAgree) {
  const ModelConfig c = tiny_config({{"gate", {{"position", "sdpa"}}}, {"init_std", 0.3}});
  Model<double> md(c);
  Model<float> mf(c);
  std::vector<double> w;
  init_params(w, md.layout(), c, 3);
  md.load_params(w);
  std::vector<float> wf(w.begin(), w.end());
  mf.load_params(wf);
  std::vector<int32_t> tokens{1, 5, 2, 9, 4, 4, 0, 10};
  md.forward(tokens.data(), nullptr, 1, 8);
  mf.forward(tokens.data(), nullptr, 1, 8);
  std::vector<double> ld(md.logits(), md.logits() + 8 * 11);
  std::vector<float> lf(mf.logits(), mf.logits() + 8 * 11);
  EXPECT_LT(testing::rel_error(lf, ld), 1e-5);
}

// The float model (the blocked kernels with the sinks' passes, the G1 gate's backward in the
// kernel) against the double one (the reference kernels), forward and gradients.
TEST(ModelTest, FloatAndDoubleAgreeWithSinksAndTheGate) {
  const ModelConfig c = tiny_config({{"gate", {{"position", "sdpa"}}}, {"attention_sinks", true}, {"init_std", 0.3}});
  Model<double> md(c);
  Model<float> mf(c);
  std::vector<double> w;
  init_params(w, md.layout(), c, 5);
  Rng rng(3);
  for (const ParamSpec& s : md.layout().specs())
    if (s.kind == ParamKind::sink)
      for (int64_t i = 0; i < s.numel; ++i) w[s.offset + i] = 1.5 * rng.normal();
  md.load_params(w);
  std::vector<float> wf(w.begin(), w.end());
  mf.load_params(wf);
  std::vector<int32_t> tokens{1, 5, 2, 9, 4, 4, 0, 10}, targets{5, 2, 9, 4, 4, 0, 10, 3};
  md.zero_grads();
  mf.zero_grads();
  md.forward(tokens.data(), targets.data(), 1, 8);
  mf.forward(tokens.data(), targets.data(), 1, 8);
  EXPECT_LT(testing::rel_error(std::vector<float>(mf.logits(), mf.logits() + 8 * 11),
                               std::vector<double>(md.logits(), md.logits() + 8 * 11)),
            1e-5);
  md.backward();
  mf.backward();
  for (const ParamSpec& s : md.layout().specs()) {
    std::vector<double> gd(md.grads().begin() + s.offset, md.grads().begin() + s.offset + s.numel);
    std::vector<float> gf(mf.grads().begin() + s.offset, mf.grads().begin() + s.offset + s.numel);
    EXPECT_LT(testing::rel_error(gf, gd), 1e-4) << s.name;
  }
}

// A window at least as long as the sequence changes nothing; a shorter one changes the rows
// past it and only those.
TEST(ModelTest, ASlidingWindowLayerIsFullAttentionWithinItsWindow) {
  const ModelConfig full = tiny_config({{"gate", {{"position", "sdpa"}}}});
  Model<double> mf(full);
  std::vector<double> w;
  init_params(w, mf.layout(), full, 4);
  mf.load_params(w);
  std::vector<int32_t> tokens{1, 5, 2, 9, 4, 4, 0, 10};
  mf.forward(tokens.data(), nullptr, 1, 8);
  const std::vector<double> want(mf.logits(), mf.logits() + 8 * 11);
  for (int64_t window : {8, 3}) {
    const ModelConfig sliding = tiny_config({{"gate", {{"position", "sdpa"}}},
                                             {"layer_types", {"sliding_attention", "sliding_attention"}},
                                             {"sliding_window", window}});
    Model<double> ms(sliding);
    ms.load_params(w);  // the same tensors
    ms.forward(tokens.data(), nullptr, 1, 8);
    const std::vector<double> got(ms.logits(), ms.logits() + 8 * 11);
    for (int64_t i = 0; i < 8 * 11; ++i) {
      if (i < window * 11) {
        EXPECT_NEAR(got[i], want[i], 1e-12) << "window " << window << ", row " << i / 11;
      } else if (window < 8) {
        EXPECT_GT(std::abs(got[i] - want[i]), 0.0) << "window " << window << ", row " << i / 11;
      }
    }
  }
}

TEST(ModelTest, IsCausal) {
  const ModelConfig c = tiny_config({{"gate", {{"position", "sdpa"}}}});
  Model<double> m(c);
  std::vector<double> w;
  init_params(w, m.layout(), c, 3);
  m.load_params(w);
  std::vector<int32_t> a{1, 2, 3, 4, 5, 6}, b{1, 2, 3, 4, 5, 9};
  m.forward(a.data(), nullptr, 1, 6);
  std::vector<double> la(m.logits(), m.logits() + 6 * 11);
  m.forward(b.data(), nullptr, 1, 6);
  std::vector<double> lb(m.logits(), m.logits() + 6 * 11);
  for (int i = 0; i < 5 * 11; ++i) EXPECT_EQ(la[i], lb[i]);  // rows before the change are identical
  double diff = 0;
  for (int i = 5 * 11; i < 6 * 11; ++i) diff += std::abs(la[i] - lb[i]);
  EXPECT_GT(diff, 1e-6);
}

TEST(ModelTest, RejectsOutOfVocabularyTokens) {
  Model<float> m(tiny_config(nlohmann::json::object()));
  std::vector<int32_t> tokens{1, 11};
  EXPECT_THROW(m.forward(tokens.data(), nullptr, 1, 2), gatedlm::Error);
}

}  // namespace
}  // namespace gatedlm::model
