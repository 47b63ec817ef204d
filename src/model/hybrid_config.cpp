#include "model/hybrid_config.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/error.h"
#include "model/moe_config.h"

namespace gatedlm::model {

using nlohmann::json;

namespace {

constexpr int64_t kMaxLinearDim = int64_t{1} << 20;

void require(bool ok, const char* key, const std::string& why) {
  if (!ok) fail("model config: key \"linear_attention.", key, "\" ", why);
}

LayerKind kind_from_json(const json& v, const std::string& where) {
  if (v == "linear_attention") return LayerKind::linear_attention;
  if (v == "full_attention") return LayerKind::full_attention;
  if (v == "sliding_attention") return LayerKind::sliding_attention;
  fail(where, ": unknown layer type ", v.dump(), " (expected linear_attention|full_attention|sliding_attention)");
}

}  // namespace

const char* to_string(ValueHeadOrder order) { return order == ValueHeadOrder::tiled ? "tiled" : "grouped"; }

const char* to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::linear_attention: return "linear_attention";
    case LayerKind::sliding_attention: return "sliding_attention";
    case LayerKind::full_attention: break;
  }
  return "full_attention";
}

void check_layer_count(int64_t n_layers, const std::string& where) {
  if (n_layers < 1 || n_layers > kMaxLayers) fail(where, ": n_layers must be in 1..", kMaxLayers, ", got ", n_layers);
}

std::vector<LayerKind> layer_kinds_from_json(const json& config, int64_t n_layers, const std::string& where) {
  const bool listed = config.contains("layer_types"), interval = config.contains("full_attention_interval");
  if (listed && interval)
    fail(where, ": give \"layer_types\" or \"full_attention_interval\", not both");
  if (listed || interval) check_layer_count(n_layers, where);
  std::vector<LayerKind> kinds;
  if (listed) {
    const json& list = config.at("layer_types");
    if (!list.is_array()) fail(where, ": key \"layer_types\": expected a list, got ", list.dump());
    if (static_cast<int64_t>(list.size()) != n_layers)
      fail(where, ": key \"layer_types\" has ", list.size(), " entries for n_layers ", n_layers);
    for (size_t i = 0; i < list.size(); ++i)
      kinds.push_back(kind_from_json(list[i], cat(where, ": layer_types[", i, "]")));
  } else if (interval) {
    const int64_t k = int_key(config, where, "full_attention_interval", std::nullopt);
    if (k < 1) fail(where, ": key \"full_attention_interval\" must be at least 1, got ", k);
    for (int64_t l = 0; l < n_layers; ++l)
      kinds.push_back((l + 1) % k == 0 ? LayerKind::full_attention : LayerKind::linear_attention);
  }
  return kinds;
}

LinearAttentionConfig linear_attention_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) fail(where, ": expected a JSON object");
  static const std::set<std::string> known = {"n_k_heads",  "n_v_heads",  "k_head_dim",
                                              "v_head_dim", "conv_kernel", "value_head_order"};
  for (auto& [key, value] : j.items())
    if (!known.count(key)) fail(where, ": unknown key \"", key, "\"");
  LinearAttentionConfig c;
  c.n_k_heads = int_key(j, where, "n_k_heads", std::nullopt);
  c.n_v_heads = int_key(j, where, "n_v_heads", std::nullopt);
  c.k_head_dim = int_key(j, where, "k_head_dim", std::nullopt);
  c.v_head_dim = int_key(j, where, "v_head_dim", std::nullopt);
  c.conv_kernel = int_key(j, where, "conv_kernel", c.conv_kernel);
  if (j.contains("value_head_order")) {
    const json& order = j.at("value_head_order");
    if (order == "tiled") c.value_head_order = ValueHeadOrder::tiled;
    else if (order != "grouped")
      fail(where, ": key \"value_head_order\" must be \"grouped\" or \"tiled\", got ", order.dump());
  }
  return c;
}

json layer_kinds_to_json(const std::vector<LayerKind>& kinds) {
  json list = json::array();
  for (LayerKind k : kinds) list.push_back(to_string(k));
  return list;
}

json linear_attention_to_json(const LinearAttentionConfig& c) {
  json j{{"n_k_heads", c.n_k_heads},
         {"n_v_heads", c.n_v_heads},
         {"k_head_dim", c.k_head_dim},
         {"v_head_dim", c.v_head_dim},
         {"conv_kernel", c.conv_kernel}};
  // Only when not the default, so that grouped models stay readable by gatedlm before the key.
  if (c.value_head_order != ValueHeadOrder::grouped) j["value_head_order"] = to_string(c.value_head_order);
  return j;
}

void validate_linear_attention(const LinearAttentionConfig& c) {
  for (auto [key, v] : {std::pair{"n_k_heads", c.n_k_heads}, {"n_v_heads", c.n_v_heads},
                        {"k_head_dim", c.k_head_dim}, {"v_head_dim", c.v_head_dim}})
    require(v >= 1 && v <= kMaxLinearDim, key, cat("must be in 1..2^20, got ", v));
  require(c.n_v_heads % c.n_k_heads == 0, "n_v_heads",
          cat("(", c.n_v_heads, ") must be a multiple of n_k_heads (", c.n_k_heads, ")"));
  require(c.conv_kernel >= 1 && c.conv_kernel <= 64, "conv_kernel", cat("must be in 1..64, got ", c.conv_kernel));
  require(c.conv_dim() <= (int64_t{1} << 31), "n_k_heads",
          cat("/ head dims give ", c.conv_dim(), " convolution channels, more than 2^31"));
}

}  // namespace gatedlm::model
