#include "io/hf_hybrid_config.h"

#include <cmath>
#include <set>

#include "core/error.h"
#include "io/hf_reader.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using model::LayerKind;
using model::ModelConfig;

// model_type of the text model, of its multimodal wrapper, per format.
struct TypeNames {
  HfFormat format;
  const char* text;
  const char* wrapper;  // nullptr: no multimodal wrapper
  const char* architecture;  // what export writes
};
const TypeNames kTypes[] = {
    {HfFormat::qwen3_next, "qwen3_next", nullptr, "Qwen3NextForCausalLM"},
    {HfFormat::qwen3_5, "qwen3_5_text", "qwen3_5", "Qwen3_5ForCausalLM"},
    {HfFormat::qwen3_5_moe, "qwen3_5_moe_text", "qwen3_5_moe", "Qwen3_5MoeForCausalLM"},
};
const TypeNames& names_of(HfFormat f) {
  for (const TypeNames& t : kTypes)
    if (t.format == f) return t;
  fail("internal error: ", to_string(f), " is not a hybrid format");
}

// Keys of the multimodal wrapper that do not reach the language model: the vision tower's
// config (its tensors are skipped on import) and the ids of the vision placeholder tokens.
const std::set<std::string> kWrapperOnlyKeys = {"vision_config", "image_token_id", "video_token_id",
                                                "vision_start_token_id", "vision_end_token_id"};

// The wrapper's own keys are checked here; returns the text model's object.
const json& text_part(const json& hf, HfFormat format, const std::string& source, std::optional<bool>& outer_tie) {
  const TypeNames& t = names_of(format);
  if (!hf.is_object()) fail(source, ": expected a JSON object");
  if (!hf.contains("text_config")) return hf;
  HfReader outer(hf, source);
  const std::string type = outer.string("model_type", "");
  if (!t.wrapper)
    fail(source, ": key \"model_type\" is \"", type, "\" with a \"text_config\" (a multimodal wrapper); format ",
         to_string(format), " has none");
  if (type != t.wrapper)
    fail(source, ": key \"model_type\" is \"", type, "\"; format ", to_string(format), "'s wrapper is \"", t.wrapper, "\"");
  for (const std::string& k : kWrapperOnlyKeys) outer.ignore(k);
  if (outer.has("tie_word_embeddings")) outer_tie = outer.boolean("tie_word_embeddings", false);
  const json& text = outer.raw("text_config");
  if (!text.is_object()) fail(outer.where("text_config"), ": expected a JSON object");
  outer.reject_unknown();
  return text;
}

void read_model_type(HfReader& r, HfFormat format, bool nested) {
  const TypeNames& t = names_of(format);
  const std::string type = r.string("model_type", nested ? t.text : "");
  if (type != t.text && !(nested && t.wrapper && type == t.wrapper))
    fail(r.where("model_type"), ": \"", type, "\" is not format ", to_string(format), "'s \"", t.text, "\"");
}

