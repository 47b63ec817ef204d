// The mixture-of-experts FFN (src/model/moe.h): its config and checkpoint names, the
// block against a dense naive reference (every expert on every token, masked), ties and
// empty experts, the whole MoE model's gradients (with the auxiliary losses) against
// fp64 central finite differences, and the global load balance split over micro-batches.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "model/moe.h"
#include "test_util.h"

namespace gatedlm::model {
namespace {

using nlohmann::json;

json tiny_json(const json& moe) {
  return json{{"vocab_size", 11}, {"d_model", 8},      {"n_layers", 2},   {"n_heads", 2},
              {"n_kv_heads", 1},  {"head_dim", 4},     {"ffn_hidden", 12}, {"max_seq_len", 8},
              {"init_std", 0.5},  {"rope_base", 100.0}, {"moe", moe}};
}

std::string config_error(const json& j) {
  try {
    config_from_json(j, "m.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MoeConfig, DefaultsRoundTripAndRejections) {
  const ModelConfig c = config_from_json(tiny_json({{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 6}}), "m.json");
  EXPECT_TRUE(c.has_moe());
  EXPECT_EQ(c.moe.shared_hidden, 6);
  EXPECT_EQ(c.moe.every, 1);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_EQ(c.moe.lb_scope, LbScope::global);
  EXPECT_DOUBLE_EQ(c.moe.lb_coef, 0.001);
  EXPECT_DOUBLE_EQ(c.moe.z_coef, 0.001);
  EXPECT_EQ(config_to_json(config_from_json(config_to_json(c), "again")), config_to_json(c));
  json dense = tiny_json(json::object());
  dense.erase("moe");
  EXPECT_FALSE(config_to_json(config_from_json(dense, "dense")).contains("moe")) << "dense configs stay as they were";
  struct Bad {
    json moe;
    const char* expect;
  };
  const Bad bad[] = {
      {{{"n_experts", 4}, {"top_k", 5}, {"expert_hidden", 6}}, "moe.top_k"},
      {{{"n_experts", 4}, {"top_k", 0}, {"expert_hidden", 6}}, "moe.top_k"},
      {{{"n_experts", 0}, {"top_k", 1}, {"expert_hidden", 6}}, "\"n_experts\": must be at least 1"},
      {{{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 0}}, "moe.expert_hidden"},
      {{{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 6}, {"every", 3}}, "moe.every"},
      {{{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 6}, {"n_shared", -1}}, "moe.n_shared"},
      {{{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 6}, {"lb_coef", -1}}, "moe.lb_coef"},
      {{{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 6}, {"lb_scope", "batch"}}, "lb_scope"},
      {{{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 6}, {"z_coef", "x"}}, "z_coef"},
      {{{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 6}, {"experts", 4}}, "unknown key \"experts\""},
      {{{"n_experts", 4}, {"expert_hidden", 6}}, "missing required key \"top_k\""},
      {{{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 6}, {"norm_topk_prob", 1}}, "norm_topk_prob"},
      {json::array(), "moe: expected a JSON object"},
  };
  for (const Bad& b : bad) {
    const std::string msg = config_error(tiny_json(b.moe));
    EXPECT_NE(msg.find(b.expect), std::string::npos) << b.moe.dump() << " -> " << msg;
    EXPECT_NE(msg.find("m.json"), std::string::npos) << msg;
  }
  // ffn_hidden may be 0 only when every layer is an MoE layer.
  json all = tiny_json({{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 6}});
  all["ffn_hidden"] = 0;
  EXPECT_EQ(config_error(all), "");
  all["moe"]["every"] = 2;
  EXPECT_NE(config_error(all).find("ffn_hidden"), std::string::npos);
}

TEST(MoeConfig, CheckpointNamesFollowQwenMoe) {
  const ModelConfig c = config_from_json(
      tiny_json({{"n_experts", 3}, {"top_k", 1}, {"expert_hidden", 6}, {"n_shared", 2}, {"shared_hidden", 5},
                 {"every", 2}}),
      "m.json");
  const ParamLayout layout(c);
  // Layer 0 is dense, layer 1 MoE.
  EXPECT_NE(layout.find("model.layers.0.mlp.gate_proj.weight"), nullptr);
  EXPECT_EQ(layout.find("model.layers.1.mlp.gate_proj.weight"), nullptr);
  EXPECT_EQ(layout.at("model.layers.1.mlp.gate.weight").shape, (std::vector<int64_t>{3, 8}));
  for (int e = 0; e < 3; ++e) {
    const std::string p = cat("model.layers.1.mlp.experts.", e, ".");
    EXPECT_EQ(layout.at(p + "gate_proj.weight").shape, (std::vector<int64_t>{6, 8}));
    EXPECT_EQ(layout.at(p + "up_proj.weight").shape, (std::vector<int64_t>{6, 8}));
    EXPECT_EQ(layout.at(p + "down_proj.weight").shape, (std::vector<int64_t>{8, 6}));
  }
  EXPECT_EQ(layout.find("model.layers.1.mlp.experts.3.gate_proj.weight"), nullptr);
  EXPECT_EQ(layout.at("model.layers.1.mlp.shared_expert.gate_proj.weight").shape, (std::vector<int64_t>{10, 8}));
  EXPECT_EQ(layout.at("model.layers.1.mlp.shared_expert.down_proj.weight").shape, (std::vector<int64_t>{8, 10}));
  EXPECT_EQ(layout.at("model.layers.1.mlp.shared_expert_gate.weight").shape, (std::vector<int64_t>{1, 8}));
  // Expert e's tensors follow each other with the stride the block assumes.
  const int64_t e0 = layout.at("model.layers.1.mlp.experts.0.gate_proj.weight").offset;
  EXPECT_EQ(layout.at("model.layers.1.mlp.experts.2.down_proj.weight").offset, e0 + 2 * 3 * 6 * 8 + 2 * 6 * 8);
}

// The block's output by brute force: every expert on every token, weighted by the chosen
// weights (0 for the others), in double.
std::vector<double> naive_moe(const MoeConfig& m, int64_t d, const std::vector<double>& h, int64_t n,
                              const std::vector<double>& W, int64_t router, int64_t experts, int64_t shared,
                              std::vector<std::vector<int>>* chosen) {
  const int64_t E = m.n_experts, f = m.expert_hidden;
  std::vector<double> y(n * d, 0.0);
  auto swiglu = [&](const double* x, const double* wg, const double* wu, const double* wd, int64_t width,
                    double* out, double scale) {
    for (int64_t j = 0; j < width; ++j) {
      double g = 0, u = 0;
      for (int64_t i = 0; i < d; ++i) {
        g += wg[j * d + i] * x[i];
        u += wu[j * d + i] * x[i];
      }
      const double a = g / (1 + std::exp(-g)) * u;
      for (int64_t i = 0; i < d; ++i) out[i] += scale * wd[i * width + j] * a;
    }
  };
  for (int64_t t = 0; t < n; ++t) {
    const double* x = h.data() + t * d;
    std::vector<double> z(E), p(E);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t i = 0; i < d; ++i) z[e] += W[router + e * d + i] * x[i];
    double mx = z[0], s = 0;
    for (double v : z) mx = std::max(mx, v);
    for (int64_t e = 0; e < E; ++e) s += std::exp(z[e] - mx);
    for (int64_t e = 0; e < E; ++e) p[e] = std::exp(z[e] - mx) / s;
    // Top-k: sort indices by (-z, index).
    std::vector<int> idx(E);
    for (int e = 0; e < E; ++e) idx[e] = e;
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return z[a] > z[b]; });
    idx.resize(m.top_k);
    if (chosen) chosen->push_back(idx);
    double ps = 0;
    for (int e : idx) ps += p[e];
    for (int e : idx) {
      const double* we = W.data() + experts + e * 3 * f * d;
      swiglu(x, we, we + f * d, we + 2 * f * d, f, y.data() + t * d, m.norm_topk_prob ? p[e] / ps : p[e]);
    }
    if (m.n_shared) {
      const int64_t fs = m.shared_width();
      const double* ws = W.data() + shared;
      double g = 0;
      for (int64_t i = 0; i < d; ++i) g += ws[3 * fs * d + i] * x[i];
      swiglu(x, ws, ws + fs * d, ws + 2 * fs * d, fs, y.data() + t * d, 1 / (1 + std::exp(-g)));
    }
  }
  return y;
}

struct BlockCase {
  const char* name;
  json moe;
  const char* router_edit;  // "", "ties", "empty"
  int64_t tokens = 9;       // enough, with even loads, for the batched products (MoeBlock::batched)
};

class MoeBlockTest : public ::testing::TestWithParam<BlockCase> {};

// One MoE layer's block alone: forward against naive_moe, backward against finite
// differences of sum(y * r) + lb_w . P + z_w Z, for every weight and the input.
TEST_P(MoeBlockTest, ForwardMatchesNaiveAndBackwardMatchesFiniteDifferences) {
  json j = tiny_json(GetParam().moe);
  j["n_layers"] = 1;
  const ModelConfig c = config_from_json(j, "block");
  const MoeConfig& m = c.moe;
  const int64_t d = c.d_model, n = GetParam().tokens, E = m.n_experts;
  const ParamLayout layout(c);
  std::vector<double> W;
  init_params(W, layout, c, 3);
  const int64_t router = layout.at("model.layers.0.mlp.gate.weight").offset;
  const int64_t experts = layout.at("model.layers.0.mlp.experts.0.gate_proj.weight").offset;
  const ParamSpec* sh = layout.find("model.layers.0.mlp.shared_expert.gate_proj.weight");
  const int64_t shared = sh ? sh->offset : 0;
  const std::string edit = GetParam().router_edit;
  for (int64_t i = 0; i < d; ++i) {
    if (edit == "ties") W[router + 3 * d + i] = W[router + 1 * d + i];  // experts 1 and 3 always tie
    if (edit == "empty") {  // rows 1 = -0, 3 = -2, last = 0: the last expert never wins with k <= 2
      W[router + 1 * d + i] = -W[router + i];
      W[router + 3 * d + i] = -W[router + 2 * d + i];
      W[router + (E - 1) * d + i] = 0;
    }
  }
  std::vector<double> h = testing::random_vector(n * d, 11);
  const std::vector<double> r = testing::random_vector(n * d, 12);
  const std::vector<double> lb_w = testing::random_vector(E, 13);
  const double z_w = 0.3;
  auto views = [&](std::vector<double>& v) {
    return MoeWeights<double>{v.data() + router, v.data() + experts, sh ? v.data() + shared : nullptr,
                              sh ? v.data() + layout.at("model.layers.0.mlp.shared_expert.down_proj.weight").offset
                                 : nullptr,
                              sh ? v.data() + layout.at("model.layers.0.mlp.shared_expert_gate.weight").offset
                                 : nullptr};
  };
  MoeBlock<double> block(m, d);
  std::vector<double> y(n * d);
  auto objective = [&] {
    block.forward(y.data(), h.data(), n, views(W), true);
    double s = 0;
    for (int64_t i = 0; i < n * d; ++i) s += y[i] * r[i];
    for (int64_t e = 0; e < E; ++e) s += lb_w[e] * block.mean_probs()[e];
    return s + z_w * block.z_loss();
  };
  objective();
  if (GetParam().tokens > 9) {
    EXPECT_TRUE(block.batched()) << "the case is meant for the batched products";
  }
  std::vector<std::vector<int>> chosen;
  const std::vector<double> want = naive_moe(m, d, h, n, W, router, experts, shared, &chosen);
  EXPECT_LT(testing::rel_error(y, want), 1e-12);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < m.top_k; ++k) EXPECT_EQ(block.chosen()[t * m.top_k + k], chosen[t][k]) << t;
  int64_t total = 0;
  for (int64_t v : block.counts()) total += v;
  EXPECT_EQ(total, n * m.top_k);
  if (edit == "ties") {
    EXPECT_EQ(block.counts()[3], 0) << "a tie goes to the lower index";
  }
  if (edit == "empty") {
    EXPECT_EQ(block.counts()[E - 1], 0);
  }

