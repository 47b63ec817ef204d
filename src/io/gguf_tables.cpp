#include "io/gguf_tables.h"

#include <map>

#include "core/error.h"
#include "io/gguf_linear.h"
#include "io/hf_names.h"

namespace gatedlm::io {

namespace {

using model::ModelConfig;
using model::ParamSpec;

// gatedlm's generic parameter names and their GGUF names that every architecture here
// shares; each architecture adds its own (GgufArchitecture::tensor_names). A parameter in
// none of an architecture's tables has no tensor there.
const GgufName kSharedNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
    {"model.layers.{i}.input_layernorm.weight", "blk.{i}.attn_norm.weight"},
    {"model.layers.{i}.self_attn.k_proj.weight", "blk.{i}.attn_k.weight"},
    {"model.layers.{i}.self_attn.v_proj.weight", "blk.{i}.attn_v.weight"},
    {"model.layers.{i}.self_attn.o_proj.weight", "blk.{i}.attn_output.weight"},
    {"model.layers.{i}.self_attn.q_norm.weight", "blk.{i}.attn_q_norm.weight"},
    {"model.layers.{i}.self_attn.k_norm.weight", "blk.{i}.attn_k_norm.weight"},
    {"model.layers.{i}.mlp.gate_proj.weight", "blk.{i}.ffn_gate.weight"},
    {"model.layers.{i}.mlp.up_proj.weight", "blk.{i}.ffn_up.weight"},
    {"model.layers.{i}.mlp.down_proj.weight", "blk.{i}.ffn_down.weight"},
    {"model.layers.{i}.mlp.gate.weight", "blk.{i}.ffn_gate_inp.weight"},  // the MoE router
};

// The GGUF name of a parameter in architecture `arch`, or "" when the tables have none.
std::string table_name(const std::string& name, const GgufArchitecture& arch) {
  // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
  const std::pair<std::string, std::string> parts = generic_name(name);
  const std::string &generic = parts.first, &layer = parts.second;
  auto look = [&](const auto& table) -> std::string {
    for (const GgufName& n : table)
      if (generic == n.ours) return with_layer(n.theirs, layer);
    return "";
  };
  std::string found = look(kSharedNames);
  if (found.empty()) found = look(arch.tensor_names());
  return found;
}

// qwen35's attn_q [n_heads * 2 * head_dim, d]: per head, its query rows, then its gate rows.
GgufTensor query_and_gate(const model::ParamLayout& layout, const ModelConfig& c, const std::string& layer) {
  const ParamSpec& q = layout.at("model.layers." + layer + ".self_attn.q_proj.weight");
  const ParamSpec& g = layout.at("model.layers." + layer + ".self_attn.gate.weight");
  const int64_t head = c.head_dim * c.d_model;  // values of one head's rows
  GgufTensor t{"blk." + layer + ".attn_q.weight", {2 * c.q_dim(), c.d_model}, {}};
  for (int64_t h = 0; h < c.n_heads; ++h) {
    t.runs.push_back({&q, h * head, head});
    t.runs.push_back({&g, h * head, head});
  }
  return t;
}

// MoE experts: each kind of expert matrix stacked over the experts as
// ffn_{gate,up,down}_exps [E, rows, cols]. Returns false for a parameter that is no expert.
bool add_expert(std::vector<GgufTensor>& out, std::map<std::string, size_t>& stacked, const ParamSpec& s) {
  const auto [generic, layer] = generic_name(s.name);
  const std::string experts = "model.layers.{i}.mlp.experts.";
  if (generic.rfind(experts, 0) != 0) return false;
  const std::string rest = generic.substr(experts.size());    // "3.gate_proj.weight"
  const std::string kind = rest.substr(rest.find('.') + 1);  // "gate_proj.weight"
  const std::string name = "blk." + layer + ".ffn_" + kind.substr(0, kind.find('_')) + "_exps.weight";
  auto [it, fresh] = stacked.try_emplace(name, out.size());
  if (fresh) out.push_back({name, {0, s.shape[0], s.shape[1]}, {}});
  GgufTensor& t = out[it->second];
  t.runs.push_back({&s, 0, s.numel});
  t.shape[0] = static_cast<int64_t>(t.runs.size());
  return true;
}

// The shared expert of qwen35moe / qwen3next for a model without one: 32 units of zeros.
void add_zero_shared_expert(std::vector<GgufTensor>& out, const ModelConfig& c, const std::string& layer) {
  const int64_t d = c.d_model, n = kZeroSharedUnits * d;
  const std::string blk = "blk." + layer + ".";
  out.push_back({blk + "ffn_gate_shexp.weight", {kZeroSharedUnits, d}, {{nullptr, 0, n}}});
  out.push_back({blk + "ffn_up_shexp.weight", {kZeroSharedUnits, d}, {{nullptr, 0, n}}});
  out.push_back({blk + "ffn_down_shexp.weight", {d, kZeroSharedUnits}, {{nullptr, 0, n}}});
  out.push_back({blk + "ffn_gate_inp_shexp.weight", {d}, {{nullptr, 0, d}}});
}

}  // namespace

