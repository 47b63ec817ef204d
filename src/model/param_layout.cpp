#include "model/param_layout.h"

#include "core/error.h"
#include "model/switch_heads.h"

namespace gatedlm::model {

std::string layer_param(int64_t layer, const std::string& suffix) {
  return cat("model.layers.", layer, ".", suffix);
}

ParamLayout::ParamLayout(const ModelConfig& c) {
  const int64_t d = c.d_model;
  add("model.embed_tokens.weight", {c.vocab_size, d}, ParamKind::embedding);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    add(layer_param(i, "input_layernorm.weight"), {d}, ParamKind::norm);
    if (c.is_linear(i))
      add_linear_attention(i, c);
    else
      add_attention(i, c);
    add(layer_param(i, "post_attention_layernorm.weight"), {d}, ParamKind::norm);
    if (c.sandwich_norm) {
      add(layer_param(i, "post_attn_branch_norm.weight"), {d}, ParamKind::norm);
      add(layer_param(i, "post_ffn_branch_norm.weight"), {d}, ParamKind::norm);
    }
    add_ffn(i, c);
  }
  add("model.norm.weight", {d}, ParamKind::norm);
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, d}, ParamKind::lm_head);
}

void ParamLayout::add_attention(int64_t i, const ModelConfig& c) {
  const int64_t d = c.d_model;
  add(layer_param(i, "self_attn.q_proj.weight"), {c.q_dim(), d}, ParamKind::matrix);
  // Switch heads replace v_proj (and k_proj) by experts, added after the gate below.
  if (!c.switch_heads.switches_k()) add(layer_param(i, "self_attn.k_proj.weight"), {c.kv_dim(), d}, ParamKind::matrix);
  if (!c.switch_heads.on()) add(layer_param(i, "self_attn.v_proj.weight"), {c.kv_dim(), d}, ParamKind::matrix);
  // The gate's rows follow v_proj's so that q|k|v|gate is one [rows, d] matrix: the
  // model multiplies them in one product (model.cpp). gate_proj|up_proj below likewise.
  if (c.has_gate()) {
    if (c.gate.input == GateInput::hidden)
      add(layer_param(i, "self_attn.gate.weight"), {c.gate_out(), c.gate_in()}, ParamKind::gate);
    else
      add(layer_param(i, "self_attn.gate.weight"), {c.gate_out()}, ParamKind::gate);
  }
  // Biases of q|k|v|gate likewise adjacent, in the product's column order.
  if (c.attn_qkv_bias) {
    add(layer_param(i, "self_attn.q_proj.bias"), {c.q_dim()}, ParamKind::bias);
    add(layer_param(i, "self_attn.k_proj.bias"), {c.kv_dim()}, ParamKind::bias);
    add(layer_param(i, "self_attn.v_proj.bias"), {c.kv_dim()}, ParamKind::bias);
    if (c.gate_has_bias()) add(layer_param(i, "self_attn.gate.bias"), {c.gate_out()}, ParamKind::bias);
  }
  for (const SwitchHeadsTensor& t : switch_heads_tensors(c))
    add(layer_param(i, t.suffix), t.shape, t.router ? ParamKind::switch_router : ParamKind::matrix);
  add(layer_param(i, "self_attn.o_proj.weight"), {d, c.q_dim()}, ParamKind::matrix);
  if (c.attn_o_bias) add(layer_param(i, "self_attn.o_proj.bias"), {d}, ParamKind::bias);
  if (c.qk_norm) {
    add(layer_param(i, "self_attn.q_norm.weight"), {c.head_dim}, ParamKind::norm);
    add(layer_param(i, "self_attn.k_norm.weight"), {c.head_dim}, ParamKind::norm);
  }
  if (c.sdpa_transform == SdpaTransform::rmsnorm)
    add(layer_param(i, "self_attn.sdpa_norm.weight"), {c.head_dim}, ParamKind::norm);
}

// Qwen3.5's names and shapes (model/gated_deltanet.h). The four input projections are
// adjacent, so that qkv|z|b|a is one [in_width, d] matrix and one product.
void ParamLayout::add_linear_attention(int64_t i, const ModelConfig& c) {
  const LinearAttentionConfig& la = c.linear_attention;
  const int64_t d = c.d_model;
  add(layer_param(i, "linear_attn.in_proj_qkv.weight"), {la.conv_dim(), d}, ParamKind::matrix);
  add(layer_param(i, "linear_attn.in_proj_z.weight"), {la.value_dim(), d}, ParamKind::matrix);
  add(layer_param(i, "linear_attn.in_proj_b.weight"), {la.n_v_heads, d}, ParamKind::matrix);
  add(layer_param(i, "linear_attn.in_proj_a.weight"), {la.n_v_heads, d}, ParamKind::matrix);
  add(layer_param(i, "linear_attn.conv1d.weight"), {la.conv_dim(), 1, la.conv_kernel}, ParamKind::conv);
  add(layer_param(i, "linear_attn.dt_bias"), {la.n_v_heads}, ParamKind::decay);
  add(layer_param(i, "linear_attn.A_log"), {la.n_v_heads}, ParamKind::decay);
  add(layer_param(i, "linear_attn.norm.weight"), {la.v_head_dim}, ParamKind::linear_norm);
  add(layer_param(i, "linear_attn.out_proj.weight"), {d, la.value_dim()}, ParamKind::matrix);
}

