#include "io/hf_shared_keys.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace gatedlm::io {

using nlohmann::json;
using model::ModelConfig;

void read_sizes(HfReader& r, ModelConfig& c, const SizeDefaults& defaults) {
  c.vocab_size = r.integer("vocab_size", std::nullopt);
  c.d_model = r.integer("hidden_size", std::nullopt);
  c.n_layers = r.integer("num_hidden_layers", std::nullopt);
  c.n_heads = r.integer("num_attention_heads", std::nullopt);
  c.n_kv_heads = r.integer("num_key_value_heads", c.n_heads);
  if (!defaults.head_dim && c.n_heads < 1) fail(r.where("num_attention_heads"), ": must be positive");
  c.head_dim = r.integer("head_dim", defaults.head_dim.value_or(c.d_model / std::max<int64_t>(c.n_heads, 1)));
  c.ffn_hidden = r.integer("intermediate_size", defaults.ffn_hidden);
  c.norm_eps = r.number("rms_norm_eps", 1e-6);
  c.max_seq_len = r.integer("max_position_embeddings", int64_t{32768});
  c.tie_embeddings = r.boolean("tie_word_embeddings", false);
  c.init_std = r.number("initializer_range", 0.02);
}

void read_activation(HfReader& r) {
  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu") fail(r.where("hidden_act"), ": \"", act, "\" is not supported (gatedlm's FFN is SwiGLU: silu)");
}

void read_activation_and_window(HfReader& r) {
  read_activation(r);
  if (r.boolean("use_sliding_window", false))
    fail(r.where("use_sliding_window"), ": sliding-window attention is not supported");
  r.ignore("sliding_window");  // unused without use_sliding_window (Qwen3-Next's config carries both)
}

namespace {

// YaRN's keys beyond the factor: original_max_position_embeddings, and beta_fast / beta_slow
// at transformers' defaults only (gatedlm's YaRN is transformers' with them).
void read_yarn_keys(const json& rs, ModelConfig& c, const std::string& where, std::set<std::string>& allowed) {
  allowed.insert("original_max_position_embeddings");
  if (rs.contains("original_max_position_embeddings")) {
    if (!rs["original_max_position_embeddings"].is_number_integer())
      fail(where, ".original_max_position_embeddings: expected an integer");
    c.rope_scaling.original_max_seq_len = rs["original_max_position_embeddings"].get<int64_t>();
  }
  for (auto [key, value] : {std::pair<const char*, double>{"beta_fast", 32.0}, {"beta_slow", 1.0}})
    if (rs.contains(key)) {
      allowed.insert(key);
      if (!rs[key].is_number() || rs[key].get<double>() != value)
        fail(where, ".", key, ": gatedlm's YaRN uses ", value, ", got ", rs[key].dump());
    }
}

}  // namespace

void read_rope_scaling(HfReader& r, ModelConfig& c, const std::string& source) {
  r.ignore("rope_scaling");
  if (!r.has("rope_scaling")) return;  // absent or null
  const json& rs = r.raw("rope_scaling");
  const std::string where = source + ": rope_scaling";
  if (!rs.is_object()) fail(where, ": expected an object or null");
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (rs.contains(key)) {
      if (!rs[key].is_string()) fail(where, ".", key, ": expected a string");
      if (!type.empty() && type != rs[key].get<std::string>()) fail(where, ": \"type\" and \"rope_type\" disagree");
      type = rs[key].get<std::string>();
    }
  std::set<std::string> allowed = {"rope_type", "type"};
  if (type == "default" || type.empty()) {
    c.rope_scaling.type = model::RopeScalingType::none;
  } else if (type == "linear" || type == "yarn") {
    c.rope_scaling.type = type == "linear" ? model::RopeScalingType::linear : model::RopeScalingType::yarn;
    if (!rs.contains("factor") || !rs["factor"].is_number()) fail(where, ".factor: a number is required");
    c.rope_scaling.factor = rs["factor"].get<double>();
    allowed.insert("factor");
    if (type == "yarn") read_yarn_keys(rs, c, where, allowed);
  } else {
    fail(where, ": type \"", type, "\" is not supported (gatedlm has none, linear and yarn)");
  }
  for (const auto& [k, v] : rs.items())
    if (!allowed.count(k)) fail(where, ".", k, ": not supported (value ", v.dump(), ")");
}

void write_head(nlohmann::ordered_json& j, const ModelConfig& c, const std::string& architecture,
                const std::string& model_type) {
  j["architectures"] = {architecture};
  j["model_type"] = model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.d_model;
  j["intermediate_size"] = c.ffn_hidden;
}

void write_shape(nlohmann::ordered_json& j, const ModelConfig& c) {
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_seq_len;
  j["rms_norm_eps"] = c.norm_eps;
}

