#include "io/hf_hybrid_config.h"

#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "core/error.h"
#include "io/hf_reader.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using model::LayerKind;
using model::ModelConfig;

// Keys of the multimodal wrapper that do not reach the language model: the vision tower's
// config (its tensors are skipped on import) and the ids of the vision placeholder tokens.
const std::set<std::string> kWrapperOnlyKeys = {"vision_config", "image_token_id", "video_token_id",
                                                "vision_start_token_id", "vision_end_token_id"};

// The wrapper's own keys are checked here; returns the text model's object.
const json& text_part(const json& hf, const HybridFamily& t, const std::string& source, std::optional<bool>& outer_tie) {
  if (!hf.is_object()) fail(source, ": expected a JSON object");
  if (!hf.contains("text_config")) return hf;
  HfReader outer(hf, source);
  const std::string type = outer.string("model_type", "");
  if (!t.wrapper_type)
    fail(source, ": key \"model_type\" is \"", type, "\" with a \"text_config\" (a multimodal wrapper); format ",
         t.format, " has none");
  if (type != t.wrapper_type)
    fail(source, ": key \"model_type\" is \"", type, "\"; format ", t.format, "'s wrapper is \"", t.wrapper_type, "\"");
  for (const std::string& k : kWrapperOnlyKeys) outer.ignore(k);
  if (outer.has("tie_word_embeddings")) outer_tie = outer.boolean("tie_word_embeddings", false);
  const json& text = outer.raw("text_config");
  if (!text.is_object()) fail(outer.where("text_config"), ": expected a JSON object");
  outer.reject_unknown();
  return text;
}

void read_model_type(HfReader& r, const HybridFamily& t, bool nested) {
  const std::string type = r.string("model_type", nested ? t.text_type : "");
  if (type == t.text_type || (nested && t.wrapper_type && type == t.wrapper_type)) return;
  if (t.wrapper_type && type == t.wrapper_type)  // the wrapper's type on a flat config
    fail(r.where("model_type"), ": \"", type, "\" is the multimodal wrapper of format ", t.format,
         ", whose config keeps the text model under \"text_config\"; this config has no \"text_config\" (a "
         "flat text config says \"", t.text_type, "\")");
  fail(r.where("model_type"), ": \"", type, "\" is not format ", t.format, "'s \"", t.text_type, "\"");
}

