#include "io/hf_config.h"

#include <set>

#include "core/error.h"
#include "io/hf_hybrid_config.h"
#include "io/hf_reader.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using model::ModelConfig;

const std::set<std::string> kPaperKeys = {"headwise_attn_output_gate", "elementwise_attn_output_gate", "use_qk_norm",
                                          "qkv_bias"};

}  // namespace

// rope_scaling: null / "default" -> none; linear; yarn with transformers' defaults.
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
    if (type == "yarn") {
      allowed.insert("original_max_position_embeddings");
      if (rs.contains("original_max_position_embeddings")) {
        if (!rs["original_max_position_embeddings"].is_number_integer())
          fail(where, ".original_max_position_embeddings: expected an integer");
        c.rope_scaling.original_max_seq_len = rs["original_max_position_embeddings"].get<int64_t>();
      }
      // gatedlm's YaRN is transformers' with its defaults; other values are refused.
      for (auto [key, value] : {std::pair<const char*, double>{"beta_fast", 32.0}, {"beta_slow", 1.0}})
        if (rs.contains(key)) {
          allowed.insert(key);
          if (!rs[key].is_number() || rs[key].get<double>() != value)
            fail(where, ".", key, ": gatedlm's YaRN uses ", value, ", got ", rs[key].dump());
        }
    }
  } else {
    fail(where, ": type \"", type, "\" is not supported (gatedlm has none, linear and yarn)");
  }
  for (const auto& [k, v] : rs.items())
    if (!allowed.count(k)) fail(where, ".", k, ": not supported (value ", v.dump(), ")");
}

namespace {

// Qwen3-MoE's keys (model_type "qwen3_moe") -> the `moe` object. Layer i is sparse when
// (i + 1) % decoder_sparse_step == 0, as gatedlm's `every`; a list of dense layers beyond
// that and Qwen2-MoE's shared expert have no gatedlm equivalent here and are refused.
void read_moe(HfReader& r, ModelConfig& c) {
  model::MoeConfig& m = c.moe;
  m.n_experts = r.integer("num_experts", std::nullopt);
  m.top_k = r.integer("num_experts_per_tok", std::nullopt);
  m.expert_hidden = r.integer("moe_intermediate_size", std::nullopt);
  m.shared_hidden = m.expert_hidden;  // moe_config_from_json's default
  m.every = r.integer("decoder_sparse_step", int64_t{1});
  m.norm_topk_prob = r.boolean("norm_topk_prob", false);  // transformers' Qwen3MoeConfig default
  m.lb_coef = r.number("router_aux_loss_coef", m.lb_coef);
  m.z_coef = r.number("router_z_loss_coef", m.z_coef);
  r.boolean("output_router_logits", false);  // training output only
  r.ignore("mlp_only_layers");
  if (r.has("mlp_only_layers")) {
    const json& dense = r.raw("mlp_only_layers");
    if (!dense.is_array()) fail(r.where("mlp_only_layers"), ": expected a list of layer indices");
    if (!dense.empty())
      fail(r.where("mlp_only_layers"), ": ", dense.dump(),
           " is not supported (gatedlm's dense layers are those decoder_sparse_step skips)");
  }
  if (r.integer("shared_expert_intermediate_size", int64_t{0}) != 0)
    fail(r.where("shared_expert_intermediate_size"), ": Qwen3-MoE has no shared expert (Qwen2-MoE's is not imported)");
}

void write_moe(nlohmann::ordered_json& j, const model::MoeConfig& m) {
  j["decoder_sparse_step"] = m.every;
  j["moe_intermediate_size"] = m.expert_hidden;
  j["num_experts"] = m.n_experts;
  j["num_experts_per_tok"] = m.top_k;
  j["norm_topk_prob"] = m.norm_topk_prob;
  j["mlp_only_layers"] = nlohmann::ordered_json::array();
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = m.lb_coef;
  j["router_z_loss_coef"] = m.z_coef;  // not Qwen3-MoE's; transformers keeps it as an attribute
}

}  // namespace

std::string to_string(HfFormat f) {
  switch (f) {
    case HfFormat::paper: return "paper";
    case HfFormat::qwen3: return "qwen3";
    case HfFormat::qwen3_next: return "qwen3_next";
    case HfFormat::qwen3_5: return "qwen3_5";
    case HfFormat::qwen3_5_moe: return "qwen3_5_moe";
  }
  return "?";
}