  std::vector<double> G(W.size(), 0.0), dh(n * d);
  block.backward(dh.data(), MoeGrads<double>{G.data() + router, G.data() + experts, sh ? G.data() + shared : nullptr,
                                             sh ? G.data() + (views(G).shared_down.values - G.data()) : nullptr,
                                             sh ? G.data() + (views(G).shared_gate.values - G.data()) : nullptr},
                 r.data(), h.data(), views(W), lb_w, z_w);
  // Finite differences over the MoE tensors only (they are contiguous in the layout).
  int64_t mlp_end = router;
  for (const ParamSpec& s : layout.specs())
    if (s.name.find(".mlp.") != std::string::npos) mlp_end = std::max(mlp_end, s.offset + s.numel);
  std::vector<double> mlp(W.begin() + router, W.begin() + mlp_end);
  const std::vector<double> numeric_mlp = testing::numeric_grad(mlp, [&] {
    std::copy(mlp.begin(), mlp.end(), W.begin() + router);
    return objective();
  });
  std::copy(mlp.begin(), mlp.end(), W.begin() + router);
  std::vector<double> numeric_w(W.size(), 0.0);
  std::copy(numeric_mlp.begin(), numeric_mlp.end(), numeric_w.begin() + router);
  std::vector<double> numeric_h = testing::numeric_grad(h, objective);
  EXPECT_LT(testing::rel_error(dh, numeric_h), 1e-7) << "d/dh";
  for (const ParamSpec& s : layout.specs()) {
    if (s.name.find(".mlp.") == std::string::npos) continue;
    std::vector<double> a(G.begin() + s.offset, G.begin() + s.offset + s.numel);
    std::vector<double> b(numeric_w.begin() + s.offset, numeric_w.begin() + s.offset + s.numel);
    // Perturbing one of two tied router rows breaks the tie: the loss has a jump there and
    // finite differences mean nothing (the analytic gradient is the chosen side's).
    if (edit == "ties" && s.name.find("mlp.gate.weight") != std::string::npos) continue;
    const bool unused = edit == "empty" && s.name.find(cat("experts.", E - 1, ".")) != std::string::npos;
    if (unused) {
      for (double v : a) EXPECT_EQ(v, 0.0) << s.name << ": an expert without tokens gets no gradient";
      continue;
    }
    EXPECT_LT(testing::rel_error(a, b), 1e-7) << s.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, MoeBlockTest,
    ::testing::Values(
        BlockCase{"e4_k2_norm", {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 6}}, ""},
        BlockCase{"e3_k2_batched", {{"n_experts", 3}, {"top_k", 2}, {"expert_hidden", 5}, {"n_shared", 1}}, "", 40},
        BlockCase{"e5_k1_plain", {{"n_experts", 5}, {"top_k", 1}, {"expert_hidden", 4}, {"norm_topk_prob", false}}, ""},
        BlockCase{"e3_k3_shared",
                  {{"n_experts", 3}, {"top_k", 3}, {"expert_hidden", 4}, {"n_shared", 2}, {"shared_hidden", 3}},
                  ""},
        BlockCase{"ties", {{"n_experts", 4}, {"top_k", 1}, {"expert_hidden", 4}}, "ties"},
        BlockCase{"empty_expert",
                  {{"n_experts", 6}, {"top_k", 2}, {"expert_hidden", 4}, {"norm_topk_prob", false}, {"n_shared", 1}},
                  "empty"}),
    [](const ::testing::TestParamInfo<BlockCase>& i) { return std::string(i.param.name); });