// Sizes, norms, attention biases: the keys Qwen3-Next and Qwen3.5 share with Qwen3.
void read_sizes(HfReader& r, ModelConfig& c, HfFormat format) {
  c.vocab_size = r.integer("vocab_size", std::nullopt);
  c.d_model = r.integer("hidden_size", std::nullopt);
  c.n_layers = r.integer("num_hidden_layers", std::nullopt);
  c.n_heads = r.integer("num_attention_heads", std::nullopt);
  c.n_kv_heads = r.integer("num_key_value_heads", c.n_heads);
  c.head_dim = r.integer("head_dim", int64_t{256});  // transformers' default for both families
  if (format == HfFormat::qwen3_5_moe) {  // every layer is sparse: the dense width is unused
    c.ffn_hidden = r.integer("intermediate_size", r.integer("moe_intermediate_size", int64_t{512}));
  } else {
    c.ffn_hidden = r.integer("intermediate_size", std::nullopt);
  }
  c.norm_eps = r.number("rms_norm_eps", 1e-6);
  c.max_seq_len = r.integer("max_position_embeddings", int64_t{32768});
  c.init_std = r.number("initializer_range", 0.02);
  c.tie_embeddings = r.boolean("tie_word_embeddings", false);
  c.attn_qkv_bias = c.attn_o_bias = r.boolean("attention_bias", false);
  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu") fail(r.where("hidden_act"), ": \"", act, "\" is not supported (gatedlm's FFN is SwiGLU: silu)");
  if (r.boolean("use_sliding_window", false))
    fail(r.where("use_sliding_window"), ": sliding-window attention is not supported");
  r.ignore("sliding_window");  // unused without use_sliding_window (Qwen3-Next's config carries both)
  c.qk_norm = true;
  c.norm_zero_centered = true;  // every RMSNorm but the gated one computes x * (1 + w)
  // transformers gates every softmax layer (q_proj holds [query | gate] per head).
  if (!r.boolean("attn_output_gate", true))
    fail(r.where("attn_output_gate"), ": false is not supported (transformers' ", to_string(format),
         " gates every softmax layer: its q_proj always holds the gate's rows)");
  c.gate = model::GateConfig{};
  c.gate.position = model::GatePosition::sdpa;
  // MTP (multi-token prediction) layers are not imported (their tensors are skipped), nor
  // is the recurrent state's storage type a property of the function.
  for (const char* k : {"mtp_num_hidden_layers", "mtp_use_dedicated_embeddings", "mamba_ssm_dtype"}) r.ignore(k);
}

// rope_parameters {rope_type "default", rope_theta, partial_rotary_factor, mrope_section,
// mrope_interleaved}, or the older top-level rope_theta / partial_rotary_factor /
// rope_scaling. M-RoPE's sections rotate by the text position in all three sections for
// text tokens, which is plain RoPE; they only matter for vision tokens.
void read_rope(HfReader& r, ModelConfig& c) {
  double theta = r.number("rope_theta", 10000.0), factor = r.number("partial_rotary_factor", 0.25);
  read_rope_scaling(r, c, r.source());
  if (r.has("rope_parameters")) {
    const json& p = r.raw("rope_parameters");
    if (!p.is_object()) fail(r.where("rope_parameters"), ": expected an object");
    for (const auto& [k, v] : p.items()) {
      const std::string where = r.where("rope_parameters." + k);
      if (k == "rope_type" || k == "type") {
        if (v != "default") fail(where, ": ", v.dump(), " is not supported (only \"default\")");
      } else if (k == "rope_theta" || k == "partial_rotary_factor") {
        if (!v.is_number()) fail(where, ": expected a number, got ", v.dump());
        (k == "rope_theta" ? theta : factor) = v.get<double>();
      } else if (k == "mrope_section") {
        if (!v.is_array()) fail(where, ": expected a list, got ", v.dump());
      } else if (k == "mrope_interleaved") {
        if (!v.is_boolean()) fail(where, ": expected true or false, got ", v.dump());
      } else {
        fail(where, ": not supported (value ", v.dump(), ")");
      }
    }
  }
  const double dims = factor * static_cast<double>(c.head_dim);
  if (!(factor > 0.0 && factor <= 1.0) || std::fabs(dims - std::round(dims)) > 1e-6)
    fail(r.where("partial_rotary_factor"), ": ", factor, " x head_dim ", c.head_dim,
         " is not a whole number of rotary dims in (0, head_dim]");
  c.rope_base = theta;
  c.rope_dims = std::llround(dims);
  if (c.rope_scaling.original_max_seq_len == 0) c.rope_scaling.original_max_seq_len = c.max_seq_len;
}