void check_dense_layers(HfReader& r, int64_t step, int64_t n_layers) {
  r.ignore("mlp_only_layers");
  if (!r.has("mlp_only_layers")) return;
  const json& dense = r.raw("mlp_only_layers");
  if (!dense.is_array()) fail(r.where("mlp_only_layers"), ": expected a list of layer indices");
  for (const json& i : dense)
    if (!i.is_number_integer() || (i.get<int64_t>() < n_layers && (i.get<int64_t>() + 1) % step == 0))
      fail(r.where("mlp_only_layers"), ": ", dense.dump(), " is not supported (gatedlm's dense layers are those "
           "decoder_sparse_step ", step, " skips)");
}

model::MoeConfig read_moe_keys(HfReader& r, const MoeKeys& keys, int64_t n_layers) {
  model::MoeConfig m;
  m.n_experts = r.integer("num_experts", keys.n_experts);
  m.top_k = r.integer("num_experts_per_tok", keys.top_k);
  m.expert_hidden = r.integer("moe_intermediate_size", keys.expert_hidden);
  m.shared_hidden = m.expert_hidden;  // moe_config_from_json's default
  if (keys.shared_expert) {
    m.shared_hidden = r.integer("shared_expert_intermediate_size", int64_t{512});
    m.n_shared = 1;
  } else if (r.integer("shared_expert_intermediate_size", int64_t{0}) != 0) {
    fail(r.where("shared_expert_intermediate_size"), ": Qwen3-MoE has no shared expert (Qwen2-MoE's is not imported)");
  }
  m.every = r.integer("decoder_sparse_step", int64_t{1});
  m.norm_topk_prob = r.boolean("norm_topk_prob", keys.norm_topk_prob);
  m.lb_coef = r.number("router_aux_loss_coef", m.lb_coef);
  m.z_coef = r.number("router_z_loss_coef", m.z_coef);
  r.boolean("output_router_logits", false);  // training output only
  if (m.every < 1) fail(r.where("decoder_sparse_step"), ": must be at least 1, got ", m.every);
  check_dense_layers(r, m.every, n_layers);
  return m;
}

void write_moe_keys(nlohmann::ordered_json& j, const model::MoeConfig& m, const MoeKeys& keys) {
  if (keys.sparse_step_keys) j["decoder_sparse_step"] = m.every;
  j["moe_intermediate_size"] = m.expert_hidden;
  if (keys.shared_expert) j["shared_expert_intermediate_size"] = m.shared_width();
  j["num_experts"] = m.n_experts;
  j["num_experts_per_tok"] = m.top_k;
  j["norm_topk_prob"] = m.norm_topk_prob;
  if (keys.sparse_step_keys) j["mlp_only_layers"] = nlohmann::ordered_json::array();
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = m.lb_coef;
  j["router_z_loss_coef"] = m.z_coef;  // gatedlm's; transformers keeps it as an attribute
}

void refuse_export(const std::string& format, const std::string& key, const std::string& why) {
  fail("export --format ", format, ": model config key \"", key, "\" ", why);
}

void check_plain_block_for_export(const ModelConfig& c, const std::string& format,
                                  const std::string& switch_heads_why, const std::string& bias_why) {
  auto refuse = [&](const std::string& key, const std::string& why) { refuse_export(format, key, why); };
  if (c.sdpa_transform != model::SdpaTransform::none) refuse("sdpa_transform", "must be none");
  if (c.sandwich_norm) refuse("sandwich_norm", "must be false");
  if (c.residual_clip != 0.0) refuse("residual_clip", "must be 0");
  if (c.attention_sinks) refuse("attention_sinks", "must be false (the format has no learned sink logits)");
  if (c.attention_normalizer != model::AttentionNormalizer::softmax)
    refuse("attention_normalizer", "must be softmax (the format has no other)");
  if (c.switch_heads.on()) refuse("switch_heads", switch_heads_why);
  if (c.attn_qkv_bias != c.attn_o_bias) refuse("attn_o_bias", bias_why);
}

void check_g1_gate_for_export(const ModelConfig& c, const std::string& format, const std::string& g1,
                              bool elementwise_only) {
  auto refuse = [&](const std::string& key, const std::string& why) { refuse_export(format, key, why); };
  const model::GateConfig& g = c.gate;
  if (g.position != model::GatePosition::sdpa) refuse("gate.position", "must be sdpa (" + g1 + ")");
  if (elementwise_only && g.granularity != model::GateGranularity::elementwise)
    refuse("gate.granularity", "must be elementwise");
  if (g.head_shared) refuse("gate.head_shared", "must be false");
  if (g.combine != model::GateCombine::multiply) refuse("gate.combine", "must be multiply");
  if (g.activation != kernels::Activation::sigmoid) refuse("gate.activation", "must be sigmoid");
  if (g.input != model::GateInput::hidden) refuse("gate.input", "must be hidden");
  if (g.input_dims != 0 && g.input_dims != c.d_model) refuse("gate.input_dims", "must be 0 (all of d_model)");
}

}  // namespace gatedlm::io