// The whole model with MoE layers: loss = cross-entropy + lb_coef LB + z_coef Z, every
// parameter's gradient against central finite differences in double.
class MoeModelGradientTest : public ::testing::TestWithParam<BlockCase> {};

TEST_P(MoeModelGradientTest, AnalyticGradientsMatchFiniteDifferences) {
  const ModelConfig c = config_from_json(tiny_json(GetParam().moe), "tiny");
  Model<double> m(c);
  std::vector<double> w;
  init_params(w, m.layout(), c, 7);
  Rng rng(99);
  for (const ParamSpec& s : m.layout().specs())
    if (s.kind == ParamKind::norm)
      for (int64_t i = 0; i < s.numel; ++i) w[s.offset + i] += 0.3 * rng.normal();
  m.load_params(w);
  const int64_t B = 2, T = 5;
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (int64_t i = 0; i < B * T; ++i) tokens[i] = static_cast<int32_t>(rng.below(c.vocab_size));
  for (int64_t i = 0; i < B * T; ++i) targets[i] = (i % T == T - 1) ? -1 : tokens[i + 1];
  auto loss = [&] { return m.forward(tokens.data(), targets.data(), B, T) + m.moe_aux().total; };
  m.zero_grads();
  const double base = loss();
  const MoeAuxLosses aux = m.moe_aux();
  EXPECT_GT(aux.lb, 0.0);
  EXPECT_GT(aux.z, 0.0);
  EXPECT_NEAR(aux.total, c.moe.lb_coef * aux.lb + c.moe.z_coef * aux.z, 1e-15);
  EXPECT_GT(base, 0.0);
  m.backward();
  std::vector<double> analytic(m.grads().begin(), m.grads().end());
  std::vector<double> x(m.params().begin(), m.params().end());
  auto numeric = testing::numeric_grad(x, [&] {
    m.load_params(x);
    return loss();
  });
  for (const ParamSpec& s : m.layout().specs()) {
    std::vector<double> a(analytic.begin() + s.offset, analytic.begin() + s.offset + s.numel);
    std::vector<double> n(numeric.begin() + s.offset, numeric.begin() + s.offset + s.numel);
    double norm = 0;
    for (double v : n) norm += v * v;
    if (norm == 0) {  // an expert no token reached in this batch
      for (double v : a) EXPECT_EQ(v, 0.0) << s.name;
      continue;
    }
    EXPECT_LT(testing::rel_error(a, n), 1e-6) << GetParam().name << ": " << s.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, MoeModelGradientTest,
    ::testing::Values(
        BlockCase{"e4_k2_norm", {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 6}, {"lb_coef", 0.5}, {"z_coef", 0.1}}, ""},
        BlockCase{"e3_k1_shared_every2",
                  {{"n_experts", 3}, {"top_k", 1}, {"expert_hidden", 5}, {"n_shared", 1}, {"every", 2},
                   {"norm_topk_prob", false}, {"lb_coef", 0.3}, {"z_coef", 0.05}},
                  ""}),
    [](const ::testing::TestParamInfo<BlockCase>& i) { return std::string(i.param.name); });