// layer_types, full_attention_interval, or both when they agree; neither: interval 4
// (transformers' default).
void read_layer_kinds(HfReader& r, ModelConfig& c) {
  // Bounded before a list of n_layers kinds is built (validate() checks the rest).
  if (c.n_layers < 1 || c.n_layers > (int64_t{1} << 16))
    fail(r.where("num_hidden_layers"), ": ", c.n_layers, " is not between 1 and 65536");
  const int64_t interval = r.integer("full_attention_interval", int64_t{4});
  if (interval < 1) fail(r.where("full_attention_interval"), ": must be at least 1, got ", interval);
  std::vector<LayerKind> kinds;
  for (int64_t l = 0; l < c.n_layers; ++l)
    kinds.push_back((l + 1) % interval == 0 ? LayerKind::full_attention : LayerKind::linear_attention);
  if (r.has("layer_types")) {
    const json& list = r.raw("layer_types");
    if (!list.is_array() || static_cast<int64_t>(list.size()) != c.n_layers)
      fail(r.where("layer_types"), ": expected a list of num_hidden_layers (", c.n_layers, ") entries");
    const bool interval_given = r.has("full_attention_interval");
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const json& v = list[static_cast<size_t>(l)];
      if (v != "linear_attention" && v != "full_attention")
        fail(r.where("layer_types"), "[", l, "]: ", v.dump(), " is not linear_attention or full_attention");
      const LayerKind k = v == "full_attention" ? LayerKind::full_attention : LayerKind::linear_attention;
      if (interval_given && k != kinds[static_cast<size_t>(l)])
        fail(r.where("layer_types"), "[", l, "] disagrees with full_attention_interval ", interval);
      kinds[static_cast<size_t>(l)] = k;
    }
  }
  c.layer_types = kinds;
}

void read_linear_attention(HfReader& r, ModelConfig& c) {
  model::LinearAttentionConfig la;  // transformers' defaults
  la.n_k_heads = r.integer("linear_num_key_heads", int64_t{16});
  la.n_v_heads = r.integer("linear_num_value_heads", int64_t{32});
  la.k_head_dim = r.integer("linear_key_head_dim", int64_t{128});
  la.v_head_dim = r.integer("linear_value_head_dim", int64_t{128});
  la.conv_kernel = r.integer("linear_conv_kernel_dim", int64_t{4});
  if (c.has_linear()) c.linear_attention = la;
}

// mlp_only_layers: gatedlm's dense layers are those decoder_sparse_step skips; a listed
// layer the step would make sparse is refused.
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

// The MoE keys: Qwen2-MoE's block (softmax router, top-k, optional renormalisation, a
// shared expert behind sigmoid(h g^T)).
void read_moe(HfReader& r, ModelConfig& c, HfFormat format) {
  const bool qwen35 = format == HfFormat::qwen3_5_moe;
  model::MoeConfig m;
  m.n_experts = r.integer("num_experts", int64_t{qwen35 ? 256 : 512});
  m.top_k = r.integer("num_experts_per_tok", int64_t{qwen35 ? 8 : 10});
  m.expert_hidden = r.integer("moe_intermediate_size", int64_t{512});
  m.shared_hidden = r.integer("shared_expert_intermediate_size", int64_t{512});
  m.n_shared = 1;
  m.every = r.integer("decoder_sparse_step", int64_t{1});
  m.norm_topk_prob = r.boolean("norm_topk_prob", true);
  m.lb_coef = r.number("router_aux_loss_coef", m.lb_coef);
  m.z_coef = r.number("router_z_loss_coef", m.z_coef);
  r.boolean("output_router_logits", false);  // training output only
  if (qwen35 && m.every != 1)
    fail(r.where("decoder_sparse_step"), ": ", m.every, " is not supported (every Qwen3.5-MoE layer is sparse)");
  if (qwen35 && !m.norm_topk_prob)
    fail(r.where("norm_topk_prob"), ": false is not supported (Qwen3.5-MoE's router always renormalises)");
  if (m.every < 1) fail(r.where("decoder_sparse_step"), ": must be at least 1, got ", m.every);
  check_dense_layers(r, m.every, c.n_layers);
  if (m.n_experts == 0) {
    if (qwen35) fail(r.where("num_experts"), ": 0 experts is format qwen3_5 (dense), not qwen3_5_moe");
    return;  // Qwen3-Next without experts: the dense FFN everywhere
  }
  if (m.shared_hidden < 1)
    fail(r.where("shared_expert_intermediate_size"), ": must be positive (transformers' block always runs a "
         "shared expert), got ", m.shared_hidden);
  c.moe = m;
}

}  // namespace