const std::vector<GgufName>& gguf_ungated_names() {
  static const std::vector<GgufName> names{
      {"model.layers.{i}.self_attn.q_proj.weight", "blk.{i}.attn_q.weight"},
      {"model.layers.{i}.post_attention_layernorm.weight", "blk.{i}.ffn_norm.weight"},
  };
  return names;
}

// The gated ones' attn_q (q_proj with the gate's rows) is assembled by query_and_gate.
const std::vector<GgufName>& gguf_gated_names() {
  static const std::vector<GgufName> names{
      {"model.layers.{i}.post_attention_layernorm.weight", "blk.{i}.post_attention_norm.weight"},
      {"model.layers.{i}.mlp.shared_expert.gate_proj.weight", "blk.{i}.ffn_gate_shexp.weight"},
      {"model.layers.{i}.mlp.shared_expert.up_proj.weight", "blk.{i}.ffn_up_shexp.weight"},
      {"model.layers.{i}.mlp.shared_expert.down_proj.weight", "blk.{i}.ffn_down_shexp.weight"},
      {"model.layers.{i}.mlp.shared_expert_gate.weight", "blk.{i}.ffn_gate_inp_shexp.weight"},  // [1, d] -> [d]
  };
  return names;
}

const GgufArchitecture& gguf_traits(const std::string& arch) {
  const ModelFamily* family = find_gguf_family(arch);
  if (!family) fail("gguf: no model family has the architecture \"", arch, "\"");
  return *family->gguf;
}

bool gguf_is_hybrid(const std::string& arch) {
  const ModelFamily* family = find_gguf_family(arch);
  return family && family->gguf->gated;
}

bool gguf_has_shared_expert(const std::string& arch) {
  const ModelFamily* family = find_gguf_family(arch);
  return family && family->gguf->shared_expert;
}

std::vector<GgufTensor> gguf_tensors(const model::ParamLayout& layout, const ModelConfig& c) {
  return gguf_tensors(layout, c, gguf_architecture(c));
}

std::vector<GgufTensor> gguf_tensors(const model::ParamLayout& layout, const ModelConfig& c, const std::string& name,
                                     bool ssm_in) {
  const GgufArchitecture& arch = gguf_traits(name);
  std::vector<GgufTensor> out;
  std::map<std::string, size_t> stacked;
  for (const ParamSpec& s : layout.specs()) {
    const auto [generic, layer] = generic_name(s.name);
    if (add_expert(out, stacked, s) || add_linear_attention_tensor(out, layout, s, c, arch.grouped_linear_inputs, ssm_in))
      continue;
    if (arch.gated && generic == "model.layers.{i}.self_attn.q_proj.weight") {
      out.push_back(query_and_gate(layout, c, layer));
      continue;
    }
    if (arch.gated && generic == "model.layers.{i}.self_attn.gate.weight") continue;  // in attn_q
    const std::string theirs = table_name(s.name, arch);
    if (theirs.empty()) fail("gguf (", arch.name, "): no GGUF tensor for gatedlm parameter ", s.name);
    out.push_back({theirs, s.shape, {{&s, 0, s.numel}}});
    // llama.cpp's norms are plain: a zero-centred weight w is stored as 1 + w.
    if (c.norm_zero_centered && s.kind == model::ParamKind::norm) out.back().values = GgufValues::plus_one;
    if (generic == "model.layers.{i}.mlp.shared_expert_gate.weight") out.back().shape = {c.d_model};
    if (arch.shared_expert && c.moe.n_shared == 0 && generic == "model.layers.{i}.mlp.gate.weight")
      add_zero_shared_expert(out, c, layer);
  }
  return out;
}