bool is_hybrid_format(HfFormat f) {
  return f == HfFormat::qwen3_next || f == HfFormat::qwen3_5 || f == HfFormat::qwen3_5_moe;
}

HfFormat parse_hf_format(const std::string& name) {
  for (HfFormat f : {HfFormat::paper, HfFormat::qwen3, HfFormat::qwen3_next, HfFormat::qwen3_5, HfFormat::qwen3_5_moe})
    if (name == to_string(f)) return f;
  fail("--format: unknown value \"", name, "\" (expected auto|paper|qwen3|qwen3_next|qwen3_5|qwen3_5_moe|gguf)");
}

HfFormat detect_hf_format(const json& hf) {
  if (const std::optional<HfFormat> hybrid = hybrid_format_of(hf)) return *hybrid;
  if (hf.is_object())
    for (const std::string& k : kPaperKeys)
      if (hf.contains(k)) return HfFormat::paper;
  return HfFormat::qwen3;
}

ModelConfig config_from_hf(const json& hf, HfFormat format, const std::string& source) {
  if (is_hybrid_format(format)) return hybrid_config_from_hf(hf, format, source);
  HfReader r(hf, source);
  const std::string model_type = r.string("model_type", "");
  if (model_type != "qwen3" && model_type != "qwen3_moe")
    fail(source, ": key \"model_type\" is \"", model_type,
         "\"; gatedlm imports qwen3, qwen3_moe, the paper's qwen3-based models, qwen3_next, qwen3_5 and qwen3_5_moe");
  if (format == HfFormat::qwen3)
    for (const std::string& k : kPaperKeys)
      if (hf.contains(k)) fail(source, ": key \"", k, "\" belongs to the paper's layout (use --format paper or auto)");
  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu") fail(r.where("hidden_act"), ": \"", act, "\" is not supported (gatedlm's FFN is SwiGLU: silu)");
  if (r.boolean("use_sliding_window", false)) fail(r.where("use_sliding_window"), ": sliding-window attention is not supported");
  r.ignore("sliding_window");  // unused without use_sliding_window
  r.ignore("layer_types");
  if (r.has("layer_types")) {
    for (const json& t : r.raw("layer_types"))
      if (t != "full_attention") fail(r.where("layer_types"), ": only full_attention layers are supported, got ", t.dump());
  }
  if (r.has("partial_rotary_factor") && r.number("partial_rotary_factor", 1.0) != 1.0)
    fail(r.where("partial_rotary_factor"), ": gatedlm imports full-head RoPE only");
  r.number("partial_rotary_factor", 1.0);

  ModelConfig c;
  c.vocab_size = r.integer("vocab_size", std::nullopt);
  c.d_model = r.integer("hidden_size", std::nullopt);
  c.n_layers = r.integer("num_hidden_layers", std::nullopt);
  c.n_heads = r.integer("num_attention_heads", std::nullopt);
  // transformers' documented defaults where a key may be left out.
  c.n_kv_heads = r.integer("num_key_value_heads", c.n_heads);
  if (c.n_heads < 1) fail(r.where("num_attention_heads"), ": must be positive");
  c.head_dim = r.integer("head_dim", c.d_model / c.n_heads);
  c.ffn_hidden = r.integer("intermediate_size", std::nullopt);
  c.norm_eps = r.number("rms_norm_eps", 1e-6);
  c.rope_base = r.number("rope_theta", 10000.0);
  c.rope_dims = c.head_dim;
  c.max_seq_len = r.integer("max_position_embeddings", int64_t{32768});
  c.tie_embeddings = r.boolean("tie_word_embeddings", false);
  c.init_std = r.number("initializer_range", 0.02);
  read_rope_scaling(r, c, source);
  if (c.rope_scaling.original_max_seq_len == 0) c.rope_scaling.original_max_seq_len = c.max_seq_len;
  bool bias = r.boolean("attention_bias", false);
  c.qk_norm = true;
  if (format == HfFormat::paper) {
    if (r.has("qkv_bias")) {
      const bool qkv = r.boolean("qkv_bias", false);
      if (hf.contains("attention_bias") && qkv != bias)
        fail(source, ": keys \"qkv_bias\" and \"attention_bias\" disagree");
      bias = qkv;
    }
    c.qk_norm = r.boolean("use_qk_norm", true);
    const bool headwise = r.boolean("headwise_attn_output_gate", false);
    const bool elementwise = r.boolean("elementwise_attn_output_gate", false);
    if (headwise && elementwise)
      fail(source, ": keys \"headwise_attn_output_gate\" and \"elementwise_attn_output_gate\" are both true");
    if (headwise || elementwise) {
      c.gate.position = model::GatePosition::sdpa;
      c.gate.granularity = headwise ? model::GateGranularity::headwise : model::GateGranularity::elementwise;
    }
  }
  c.attn_qkv_bias = c.attn_o_bias = bias;
  if (model_type == "qwen3_moe") read_moe(r, c);
  finish_config(r, c, source);
  return c;
}

