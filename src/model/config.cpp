#include "model/config.h"

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/json_file.h"

namespace gatedlm::model {
namespace {

using nlohmann::json;

// Name <-> value tables for every enum key; the first name of each is printed back.
template <typename E>
struct EnumNames {
  std::vector<std::pair<std::string, E>> names;
  E parse(const json& v, const std::string& where) const {
    if (!v.is_string()) fail(where, ": expected a string, got ", v.dump());
    for (auto& [name, value] : names)
      if (name == v.get<std::string>()) return value;
    std::string options;
    for (auto& [name, value] : names) options += (options.empty() ? "" : "|") + name;
    fail(where, ": unknown value \"", v.get<std::string>(), "\" (expected ", options, ")");
  }
  std::string name(E e) const {
    for (auto& [name, value] : names)
      if (value == e) return name;
    return "?";
  }
};

const EnumNames<GatePosition> kPositions{{{"none", GatePosition::none},
                                          {"sdpa", GatePosition::sdpa},
                                          {"value", GatePosition::value},
                                          {"key", GatePosition::key},
                                          {"query", GatePosition::query},
                                          {"dense", GatePosition::dense}}};
const EnumNames<GateGranularity> kGranularities{
    {{"elementwise", GateGranularity::elementwise}, {"headwise", GateGranularity::headwise}}};
const EnumNames<GateCombine> kCombines{{{"multiply", GateCombine::multiply}, {"add", GateCombine::add}}};
const EnumNames<kernels::Activation> kActivations{{{"sigmoid", kernels::Activation::sigmoid},
                                                   {"silu", kernels::Activation::silu},
                                                   {"ns_sigmoid", kernels::Activation::ns_sigmoid},
                                                   {"identity", kernels::Activation::identity}}};
const EnumNames<GateInput> kInputs{{{"hidden", GateInput::hidden}, {"constant", GateInput::constant}}};
const EnumNames<GateInit> kInits{{{"normal", GateInit::normal}, {"zero", GateInit::zero}}};
const EnumNames<SdpaTransform> kTransforms{{{"none", SdpaTransform::none},
                                            {"rmsnorm", SdpaTransform::rmsnorm},
                                            {"silu", SdpaTransform::silu}}};
const EnumNames<AttentionNormalizer> kNormalizers{{{"softmax", AttentionNormalizer::softmax},
                                                   {"softpick", AttentionNormalizer::softpick}}};
const EnumNames<SwitchTarget> kSwitchTargets{{{"v", SwitchTarget::v}, {"kv", SwitchTarget::kv}}};
const EnumNames<RopeScalingType> kRopeScalings{{{"none", RopeScalingType::none},
                                                {"linear", RopeScalingType::linear},
                                                {"ntk", RopeScalingType::ntk},
                                                {"yarn", RopeScalingType::yarn}}};

// Reads typed values out of one JSON object, remembering which keys were used so that
// unknown keys can be reported by name.
class Reader {
 public:
  Reader(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {
    if (!obj.is_object()) fail(where_, ": expected a JSON object");
  }
  bool has(const std::string& key) const { return obj_.contains(key); }
  const json& raw(const std::string& key) {
    used_.insert(key);
    return obj_.at(key);
  }
  std::string at(const std::string& key) const { return where_ + ": key \"" + key + "\""; }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback) {
    if (!has(key)) {
      if (!fallback) fail(where_, ": missing required key \"", key, "\"");
      return *fallback;
    }
    const json& v = raw(key);
    if (!v.is_number_integer()) fail(at(key), ": expected an integer, got ", v.dump());
    return v.get<int64_t>();
  }
  double number(const std::string& key, double fallback) {
    if (!has(key)) return fallback;
    const json& v = raw(key);
    if (!v.is_number()) fail(at(key), ": expected a number, got ", v.dump());
    return v.get<double>();
  }
  bool boolean(const std::string& key, bool fallback) {
    if (!has(key)) return fallback;
    const json& v = raw(key);
    if (!v.is_boolean()) fail(at(key), ": expected true or false, got ", v.dump());
    return v.get<bool>();
  }
  template <typename E>
  E choice(const std::string& key, const EnumNames<E>& names, E fallback) {
    if (!has(key)) return fallback;
    return names.parse(raw(key), at(key));
  }
  void reject_unknown() const {
    for (auto& [key, value] : obj_.items())
      if (!used_.count(key)) fail(where_, ": unknown key \"", key, "\"");
  }