std::string gguf_architecture(const ModelConfig& c) {
  for (const GgufArchitecture* a : gguf_architectures())
    if (a->chosen_by_auto && a->gated == c.has_gate() && a->moe == c.moe.enabled()) return a->name;
  fail("internal error: no registered GGUF architecture is chosen for a model of gate ", model::describe_gate(c),
       c.moe.enabled() ? " with MoE" : " without MoE");
}

const std::vector<GgufIntKey>& gguf_int_keys() {
  using C = model::ModelConfig;
  using M = model::MoeConfig;
  static const std::vector<GgufIntKey> keys{
      {"context_length", &C::max_seq_len, nullptr},
      {"embedding_length", &C::d_model, nullptr},
      {"block_count", &C::n_layers, nullptr},
      {"feed_forward_length", &C::ffn_hidden, nullptr},
      {"attention.head_count", &C::n_heads, nullptr},
      {"attention.head_count_kv", &C::n_kv_heads, nullptr},
      {"attention.key_length", &C::head_dim, nullptr},
      {"attention.value_length", &C::head_dim, nullptr},
      {"expert_count", nullptr, &M::n_experts},
      {"expert_used_count", nullptr, &M::top_k},
      {"expert_feed_forward_length", nullptr, &M::expert_hidden},
      {"vocab_size", &C::vocab_size, nullptr},
  };
  return keys;
}

const std::vector<GgufFloatKey>& gguf_float_keys() {
  using C = model::ModelConfig;
  static const std::vector<GgufFloatKey> keys{{"rope.freq_base", &C::rope_base},
                                              {"attention.layer_norm_rms_epsilon", &C::norm_eps}};
  return keys;
}

std::vector<int32_t> gguf_rope_sections(int64_t rope_dims) {
  const auto p = static_cast<int32_t>(rope_dims / 2);
  return {(p + 2) / 3, (p + 1) / 3, p / 3, 0};
}

namespace {

// full_attention_interval k when the layer kinds follow it (all full attention: 1), else a
// recurrent flag per layer.
GgufArchKey layer_kinds_key(const ModelConfig& c) {
  for (int64_t k = 1; k <= c.n_layers; ++k) {
    bool follows = true;
    for (int64_t l = 0; l < c.n_layers && follows; ++l) follows = c.is_linear(l) == ((l + 1) % k != 0);
    if (follows) return {"full_attention_interval", static_cast<uint32_t>(k)};
  }
  std::vector<bool> recurrent;
  for (int64_t l = 0; l < c.n_layers; ++l) recurrent.push_back(c.is_linear(l));
  return {"attention.recurrent_layers", recurrent};
}

}  // namespace

std::vector<GgufArchKey> gguf_arch_keys(const ModelConfig& c) { return gguf_arch_keys(c, gguf_architecture(c)); }

std::vector<GgufArchKey> gguf_arch_keys(const ModelConfig& c, const std::string& name) {
  const GgufArchitecture& arch = gguf_traits(name);
  if (!arch.gated) return {};
  std::vector<GgufArchKey> keys{{"rope.dimension_count", static_cast<uint32_t>(c.rope_dims)}};
  if (arch.rope_sections) keys.push_back({"rope.dimension_sections", gguf_rope_sections(c.rope_dims)});
  keys.push_back(layer_kinds_key(c));
  const model::LinearAttentionConfig& la = c.linear_attention;
  const bool linear = c.has_linear();
  const std::pair<const char*, int64_t> sizes[] = {{"ssm.conv_kernel", la.conv_kernel}, {"ssm.state_size", la.k_head_dim},
                                                   {"ssm.group_count", la.n_k_heads}, {"ssm.time_step_rank", la.n_v_heads},
                                                   {"ssm.inner_size", la.value_dim()}};
  for (const auto& [k, v] : sizes) keys.push_back({k, static_cast<uint32_t>(linear ? v : 0)});
  if (arch.shared_expert)
    keys.push_back({"expert_shared_feed_forward_length",
                    static_cast<uint32_t>(c.moe.n_shared > 0 ? c.moe.shared_width() : kZeroSharedUnits)});
  return keys;
}

}  // namespace gatedlm::io
