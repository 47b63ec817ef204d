// Activation hooks (model/hooks.h): names and sites, identity hooks leave every bit as it was,
// the gradients backward reports at the hook points match fp64 central differences taken by
// perturbing the same points through forward hooks, and a changed pattern or SDPA output is
// what the rest of the forward reads (and refuses a backward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/hooks.h"
#include "model/init.h"
#include "model/model.h"
#include "seeded_model.h"

namespace gatedlm::model {
namespace {

// A tiny config: `extra` merged into a 3-layer G1 model; hybrid: the middle layer is Gated DeltaNet.
ModelConfig hooks_config(const nlohmann::json& extra, bool hybrid = false) {
  nlohmann::json j{{"vocab_size", 13}, {"d_model", 8},  {"n_layers", 3},    {"n_heads", 2},
                   {"n_kv_heads", 1},  {"head_dim", 4}, {"ffn_hidden", 12}, {"max_seq_len", 8},
                   {"init_std", 0.5},  {"rope_base", 100.0}, {"gate", {{"position", "sdpa"}}}};
  if (extra.is_object()) j.merge_patch(extra);  // {} arrives as null
  ModelConfig c = config_from_json(j, "hooks test");
  if (hybrid) {
    c.layer_types = {LayerKind::full_attention, LayerKind::linear_attention, LayerKind::full_attention};
    c.linear_attention = {/*n_k_heads=*/1, /*n_v_heads=*/2, /*k_head_dim=*/4, /*v_head_dim=*/4, /*conv_kernel=*/3};
  }
  c.validate();
  return c;
}

Model<double> hooks_model(const ModelConfig& c, uint64_t seed) { return gatedlm::testing::seeded_model<double>(c, seed); }

// Hooks from lambdas, recording the gradients asked for.
class TestHooks : public ActivationHooks<double> {
 public:
  using Fn = std::function<void(const HookSite&, const HookTensor<double>&)>;
  std::map<std::string, Fn> on_forward;       // by hook name
  std::vector<std::string> gradient_names;    // reported into grads
  std::map<std::string, std::vector<double>> grads;

