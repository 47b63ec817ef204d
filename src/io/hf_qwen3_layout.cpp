#include "io/hf_qwen3_layout.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "io/hf_reader.h"
#include "io/hf_shared_keys.h"

namespace gatedlm::io {

namespace {

using nlohmann::json;
using model::ModelConfig;

const std::set<std::string> kPaperKeys = {"headwise_attn_output_gate", "elementwise_attn_output_gate", "use_qk_norm",
                                          "qkv_bias"};

// The model types of the layout, dense and MoE, and what export writes as `architectures`.
constexpr const char* kDenseType = "qwen3";
constexpr const char* kMoeType = "qwen3_moe";
constexpr const char* kDenseArchitecture = "Qwen3ForCausalLM";
constexpr const char* kMoeArchitecture = "Qwen3MoeForCausalLM";

// Qwen3-MoE's keys (model_type "qwen3_moe"): all required, top-k weights not renormalised
// unless asked (transformers' Qwen3MoeConfig default), no shared expert.
const MoeKeys kQwen3MoeKeys{std::nullopt, std::nullopt, std::nullopt, false, false, true};

// The keys that would make this a model gatedlm does not run: another activation, partial
// RoPE.
void check_plain_layers(HfReader& r) {
  read_activation(r);
  if (r.has("partial_rotary_factor") && r.number("partial_rotary_factor", 1.0) != 1.0)
    fail(r.where("partial_rotary_factor"), ": gatedlm imports full-head RoPE only");
  r.number("partial_rotary_factor", 1.0);
}

// Qwen3's sliding windows as transformers' Qwen3Config reads them: with use_sliding_window,
// the layers of layer_types marked sliding_attention (without the list: every layer from
// max_window_layers on) attend over the last sliding_window keys (4096 when the key is
// absent). Without use_sliding_window, or with "sliding_window": null, transformers drops the
// window, and every layer is full attention whatever the list says.
void read_sliding_layers(HfReader& r, const json& hf, ModelConfig& c) {
  model::check_layer_count(c.n_layers, r.where("num_hidden_layers"));
  const bool on = r.boolean("use_sliding_window", false) && !(hf.contains("sliding_window") && hf["sliding_window"].is_null());
  const int64_t window = r.integer("sliding_window", int64_t{4096}), first = r.integer("max_window_layers", int64_t{28});
  if (on && window < 1) fail(r.where("sliding_window"), ": must be at least 1 with use_sliding_window, got ", window);
  std::vector<model::LayerKind> kinds(static_cast<size_t>(c.n_layers), model::LayerKind::full_attention);
  if (r.has("layer_types")) {
    const json& list = r.raw("layer_types");
    if (!list.is_array() || static_cast<int64_t>(list.size()) != c.n_layers)
      fail(r.where("layer_types"), ": expected a list of num_hidden_layers (", c.n_layers, ") entries");
    for (size_t l = 0; l < list.size(); ++l) {
      if (list[l] != "full_attention" && list[l] != "sliding_attention")
        fail(r.where("layer_types"), "[", l, "]: ", list[l].dump(), " is not full_attention or sliding_attention");
      if (on && list[l] == "sliding_attention") kinds[l] = model::LayerKind::sliding_attention;
    }
  } else if (on) {
    for (int64_t l = std::max<int64_t>(first, 0); l < c.n_layers; ++l) kinds[l] = model::LayerKind::sliding_attention;
  }
  if (!on || std::count(kinds.begin(), kinds.end(), model::LayerKind::sliding_attention) == 0) return;
  c.layer_types = std::move(kinds);
  c.sliding_window = window;
}

// The same keys written back: layer_types always listed (max_window_layers as the count of
// leading full layers, for readers that ignore the list).
void write_sliding_layers(nlohmann::ordered_json& j, const ModelConfig& c) {
  const bool sliding = c.sliding_layers() > 0;
  j["use_sliding_window"] = sliding;
  if (!sliding) return;
  int64_t leading_full = 0;
  while (leading_full < c.n_layers && c.layer_types[leading_full] == model::LayerKind::full_attention) ++leading_full;
  j["sliding_window"] = c.sliding_window;
  j["max_window_layers"] = leading_full;
  j["layer_types"] = model::layer_kinds_to_json(c.layer_types);
}

// The paper's keys: qkv_bias (which must agree with attention_bias), use_qk_norm, and the
// G1 gate's granularity. Returns the attention bias.
bool read_paper_keys(HfReader& r, const json& hf, ModelConfig& c, bool bias) {
  const std::string& source = r.source();
  if (r.has("qkv_bias")) {
    const bool qkv = r.boolean("qkv_bias", false);
    if (hf.contains("attention_bias") && qkv != bias) fail(source, ": keys \"qkv_bias\" and \"attention_bias\" disagree");
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
  return bias;
}

// The registered families' names, for the refusal of another model_type.
std::vector<std::string> family_list() {
  std::vector<std::string> names;
  for (const ModelFamily* f : model_families()) names.push_back(f->name);
  return names;
}

}  // namespace

bool has_paper_keys(const json& hf) {
  if (hf.is_object())
    for (const std::string& k : kPaperKeys)
      if (hf.contains(k)) return true;
  return false;
}

std::string model_type_of(const json& hf) {
  return hf.is_object() && hf.contains("model_type") && hf["model_type"].is_string() ? hf["model_type"].get<std::string>()
                                                                                      : "";
}

ModelConfig qwen3_layout_from_hf(const json& hf, const Qwen3Layout& layout, const std::string& source) {
  HfReader r(hf, source);
  const std::string model_type = r.string("model_type", "");
  if (model_type != kDenseType && model_type != kMoeType)
    fail(source, ": key \"model_type\" is \"", model_type, "\"; format ", layout.format, " reads \"", kDenseType,
         "\" and \"", kMoeType, "\" (gatedlm imports the families ", join_names(family_list(), "and"),
         "; --format auto picks one by model_type)");
  if (layout.moe_only && model_type != kMoeType)
    fail(source, ": key \"model_type\" is \"", model_type, "\"; format ", layout.format, " reads \"", kMoeType,
         "\" (use --format qwen3 or auto)");
  if (!layout.paper_keys)
    for (const std::string& k : kPaperKeys)
      if (hf.contains(k)) fail(source, ": key \"", k, "\" belongs to the paper's layout (use --format paper or auto)");
  check_plain_layers(r);
  ModelConfig c;
  read_sizes(r, c, SizeDefaults{std::nullopt, std::nullopt});
  read_sliding_layers(r, hf, c);
  c.rope_base = r.number("rope_theta", 10000.0);
  c.rope_dims = c.head_dim;
  read_rope_scaling(r, c, source);
  if (c.rope_scaling.original_max_seq_len == 0) c.rope_scaling.original_max_seq_len = c.max_seq_len;
  bool bias = r.boolean("attention_bias", false);
  c.qk_norm = true;
  if (layout.paper_keys) bias = read_paper_keys(r, hf, c, bias);
  c.attn_qkv_bias = c.attn_o_bias = bias;
  if (model_type == kMoeType) c.moe = read_moe_keys(r, kQwen3MoeKeys, c.n_layers);
  finish_config(r, c, source);
  return c;
}

namespace {

// What neither the qwen3 nor the paper layout can express, and the gate each allows.
void check_expressible(const ModelConfig& c, const Qwen3Layout& layout) {
  auto refuse = [&](const std::string& key, const std::string& why) { refuse_export(layout.format, key, why); };
  if (c.rope_dims != c.head_dim) refuse("rope_dims", "must equal head_dim (the format rotates whole heads)");
  check_plain_block_for_export(c, layout.format, "must be absent (neither format has switch heads)",
                               "must equal attn_qkv_bias (the format's one bias key covers q, k, v and o)");
  if (c.rope_scaling.type == model::RopeScalingType::ntk) refuse("rope_scaling.type", "\"ntk\" has no Hugging Face equivalent");
  if (c.moe.n_shared > 0) refuse("moe.n_shared", "must be 0 (Qwen3-MoE has no shared expert)");
  if (!layout.paper_keys) {
    if (c.has_gate()) refuse("gate", "must be none (Qwen3 has no attention gate; use --format paper)");
    if (!c.qk_norm) refuse("qk_norm", "must be true (Qwen3 always normalises q and k)");
  } else if (c.has_gate()) {
    check_g1_gate_for_export(c, layout.format, "the paper's G1", false);  // headwise or elementwise
  }
}

nlohmann::ordered_json rope_scaling_json(const model::RopeScaling& s) {
  if (s.type == model::RopeScalingType::none) return nullptr;
  if (s.type == model::RopeScalingType::linear) return {{"rope_type", "linear"}, {"factor", s.factor}};
  return {{"rope_type", "yarn"}, {"factor", s.factor}, {"original_max_position_embeddings", s.original_max_seq_len}};
}

}  // namespace

nlohmann::ordered_json qwen3_layout_to_hf(const ModelConfig& c, const Qwen3Layout& layout, const std::string& torch_dtype) {
  if (layout.moe_only && !c.moe.enabled()) refuse_export(layout.format, "moe", "is required (use --format qwen3)");
  check_expressible(c, layout);
  const bool moe = c.moe.enabled();
  nlohmann::ordered_json j;
  write_head(j, c, moe ? kMoeArchitecture : kDenseArchitecture, moe ? kMoeType : kDenseType);
  if (moe) write_moe_keys(j, c.moe, kQwen3MoeKeys);
  write_shape(j, c);
  j["rope_theta"] = c.rope_base;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["attention_bias"] = c.attn_qkv_bias;
  j["attention_dropout"] = 0.0;
  write_sliding_layers(j, c);
  j["initializer_range"] = c.init_std;
  if (layout.paper_keys) {
    j["use_qk_norm"] = c.qk_norm;
    j["headwise_attn_output_gate"] = c.has_gate() && c.gate.granularity == model::GateGranularity::headwise;
    j["elementwise_attn_output_gate"] = c.has_gate() && c.gate.granularity == model::GateGranularity::elementwise;
  }
  j["torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace gatedlm::io
