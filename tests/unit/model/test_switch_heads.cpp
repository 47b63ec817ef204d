// Switch heads (model/switch_heads.h): the config, the layer against a naive dense
// reference (selection, ties, empty experts), the whole model's gradients against fp64
// finite differences, and "switch v, 1top1" == the headwise value gate (G2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "config_checks.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "model/switch_heads.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::model {
namespace {

using nlohmann::json;

json small_json(const json& overrides) {
  json j{{"vocab_size", 11}, {"d_model", 8},      {"n_layers", 2},  {"n_heads", 2},
         {"n_kv_heads", 1},  {"head_dim", 4},     {"ffn_hidden", 12}, {"max_seq_len", 8},
         {"init_std", 0.5},  {"rope_base", 100.0}};
  j.merge_patch(overrides);
  return j;
}
ModelConfig small_config(const json& overrides) { return config_from_json(small_json(overrides), "tiny"); }
json switch_heads(int64_t experts, int64_t top_k, const char* on) {
  return {{"switch_heads", {{"n_experts", experts}, {"top_k", top_k}, {"experts_on", on}}}};
}

// ---- config ---------------------------------------------------------------------------


TEST(SwitchHeadsConfig, ParsesRoundTripsAndDescribes) {
  const ModelConfig c = small_config(switch_heads(8, 2, "kv"));
  EXPECT_EQ(c.switch_heads.n_experts, 8);
  EXPECT_EQ(c.switch_heads.top_k, 2);
  EXPECT_TRUE(c.switch_heads.switches_k());
  EXPECT_EQ(describe_switch_heads(c), "switch kv, 8top2");
  EXPECT_EQ(config_to_json(config_from_json(config_to_json(c))), config_to_json(c));
  // experts_on defaults to v; a config without the object has none and writes none.
  const ModelConfig v = small_config({{"switch_heads", {{"n_experts", 1}, {"top_k", 1}}}});
  EXPECT_EQ(v.switch_heads.experts_on, SwitchTarget::v);
  EXPECT_FALSE(v.switch_heads.switches_k());
  const ModelConfig plain = small_config(json::object());
  EXPECT_FALSE(plain.switch_heads.on());
  EXPECT_FALSE(config_to_json(plain).contains("switch_heads"));
  EXPECT_EQ(describe_switch_heads(plain), "none");
}

TEST(SwitchHeadsConfig, RejectsBadInputNamingTheKey) {
  auto expect_rejected = [](const json& patch, const std::string& needle) {
    testing::expect_config_rejected(small_json(json::object()), patch, needle);
  };
  expect_rejected({{"switch_heads", {{"n_experts", 0}, {"top_k", 1}}}}, "\"n_experts\"");
  expect_rejected({{"switch_heads", {{"n_experts", 4}, {"top_k", 5}}}}, "switch_heads.top_k");
  expect_rejected({{"switch_heads", {{"n_experts", 4}, {"top_k", 0}}}}, "switch_heads.top_k");
  expect_rejected({{"switch_heads", {{"n_experts", 4}}}}, "\"top_k\"");
  expect_rejected({{"switch_heads", {{"top_k", 1}}}}, "\"n_experts\"");
  expect_rejected({{"switch_heads", {{"n_experts", 2}, {"top_k", 1}, {"experts_on", "q"}}}}, "experts_on");
  expect_rejected({{"switch_heads", {{"n_experts", 2}, {"top_k", 1}, {"router", "softmax"}}}}, "\"router\"");
  expect_rejected({{"switch_heads", {{"n_experts", 5000}, {"top_k", 1}}}}, "switch_heads.n_experts");
  expect_rejected({{"switch_heads", "v"}}, "switch_heads");
  json bias = switch_heads(2, 1, "v");
  bias["attn_qkv_bias"] = true;
  expect_rejected(bias, "\"attn_qkv_bias\"");
}

TEST(SwitchHeadsConfig, LayoutNamesAndCounts) {
  const ModelConfig kv = small_config(switch_heads(3, 2, "kv"));
  const ParamLayout l(kv);
  EXPECT_EQ(l.find("model.layers.0.self_attn.v_proj.weight"), nullptr);
  EXPECT_EQ(l.find("model.layers.0.self_attn.k_proj.weight"), nullptr);
  EXPECT_EQ(l.at("model.layers.1.self_attn.kv_router.weight").shape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(l.at("model.layers.1.self_attn.kv_router.weight").kind, ParamKind::switch_router);
  for (const char* kind : {"k", "v"})
    for (int e = 0; e < 3; ++e)
      EXPECT_EQ(l.at(cat("model.layers.0.self_attn.", kind, "_experts.", e, ".weight")).shape,
                (std::vector<int64_t>{4, 8}));
  const SwitchHeadsCounts n = switch_heads_counts(kv);
  EXPECT_EQ(n.router, 2 * 3 * 8);
  EXPECT_EQ(n.experts, 2 * 2 * 3 * 4 * 8);
  EXPECT_EQ(n.experts_active, 2 * 2 * 2 * 4 * 8);
  EXPECT_EQ(l.count(ParamKind::switch_router), n.router);
  // Against the plain model: v_proj and k_proj (2 x 32 per layer) become 6 experts and a router.
  const ParamLayout plain(small_config(json::object()));
  EXPECT_EQ(l.total() - plain.total(), 2 * (6 * 32 + 24 - 64));

  const ModelConfig v = small_config(switch_heads(2, 1, "v"));
  const ParamLayout lv(v);
  EXPECT_NE(lv.find("model.layers.0.self_attn.k_proj.weight"), nullptr);
  EXPECT_EQ(lv.find("model.layers.0.self_attn.v_proj.weight"), nullptr);
  EXPECT_EQ(lv.find("model.layers.0.self_attn.k_experts.0.weight"), nullptr);
  EXPECT_EQ(lv.at("model.layers.0.self_attn.v_router.weight").shape, (std::vector<int64_t>{2, 8}));
}

// ---- the layer against a naive reference ----------------------------------------------

// Everything computed densely, in double, with its own selection (a stable sort).
struct NaiveOut {
  std::vector<double> k, v;                // [n, kv_dim]
  std::vector<std::vector<int>> chosen;    // [n*H] experts, best first
};
NaiveOut naive_switch(const ModelConfig& c, const std::vector<double>& x, int64_t n, const std::vector<double>& router,
                      const std::vector<double>& kx, const std::vector<double>& vx) {
  const int64_t H = c.n_kv_heads, E = c.switch_heads.n_experts, K = c.switch_heads.top_k, hd = c.head_dim,
                d = c.d_model, kvd = c.kv_dim();
  NaiveOut o{std::vector<double>(n * kvd, 0.0), std::vector<double>(n * kvd, 0.0), {}};
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> pre(E, 0.0);
      for (int64_t e = 0; e < E; ++e)
        for (int64_t i = 0; i < d; ++i) pre[e] += x[t * d + i] * router[(h * E + e) * d + i];
      std::vector<int> order(E);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pre[a] > pre[b]; });
      order.resize(K);
      o.chosen.push_back(order);
      for (int e : order) {
        const double s = 1.0 / (1.0 + std::exp(-pre[e]));
        for (int64_t r = 0; r < hd; ++r) {
          double pv = 0, pk = 0;
          for (int64_t i = 0; i < d; ++i) {
            pv += vx[(e * kvd + h * hd + r) * d + i] * x[t * d + i];
            if (!kx.empty()) pk += kx[(e * kvd + h * hd + r) * d + i] * x[t * d + i];
          }
          o.v[t * kvd + h * hd + r] += s * pv;
          o.k[t * kvd + h * hd + r] += s * pk;
        }
      }
    }
  return o;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Runs the layer in float (oneDNN products) against the naive reference; `router` lets a