 private:
  const json& obj_;
  std::string where_;
  std::set<std::string> used_;
};

// Limits that keep sizes computable and tables allocatable (2^22 positions is 4M tokens).
constexpr int64_t kMaxSeqLen = int64_t{1} << 22;
constexpr int64_t kMaxParams = int64_t{1} << 44;  // 17.6e12 parameters, 70 TB of fp32
constexpr int64_t kMaxSwitchExperts = 1024;

void require(bool ok, const std::string& key, const std::string& why) {
  if (!ok) fail("model config: key \"", key, "\" ", why);
}

}  // namespace

int64_t ModelConfig::gate_target_heads() const {
  switch (gate.position) {
    case GatePosition::sdpa:
    case GatePosition::query: return n_heads;
    case GatePosition::value:
    case GatePosition::key: return n_kv_heads;
    case GatePosition::dense: return 1;
    case GatePosition::none: return 0;
  }
  return 0;
}

int64_t ModelConfig::gate_target_head_dim() const {
  return gate.position == GatePosition::dense ? d_model : head_dim;
}

int64_t ModelConfig::gate_out() const {
  if (!has_gate()) return 0;
  if (gate.granularity == GateGranularity::headwise) return gate_target_heads();
  return gate_target_heads() * gate_target_head_dim();
}

int64_t ModelConfig::gate_in() const {
  if (gate.input == GateInput::constant) return 0;
  return gate.input_dims == 0 ? d_model : gate.input_dims;
}

bool ModelConfig::gate_has_bias() const { return attn_qkv_bias && has_gate() && gate.input == GateInput::hidden; }

void ModelConfig::validate() const {
  require(vocab_size >= 1 && vocab_size <= (int64_t{1} << 31) - 1, "vocab_size",
          cat("must be in 1..2^31-1, got ", vocab_size));
  require(d_model >= 1, "d_model", cat("must be positive, got ", d_model));
  require(n_layers >= 1 && n_layers <= kMaxLayers, "n_layers", cat("must be in 1..", kMaxLayers, ", got ", n_layers));
  require(n_heads >= 1, "n_heads", cat("must be positive, got ", n_heads));
  require(n_kv_heads >= 1, "n_kv_heads", cat("must be positive, got ", n_kv_heads));
  require(n_heads % n_kv_heads == 0, "n_heads",
          cat("(", n_heads, ") must be a multiple of n_kv_heads (", n_kv_heads, ")"));
  require(head_dim >= 2 && head_dim % 2 == 0, "head_dim", cat("must be even and positive, got ", head_dim));
  // With an MoE FFN in every layer (moe.every 1) the dense width is unused and may be 0.
  // An `every` below 1 is left to validate_moe, which blames `every` itself.
  require(ffn_hidden >= 1 || (has_moe() && moe.every <= 1), "ffn_hidden",
          cat("must be positive, got ", ffn_hidden));
  require(rope_base > 1.0, "rope_base", cat("must be greater than 1, got ", rope_base));
  require(rope_dims >= 0 && rope_dims <= head_dim, "rope_dims",
          cat("(", rope_dims, ") must be between 0 and head_dim (", head_dim, ")"));
  require(rope_dims % 2 == 0, "rope_dims", cat("must be even, got ", rope_dims));
  if (rope_scaling.type == RopeScalingType::none) {
    require(rope_scaling.factor == 1.0, "rope_scaling.factor",
            cat("must be 1 with rope_scaling.type none, got ", rope_scaling.factor));
  } else {
    require(std::isfinite(rope_scaling.factor) && rope_scaling.factor >= 1.0, "rope_scaling.factor",
            cat("must be at least 1, got ", rope_scaling.factor));
    require(rope_dims > 0, "rope_scaling.type",
            cat("\"", to_string(rope_scaling.type), "\" needs rotary dims (rope_dims is 0)"));
    require(!(rope_scaling.type == RopeScalingType::ntk && rope_dims <= 2), "rope_scaling.type",
            cat("\"ntk\" needs rope_dims > 2 (the base exponent is D/(D-2)), got ", rope_dims));
  }
  require(rope_scaling.original_max_seq_len >= 0, "rope_scaling.original_max_seq_len",
          cat("must be positive, got ", rope_scaling.original_max_seq_len));
  require(norm_eps > 0.0, "norm_eps", cat("must be positive, got ", norm_eps));
  require(max_seq_len >= 1 && max_seq_len <= kMaxSeqLen, "max_seq_len",
          cat("must be in 1..", kMaxSeqLen, " (the RoPE table and attention are sized by it), got ", max_seq_len));
  require(std::isfinite(rope_base) && std::isfinite(norm_eps) && std::isfinite(init_std) &&
              std::isfinite(residual_clip),
          "rope_base", "/ norm_eps / init_std / residual_clip must be finite numbers");
  validate_switch_heads();
  // Each count is at most 2^31, so the estimate below cannot overflow a long double; the
  // limit keeps every int64 parameter offset exact.
  for (auto [key, v] : {std::pair{"d_model", d_model}, {"n_layers", n_layers}, {"n_heads", n_heads},
                        {"n_kv_heads", n_kv_heads}, {"head_dim", head_dim}, {"ffn_hidden", ffn_hidden}})
    require(v <= (int64_t{1} << 31), key, cat("must be at most 2^31, got ", v));
  const long double layer = static_cast<long double>(d_model) * 2.0L *
                                (static_cast<long double>(q_dim()) + static_cast<long double>(kv_dim())) +
                            3.0L * static_cast<long double>(d_model) * static_cast<long double>(ffn_hidden) +
                            static_cast<long double>(gate_out()) * static_cast<long double>(std::max<int64_t>(gate_in(), 1)) +
                            4.0L * static_cast<long double>(d_model + head_dim) +
                            static_cast<long double>(std::max<int64_t>(switch_heads.n_experts, 0)) *
                                static_cast<long double>(d_model) *
                                (2.0L * static_cast<long double>(kv_dim()) + static_cast<long double>(n_kv_heads));
  const long double total = static_cast<long double>(n_layers) * layer +
                            2.0L * static_cast<long double>(vocab_size) * static_cast<long double>(d_model);
  require(total <= static_cast<long double>(kMaxParams), "d_model",
          cat("/ ffn_hidden / n_layers / vocab_size give about ", static_cast<double>(total),
              " parameters, more than the limit of ", kMaxParams));
  require(init_std >= 0.0, "init_std", cat("must not be negative, got ", init_std));
  require(residual_clip >= 0.0, "residual_clip", cat("must be 0 (off) or positive, got ", residual_clip));
  validate_moe(moe, d_model, n_layers);
  validate_hybrid();
  if (!has_gate()) return;
  const std::string pos = to_string(gate.position);
  if (gate.granularity == GateGranularity::headwise) {
    require(gate.position == GatePosition::sdpa || gate.position == GatePosition::value,
            "gate.granularity", cat("\"headwise\" needs gate.position sdpa or value, not ", pos));
    require(!gate.head_shared, "gate.head_shared",
            "cannot be combined with headwise granularity (a head-shared gate is elementwise)");
  }
  require(!(gate.head_shared && gate.position == GatePosition::dense), "gate.head_shared",
          "needs a per-head position (sdpa, value, key or query), not dense");
  require(gate.input_dims >= 0 && gate.input_dims <= d_model, "gate.input_dims",
          cat("(", gate.input_dims, ") must be between 0 (all) and d_model (", d_model, ")"));
  require(!(gate.input == GateInput::constant && gate.input_dims != 0), "gate.input_dims",
          "must be 0 for an input-independent (constant) gate");
  // The gate's bias rides in the fused q|k|v|gate product, which needs the whole input.
  require(!(gate_has_bias() && gate_in() != d_model), "attn_qkv_bias",
          cat("needs a gate that reads all of d_model (gate.input_dims is ", gate.input_dims, ")"));
}

void ModelConfig::validate_hybrid() const {
  require(layer_types.empty() || static_cast<int64_t>(layer_types.size()) == n_layers, "layer_types",
          cat("has ", layer_types.size(), " entries for n_layers ", n_layers));
  require(sliding_window >= 0 && sliding_window <= (int64_t{1} << 30), "sliding_window",
          cat("must be in 0..2^30, got ", sliding_window));
  require(sliding_layers() == 0 || sliding_window >= 1, "sliding_window",
          "must be at least 1: layer_types has sliding_attention layers");
  require(!(attention_sinks && attention_normalizer == AttentionNormalizer::softpick), "attention_sinks",
          "cannot be combined with attention_normalizer \"softpick\" (a sink logit is a softmax column)");
  if (!has_linear()) return;
  validate_linear_attention(linear_attention);
  require(!switch_heads.on(), "switch_heads", "cannot be combined with linear_attention layers (not implemented)");
}

void ModelConfig::validate_switch_heads() const {
  const SwitchHeadsConfig& sw = switch_heads;
  require(sw.n_experts >= 0 && sw.n_experts <= kMaxSwitchExperts, "switch_heads.n_experts",
          cat("must be in 1..", kMaxSwitchExperts, ", got ", sw.n_experts));
  if (!sw.on()) return;
  require(sw.top_k >= 1 && sw.top_k <= sw.n_experts, "switch_heads.top_k",
          cat("must be in 1..n_experts (", sw.n_experts, "), got ", sw.top_k));
  require(!attn_qkv_bias, "attn_qkv_bias",
          "must be false with switch_heads (the expert projections carry no biases)");
}

int64_t ModelConfig::linear_layers() const {
  int64_t count = 0;
  for (LayerKind k : layer_types) count += k == LayerKind::linear_attention;
  return count;
}

int64_t ModelConfig::sliding_layers() const {
  int64_t count = 0;
  for (LayerKind k : layer_types) count += k == LayerKind::sliding_attention;
  return count;
}

namespace {

// layer_types / full_attention_interval, linear_attention, norm_zero_centered and sliding_window.
void read_hybrid_keys(Reader& r, const json& j, ModelConfig& c, const std::string& source) {
  c.layer_types = layer_kinds_from_json(j, c.n_layers, source);
  if (r.has("layer_types")) r.raw("layer_types");
  if (r.has("full_attention_interval")) r.raw("full_attention_interval");
  if (r.has("linear_attention"))
    c.linear_attention = linear_attention_from_json(r.raw("linear_attention"), source + ": linear_attention");
  else if (c.has_linear())
    fail(source, ": linear_attention layers need a \"linear_attention\" object (n_k_heads, n_v_heads, k_head_dim, v_head_dim)");
  c.norm_zero_centered = r.boolean("norm_zero_centered", c.norm_zero_centered);
  c.sliding_window = r.integer("sliding_window", c.sliding_window);
}

}  // namespace

ModelConfig config_from_json(const json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig c;
  c.vocab_size = r.integer("vocab_size", std::nullopt);
  c.d_model = r.integer("d_model", std::nullopt);
  c.n_layers = r.integer("n_layers", std::nullopt);
  c.n_heads = r.integer("n_heads", std::nullopt);
  c.n_kv_heads = r.integer("n_kv_heads", std::nullopt);
  c.head_dim = r.integer("head_dim", std::nullopt);
  c.ffn_hidden = r.integer("ffn_hidden", std::nullopt);
  c.rope_base = r.number("rope_base", c.rope_base);
  c.rope_dims = r.integer("rope_dims", c.head_dim);
  if (r.has("rope_scaling")) {
    Reader rs(r.raw("rope_scaling"), source + ": rope_scaling");
    c.rope_scaling.type = rs.choice("type", kRopeScalings, c.rope_scaling.type);
    c.rope_scaling.factor = rs.number("factor", c.rope_scaling.factor);
    c.rope_scaling.original_max_seq_len = rs.integer("original_max_seq_len", int64_t{0});
    if (rs.has("original_max_seq_len") && c.rope_scaling.original_max_seq_len < 1)
      fail(rs.at("original_max_seq_len"), ": must be positive, got ", c.rope_scaling.original_max_seq_len);
    rs.reject_unknown();
  }
  c.qk_norm = r.boolean("qk_norm", c.qk_norm);
  c.tie_embeddings = r.boolean("tie_embeddings", c.tie_embeddings);
  c.norm_eps = r.number("norm_eps", c.norm_eps);
  c.max_seq_len = r.integer("max_seq_len", std::nullopt);
  if (c.rope_scaling.original_max_seq_len == 0) c.rope_scaling.original_max_seq_len = c.max_seq_len;
  c.init_std = r.number("init_std", c.init_std);
  if (r.has("gate")) {
    Reader g(r.raw("gate"), source + ": gate");
    GateConfig& gc = c.gate;
    gc.position = g.choice("position", kPositions, gc.position);
    gc.granularity = g.choice("granularity", kGranularities, gc.granularity);
    gc.head_shared = g.boolean("head_shared", gc.head_shared);
    gc.combine = g.choice("combine", kCombines, gc.combine);
    gc.activation = g.choice("activation", kActivations, gc.activation);
    gc.input = g.choice("input", kInputs, gc.input);
    gc.input_dims = g.integer("input_dims", gc.input_dims);
    GateInit default_init = gc.input == GateInput::constant ? GateInit::zero : GateInit::normal;
    gc.init = g.choice("init", kInits, default_init);
    g.reject_unknown();
  }
  c.sdpa_transform = r.choice("sdpa_transform", kTransforms, c.sdpa_transform);
  c.sandwich_norm = r.boolean("sandwich_norm", c.sandwich_norm);
  c.residual_clip = r.number("residual_clip", c.residual_clip);
  c.attn_qkv_bias = r.boolean("attn_qkv_bias", c.attn_qkv_bias);
  c.attn_o_bias = r.boolean("attn_o_bias", c.attn_o_bias);
  c.attention_sinks = r.boolean("attention_sinks", c.attention_sinks);
  c.attention_normalizer = r.choice("attention_normalizer", kNormalizers, c.attention_normalizer);
  if (r.has("switch_heads")) {
    Reader sr(r.raw("switch_heads"), source + ": switch_heads");
    SwitchHeadsConfig& sw = c.switch_heads;
    sw.n_experts = sr.integer("n_experts", std::nullopt);
    if (sw.n_experts < 1) fail(sr.at("n_experts"), ": must be at least 1, got ", sw.n_experts);
    sw.top_k = sr.integer("top_k", std::nullopt);
    sw.experts_on = sr.choice("experts_on", kSwitchTargets, sw.experts_on);
    sr.reject_unknown();
  }
  if (r.has("moe")) c.moe = moe_config_from_json(r.raw("moe"), source + ": moe");
  read_hybrid_keys(r, j, c, source);
  r.reject_unknown();
  try {
    c.validate();
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  return c;
}

static json config_to_json_unscaled(const ModelConfig& c) {
  json gate = {{"position", kPositions.name(c.gate.position)},
               {"granularity", kGranularities.name(c.gate.granularity)},
               {"head_shared", c.gate.head_shared},
               {"combine", kCombines.name(c.gate.combine)},
               {"activation", kActivations.name(c.gate.activation)},
               {"input", kInputs.name(c.gate.input)},
               {"input_dims", c.gate.input_dims},
               {"init", kInits.name(c.gate.init)}};
  return json{{"vocab_size", c.vocab_size},
              {"d_model", c.d_model},
              {"n_layers", c.n_layers},
              {"n_heads", c.n_heads},
              {"n_kv_heads", c.n_kv_heads},
              {"head_dim", c.head_dim},
              {"ffn_hidden", c.ffn_hidden},
              {"rope_base", c.rope_base},
              {"rope_dims", c.rope_dims},
              {"qk_norm", c.qk_norm},
              {"tie_embeddings", c.tie_embeddings},
              {"norm_eps", c.norm_eps},
              {"max_seq_len", c.max_seq_len},
              {"init_std", c.init_std},
              {"gate", gate},
              {"sdpa_transform", kTransforms.name(c.sdpa_transform)},
              {"sandwich_norm", c.sandwich_norm},
              {"residual_clip", c.residual_clip}};
}

// rope_scaling, the attention biases, attention_sinks and switch_heads are written only when used, so configs without
// them stay as they were.
json config_to_json(const ModelConfig& c) {
  json j = config_to_json_unscaled(c);
  if (c.attn_qkv_bias) j["attn_qkv_bias"] = true;
  if (c.attn_o_bias) j["attn_o_bias"] = true;
  if (c.attention_sinks) j["attention_sinks"] = true;
  if (c.attention_normalizer != AttentionNormalizer::softmax) j["attention_normalizer"] = kNormalizers.name(c.attention_normalizer);
  if (c.switch_heads.on())
    j["switch_heads"] = json{{"n_experts", c.switch_heads.n_experts},
                             {"top_k", c.switch_heads.top_k},
                             {"experts_on", kSwitchTargets.name(c.switch_heads.experts_on)}};
  if (c.has_moe()) j["moe"] = moe_config_to_json(c.moe);
  if (c.has_linear() || c.sliding_layers() > 0) j["layer_types"] = layer_kinds_to_json(c.layer_types);
  if (c.has_linear()) j["linear_attention"] = linear_attention_to_json(c.linear_attention);
  if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
  if (c.norm_zero_centered) j["norm_zero_centered"] = true;
  if (c.rope_scaling.type != RopeScalingType::none)
    j["rope_scaling"] = json{{"type", kRopeScalings.name(c.rope_scaling.type)},
                             {"factor", c.rope_scaling.factor},
                             {"original_max_seq_len", c.rope_scaling.original_max_seq_len > 0
                                                          ? c.rope_scaling.original_max_seq_len
                                                          : c.max_seq_len}};
  return j;
}

ModelConfig load_config(const std::string& path) {
  return config_from_json(read_json_file(path, "model config"), path);
}

void save_config(const ModelConfig& c, const std::string& path) {
  std::ofstream out(path);
  if (!out) fail(path, ": cannot write");
  out << config_to_json(c).dump(2) << "\n";
  if (!out) fail(path, ": write failed");
}

std::string to_string(GatePosition p) { return kPositions.name(p); }
std::string to_string(SwitchTarget t) { return kSwitchTargets.name(t); }

std::string describe_switch_heads(const ModelConfig& c) {
  if (!c.switch_heads.on()) return "none";
  return cat("switch ", to_string(c.switch_heads.experts_on), ", ", c.switch_heads.n_experts, "top",
             c.switch_heads.top_k);
}

std::string describe_gate(const ModelConfig& c) {
  if (!c.has_gate()) return "none";
  static const std::map<GatePosition, std::string> tag = {{GatePosition::sdpa, "G1"},
                                                          {GatePosition::value, "G2"},
                                                          {GatePosition::key, "G3"},
                                                          {GatePosition::query, "G4"},
                                                          {GatePosition::dense, "G5"}};
  std::string s = tag.at(c.gate.position) + " " + kPositions.name(c.gate.position) + " " +
                  kGranularities.name(c.gate.granularity);
  if (c.gate.head_shared) s += " head-shared";
  s += " " + kActivations.name(c.gate.activation) + " " + kCombines.name(c.gate.combine);
  if (c.gate.input == GateInput::constant) s += " input-independent";
  if (c.gate.input_dims) s += cat(" (reads ", c.gate.input_dims, " dims)");
  return s;
}

kernels::RopeTable model_rope_table(const ModelConfig& c, int64_t positions, bool unit_magnitude) {
  const int64_t original = c.rope_scaling.original_max_seq_len > 0 ? c.rope_scaling.original_max_seq_len
                                                                    : c.max_seq_len;
  const ScaledRope r = scaled_rope(c.rope_dims, c.rope_base, c.rope_scaling, original);
  return kernels::rope_table(r.inv_freq, positions, unit_magnitude ? 1.0 : r.magnitude);
}

}  // namespace gatedlm::model