// Sizes, norms, attention biases: the keys Qwen3-Next and Qwen3.5 share with Qwen3
// (io/hf_shared_keys.h), and the G1 gate and zero-centred norms every hybrid has.
void read_sizes_and_gate(HfReader& r, ModelConfig& c, const HybridFamily& t) {
  SizeDefaults defaults{int64_t{256}, std::nullopt};  // transformers' head_dim for both families
  if (t.ffn == HybridFfn::moe_every_layer)  // every layer is sparse: the dense width is unused
    defaults.ffn_hidden = r.integer("moe_intermediate_size", int64_t{512});
  read_sizes(r, c, defaults);
  c.attn_qkv_bias = c.attn_o_bias = r.boolean("attention_bias", false);
  read_activation_and_window(r);
  c.qk_norm = true;
  c.norm_zero_centered = true;  // every RMSNorm but the gated one computes x * (1 + w)
  // transformers gates every softmax layer (q_proj holds [query | gate] per head).
  if (!r.boolean("attn_output_gate", true))
    fail(r.where("attn_output_gate"), ": false is not supported (transformers' ", t.format,
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
  model::check_layer_count(c.n_layers, r.where("num_hidden_layers"));
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

// The MoE keys (io/hf_shared_keys.h) as the family's FFN allows them: Qwen2-MoE's block
// (softmax router, top-k, optional renormalisation, a shared expert behind sigmoid(h g^T)).
void read_moe(HfReader& r, ModelConfig& c, const HybridFamily& t) {
  if (t.ffn == HybridFfn::dense) {
    check_dense_layers(r, 1, 0);  // Qwen3.5 dense: an empty mlp_only_layers says nothing
    if (r.has("mlp_only_layers") && !r.raw("mlp_only_layers").empty())
      fail(r.where("mlp_only_layers"), ": ", r.raw("mlp_only_layers").dump(), " in a dense model");
    return;
  }
  const bool every_layer = t.ffn == HybridFfn::moe_every_layer;
  const model::MoeConfig m = read_moe_keys(r, t.moe, c.n_layers);
  if (every_layer && m.every != 1)
    fail(r.where("decoder_sparse_step"), ": ", m.every, " is not supported (every Qwen3.5-MoE layer is sparse)");
  if (every_layer && !m.norm_topk_prob)
    fail(r.where("norm_topk_prob"), ": false is not supported (Qwen3.5-MoE's router always renormalises)");
  if (m.n_experts == 0) {
    if (every_layer) fail(r.where("num_experts"), ": 0 experts is format qwen3_5 (dense), not qwen3_5_moe");
    return;  // Qwen3-Next without experts: the dense FFN everywhere
  }
  if (m.shared_hidden < 1)
    fail(r.where("shared_expert_intermediate_size"), ": must be positive (transformers' block always runs a "
         "shared expert), got ", m.shared_hidden);
  c.moe = m;
}

}  // namespace

bool names_hybrid_family(const json& hf, const HybridFamily& family) {
  if (!hf.is_object()) return false;
  std::vector<std::string> types;
  if (hf.contains("model_type") && hf["model_type"].is_string()) types.push_back(hf["model_type"]);
  if (hf.contains("text_config") && hf["text_config"].is_object() && hf["text_config"].contains("model_type") &&
      hf["text_config"]["model_type"].is_string())
    types.push_back(hf["text_config"]["model_type"]);
  for (const std::string& type : types)
    if (type == family.text_type || (family.wrapper_type && type == family.wrapper_type)) return true;
  return false;
}

ModelConfig hybrid_config_from_hf(const json& hf, const HybridFamily& family, const std::string& source) {
  std::optional<bool> outer_tie;
  const json& text = text_part(hf, family, source, outer_tie);
  const bool nested = &text != &hf;
  HfReader r(text, nested ? source + ": text_config" : source);
  read_model_type(r, family, nested);
  ModelConfig c;
  read_sizes_and_gate(r, c, family);
  if (outer_tie) {
    if (text.contains("tie_word_embeddings") && *outer_tie != c.tie_embeddings)
      fail(source, ": key \"tie_word_embeddings\" (", *outer_tie ? "true" : "false", ") and text_config's (",
           c.tie_embeddings ? "true" : "false", ") disagree");
    c.tie_embeddings = *outer_tie;
  }
  read_rope(r, c);
  read_layer_kinds(r, c);
  read_linear_attention(r, c);
  read_moe(r, c, family);
  finish_config(r, c, source);
  return c;
}

namespace {

// What the hybrid families cannot express, by gatedlm key.
void check_expressible(const ModelConfig& c, const HybridFamily& t) {
  auto refuse = [&](const std::string& key, const std::string& why) { refuse_export(t.format, key, why); };
  if (!c.norm_zero_centered) refuse("norm_zero_centered", "must be true (the format's norms compute x * (1 + w))");
  if (!c.qk_norm) refuse("qk_norm", "must be true (the format always normalises q and k)");
  if (!c.has_gate()) refuse("gate", "must be the G1 gate (the format gates every softmax layer)");
  check_g1_gate_for_export(c, t.format, "G1", true);
  if (c.rope_scaling.type != model::RopeScalingType::none) refuse("rope_scaling.type", "must be none");
  if (c.sliding_layers() > 0)
    refuse("layer_types", "has sliding_attention layers (the format's layers are linear_attention or full_attention)");
  check_plain_block_for_export(c, t.format, "must be absent",
                               "must equal attn_qkv_bias (the format's attention_bias covers q, gate, k, v and o)");
}

// The FFN the family holds: MoE or not, and Qwen3.5-MoE's fixed router.
void check_expressible_ffn(const ModelConfig& c, const HybridFamily& t) {
  auto refuse = [&](const std::string& key, const std::string& why) { refuse_export(t.format, key, why); };
  const bool every_layer = t.ffn == HybridFfn::moe_every_layer;
  if (t.ffn == HybridFfn::dense && c.has_moe()) refuse("moe", "must be absent (use --format qwen3_5_moe)");
  if (every_layer && !c.has_moe()) refuse("moe", "is required (use --format qwen3_5)");
  if (c.has_moe() && c.moe.n_shared < 1) refuse("moe.n_shared", "must be at least 1 (the format's block runs a shared expert)");
  if (every_layer && c.moe.every != 1) refuse("moe.every", "must be 1 (every layer sparse)");
  if (every_layer && !c.moe.norm_topk_prob) refuse("moe.norm_topk_prob", "must be true (the router always renormalises)");
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

}  // namespace

nlohmann::ordered_json hybrid_config_to_hf(const ModelConfig& c, const HybridFamily& family, const std::string& torch_dtype) {
  check_expressible(c, family);
  check_expressible_ffn(c, family);
  nlohmann::ordered_json j;
  write_head(j, c, family.architecture, family.text_type);
  write_shape(j, c);
  j["rope_parameters"] = {{"rope_type", "default"},
                          {"rope_theta", c.rope_base},
                          {"partial_rotary_factor", static_cast<double>(c.rope_dims) / static_cast<double>(c.head_dim)}};
  j["attn_output_gate"] = true;
  j["attention_bias"] = c.attn_qkv_bias;
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["initializer_range"] = c.init_std;
  write_layers(j, c);
  if (c.has_moe())
    write_moe_keys(j, c.moe, family.moe);
  else if (family.ffn == HybridFfn::dense_or_moe)
    j["num_experts"] = 0;  // transformers' default is 512
  j["torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace gatedlm::io