// test force ties.
void check_layer(const ModelConfig& c, std::vector<double> router, int64_t n, uint64_t seed) {
  const int64_t E = c.switch_heads.n_experts, kvd = c.kv_dim(), d = c.d_model;
  const bool kv = c.switch_heads.switches_k();
  const auto x = testing::random_vector<double>(n * d, seed);
  const auto vx = testing::random_vector<double>(E * kvd * d, seed + 1, 0.3);
  const auto kx = kv ? testing::random_vector<double>(E * kvd * d, seed + 2, 0.3) : std::vector<double>{};
  const NaiveOut want = naive_switch(c, x, n, router, kx, vx);
  const auto xf = cast<float>(x), rf = cast<float>(router), vf = cast<float>(vx), kf = cast<float>(kx);
  std::vector<float> k0(n * kvd, -7.0f), v0(n * kvd, -7.0f);
  SwitchHeadsState<float> st;
  SwitchHeadsScratch<float> scratch;
  switch_heads_forward(k0.data(), v0.data(), st, scratch, xf.data(), n,
                       SwitchHeadsWeights<float>{rf.data(), kv ? kf.data() : nullptr, vf.data()}, c);
  EXPECT_LT(testing::rel_error(v0, want.v), 1e-5);
  if (kv) {
    EXPECT_LT(testing::rel_error(k0, want.k), 1e-5);
  } else {
    EXPECT_EQ(k0, std::vector<float>(n * kvd, -7.0f));  // keys untouched
  }
  const int64_t K = c.switch_heads.top_k;
  for (size_t th = 0; th < want.chosen.size(); ++th)
    for (int64_t j = 0; j < K; ++j) EXPECT_EQ(st.expert[th * K + j], want.chosen[th][j]) << th << " " << j;
  EXPECT_EQ(st.group_start.back(), n * c.n_kv_heads * K);  // every selection grouped once
}