std::optional<HfFormat> hybrid_format_of(const json& hf) {
  if (!hf.is_object()) return std::nullopt;
  std::vector<std::string> types;
  if (hf.contains("model_type") && hf["model_type"].is_string()) types.push_back(hf["model_type"]);
  if (hf.contains("text_config") && hf["text_config"].is_object() && hf["text_config"].contains("model_type") &&
      hf["text_config"]["model_type"].is_string())
    types.push_back(hf["text_config"]["model_type"]);
  for (const std::string& type : types)
    for (const TypeNames& t : kTypes)
      if (type == t.text || (t.wrapper && type == t.wrapper)) return t.format;
  return std::nullopt;
}

std::string hf_weight_prefix(const json& hf) {
  return hf.is_object() && hf.contains("text_config") ? "model.language_model." : "model.";
}

ModelConfig hybrid_config_from_hf(const json& hf, HfFormat format, const std::string& source) {
  std::optional<bool> outer_tie;
  const json& text = text_part(hf, format, source, outer_tie);
  const bool nested = &text != &hf;
  HfReader r(text, nested ? source + ": text_config" : source);
  read_model_type(r, format, nested);
  ModelConfig c;
  read_sizes(r, c, format);
  if (outer_tie) {
    if (text.contains("tie_word_embeddings") && *outer_tie != c.tie_embeddings)
      fail(source, ": key \"tie_word_embeddings\" (", *outer_tie ? "true" : "false", ") and text_config's (",
           c.tie_embeddings ? "true" : "false", ") disagree");
    c.tie_embeddings = *outer_tie;
  }
  read_rope(r, c);
  read_layer_kinds(r, c);
  read_linear_attention(r, c);
  if (format != HfFormat::qwen3_5) {
    read_moe(r, c, format);
  } else {
    check_dense_layers(r, 1, 0);  // Qwen3.5 dense: an empty mlp_only_layers says nothing
    if (r.has("mlp_only_layers") && !r.raw("mlp_only_layers").empty())
      fail(r.where("mlp_only_layers"), ": ", r.raw("mlp_only_layers").dump(), " in a dense model");
  }
  finish_config(r, c, source);
  return c;
}

