#include "io/hf_names.h"

#include <string_view>

#include "core/error.h"

namespace gatedlm::io {

namespace {

// Every name a Qwen3 checkpoint uses that gatedlm uses unchanged, in both formats.
const char* const kSameNames[] = {
    "model.embed_tokens.weight",
    "model.norm.weight",
    "lm_head.weight",
    "model.layers.{i}.input_layernorm.weight",
    "model.layers.{i}.self_attn.k_proj.weight",
    "model.layers.{i}.self_attn.v_proj.weight",
    "model.layers.{i}.self_attn.o_proj.weight",
    "model.layers.{i}.self_attn.k_proj.bias",
    "model.layers.{i}.self_attn.v_proj.bias",
    "model.layers.{i}.self_attn.o_proj.bias",
    "model.layers.{i}.self_attn.q_norm.weight",
    "model.layers.{i}.self_attn.k_norm.weight",
    "model.layers.{i}.post_attention_layernorm.weight",
    "model.layers.{i}.mlp.gate_proj.weight",
    "model.layers.{i}.mlp.up_proj.weight",
    "model.layers.{i}.mlp.down_proj.weight",
};

// The MoE FFN's tensors (model/moe_config.h) carry Qwen3-MoE's / Qwen2-MoE's names in
// both formats: "model.layers.{i}.mlp.gate.weight", "...mlp.experts.{e}.*", "...mlp.shared_expert*".
bool moe_tensor(const std::string& generic) {
  const std::string mlp = "model.layers.{i}.mlp.";
  if (generic.rfind(mlp, 0) != 0) return false;
  const std::string rest = generic.substr(mlp.size());
  return rest == "gate.weight" || rest.rfind("experts.", 0) == 0 || rest.rfind("shared_expert", 0) == 0;
}

// Per-head widths of the paper's fused q_proj.
struct PaperGroups {
  int64_t group, head_dim, gate_width;  // G, head_dim, gate rows per head
  int64_t block() const { return group * (head_dim + gate_width); }
};
PaperGroups paper_groups(const model::ModelConfig& c, RowPart part) {
  if (part == RowPart::mapped) fail("internal error: RowPart::mapped rows come from TensorMapping::row alone");
  if (!c.has_gate()) fail("internal error: the paper's gate rows asked of an ungated model");
  return {c.n_heads / c.n_kv_heads, c.head_dim,
          c.gate.granularity == model::GateGranularity::headwise ? 1 : c.head_dim};
}

}  // namespace

std::vector<NameRule> table_with(std::vector<NameRule> specific) {
  for (const char* name : kSameNames) specific.push_back({name, name, RowPart::all});
  return specific;
}

const std::vector<NameRule>& qwen3_name_table() {
  static const std::vector<NameRule> table = table_with({
      {"model.layers.{i}.self_attn.q_proj.weight", "model.layers.{i}.self_attn.q_proj.weight", RowPart::all},
      {"model.layers.{i}.self_attn.q_proj.bias", "model.layers.{i}.self_attn.q_proj.bias", RowPart::all},
  });
  return table;
}

std::pair<std::string, std::string> generic_name(const std::string& name) {
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) != 0) return {name, ""};
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return {name, ""};
  return {prefix + "{i}" + name.substr(dot), name.substr(prefix.size(), dot - prefix.size())};
}

std::vector<TensorMapping> map_parameters(const model::ParamLayout& layout, const std::vector<NameRule>& table,
                                          const std::string& format) {
  std::vector<TensorMapping> out;
  for (const model::ParamSpec& s : layout.specs()) {
    const auto [generic, layer] = generic_name(s.name);
    if (moe_tensor(generic)) {
      out.push_back({&s, s.name, RowPart::all, {}, {}});
      continue;
    }
    const NameRule* rule = nullptr;
    for (const NameRule& r : table)
      if (generic == r.ours) rule = &r;
    if (!rule) fail("format ", format, " has no tensor for gatedlm parameter ", s.name);
    // Without a gate the paper's q_proj is Qwen3's.
    RowPart part = rule->part;
    if (part == RowPart::paper_query && !layout.find(with_layer("model.layers.{i}.self_attn.gate.weight", layer)))
      part = RowPart::all;
    out.push_back({&s, with_layer(rule->theirs, layer), part, {}, {}});
  }
  return out;
}

std::vector<TensorMapping> map_table_tensors(const model::ModelConfig& c, const model::ParamLayout& layout,
                                             const std::vector<NameRule>& table, const std::string& format) {
  std::vector<TensorMapping> out = map_parameters(layout, table, format);
  for (TensorMapping& m : out) {
    m.their_shape = m.spec->shape;
    m.their_shape[0] = their_rows(c, m.part, m.their_shape[0]);
    m.row = [&c, part = m.part](int64_t r) { return their_row(c, part, r); };
  }
  return out;
}

int64_t their_rows(const model::ModelConfig& c, RowPart part, int64_t ours_rows) {
  if (part == RowPart::all) return ours_rows;
  const PaperGroups p = paper_groups(c, part);
  return c.n_kv_heads * p.block();
}

int64_t their_row(const model::ModelConfig& c, RowPart part, int64_t r) {
  if (part == RowPart::all) return r;
  const PaperGroups p = paper_groups(c, part);
  if (part == RowPart::paper_query) {
    const int64_t head = r / p.head_dim, j = r % p.head_dim;
    const int64_t g = head / p.group, in_group = head % p.group;
    return g * p.block() + in_group * p.head_dim + j;
  }
  const int64_t head = r / p.gate_width, j = r % p.gate_width;
  const int64_t g = head / p.group, in_group = head % p.group;
  return g * p.block() + p.group * p.head_dim + in_group * p.gate_width + j;
}

std::string with_layer(std::string_view pattern, const std::string& layer) {
  std::string s(pattern);
  const size_t at = s.find("{i}");
  if (at != std::string::npos) s.replace(at, 3, layer);
  return s;
}

}  // namespace gatedlm::io