TEST(SwitchHeadsLayer, MatchesNaiveDenseReference) {
  for (const char* on : {"v", "kv"})
    for (auto [E, K] : {std::pair{1, 1}, {4, 1}, {4, 2}, {3, 3}, {8, 2}}) {
      ModelConfig c = small_config(switch_heads(E, K, on));
      c.n_kv_heads = 2, c.n_heads = 4, c.d_model = 16;
      SCOPED_TRACE(cat(on, " ", E, "top", K));
      check_layer(c, testing::random_vector<double>(2 * E * 16, 17 + E * K), 37, 5);
    }
}

TEST(SwitchHeadsLayer, TiesGoToTheLowerIndexAndEmptyExpertsAreSkipped) {
  // A zero router scores every expert 0 (sigmoid 0.5): experts 0..k-1 are chosen for every
  // token, the others get no tokens at all.
  ModelConfig c = small_config(switch_heads(5, 2, "kv"));
  c.n_kv_heads = 2, c.n_heads = 2;
  check_layer(c, std::vector<double>(2 * 5 * 8, 0.0), 9, 3);
  SwitchHeadsState<float> st;
  SwitchHeadsScratch<float> scratch;
  const auto x = cast<float>(testing::random_vector<double>(9 * 8, 1));
  const std::vector<float> router(2 * 5 * 8, 0.0f), experts(5 * 8 * 8, 0.1f);
  std::vector<float> k0(9 * 8), v0(9 * 8);
  switch_heads_forward(k0.data(), v0.data(), st, scratch, x.data(), 9,
                       SwitchHeadsWeights<float>{router.data(), experts.data(), experts.data()}, c);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t e = 0; e < 5; ++e)
      EXPECT_EQ(st.group_start[h * 5 + e + 1] - st.group_start[h * 5 + e], e < 2 ? 9 : 0) << h << " " << e;
  for (float s : std::vector<float>(st.score.begin(), st.score.begin() + 9 * 2 * 2)) EXPECT_EQ(s, 0.5f);
  // Two experts tied above the rest: both chosen, the lower index first.
  std::vector<double> r(2 * 5 * 8, 0.0);
  for (int64_t i = 0; i < 8; ++i) r[(0 * 5 + 3) * 8 + i] = r[(0 * 5 + 1) * 8 + i] = 1.0;
  std::vector<double> xs(8, 0.5);  // x . r = 4 for experts 1 and 3 of head 0, 0 elsewhere
  c.switch_heads.top_k = 1;
  const NaiveOut want = naive_switch(c, xs, 1, r, {}, std::vector<double>(5 * 8 * 8, 0.1));
  EXPECT_EQ(want.chosen[0][0], 1);
  const auto xsf = cast<float>(xs), rf = cast<float>(r);
  switch_heads_forward(k0.data(), v0.data(), st, scratch, xsf.data(), 1,
                       SwitchHeadsWeights<float>{rf.data(), experts.data(), experts.data()}, c);
  EXPECT_EQ(st.expert[0], 1);
  EXPECT_EQ(st.expert[1], 0);  // head 1: all tied at 0
}