namespace {

void refuse(HfFormat f, const std::string& key, const std::string& why) {
  fail("export --format ", to_string(f), ": model config key \"", key, "\" ", why);
}

// What the hybrid formats cannot express, by gatedlm key.
void check_expressible(const ModelConfig& c, HfFormat f) {
  if (!c.norm_zero_centered) refuse(f, "norm_zero_centered", "must be true (the format's norms compute x * (1 + w))");
  if (!c.qk_norm) refuse(f, "qk_norm", "must be true (the format always normalises q and k)");
  if (!c.has_gate()) refuse(f, "gate", "must be the G1 gate (the format gates every softmax layer)");
  const model::GateConfig& g = c.gate;
  if (g.position != model::GatePosition::sdpa) refuse(f, "gate.position", "must be sdpa (G1)");
  if (g.granularity != model::GateGranularity::elementwise) refuse(f, "gate.granularity", "must be elementwise");
  if (g.head_shared) refuse(f, "gate.head_shared", "must be false");
  if (g.combine != model::GateCombine::multiply) refuse(f, "gate.combine", "must be multiply");
  if (g.activation != kernels::Activation::sigmoid) refuse(f, "gate.activation", "must be sigmoid");
  if (g.input != model::GateInput::hidden) refuse(f, "gate.input", "must be hidden");
  if (g.input_dims != 0 && g.input_dims != c.d_model) refuse(f, "gate.input_dims", "must be 0 (all of d_model)");
  if (c.rope_scaling.type != model::RopeScalingType::none) refuse(f, "rope_scaling.type", "must be none");
  if (c.sdpa_transform != model::SdpaTransform::none) refuse(f, "sdpa_transform", "must be none");
  if (c.sandwich_norm) refuse(f, "sandwich_norm", "must be false");
  if (c.residual_clip != 0.0) refuse(f, "residual_clip", "must be 0");
  if (c.switch_heads.on()) refuse(f, "switch_heads", "must be absent");
  if (c.attn_qkv_bias != c.attn_o_bias)
    refuse(f, "attn_o_bias", "must equal attn_qkv_bias (the format's attention_bias covers q, gate, k, v and o)");
  if (f == HfFormat::qwen3_5 && c.has_moe()) refuse(f, "moe", "must be absent (use --format qwen3_5_moe)");
  if (f == HfFormat::qwen3_5_moe && !c.has_moe()) refuse(f, "moe", "is required (use --format qwen3_5)");
  if (c.has_moe() && c.moe.n_shared < 1) refuse(f, "moe.n_shared", "must be at least 1 (the format's block runs a shared expert)");
  if (f == HfFormat::qwen3_5_moe && c.moe.every != 1) refuse(f, "moe.every", "must be 1 (every layer sparse)");
  if (f == HfFormat::qwen3_5_moe && !c.moe.norm_topk_prob)
    refuse(f, "moe.norm_topk_prob", "must be true (the router always renormalises)");
}

void write_layers(nlohmann::ordered_json& j, const ModelConfig& c) {
  nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
  for (int64_t l = 0; l < c.n_layers; ++l) kinds.push_back(model::to_string(c.is_linear(l) ? LayerKind::linear_attention
                                                                                             : LayerKind::full_attention));
  j["layer_types"] = kinds;
  const model::LinearAttentionConfig& la = c.linear_attention;
  if (!c.has_linear()) return;
  j["linear_num_key_heads"] = la.n_k_heads;
  j["linear_num_value_heads"] = la.n_v_heads;
  j["linear_key_head_dim"] = la.k_head_dim;
  j["linear_value_head_dim"] = la.v_head_dim;
  j["linear_conv_kernel_dim"] = la.conv_kernel;
}

void write_moe(nlohmann::ordered_json& j, const ModelConfig& c, HfFormat f) {
  if (!c.has_moe()) {
    if (f == HfFormat::qwen3_next) j["num_experts"] = 0;  // transformers' default is 512
    return;
  }
  const model::MoeConfig& m = c.moe;
  if (f == HfFormat::qwen3_next) j["decoder_sparse_step"] = m.every;
  j["moe_intermediate_size"] = m.expert_hidden;
  j["shared_expert_intermediate_size"] = m.shared_width();
  j["num_experts"] = m.n_experts;
  j["num_experts_per_tok"] = m.top_k;
  j["norm_topk_prob"] = m.norm_topk_prob;
  if (f == HfFormat::qwen3_next) j["mlp_only_layers"] = nlohmann::ordered_json::array();
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = m.lb_coef;
  j["router_z_loss_coef"] = m.z_coef;  // gatedlm's; transformers keeps it as an attribute
}

}  // namespace

nlohmann::ordered_json hybrid_config_to_hf(const ModelConfig& c, HfFormat f, const std::string& torch_dtype) {
  check_expressible(c, f);
  const TypeNames& t = names_of(f);
  nlohmann::ordered_json j;
  j["architectures"] = {t.architecture};
  j["model_type"] = t.text;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.d_model;
  j["intermediate_size"] = c.ffn_hidden;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_seq_len;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_parameters"] = {{"rope_type", "default"},
                          {"rope_theta", c.rope_base},
                          {"partial_rotary_factor", static_cast<double>(c.rope_dims) / static_cast<double>(c.head_dim)}};
  j["attn_output_gate"] = true;
  j["attention_bias"] = c.attn_qkv_bias;
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["initializer_range"] = c.init_std;
  write_layers(j, c);
  write_moe(j, c, f);
  j["torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace gatedlm::io
