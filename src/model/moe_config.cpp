#include "model/moe_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/error.h"

namespace gatedlm::model {

using nlohmann::json;

int64_t int_key(const json& j, const std::string& where, const char* key, std::optional<int64_t> fallback) {
  if (!j.contains(key)) {
    if (!fallback) fail(where, ": missing required key \"", key, "\"");
    return *fallback;
  }
  const json& v = j.at(key);
  if (!v.is_number_integer()) fail(where, ": key \"", key, "\": expected an integer, got ", v.dump());
  return v.get<int64_t>();
}

namespace {

const std::set<std::string> kKeys = {"n_experts",     "top_k", "expert_hidden",  "n_shared", "shared_hidden",
                                     "every",         "norm_topk_prob", "lb_coef", "lb_scope", "z_coef"};

double number_key(const json& j, const std::string& where, const char* key, double fallback) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number()) fail(where, ": key \"", key, "\": expected a number, got ", v.dump());
  return v.get<double>();
}

void require(bool ok, const std::string& key, const std::string& why) {
  if (!ok) fail("model config: key \"moe.", key, "\" ", why);
}

}  // namespace

std::string to_string(LbScope s) { return s == LbScope::global ? "global" : "micro"; }

MoeConfig moe_config_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) fail(where, ": expected a JSON object");
  for (auto& [key, value] : j.items())
    if (!kKeys.count(key)) fail(where, ": unknown key \"", key, "\"");
  MoeConfig m;
  m.n_experts = int_key(j, where, "n_experts", std::nullopt);
  if (m.n_experts < 1) fail(where, ": key \"n_experts\": must be at least 1, got ", m.n_experts);
  m.top_k = int_key(j, where, "top_k", std::nullopt);
  m.expert_hidden = int_key(j, where, "expert_hidden", std::nullopt);
  m.n_shared = int_key(j, where, "n_shared", m.n_shared);
  m.shared_hidden = int_key(j, where, "shared_hidden", m.expert_hidden);
  m.every = int_key(j, where, "every", m.every);
  if (j.contains("norm_topk_prob")) {
    if (!j.at("norm_topk_prob").is_boolean())
      fail(where, ": key \"norm_topk_prob\": expected true or false, got ", j.at("norm_topk_prob").dump());
    m.norm_topk_prob = j.at("norm_topk_prob").get<bool>();
  }
  m.lb_coef = number_key(j, where, "lb_coef", m.lb_coef);
  m.z_coef = number_key(j, where, "z_coef", m.z_coef);
  if (j.contains("lb_scope")) {
    const json& v = j.at("lb_scope");
    if (v == "global") m.lb_scope = LbScope::global;
    else if (v == "micro") m.lb_scope = LbScope::micro;
    else fail(where, ": key \"lb_scope\": unknown value ", v.dump(), " (expected global|micro)");
  }
  return m;
}

json moe_config_to_json(const MoeConfig& m) {
  return json{{"n_experts", m.n_experts},         {"top_k", m.top_k},     {"expert_hidden", m.expert_hidden},
              {"n_shared", m.n_shared},           {"shared_hidden", m.shared_hidden}, {"every", m.every},
              {"norm_topk_prob", m.norm_topk_prob}, {"lb_coef", m.lb_coef}, {"lb_scope", to_string(m.lb_scope)},
              {"z_coef", m.z_coef}};
}

void validate_moe(const MoeConfig& m, int64_t d_model, int64_t n_layers) {
  if (!m.enabled()) return;
  constexpr int64_t kMaxDim = int64_t{1} << 31;
  require(m.n_experts >= 1 && m.n_experts <= 65536, "n_experts", cat("must be in 1..65536, got ", m.n_experts));
  require(m.top_k >= 1 && m.top_k <= m.n_experts, "top_k",
          cat("must be in 1..n_experts (", m.n_experts, "), got ", m.top_k));
  require(m.expert_hidden >= 1 && m.expert_hidden <= kMaxDim, "expert_hidden",
          cat("must be in 1..2^31, got ", m.expert_hidden));
  require(m.n_shared >= 0 && m.n_shared <= 65536, "n_shared", cat("must be in 0..65536, got ", m.n_shared));
  require(m.shared_hidden >= 1 && m.shared_hidden <= kMaxDim, "shared_hidden",
          cat("must be in 1..2^31, got ", m.shared_hidden));
  require(m.every >= 1 && m.every <= n_layers, "every",
          cat("must be in 1..n_layers (", n_layers, ") so that some layer is an MoE layer, got ", m.every));
  require(std::isfinite(m.lb_coef) && m.lb_coef >= 0, "lb_coef", cat("must be a number >= 0, got ", m.lb_coef));
  require(std::isfinite(m.z_coef) && m.z_coef >= 0, "z_coef", cat("must be a number >= 0, got ", m.z_coef));
  const long double per_layer = static_cast<long double>(m.n_experts) * 3.0L * d_model * m.expert_hidden +
                                3.0L * d_model * static_cast<long double>(m.shared_width());
  require(per_layer * static_cast<long double>(n_layers) <= static_cast<long double>(int64_t{1} << 44), "n_experts",
          cat("/ expert_hidden give about ", static_cast<double>(per_layer * n_layers),
              " expert parameters, more than the limit of 2^44"));
}

std::vector<MoeTensor> moe_layer_tensors(const MoeConfig& m, int64_t d) {
  std::vector<MoeTensor> t{{"mlp.gate.weight", {m.n_experts, d}}};
  const int64_t f = m.expert_hidden;
  for (int64_t e = 0; e < m.n_experts; ++e) {
    const std::string p = cat("mlp.experts.", e, ".");
    t.push_back({p + "gate_proj.weight", {f, d}});
    t.push_back({p + "up_proj.weight", {f, d}});
    t.push_back({p + "down_proj.weight", {d, f}});
  }
  if (m.n_shared > 0) {
    const int64_t fs = m.shared_width();
    t.push_back({"mlp.shared_expert.gate_proj.weight", {fs, d}});
    t.push_back({"mlp.shared_expert.up_proj.weight", {fs, d}});
    t.push_back({"mlp.shared_expert.down_proj.weight", {d, fs}});
    t.push_back({"mlp.shared_expert_gate.weight", {1, d}});
  }
  return t;
}

}  // namespace gatedlm::model