// ---- whole-model gradients against finite differences ---------------------------------

// The smallest gap, over every layer, token and head, between the k-th and the (k+1)-th
// router pre-activation: the finite differences must not move a token across it.
template <typename T>
double min_selection_gap(const Model<T>& m) {
  const ModelConfig& c = m.config();
  const int64_t H = c.n_kv_heads, E = c.switch_heads.n_experts, K = c.switch_heads.top_k;
  double gap = INFINITY;
  if (K == E) return gap;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const SwitchHeadsState<T>& st = *m.probe(l).switch_heads;
    for (int64_t th = 0; th < st.n * H; ++th) {
      std::vector<double> pre(st.router_pre.begin() + th * E, st.router_pre.begin() + (th + 1) * E);
      std::sort(pre.rbegin(), pre.rend());
      gap = std::min(gap, pre[K - 1] - pre[K]);
    }
  }
  return gap;
}

struct SwitchVariant {
  const char* name;
  json overrides;
};
class SwitchHeadsGradientTest : public ::testing::TestWithParam<SwitchVariant> {};

TEST_P(SwitchHeadsGradientTest, AnalyticGradientsMatchFiniteDifferences) {
  const ModelConfig c = small_config(GetParam().overrides);
  Model<double> m(c);
  std::vector<double> w;
  init_params(w, m.layout(), c, 11);
  Rng rng(5);
  for (const ParamSpec& s : m.layout().specs())
    if (s.kind == ParamKind::norm || s.kind == ParamKind::gate)
      for (int64_t i = 0; i < s.numel; ++i) w[s.offset + i] += 0.3 * rng.normal();
  m.load_params(w);
  const int64_t B = 2, T = 5;
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.below(c.vocab_size));
  for (int64_t i = 0; i < B * T; ++i) targets[i] = (i % T == T - 1) ? -1 : tokens[i + 1];
  m.zero_grads();
  m.forward(tokens.data(), targets.data(), B, T);
  ASSERT_GT(min_selection_gap(m), 1e-3) << "a near tie: choose another seed";
  m.backward();
  std::vector<double> analytic(m.grads().begin(), m.grads().end());
  std::vector<double> x(m.params().begin(), m.params().end());
  auto numeric = testing::numeric_grad(x, [&] {
    m.load_params(x);
    return m.forward(tokens.data(), targets.data(), B, T);
  });
  int64_t nonzero_experts = 0;
  for (const ParamSpec& s : m.layout().specs()) {
    std::vector<double> a(analytic.begin() + s.offset, analytic.begin() + s.offset + s.numel);
    std::vector<double> n(numeric.begin() + s.offset, numeric.begin() + s.offset + s.numel);
    double norm = 0;
    for (double v : n) norm += v * v;
    const bool expert = s.name.find("_experts.") != std::string::npos;
    if (expert && norm == 0.0) {  // an expert no token chose: its gradient must be exactly 0 too
      EXPECT_EQ(a, n) << s.name;
      continue;
    }
    nonzero_experts += expert;
    EXPECT_GT(norm, 1e-20) << s.name << " has a zero gradient: the check would be vacuous";
    EXPECT_LT(testing::rel_error(a, n), 1e-6) << GetParam().name << ": " << s.name;
  }
  EXPECT_GT(nonzero_experts, 0);
}

json merged(json a, const json& b) {
  a.merge_patch(b);
  return a;
}