  bool wants(const HookSite& s) const override { return on_forward.count(hook_name(s)) > 0; }
  void forward(const HookSite& s, const HookTensor<double>& t) override { on_forward.at(hook_name(s))(s, t); }
  bool wants_gradient(const HookSite& s) const override {
    return std::find(gradient_names.begin(), gradient_names.end(), hook_name(s)) != gradient_names.end();
  }
  void gradient(const HookSite& s, const HookTensor<const double>& t) override {
    grads[hook_name(s)].assign(t.data, t.data + t.size());
  }
};

const std::vector<int32_t> kTokens{1, 5, 2, 9, 12, 3, 7, 4, 0, 6, 11, 8};  // [2, 6]
const std::vector<int32_t> kTargets{5, 2, 9, 12, 3, -1, 4, 0, 6, 11, 8, -1};

double loss_of(Model<double>& m) { return m.forward(kTokens.data(), kTargets.data(), 2, 6); }

TEST(Hooks, EveryNameParsesBackToItsSite) {
  for (bool hybrid : {false, true}) {
    const ModelConfig c = hooks_config({{"moe", {{"n_experts", 4}, {"top_k", 2}, {"every", 2}, {"expert_hidden", 6}}}}, hybrid);
    const std::vector<HookSite> sites = hook_sites(c);
    for (const HookSite& s : sites) {
      const std::optional<HookSite> back = parse_hook_name(hook_name(s), c);
      ASSERT_TRUE(back) << hook_name(s);
      EXPECT_EQ(*back, s) << hook_name(s);
    }
    EXPECT_EQ(hook_name(sites.back()), "hook_logits");
    // The MoE layer (1) has no dense FFN's hook_pre; the hybrid's layer 1 has no attention points.
    EXPECT_FALSE(parse_hook_name("blocks.1.mlp.hook_pre", c));
    EXPECT_TRUE(parse_hook_name("blocks.0.mlp.hook_pre", c));
    EXPECT_TRUE(parse_hook_name("blocks.1.mlp.hook_router", c));
    EXPECT_FALSE(parse_hook_name("blocks.0.mlp.hook_router", c));
    EXPECT_EQ(parse_hook_name("blocks.1.attn.hook_z", c).has_value(), !hybrid);
    EXPECT_EQ(parse_hook_name("blocks.1.linear_attn.hook_beta", c).has_value(), hybrid);
  }
  const ModelConfig c = hooks_config({});
  EXPECT_EQ(parse_hook_name("blocks.2.mlp.hook_out", c), (HookSite{2, HookPoint::mlp_out}));
  EXPECT_EQ(parse_hook_name("blocks.0.attn.hook_attn_out", c), (HookSite{0, HookPoint::attn_out}));
  for (const char* bad : {"blocks.3.hook_resid_pre", "blocks.01.hook_resid_pre", "blocks.-1.hook_resid_pre",
                          "blocks.0.hook_nothing", "blocks.0", "hook_resid_pre", "blocks.0.hook_logits", ""})
    EXPECT_FALSE(parse_hook_name(bad, c)) << bad;
  EXPECT_FALSE(parse_hook_name("blocks.0.attn.hook_gate", hooks_config({{"gate", {{"position", "none"}}}})));
}

// Hooks that hand every point back unchanged: logits, loss and every gradient bit for bit.
TEST(Hooks, IdentityHooksChangeNoBit) {
  for (bool hybrid : {false, true}) {
    const ModelConfig c = hooks_config({{"attention_sinks", true}}, hybrid);
    Model<double> plain = hooks_model(c, 3), hooked = hooks_model(c, 3);
    TestHooks hooks;
    int calls = 0;
    for (const HookSite& s : hook_sites(c))
      hooks.on_forward[hook_name(s)] = [&](const HookSite&, const HookTensor<double>&) { ++calls; };
    hooked.set_hooks(&hooks);
    EXPECT_EQ(loss_of(plain), loss_of(hooked));
    EXPECT_EQ(calls, static_cast<int>(hook_sites(c).size()));
    plain.backward();
    hooked.backward();
    const int64_t V = c.vocab_size;
    for (int64_t i = 0; i < 12 * V; ++i) ASSERT_EQ(plain.logits()[i], hooked.logits()[i]);
    const auto gp = plain.grads(), gh = hooked.grads();
    for (size_t i = 0; i < gp.size(); ++i) ASSERT_EQ(gp[i], gh[i]) << i;
  }
}

// d loss / d (the tensor at a hook point) against central differences taken by adding
// +-eps to one element of that tensor through a forward hook.
void expect_gradients_match_differences(const ModelConfig& c, const std::vector<std::string>& names) {
  Model<double> m = hooks_model(c, 7);
  TestHooks reporter;
  reporter.gradient_names = names;
  m.set_hooks(&reporter);
  loss_of(m);
  m.backward();
  Rng rng(11);
  for (const std::string& name : names) {
    ASSERT_TRUE(reporter.grads.count(name)) << name << " reported no gradient";
    const std::vector<double>& g = reporter.grads[name];
    for (int probe = 0; probe < 4; ++probe) {
      const int64_t at = static_cast<int64_t>(rng.below(g.size()));
      auto loss_moved = [&](double by) {
        TestHooks nudge;
        nudge.on_forward[name] = [&](const HookSite&, const HookTensor<double>& t) { t.data[at] += by; };
        m.set_hooks(&nudge);
        const double loss = loss_of(m);
        m.set_hooks(nullptr);
        return loss;
      };
      const double eps = 1e-5;
      const double numeric = (loss_moved(eps) - loss_moved(-eps)) / (2 * eps);
      EXPECT_NEAR(g[at], numeric, 1e-7 + 1e-5 * std::abs(numeric)) << name << " element " << at;
    }
  }
}

TEST(Hooks, GradientsAtHookPointsMatchFiniteDifferences) {
  const std::vector<std::string> names{
      "hook_logits",           "blocks.2.hook_resid_post", "blocks.1.hook_resid_mid", "blocks.1.hook_mlp_out",
      "blocks.1.hook_attn_out", "blocks.0.attn.hook_z",     "blocks.0.attn.hook_q",    "blocks.2.attn.hook_k",
      "blocks.2.attn.hook_v",  "blocks.0.hook_resid_pre"};
  expect_gradients_match_differences(hooks_config({}), names);  // G1 in the attention kernel's epilogue
  expect_gradients_match_differences(
      hooks_config({{"gate", {{"position", "value"}, {"granularity", "headwise"}}}, {"sliding_window", 3},
                    {"attention_sinks", true}}),
      names);
}

TEST(Hooks, GradientsThroughAHybridMatchFiniteDifferences) {
  expect_gradients_match_differences(hooks_config({}, /*hybrid=*/true),
                                     {"blocks.1.hook_attn_out", "blocks.1.hook_resid_pre", "blocks.0.attn.hook_z",
                                      "blocks.0.hook_mlp_out"});
}

// A changed pattern P': z = P' v (cached at hook_v), the G1 epilogue's Y' made from it, and
// the backward refused naming the hook.
TEST(Hooks, AChangedPatternIsWhatTheAttentionOutputIsMadeOf) {
  const ModelConfig c = hooks_config({});
  Model<double> m = hooks_model(c, 5);
  const int64_t B = 2, S = 6, H = 2, hd = 4;
  std::vector<double> v, z, gate, gated;
  auto keep = [](std::vector<double>& into) {
    return [&into](const HookSite&, const HookTensor<double>& t) { into.assign(t.data, t.data + t.size()); };
  };
  TestHooks hooks;
  hooks.on_forward["blocks.1.attn.hook_v"] = keep(v);
  hooks.on_forward["blocks.1.attn.hook_z"] = keep(z);
  hooks.on_forward["blocks.1.attn.hook_gate"] = keep(gate);
  hooks.on_forward["blocks.1.attn.hook_gated"] = keep(gated);
  hooks.on_forward["blocks.1.attn.hook_pattern"] = [](const HookSite&, const HookTensor<double>& t) {
    ASSERT_EQ(t.shape, (std::vector<int64_t>{2, 2, 6, 6}));
    for (int64_t row = 0; row < 2 * 2 * 6; ++row)  // uniform over the keys a query sees
      for (int64_t j = 0; j < 6; ++j) t.data[row * 6 + j] = j <= row % 6 ? 1.0 / (row % 6 + 1) : 0.0;
  };
  m.set_hooks(&hooks);
  loss_of(m);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < hd; ++i) {
          double mean = 0;
          for (int64_t j = 0; j <= t; ++j) mean += v[(b * S + j) * hd + i] / static_cast<double>(t + 1);
          const int64_t at = ((b * S + t) * H + h) * hd + i;
          ASSERT_NEAR(z[at], mean, 1e-12);
          ASSERT_DOUBLE_EQ(gated[at], z[at] * gate[at]);
        }
  try {
    m.backward();
    FAIL() << "backward ran after a changed pattern";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.1.attn.hook_pattern"), std::string::npos) << e.what();
  }
}

// Zeroing one head's z: its Y' is zero, the logits move, and backward is refused.
TEST(Hooks, AChangedSdpaOutputFeedsTheGateAndRefusesBackward) {
  const ModelConfig c = hooks_config({});
  Model<double> plain = hooks_model(c, 5), m = hooks_model(c, 5);
  std::vector<double> gated;
  TestHooks hooks;
  hooks.on_forward["blocks.0.attn.hook_z"] = [](const HookSite&, const HookTensor<double>& t) {
    for (int64_t r = 0; r < t.shape[0] * t.shape[1]; ++r)
      for (int64_t i = 0; i < t.shape[3]; ++i) t.data[r * t.shape[2] * t.shape[3] + i] = 0;  // head 0
  };
  hooks.on_forward["blocks.0.attn.hook_gated"] = [&](const HookSite&, const HookTensor<double>& t) {
    gated.assign(t.data, t.data + t.size());
  };
  m.set_hooks(&hooks);
  EXPECT_NE(loss_of(m), loss_of(plain));
  for (int64_t r = 0; r < 12; ++r)
    for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(gated[r * 8 + i], 0.0);
  EXPECT_THROW(m.backward(), Error);
  m.set_hooks(nullptr);  // the next forward without the change may go backward again
  loss_of(m);
  EXPECT_NO_THROW(m.backward());
}

// Router logits changed by hook_router decide the experts: every token goes to experts 2 and 3.
TEST(Hooks, TheRouterHookRoutes) {
  const ModelConfig c = hooks_config({{"moe", {{"n_experts", 4}, {"top_k", 2}, {"every", 2}, {"expert_hidden", 6}}}});
  Model<double> m = hooks_model(c, 9), plain = hooks_model(c, 9);
  TestHooks hooks;
  hooks.on_forward["blocks.1.mlp.hook_router"] = [](const HookSite&, const HookTensor<double>& t) {
    ASSERT_EQ(t.shape, (std::vector<int64_t>{2, 6, 4}));
    for (int64_t r = 0; r < 12; ++r)
      for (int64_t e = 0; e < 4; ++e) t.data[r * 4 + e] = e == 2 ? 5.0 : e == 3 ? 4.0 : 0.0;
  };
  m.set_hooks(&hooks);
  EXPECT_NE(loss_of(m), loss_of(plain));
  const std::span<const int32_t> chosen = m.moe_block(1)->chosen();
  for (size_t i = 0; i < chosen.size(); ++i) EXPECT_EQ(chosen[i], i % 2 == 0 ? 2 : 3);
  EXPECT_NO_THROW(m.backward());  // routing changes keep the backward consistent
  m.set_hooks(nullptr);           // and the block forgets the hook
  loss_of(m);
  EXPECT_NE(std::vector<int32_t>(m.moe_block(1)->chosen().begin(), m.moe_block(1)->chosen().end()),
            std::vector<int32_t>(chosen.size(), 2));
}

// A seeded backward is the gradient of one logit: at hook_logits it is the seed itself, and
// at the residual stream it matches the logit's central difference.
TEST(Hooks, ABackwardFromOneLogit) {
  const ModelConfig c = hooks_config({{"moe", {{"n_experts", 4}, {"top_k", 2}, {"every", 2}, {"expert_hidden", 6}}}});
  Model<double> m = hooks_model(c, 9);
  const int64_t V = c.vocab_size, row = 7, token = 4;
  TestHooks reporter;
  reporter.gradient_names = {"hook_logits", "blocks.1.hook_resid_pre"};
  m.set_hooks(&reporter);
  loss_of(m);
  std::vector<double> seed(12 * V, 0.0);
  seed[row * V + token] = 1;
  m.backward_from_logits(seed);
  EXPECT_EQ(reporter.grads["hook_logits"], seed);
  const std::vector<double> g = reporter.grads["blocks.1.hook_resid_pre"];
  const int64_t at = 6 * 8 + 3;  // row 6 feeds row 7's logit through attention
  auto logit_moved = [&](double by) {
    TestHooks nudge;
    nudge.on_forward["blocks.1.hook_resid_pre"] = [&](const HookSite&, const HookTensor<double>& t) { t.data[at] += by; };
    m.set_hooks(&nudge);
    loss_of(m);
    return m.logits()[row * V + token];
  };
  const double numeric = (logit_moved(1e-5) - logit_moved(-1e-5)) / 2e-5;
  EXPECT_NEAR(g[at], numeric, 1e-7 + 1e-5 * std::abs(numeric));
  EXPECT_NE(numeric, 0.0);
}

}  // namespace
}  // namespace gatedlm::model