void ParamLayout::add_ffn(int64_t i, const ModelConfig& c) {
  const int64_t d = c.d_model;
  if (c.moe.is_moe_layer(i)) {  // router, experts, shared expert (model/moe_config.h)
    for (const MoeTensor& t : moe_layer_tensors(c.moe, d)) add(layer_param(i, t.suffix), t.shape, ParamKind::matrix);
    return;
  }
  add(layer_param(i, "mlp.gate_proj.weight"), {c.ffn_hidden, d}, ParamKind::matrix);
  add(layer_param(i, "mlp.up_proj.weight"), {c.ffn_hidden, d}, ParamKind::matrix);
  add(layer_param(i, "mlp.down_proj.weight"), {d, c.ffn_hidden}, ParamKind::matrix);
}

void ParamLayout::add(std::string name, std::vector<int64_t> shape, ParamKind kind) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  specs_.push_back(ParamSpec{std::move(name), std::move(shape), total_, numel, kind});
  total_ += numel;
}

const ParamSpec* ParamLayout::find(const std::string& name) const {
  for (const ParamSpec& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

const ParamSpec& ParamLayout::at(const std::string& name) const {
  const ParamSpec* s = find(name);
  if (!s) fail("no parameter named ", name);
  return *s;
}

int64_t ParamLayout::count(ParamKind kind) const {
  int64_t n = 0;
  for (const ParamSpec& s : specs_)
    if (s.kind == kind) n += s.numel;
  return n;
}

template <typename T>
ModelViews<T> make_views(const ParamLayout& layout, const ModelConfig& c, T* base) {
  auto ptr = [&](const std::string& name) -> T* {
    const ParamSpec* s = layout.find(name);
    return s ? base + s->offset : nullptr;
  };
  ModelViews<T> v;
  v.embed = ptr("model.embed_tokens.weight");
  v.final_norm = ptr("model.norm.weight");
  v.lm_head = c.tie_embeddings ? v.embed : ptr("lm_head.weight");
  for (int64_t i = 0; i < c.n_layers; ++i) {
    auto p = [&](const char* suffix) { return ptr(layer_param(i, suffix)); };
    v.layers.push_back(LayerViews<T>{
        p("input_layernorm.weight"), p("self_attn.q_proj.weight"), p("self_attn.k_proj.weight"),
        p("self_attn.v_proj.weight"), p("self_attn.o_proj.weight"), p("self_attn.q_norm.weight"),
        p("self_attn.k_norm.weight"), p("self_attn.gate.weight"), p("self_attn.sdpa_norm.weight"),
        p("post_attention_layernorm.weight"), p("post_attn_branch_norm.weight"),
        p("post_ffn_branch_norm.weight"), p("mlp.gate_proj.weight"), p("mlp.up_proj.weight"),
        p("mlp.down_proj.weight"), p("self_attn.q_proj.bias"), p("self_attn.k_proj.bias"),
        p("self_attn.v_proj.bias"), p("self_attn.gate.bias"), p("self_attn.o_proj.bias"),
        c.switch_heads.on() ? ptr(layer_param(i, switch_router_suffix(c))) : nullptr,
        p("self_attn.k_experts.0.weight"), p("self_attn.v_experts.0.weight"), nullptr, nullptr, nullptr, nullptr,
        nullptr, {}});
    LayerViews<T>& l = v.layers.back();
    l.moe_router = p("mlp.gate.weight");
    l.moe_experts = p("mlp.experts.0.gate_proj.weight");
    l.moe_shared = p("mlp.shared_expert.gate_proj.weight");
    l.moe_shared_down = p("mlp.shared_expert.down_proj.weight");
    l.moe_shared_gate = p("mlp.shared_expert_gate.weight");
    l.linear = {p("linear_attn.in_proj_qkv.weight"), p("linear_attn.conv1d.weight"), p("linear_attn.dt_bias"),
                p("linear_attn.A_log"), p("linear_attn.norm.weight"), p("linear_attn.out_proj.weight")};
  }
  return v;
}

template ModelViews<float> make_views<float>(const ParamLayout&, const ModelConfig&, float*);
template ModelViews<double> make_views<double>(const ParamLayout&, const ModelConfig&, double*);

}  // namespace gatedlm::model