const SwitchVariant kSwitchVariants[] = {
    {"v_1top1", switch_heads(1, 1, "v")},
    {"v_4top2", switch_heads(4, 2, "v")},
    {"v_3top3", switch_heads(3, 3, "v")},
    {"kv_4top1", switch_heads(4, 1, "kv")},
    {"kv_3top2_gqa2", merged(switch_heads(3, 2, "kv"), {{"n_heads", 4}, {"n_kv_heads", 2}})},
    {"kv_2top2_no_qknorm", merged(switch_heads(2, 2, "kv"), {{"qk_norm", false}})},
    {"v_4top2_sdpa_gate", merged(switch_heads(4, 2, "v"), {{"gate", {{"position", "sdpa"}}}})},
    {"v_2top1_value_gate", merged(switch_heads(2, 1, "v"), {{"gate", {{"position", "value"}, {"input_dims", 5}}}})},
    {"kv_2top1_key_gate", merged(switch_heads(2, 1, "kv"), {{"gate", {{"position", "key"}}}})},
};
INSTANTIATE_TEST_SUITE_P(Variants, SwitchHeadsGradientTest, ::testing::ValuesIn(kSwitchVariants),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- switch v, 1top1 == the headwise value gate ---------------------------------------

// The headwise G2 gate's model and the switch-head model with the same weights: v_proj
// becomes expert 0, the gate's [n_kv_heads, d] projection the router.
template <typename T>
void expect_1top1_equals_value_gate(double tolerance) {
  const json common{{"n_heads", 4}, {"n_kv_heads", 2}, {"init_std", 0.4}};
  const ModelConfig gated =
      small_config(merged(common, {{"gate", {{"position", "value"}, {"granularity", "headwise"}}}}));
  const ModelConfig sw = small_config(merged(common, switch_heads(1, 1, "v")));
  Model<T> a(gated), b(sw);
  std::vector<T> wa;
  init_params(wa, a.layout(), gated, 21);
  auto b_name = [](const std::string& name) {
    for (auto [from, to] : {std::pair{"self_attn.v_proj.weight", "self_attn.v_experts.0.weight"},
                            {"self_attn.gate.weight", "self_attn.v_router.weight"}})
      if (name.size() > std::string(from).size() && name.ends_with(from))
        return name.substr(0, name.size() - std::string(from).size()) + to;
    return name;
  };
  std::vector<T> wb(b.layout().total());
  ASSERT_EQ(a.layout().total(), b.layout().total());  // the same parameter count
  for (const ParamSpec& s : a.layout().specs()) {
    const ParamSpec& t = b.layout().at(b_name(s.name));
    ASSERT_EQ(s.shape, t.shape) << s.name;
    std::copy_n(wa.begin() + s.offset, s.numel, wb.begin() + t.offset);
  }
  a.load_params(wa);
  b.load_params(wb);
  std::vector<int32_t> tokens{1, 5, 2, 9, 4, 4, 0, 10, 3, 7, 7, 2, 8, 6, 1, 0};
  std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
  targets.push_back(-1);
  a.zero_grads();
  b.zero_grads();
  const double la = a.forward(tokens.data(), targets.data(), 2, 8);
  const double lb = b.forward(tokens.data(), targets.data(), 2, 8);
  EXPECT_NEAR(la, lb, tolerance * std::abs(la));
  const std::vector<T> logits_a(a.logits(), a.logits() + 16 * 11), logits_b(b.logits(), b.logits() + 16 * 11);
  EXPECT_LT(testing::rel_error(logits_b, logits_a), tolerance);
  a.backward();
  b.backward();
  for (const ParamSpec& s : a.layout().specs()) {
    const ParamSpec& t = b.layout().at(b_name(s.name));
    const std::vector<T> ga(a.grads().begin() + s.offset, a.grads().begin() + s.offset + s.numel);
    const std::vector<T> gb(b.grads().begin() + t.offset, b.grads().begin() + t.offset + t.numel);
    EXPECT_LT(testing::rel_error(gb, ga), tolerance) << s.name << " vs " << t.name;
  }
}

TEST(SwitchHeadsEquivalence, SwitchV1top1IsTheHeadwiseValueGateDouble) { expect_1top1_equals_value_gate<double>(1e-12); }
TEST(SwitchHeadsEquivalence, SwitchV1top1IsTheHeadwiseValueGateFloat) { expect_1top1_equals_value_gate<float>(2e-5); }

}  // namespace
}  // namespace gatedlm::model