nlohmann::ordered_json config_to_hf(const ModelConfig& c, HfFormat format, const std::string& torch_dtype) {
  if (is_hybrid_format(format)) return hybrid_config_to_hf(c, format, torch_dtype);
  const std::string fmt = to_string(format);
  auto refuse = [&](const std::string& key, const std::string& why) {
    fail("export --format ", fmt, ": model config key \"", key, "\" ", why);
  };
  if (c.rope_dims != c.head_dim) refuse("rope_dims", "must equal head_dim (the format rotates whole heads)");
  if (c.sdpa_transform != model::SdpaTransform::none) refuse("sdpa_transform", "must be none");
  if (c.sandwich_norm) refuse("sandwich_norm", "must be false");
  if (c.residual_clip != 0.0) refuse("residual_clip", "must be 0");
  if (c.switch_heads.on()) refuse("switch_heads", "must be absent (neither format has switch heads)");
  if (c.attn_qkv_bias != c.attn_o_bias)
    refuse("attn_o_bias", "must equal attn_qkv_bias (the format's one bias key covers q, k, v and o)");
  if (c.rope_scaling.type == model::RopeScalingType::ntk) refuse("rope_scaling.type", "\"ntk\" has no Hugging Face equivalent");
  if (c.moe.n_shared > 0) refuse("moe.n_shared", "must be 0 (Qwen3-MoE has no shared expert)");
  if (format == HfFormat::qwen3) {
    if (c.has_gate()) refuse("gate", "must be none (Qwen3 has no attention gate; use --format paper)");
    if (!c.qk_norm) refuse("qk_norm", "must be true (Qwen3 always normalises q and k)");
  } else if (c.has_gate()) {
    const model::GateConfig& g = c.gate;
    if (g.position != model::GatePosition::sdpa) refuse("gate.position", "must be sdpa (the paper's G1)");
    if (g.head_shared) refuse("gate.head_shared", "must be false");
    if (g.combine != model::GateCombine::multiply) refuse("gate.combine", "must be multiply");
    if (g.activation != kernels::Activation::sigmoid) refuse("gate.activation", "must be sigmoid");
    if (g.input != model::GateInput::hidden) refuse("gate.input", "must be hidden");
    if (g.input_dims != 0 && g.input_dims != c.d_model) refuse("gate.input_dims", "must be 0 (all of d_model)");
  }
  nlohmann::ordered_json j;
  j["architectures"] = {c.moe.enabled() ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"};
  j["model_type"] = c.moe.enabled() ? "qwen3_moe" : "qwen3";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.d_model;
  j["intermediate_size"] = c.ffn_hidden;
  if (c.moe.enabled()) write_moe(j, c.moe);
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_seq_len;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_base;
  if (c.rope_scaling.type == model::RopeScalingType::none) {
    j["rope_scaling"] = nullptr;
  } else if (c.rope_scaling.type == model::RopeScalingType::linear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  } else {
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", c.rope_scaling.factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_seq_len}};
  }
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["attention_bias"] = c.attn_qkv_bias;
  j["attention_dropout"] = 0.0;
  j["use_sliding_window"] = false;
  j["initializer_range"] = c.init_std;
  if (format == HfFormat::paper) {
    j["use_qk_norm"] = c.qk_norm;
    j["headwise_attn_output_gate"] = c.has_gate() && c.gate.granularity == model::GateGranularity::headwise;
    j["elementwise_attn_output_gate"] = c.has_gate() && c.gate.granularity == model::GateGranularity::elementwise;
  }
  j["torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace gatedlm::io
