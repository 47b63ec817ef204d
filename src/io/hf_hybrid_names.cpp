#include "io/hf_hybrid_names.h"

#include "core/error.h"

namespace gatedlm::io {

int64_t head_interleaved_row(int64_t head_dim, bool gate, int64_t r) {
  return (r / head_dim) * 2 * head_dim + (gate ? head_dim : 0) + r % head_dim;
}

int64_t qkvz_row(const model::LinearAttentionConfig& la, LinearPart part, int64_t r) {
  const int64_t dk = la.k_head_dim, group_v = la.heads_per_key() * la.v_head_dim;  // r*d_v
  const int64_t block = 2 * dk + 2 * group_v;
  if (part == LinearPart::z) return (r / group_v) * block + 2 * dk + group_v + r % group_v;
  if (part != LinearPart::qkv) fail("internal error: in_proj_qkvz holds qkv and z only");
  const int64_t key_dim = la.key_dim();
  if (r < key_dim) return (r / dk) * block + r % dk;                             // q of key head r / dk
  if (r < 2 * key_dim) return ((r - key_dim) / dk) * block + dk + (r - key_dim) % dk;  // k
  const int64_t v = r - 2 * key_dim;                                            // v, value heads in order
  return (v / group_v) * block + 2 * dk + v % group_v;
}

int64_t ba_row(const model::LinearAttentionConfig& la, LinearPart part, int64_t r) {
  const int64_t per_key = la.heads_per_key();
  if (part != LinearPart::b && part != LinearPart::a) fail("internal error: in_proj_ba holds b and a only");
  return (r / per_key) * 2 * per_key + (part == LinearPart::a ? per_key : 0) + r % per_key;
}

namespace {

using Row = std::function<int64_t(int64_t)>;

// "model.x" -> prefix + "x"; other names (lm_head.weight) unchanged.
std::string with_prefix(const std::string& name, const std::string& prefix) {
  return name.rfind("model.", 0) == 0 ? prefix + name.substr(6) : name;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Softmax layers: query and gate rows interleaved per head in q_proj.
bool map_attention(TensorMapping& m, const model::ModelConfig& c, const std::string& layer_prefix,
                   const std::string& suffix) {
  const bool gate = suffix.rfind("self_attn.gate.", 0) == 0;
  if (!gate && suffix.rfind("self_attn.q_proj.", 0) != 0) return false;
  const std::string kind = ends_with(suffix, ".bias") ? "bias" : "weight";
  m.part = RowPart::mapped;
  m.theirs = layer_prefix + "self_attn.q_proj." + kind;
  m.their_shape[0] = 2 * c.q_dim();
  m.row = [hd = c.head_dim, gate](int64_t r) { return head_interleaved_row(hd, gate, r); };
  return true;
}

// Qwen3-Next's fused in_proj_qkvz / in_proj_ba.
bool map_qwen3_next_linear(TensorMapping& m, const model::ModelConfig& c, const std::string& layer_prefix,
                           const std::string& suffix) {
  const model::LinearAttentionConfig& la = c.linear_attention;
  struct Part {
    const char* ours;
    LinearPart part;
    bool qkvz;
  };
  for (const Part& p : {Part{"linear_attn.in_proj_qkv.weight", LinearPart::qkv, true},
                        Part{"linear_attn.in_proj_z.weight", LinearPart::z, true},
                        Part{"linear_attn.in_proj_b.weight", LinearPart::b, false},
                        Part{"linear_attn.in_proj_a.weight", LinearPart::a, false}}) {
    if (suffix != p.ours) continue;
    m.part = RowPart::mapped;
    m.theirs = layer_prefix + (p.qkvz ? "linear_attn.in_proj_qkvz.weight" : "linear_attn.in_proj_ba.weight");
    m.their_shape = {p.qkvz ? 2 * la.key_dim() + 2 * la.value_dim() : 2 * la.n_v_heads, c.d_model};
    if (p.qkvz)
      m.row = [la, part = p.part](int64_t r) { return qkvz_row(la, part, r); };
    else
      m.row = [la, part = p.part](int64_t r) { return ba_row(la, part, r); };
    return true;
  }
  return false;
}

// Qwen3.5-MoE's stacked experts: "mlp.experts.{e}.{gate,up,down}_proj.weight".
bool map_stacked_expert(TensorMapping& m, const model::ModelConfig& c, const std::string& layer_prefix,
                        const std::string& suffix) {
  const std::string head = "mlp.experts.";
  if (suffix.rfind(head, 0) != 0) return false;
  const size_t dot = suffix.find('.', head.size());
  if (dot == std::string::npos) return false;
  const int64_t e = std::stoll(suffix.substr(head.size(), dot - head.size()));
  const std::string proj = suffix.substr(dot + 1);
  const int64_t E = c.moe.n_experts, I = c.moe.expert_hidden, d = c.d_model;
  m.part = RowPart::mapped;
  if (proj == "down_proj.weight") {
    m.theirs = layer_prefix + "mlp.experts.down_proj";
    m.their_shape = {E, d, I};
    m.row = [e, d](int64_t r) { return e * d + r; };
    return true;
  }
  if (proj != "gate_proj.weight" && proj != "up_proj.weight") fail("internal error: unexpected expert tensor ", suffix);
  const int64_t offset = e * 2 * I + (proj == "up_proj.weight" ? I : 0);
  m.theirs = layer_prefix + "mlp.experts.gate_up_proj";
  m.their_shape = {E, 2 * I, d};
  m.row = [offset](int64_t r) { return offset + r; };
  return true;
}

}  // namespace

std::vector<TensorMapping> map_hybrid_parameters(const model::ModelConfig& c, const model::ParamLayout& layout,
                                                 const HybridTensors& family, const std::string& prefix,
                                                 std::optional<bool> stacked_experts) {
  const bool stacked = stacked_experts.value_or(family.stacked_experts);
  std::vector<TensorMapping> out;
  for (const model::ParamSpec& s : layout.specs()) {
    TensorMapping m{&s, with_prefix(s.name, prefix), RowPart::all, s.shape, [](int64_t r) { return r; }};
    const auto [generic, layer] = generic_name(s.name);
    if (!layer.empty()) {
      const std::string layer_prefix = prefix + "layers." + layer + ".";
      const std::string suffix = generic.substr(std::string("model.layers.{i}.").size());
      if (!map_attention(m, c, layer_prefix, suffix) && family.fused_linear_inputs)
        map_qwen3_next_linear(m, c, layer_prefix, suffix);
      if (stacked) map_stacked_expert(m, c, layer_prefix, suffix);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace gatedlm::io