// lb_scope global: micro-batches whose balance loss counts the loads of the whole step
// (route_counts summed, set_balance_counts) give, averaged, the gradient of one
// forward/backward over the concatenated batch.
TEST(MoeBalance, MicroBatchesWithStepCountsEqualTheWholeBatch) {
  const ModelConfig c = config_from_json(
      tiny_json({{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 6}, {"lb_coef", 0.5}, {"z_coef", 0.1}}), "tiny");
  Model<double> whole(c), part(c);
  std::vector<double> w;
  init_params(w, whole.layout(), c, 5);
  whole.load_params(w);
  part.load_params(w);
  const int64_t B = 4, T = 6, half = B / 2 * T;
  Rng rng(3);
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.below(c.vocab_size));
  for (auto& t : targets) t = static_cast<int32_t>(rng.below(c.vocab_size));
  whole.zero_grads();
  const double whole_loss = whole.forward(tokens.data(), targets.data(), B, T) + whole.moe_aux().total;
  whole.backward();
  const std::vector<int64_t> whole_counts = whole.expert_counts();

  // The counting pass, then the micro-batches.
  std::vector<double> counts(whole_counts.size(), 0.0);
  for (int i = 0; i < 2; ++i) {
    const std::vector<int64_t> ci = part.route_counts(tokens.data() + i * half, B / 2, T);
    for (size_t j = 0; j < ci.size(); ++j) counts[j] += static_cast<double>(ci[j]);
  }
  for (size_t j = 0; j < counts.size(); ++j) EXPECT_EQ(counts[j], static_cast<double>(whole_counts[j]));
  EXPECT_THROW(part.backward(), Error) << "route_counts keeps nothing for backward";
  part.set_balance_counts(counts);
  std::vector<double> grad(w.size(), 0.0);
  double loss = 0;
  for (int i = 0; i < 2; ++i) {
    part.zero_grads();
    loss += 0.5 * (part.forward(tokens.data() + i * half, targets.data() + i * half, B / 2, T) + part.moe_aux().total);
    part.backward();
    for (size_t j = 0; j < w.size(); ++j) grad[j] += 0.5 * part.grads()[j];
  }
  EXPECT_NEAR(loss, whole_loss, 1e-12);
  std::vector<double> want(whole.grads().begin(), whole.grads().end());
  EXPECT_LT(testing::rel_error(grad, want), 1e-12);

  // Each micro-batch with its own loads (lb_scope micro) differs: the check above can fail.
  part.set_balance_counts({});
  std::vector<double> own(w.size(), 0.0);
  for (int i = 0; i < 2; ++i) {
    part.zero_grads();
    part.forward(tokens.data() + i * half, targets.data() + i * half, B / 2, T);
    part.backward();
    for (size_t j = 0; j < w.size(); ++j) own[j] += 0.5 * part.grads()[j];
  }
  EXPECT_GT(testing::rel_error(own, want), 1e-9);
  EXPECT_THROW(part.set_balance_counts(std::vector<double>(3, 1.0)), Error);
}

}  // namespace
}  // namespace gatedlm::model
